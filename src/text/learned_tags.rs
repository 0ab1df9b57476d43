//! Part-of-speech factors learned word by word from jieba-rs's tags.
//!
//! jieba-rs's `tag` cuts a text exactly as `cut` does and then tags each
//! word by the word alone: a dictionary word by its entry, any other word by
//! a guess from its characters (an HMM over the word, for Chinese). So a
//! word's tag is a function of the word, and the term statistics, which need
//! only its POS factor ([`super::stats::pos_factor`]), can cut with `cut`
//! and look the factor up by the word's hash, learning it once for a word
//! not seen before. The guess was about a seventh of segmentation's time
//! (Heybox and Weibo), paid at every occurrence of every unknown word.

use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use super::HashKeyed;

/// At most this many words are remembered (about 16 bytes each): a corpus
/// of hundreds of millions of distinct words keeps learning the rest again.
const MAX_WORDS: usize = 1 << 22;

/// Slots of [`RecentFactors`]: 128 KB, within a core's L2 cache.
const RECENT_SLOTS: usize = 1 << 14;

/// The bits of a [`RecentFactors`] slot that are the bits of its index in
/// the hash, and so free to hold the word's [`WordFacts`].
const INDEX_BITS: u64 = RECENT_SLOTS as u64 - 1;

/// Where a slot's [`WordFacts`] lie in its [`INDEX_BITS`]: a slot in use,
/// a feature, a signal word, the POS factor (two bits) and the characters
/// (nine bits).
const IN_USE: u64 = 1 << 13;
const FEATURE: u64 = 1 << 12;
const SIGNAL: u64 = 1 << 11;
const FACTOR_SHIFT: u32 = 9;
const CHARS_MASK: u64 = (1 << FACTOR_SHIFT) - 1;

/// Tells one analyzer's table from another's, so that a thread's recent
/// factors are never read for another dictionary.
static NEXT_TABLE: AtomicU64 = AtomicU64::new(1);

/// POS factors by `hash64` of the word, shared by every thread of an
/// analyzer. Which thread learns a word first does not matter: every one
/// learns the same factor.
pub(super) struct LearnedFactors {
    table: u64,
    by_hash: RwLock<HashKeyed<u8>>,
}

impl Default for LearnedFactors {
    fn default() -> Self {
        LearnedFactors { table: NEXT_TABLE.fetch_add(1, Ordering::Relaxed), by_hash: RwLock::default() }
    }
}

/// A word whose factor is wanted: its hash, the caller's index of it, and
/// its factor once found.
pub(super) type Wanted = (u64, usize, u8);

/// What the term statistics need of a word that is a function of the word
/// alone (and of the analyzer): whether it is a feature, its POS factor,
/// whether it holds a signal word, and its length in characters. Looked up
/// once a distinct word of a document ([`RecentFactors`]), they are not
/// worked out again at each document that has the word: the stop-word and
/// signal-word lookups and the count of characters were together 2.6 % of
/// a one-core Heybox `fingerprint` and 5 % of Weibo's segmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WordFacts {
    pub feature: bool,
    /// The POS factor, 1 to 3, of a feature (1 for any other word).
    pub cx: u8,
    pub signal: bool,
    pub chars: usize,
}

/// The facts of the words one thread saw lately, a slot a hash, in front
/// of a [`LearnedFactors`] (for the POS factors) and of the analyzer's word
/// lists. Most words of a text are common ones, found here without a lock.
/// When dropped, the slots stay with the thread for its next batch of the
/// same analyzer.
///
/// A slot is one word: the hash with the bits of the slot's index replaced
/// by its [`WordFacts`] (0 is an empty slot). Those bits are the index, so
/// the slot still tells its hash exactly. Half the size of a (hash, facts)
/// pair: the slots were read from beyond the core's L2 cache, a cache miss
/// of the lookup's load in nearly half of `DocStats::compute`'s own samples
/// (Heybox).
pub(super) struct RecentFactors {
    table: u64,
    slots: Box<[u64]>,
    learned: Vec<(u64, u8)>,
}

