//! Word lists (stop words, signal words) for the hot path: looked up by
//! their 64-bit hash, confirmed by comparing the words.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use fixedbitset::FixedBitSet;

use crate::fingerprint::hash64;

/// A hasher for keys that are already good 64-bit hashes.
#[derive(Default)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("IdentityHasher only hashes u64 keys")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by 64-bit hashes, which hashes no further.
pub type HashKeyed<V> = HashMap<u64, V, BuildHasherDefault<IdentityHasher>>;

/// A set of words.
#[derive(Debug, Default)]
pub struct WordSet {
    by_hash: HashKeyed<Vec<Box<str>>>,
    /// The distinct byte lengths of the words, ascending.
    lengths: Vec<usize>,
    /// A bit per code point, up to the largest that starts a word: set for
    /// the words' first characters. [`WordSet::found_in`] tests every
    /// character of every distinct term of every document; a bit costs a
    /// load where a search of a sorted list cost a loop (with the test of
    /// the shortest word's length: 2 % of the instructions of `text_features`).
    first_chars: FixedBitSet,
    len: usize,
}

impl WordSet {
    pub fn new<'a>(words: impl IntoIterator<Item = &'a str>) -> WordSet {
        let mut set = WordSet::default();
        for word in words {
            let same_hash = set.by_hash.entry(hash64(word.as_bytes())).or_default();
            if !same_hash.iter().any(|w| **w == *word) {
                same_hash.push(word.into());
                set.lengths.push(word.len());
                if let Some(c) = word.chars().next() {
                    set.first_chars.grow_and_insert(c as usize);
                }
                set.len += 1;
            }
        }
        set.lengths.sort_unstable();
        set.lengths.dedup();
        set
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, word: &str) -> bool {
        self.contains_hashed(word, hash64(word.as_bytes()))
    }

    /// [`WordSet::contains`] of a word whose `hash64` is `hash`.
    pub fn contains_hashed(&self, word: &str, hash: u64) -> bool {
        self.by_hash.get(&hash).is_some_and(|ws| ws.iter().any(|w| **w == *word))
    }

    /// Whether some word starts with `c`.
    #[inline]
    fn may_start(&self, c: char) -> bool {
        self.first_chars.contains(c as usize)
    }

    /// Whether `text` is, or contains, one of the words: every substring
    /// that starts and ends on a character boundary and has the length of
    /// some word is looked up. Only starts that leave room for the shortest
    /// word are tried, so a term shorter than every word (most terms of
    /// Chinese text are one or two characters) costs a comparison.
    pub fn found_in(&self, text: &str) -> bool {
        let Some(&shortest) = self.lengths.first() else { return false };
        text.char_indices().take_while(|&(start, _)| start + shortest <= text.len()).any(|(start, c)| {
            self.may_start(c)
                && self
                    .lengths
                    .iter()
                    .map(|len| start + len)
                    .take_while(|&end| end <= text.len())
                    .any(|end| text.is_char_boundary(end) && self.contains(&text[start..end]))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_and_substrings() {
        let set = WordSet::new(["总之", "因此", "a", "总之"]);
        assert_eq!(set.len(), 3);
        assert!(set.contains("总之") && set.contains("a") && !set.contains("总") && !set.contains(""));
        for (text, found) in [("总之", true), ("总而言之", false), ("所以因此而", true), ("banana", true), ("bcd", false), ("", false), ("总", false), ("之总", false)] {
            assert_eq!(set.found_in(text), found, "{text}");
            let naive = ["总之", "因此", "a"].iter().any(|w| text.contains(w));
            assert_eq!(set.found_in(text), naive, "{text}");
        }
        assert!(!WordSet::new([]).found_in("anything"));
        // First characters past the Han block, and text past every first character.
        let emoji = WordSet::new(["😀好"]);
        assert!(emoji.found_in("哈😀好") && !emoji.found_in("😀") && !emoji.found_in("好😀") && !emoji.found_in("𠀀😀"));
        assert!(!set.found_in("😀😀😀"));
    }
}
