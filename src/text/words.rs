//! Word lists (stop words, signal words) for the hot path: looked up by
//! their 64-bit hash, confirmed by comparing the words.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
    /// The distinct first characters of the words, ascending.
    first_chars: Vec<char>,
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
                set.first_chars.extend(word.chars().next());
                set.len += 1;
            }
        }
        set.lengths.sort_unstable();
        set.lengths.dedup();
        set.first_chars.sort_unstable();
        set.first_chars.dedup();
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

    /// Whether `text` is, or contains, one of the words: every substring
    /// that starts and ends on a character boundary and has the length of
    /// some word is looked up.
    pub fn found_in(&self, text: &str) -> bool {
        text.char_indices().any(|(start, c)| {
            self.first_chars.binary_search(&c).is_ok()
                && self.lengths
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
        for (text, found) in [("总之", true), ("总而言之", false), ("所以因此而", true), ("banana", true), ("bcd", false), ("", false)] {
            assert_eq!(set.found_in(text), found, "{text}");
            let naive = ["总之", "因此", "a"].iter().any(|w| text.contains(w));
            assert_eq!(set.found_in(text), naive, "{text}");
        }
        assert!(!WordSet::new([]).found_in("anything"));
    }
}