thread_local! {
    /// The slots of the thread's last [`RecentFactors`] and their table.
    static KEPT: Cell<Option<(u64, Box<[u64]>)>> = const { Cell::new(None) };
}

impl Drop for RecentFactors {
    fn drop(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        // At the thread's exit there is nowhere to keep them.
        let _ = KEPT.try_with(|kept| kept.set(Some((self.table, slots))));
    }
}

impl RecentFactors {
    fn slot(hash: u64) -> usize {
        (hash & INDEX_BITS) as usize
    }

    /// The facts of the word of `hash`, if seen lately.
    #[inline]
    pub(super) fn get(&self, hash: u64) -> Option<WordFacts> {
        let slot = self.slots[Self::slot(hash)];
        (slot & IN_USE != 0 && slot & !INDEX_BITS == hash & !INDEX_BITS).then(|| WordFacts {
            feature: slot & FEATURE != 0,
            cx: ((slot >> FACTOR_SHIFT) & 0b11) as u8,
            signal: slot & SIGNAL != 0,
            chars: (slot & CHARS_MASK) as usize,
        })
    }

    /// Keep `facts` for the word of `hash`; facts that do not fit in a slot
    /// (a word of more than 511 characters) are worked out again.
    pub(super) fn put(&mut self, hash: u64, facts: WordFacts) {
        if (1..=3).contains(&facts.cx) && facts.chars as u64 <= CHARS_MASK {
            let bits = IN_USE
                | if facts.feature { FEATURE } else { 0 }
                | if facts.signal { SIGNAL } else { 0 }
                | u64::from(facts.cx) << FACTOR_SHIFT
                | facts.chars as u64;
            self.slots[Self::slot(hash)] = hash & !INDEX_BITS | bits;
        }
    }
}

