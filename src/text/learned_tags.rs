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

use std::ops::Range;
use std::sync::{RwLock, RwLockReadGuard};

use super::HashKeyed;

/// At most this many words are remembered (about 16 bytes each): a corpus
/// of hundreds of millions of distinct words keeps learning the rest again.
const MAX_WORDS: usize = 1 << 22;

/// POS factors by `hash64` of the word, shared by every thread of an
/// analyzer. Which thread learns a word first does not matter: every one
/// learns the same factor.
#[derive(Default)]
pub(super) struct LearnedFactors {
    by_hash: RwLock<HashKeyed<u8>>,
}

impl LearnedFactors {
    /// The factors learned so far, read through one document.
    pub(super) fn known(&self) -> RwLockReadGuard<'_, HashKeyed<u8>> {
        // A panic elsewhere leaves every entry a word's factor: still right.
        self.by_hash.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember `learned` (hash, factor) pairs.
    pub(super) fn remember(&self, learned: &[(u64, u8)]) {
        let mut by_hash = self.by_hash.write().unwrap_or_else(|e| e.into_inner());
        for &(hash, factor) in learned {
            if by_hash.len() < MAX_WORDS {
                by_hash.insert(hash, factor);
            }
        }
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