impl LearnedFactors {
    /// This table's recent factors in `recent`: the thread's, kept from its
    /// last batch, or new ones.
    pub(super) fn recent<'r>(&self, recent: &'r mut Option<RecentFactors>) -> &'r mut RecentFactors {
        if recent.as_ref().is_some_and(|r| r.table != self.table) {
            *recent = None;
        }
        recent.get_or_insert_with(|| {
            let slots = match KEPT.take() {
                Some((table, slots)) if table == self.table => slots,
                _ => vec![0; RECENT_SLOTS].into_boxed_slice(),
            };
            RecentFactors { table: self.table, slots, learned: Vec::new() }
        })
    }

    /// The factors of `wanted` words, none of them in `recent`: from this
    /// table (one read lock), else `learn`ed from the caller's index (and
    /// remembered, one write lock). The caller puts them in `recent`, with
    /// the words' other facts.
    pub(super) fn find_or_learn(&self, recent: &mut RecentFactors, wanted: &mut [Wanted], learn: impl Fn(usize) -> u8) {
        // A panic elsewhere leaves every entry a word's factor: still right.
        let known = self.by_hash.read().unwrap_or_else(PoisonError::into_inner);
        for (hash, _, factor) in wanted.iter_mut() {
            *factor = known.get(hash).copied().unwrap_or(0);
        }
        drop(known);
        recent.learned.clear();
        for &mut (hash, at, ref mut factor) in wanted.iter_mut() {
            if *factor == 0 {
                *factor = learn(at);
                recent.learned.push((hash, *factor));
            }
        }
        if recent.learned.is_empty() {
            return;
        }
        let mut by_hash = self.by_hash.write().unwrap_or_else(PoisonError::into_inner);
        for &(hash, factor) in &recent.learned {
            if by_hash.len() < MAX_WORDS {
                by_hash.insert(hash, factor);
            }
        }
    }

    /// How many words' factors are known.
    pub(super) fn len(&self) -> usize {
        self.by_hash.read().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// The characters jieba-rs cuts in runs (its `RE_HAN_DEFAULT` class): CJK
/// ideographs, ASCII letters and digits, and `+#&._%-`. Every other
/// character is a word of its own (`\r\n` one word).
fn cut_in_runs(c: char) -> bool {
    match c {
        '\u{4E00}'..='\u{9FFF}' => true,
        _ if c.is_ascii() => c.is_ascii_alphanumeric() || matches!(c, '+' | '#' | '&' | '.' | '_' | '%' | '-'),
        _ => matches!(c,
            '\u{3400}'..='\u{4DBF}'
            | '\u{F900}'..='\u{FAFF}'
            | '\u{20000}'..='\u{2A6DF}'
            | '\u{2A700}'..='\u{2EBEF}'
            | '\u{2F800}'..='\u{2FA1F}'),
    }
}

/// The byte range of the run around `word` (a byte range of `text`) that
/// jieba-rs cuts without looking outside it: the longest stretch of
/// characters of the same class ([`cut_in_runs`]). A run is cut the same
/// whatever surrounds it.
pub(super) fn run_around(text: &str, word: Range<usize>) -> Range<usize> {
    let Some(first) = text[word.clone()].chars().next() else {
        return word;
    };
    let class = cut_in_runs(first);
    let start = text[..word.start]
        .char_indices()
        .rev()
        .take_while(|&(_, c)| cut_in_runs(c) == class)
        .last()
        .map_or(word.start, |(i, _)| i);
    let end = text[word.end..]
        .char_indices()
        .take_while(|&(_, c)| cut_in_runs(c) == class)
        .last()
        .map_or(word.end, |(i, c)| word.end + i + c.len_utf8());
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_tells_its_hash_exactly_and_stays_with_the_thread() {
        let (table, other) = (LearnedFactors::default(), LearnedFactors::default());
        let h = 0xDEAD_BEEF_0000_1235_u64;
        let noun = WordFacts { feature: true, cx: 3, signal: true, chars: 511 };
        let verb = WordFacts { feature: true, cx: 2, signal: false, chars: 2 };
        let stop_word = WordFacts { feature: false, cx: 1, signal: false, chars: 0 };
        let mut held = None;
        let recent = table.recent(&mut held);
        recent.put(h, noun);
        assert_eq!(recent.get(h), Some(noun));
        assert_eq!(recent.get(h ^ 1), None, "another slot");
        assert_eq!(recent.get(h ^ (1 << 40)), None, "the same slot, another hash");
        recent.put(h ^ (1 << 40), verb);
        assert_eq!((recent.get(h), recent.get(h ^ (1 << 40))), (None, Some(verb)));
        recent.put(7, stop_word);
        assert_eq!(recent.get(7), Some(stop_word));
        recent.put(8, WordFacts { cx: 9, ..verb });
        assert_eq!(recent.get(8), None, "a factor beyond 3 is not kept");
        recent.put(9, WordFacts { chars: 512, ..verb });
        assert_eq!(recent.get(9), None, "nor a word of more than 511 characters");
        drop(held);
        // The thread keeps the slots for the same table, not for another.
        assert_eq!(table.recent(&mut None).get(h ^ (1 << 40)), Some(verb));
        assert_eq!(other.recent(&mut None).get(h ^ (1 << 40)), None);
        assert_eq!(table.recent(&mut None).get(h ^ (1 << 40)), None, "the other table's slots were kept last");
    }

    #[test]
    fn a_run_stops_where_the_class_of_characters_changes() {
        let text = "你好，world2024年！";
        let at = |w: &str| text.find(w).unwrap()..text.find(w).unwrap() + w.len();
        assert_eq!(&text[run_around(text, at("好"))], "你好");
        assert_eq!(&text[run_around(text, at("2024"))], "world2024年");
        assert_eq!(&text[run_around(text, at("，"))], "，");
        assert_eq!(&text[run_around(text, at("！"))], "！");
        assert_eq!(run_around(text, 3..3), 3..3);
    }
}
