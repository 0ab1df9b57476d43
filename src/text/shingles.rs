//! How much of one document's text is found in another: shingle sketches
//! and their containment.
//!
//! A *shingle* is a run of [`SHINGLE_TOKENS`] consecutive tokens of the
//! normalised text, where a token is one character of a script written
//! without spaces (Han, kana, Hangul) or one word of any other script.
//! Punctuation and white space separate tokens but are not tokens, so a
//! crawl's re-spacing or re-punctuation leaves the shingles as they were.
//! Shingles of words catch verbatim passages, not shared vocabulary: two
//! articles on one event share words, a reprint shares sentences.
//!
//! A document keeps a *sketch*: the [`SKETCH_SIZE`] smallest distinct
//! 32-bit hashes of its shingles (bottom-k), or all of them when it has
//! fewer. A sketch with fewer than `SKETCH_SIZE` hashes is complete: it
//! holds every hash of the document. A full one holds every hash below its
//! largest plus one. So for two sketches, the hashes below the smaller of
//! the two limits are exactly the documents' own hashes in that range, a
//! uniform sample of each document's shingles drawn by the same rule; the
//! share of one sample found in the other estimates the share of one
//! document's text found in the other ([`containment`]). Documents of up
//! to 256 shingles (a Weibo post, a news paragraph, an article of about
//! 260 characters) are measured exactly; longer ones by a sample of about
//! 256 hashes from the longer document's range. The sketch is at most 1 KB,
//! whatever the length: its bytes are carried by every stage that compares
//! documents and kept for every stored one, and 512 hashes cost a long
//! article's run 0.3 s more for an error of 0.01 less (docs/quality.md).

use super::normalize::{is_unified_han, three_byte_code};
use crate::fingerprint::hash64;
use crate::minhash::mix;
use crate::sets::intersection;

/// Tokens per shingle: five characters of Chinese (two or three words), or
/// five words of English.
pub const SHINGLE_TOKENS: usize = 5;

/// Hashes a sketch keeps at most.
pub const SKETCH_SIZE: usize = 256;

/// The sketch scheme, as recorded with the outputs and in a store: changing
/// any constant here makes sketches incomparable.
pub const SKETCH_SCHEME: &str = "shingles:5-tokens,bottom-256,mix-32";

/// Whether `c` is written without spaces between words, so that each
/// character is a token of its own.
fn is_unspaced(c: char) -> bool {
    super::is_han(c) || matches!(c as u32, 0x3040..=0x30FF | 0x31F0..=0x31FF | 0xAC00..=0xD7AF)
}

/// The tokens of a normalised text, as hashes, into `out` (cleared first):
/// a word by `hash64` of its bytes, a character by a mix of its code point
/// (most tokens of Chinese text; a hash of three bytes would cost as much as
/// the rest of the sketch).
///
/// The text is walked a byte at a time. ASCII, and the three bytes of a
/// character of the unified Han block (U+4E00–U+9FFF, lead bytes E4–E9),
/// are told apart from their bytes alone; only the rest is decoded and
/// classified in full ([`Class::of`]): on Chinese articles the sketch takes
/// 7.7 % fewer instructions than when every character was decoded and tested
/// against every range (docs/performance.md).
fn token_hashes(text: &str, out: &mut Vec<u64>) {
    out.clear();
    let bytes = text.as_bytes();
    let mut word_start = None;
    let mut i = 0;
    while i < bytes.len() {
        let (class, len) = match bytes[i] {
            b if b < 0x80 => (if b.is_ascii_alphanumeric() { Class::Word } else { Class::Gap }, 1),
            b @ 0xE4..=0xE9 if is_unified_han(b, bytes[i + 1]) => (Class::Unspaced(three_byte_code(bytes, i)), 3),
            _ => {
                // A char boundary: every step above moved by a whole character.
                let c = text[i..].chars().next().unwrap_or_default();
                (Class::of(c), c.len_utf8())
            }
        };
        match (class, word_start) {
            (Class::Word, None) => word_start = Some(i),
            (Class::Word, Some(_)) => {}
            (_, Some(start)) => {
                out.push(hash64(&bytes[start..i]));
                word_start = None;
            }
            (_, None) => {}
        }
        if let Class::Unspaced(c) = class {
            out.push(mix(u64::from(c) ^ CHARACTER_SEED));
        }
        i += len;
    }
    if let Some(start) = word_start {
        out.push(hash64(&bytes[start..]));
    }
}

/// What a character is to the sketch: a token of its own (its code point),
/// part of a word, or a gap between tokens.
#[derive(Clone, Copy)]
enum Class {
    Unspaced(u32),
    Word,
    Gap,
}

impl Class {
    fn of(c: char) -> Class {
        if is_unspaced(c) {
            Class::Unspaced(c as u32)
        } else if super::is_letter_or_digit(c) {
            Class::Word
        } else {
            Class::Gap
        }
    }
}

/// Keeps the characters' hashes apart from small numbers.
const CHARACTER_SEED: u64 = 0x5348_494e_474c_4553;

/// Bits each token's hash is turned by per place in its shingle.
const TURN: u32 = 12;
const _: () = assert!(TURN * (SHINGLE_TOKENS as u32 - 1) < 64);

/// The 32-bit hash of one shingle, from its tokens' hashes: each token's
/// hash turned by its place (so that order counts), combined, mixed.
fn shingle_hash(tokens: &[u64]) -> u32 {
    finish(combine(tokens))
}

/// The tokens' hashes turned by their places and combined.
fn combine(tokens: &[u64]) -> u64 {
    tokens.iter().zip(0u32..).fold(0u64, |h, (t, i)| h ^ t.rotate_left(TURN * i))
}

fn finish(combined: u64) -> u32 {
    (mix(combined) >> 32) as u32
}

/// Reusable buffers for [`Sketcher::sketch`], one per thread or batch.
#[derive(Default)]
pub struct Sketcher {
    tokens: Vec<u64>,
}

impl Sketcher {
    /// The sketch of a normalised text into `out` (cleared first): sorted,
    /// distinct, at most [`SKETCH_SIZE`] hashes. A text of fewer tokens than
    /// a shingle is one shingle of all of them; a text without tokens has an
    /// empty sketch.
    pub fn sketch(&mut self, text: &str, out: &mut Vec<u32>) {
        out.clear();
        token_hashes(text, &mut self.tokens);
        if self.tokens.is_empty() {
            return;
        }
        if self.tokens.len() < SHINGLE_TOKENS {
            out.push(shingle_hash(&self.tokens));
            return;
        }
        let shingles = self.tokens.len() - SHINGLE_TOKENS + 1;
        // Shingle hashes are uniform: of n of them, about k + k/4 fall below
        // 2^32 (k + k/4) / n. When at least k distinct ones do, they hold
        // the k smallest, so a long document keeps only those and sorts
        // them, instead of keeping all and selecting (a tenth of the sketch
        // of a long article). Fewer (a text that repeats itself, or one
        // chance in thousands) take the whole way.
        let first = SKETCH_SIZE + SKETCH_SIZE / 4;
        if shingles > 2 * first {
            let below = ((first as u64) << 32) / shingles as u64;
            // Every hash is written, and kept (the next written past it)
            // only when below the cut: about a quarter are, at random, which
            // a branch on it could not predict.
            out.resize(shingles, 0);
            let mut kept = 0;
            roll(&self.tokens, |h| {
                out[kept] = h;
                kept += usize::from(u64::from(h) < below);
            });
            out.truncate(kept);
            if cut_to_distinct(out, SKETCH_SIZE) {
                return;
            }
            out.clear();
        }
        out.reserve(shingles);
        roll(&self.tokens, |h| out.push(h));
        bottom(out, SKETCH_SIZE);
    }
}

/// The hash of every shingle of `tokens` (at least [`SHINGLE_TOKENS`]), in
/// order. Each shingle's combination is made from the one before: take out
/// its first token, turn the rest back by one place, put in the next token
/// at the last place. Turning is linear over xor, so this is exactly
/// `combine` of the window, in four operations rather than ten.
#[inline]
fn roll(tokens: &[u64], mut each: impl FnMut(u32)) {
    let last_turn = TURN * (SHINGLE_TOKENS as u32 - 1);
    let mut combined = combine(&tokens[..SHINGLE_TOKENS]);
    each(finish(combined));
    for (first, next) in tokens.iter().zip(&tokens[SHINGLE_TOKENS..]) {
        combined = (combined ^ first).rotate_right(TURN) ^ next.rotate_left(last_turn);
        each(finish(combined));
    }
}

/// `hashes` cut to its `k` smallest distinct values, sorted. A long
/// document's thousands of hashes are first cut to the k + k/4 smallest (in
/// linear time), which hold its k smallest distinct ones unless it repeats
/// itself that much; only then is all of it sorted.
fn bottom(hashes: &mut Vec<u32>, k: usize) {
    let first = k + k / 4;
    if hashes.len() > first {
        hashes.select_nth_unstable(first - 1);
        let mut smallest = hashes[..first].to_vec();
        if cut_to_distinct(&mut smallest, k) {
            *hashes = smallest;
            return;
        }
    }
    cut_to_distinct(hashes, k);
}

/// `values` sorted, without repeats, cut to `k`; whether `k` were left. If
/// so, and `values` were the smallest of a longer list, they are now its
/// `k` smallest distinct values.
fn cut_to_distinct(values: &mut Vec<u32>, k: usize) -> bool {
    values.sort_unstable();
    values.dedup();
    let full = values.len() >= k;
    values.truncate(k);
    full
}

/// The sketch of a normalised text (see [`Sketcher::sketch`]).
pub fn sketch(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    Sketcher::default().sketch(text, &mut out);
    out
}

/// One above the largest hash below which `sketch` holds all of its
/// document's hashes.
fn limit(sketch: &[u32]) -> u64 {
    match sketch.last() {
        Some(&last) if sketch.len() >= SKETCH_SIZE => u64::from(last) + 1,
        _ => 1 << 32,
    }
}

/// The share of document `a`'s shingles found in document `b`, from their
/// sketches (sorted, distinct): exact when both documents have fewer than
/// [`SKETCH_SIZE`] shingles, estimated otherwise. `None` when `a` has no
/// shingle in the range both sketches cover (an empty document, or a short
/// one beside a very long one whose sample misses it).
pub fn containment(a: &[u32], b: &[u32]) -> Option<f64> {
    let limit = limit(a).min(limit(b));
    let a = &a[..a.partition_point(|&h| u64::from(h) < limit)];
    let b = &b[..b.partition_point(|&h| u64::from(h) < limit)];
    if a.is_empty() {
        return None;
    }
    Some(intersection(a, b) as f64 / a.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::normalize;

    fn words(n: usize, salt: &str) -> String {
        (0..n).map(|i| format!("w{salt}{i}")).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn tokens_are_han_characters_and_words() {
        let mut t = Vec::new();
        token_hashes("北京 天安门, hello world-2024!", &mut t);
        let character = |c: char| mix(u64::from(c) ^ CHARACTER_SEED);
        let mut expected: Vec<u64> = "北京天安门".chars().map(character).collect();
        expected.extend(["hello", "world", "2024"].iter().map(|s| hash64(s.as_bytes())));
        assert_eq!(t, expected);
        // Spacing and punctuation do not change the tokens.
        let mut u = Vec::new();
        token_hashes("北京天安门 hello  world 2024", &mut u);
        assert_eq!(t, u);
    }

    /// The tokens as the characters' own classes give them, one decoded
    /// character at a time: what [`token_hashes`]' byte-level steps must equal.
    fn tokens_by_characters(text: &str) -> Vec<u64> {
        let mut out = Vec::new();
        let mut word_start = None;
        for (i, c) in text.char_indices() {
            let unspaced = is_unspaced(c);
            let in_word = !unspaced && crate::text::is_letter_or_digit(c);
            match (in_word, word_start) {
                (true, None) => word_start = Some(i),
                (false, Some(start)) => {
                    out.push(hash64(text[start..i].as_bytes()));
                    word_start = None;
                }
                _ => {}
            }
            if unspaced {
                out.push(mix(u64::from(c) ^ CHARACTER_SEED));
            }
        }
        if let Some(start) = word_start {
            out.push(hash64(text[start..].as_bytes()));
        }
        out
    }

    #[test]
    fn tokens_from_bytes_are_the_tokens_of_the_characters() {
        // Every code point of the blocks the byte-level steps tell apart
        // (ASCII, lead bytes E4-E9 on both sides of U+4E00, the rest of the
        // Basic Multilingual Plane and beyond it), alone, inside words and
        // between Han characters.
        let points = (0u32..0x3_0000).step_by(7).chain(0x3FF0..0x4F10).chain(0x9FF0..0xA010);
        let chars: Vec<char> = points.filter_map(char::from_u32).collect();
        let mut texts: Vec<String> = chars.chunks(40).map(|c| c.iter().collect()).collect();
        texts.extend(chars.iter().map(|c| format!("ab{c}cd 中{c}文 {c}")));
        texts.extend(["", "a", "中", "abc", "中文 English 混合 text2024 ，。", "\u{4DFF}\u{4E00}x\u{9FFF}\u{A000}y"].map(String::from));
        let mut tokens = Vec::new();
        for text in &texts {
            token_hashes(text, &mut tokens);
            assert_eq!(tokens, tokens_by_characters(text), "{text:?}");
        }
    }

    #[test]
    fn each_shingle_is_hashed_as_if_alone() {
        // Words and characters: rolling from shingle to shingle gives each
        // window's own hash.
        let mut tokens = Vec::new();
        token_hashes("国家统计局今天发布了 consumer price index 数据 2024", &mut tokens);
        let mut rolled = Vec::new();
        Sketcher::default().sketch("国家统计局今天发布了 consumer price index 数据 2024", &mut rolled);
        let mut alone: Vec<u32> = tokens.windows(SHINGLE_TOKENS).map(shingle_hash).collect();
        alone.sort_unstable();
        alone.dedup();
        assert_eq!((rolled.len(), rolled), (tokens.len() - SHINGLE_TOKENS + 1, alone));
    }

    #[test]
    fn a_long_sketch_is_the_bottom_of_every_hash() {
        // Long texts of distinct words, of repeated passages (fewer distinct
        // shingles below the cut than the sketch keeps), and of one word.
        let repeated = std::iter::repeat_n(words(300, "r"), 8).collect::<Vec<_>>().join(" ");
        for text in [words(700, "a"), words(5000, "b"), repeated, "x ".repeat(3000)] {
            let mut tokens = Vec::new();
            token_hashes(&text, &mut tokens);
            let mut all: Vec<u32> = tokens.windows(SHINGLE_TOKENS).map(shingle_hash).collect();
            all.sort_unstable();
            all.dedup();
            all.truncate(SKETCH_SIZE);
            assert_eq!(sketch(&text), all, "{} tokens", tokens.len());
        }
    }

    #[test]
    fn a_sketch_is_sorted_distinct_and_bounded() {
        let short = sketch(&words(100, "a"));
        assert_eq!(short.len(), 96, "100 words give 96 shingles");
        assert!(short.windows(2).all(|w| w[0] < w[1]));
        let long = sketch(&words(5000, "a"));
        assert_eq!(long.len(), SKETCH_SIZE);
        // Bottom-k: the long document's sketch is its smallest hashes,
        // so it holds every hash of the short one below its limit.
        let limit = *long.last().unwrap();
        assert!(short.iter().filter(|&&h| h <= limit).all(|h| long.binary_search(h).is_ok()));
        assert_eq!(sketch("abc"), vec![shingle_hash(&[hash64(b"abc")])]);
        // Order counts.
        assert_ne!(shingle_hash(&[1, 2, 3, 4, 5]), shingle_hash(&[2, 1, 3, 4, 5]));
        assert!(sketch(" ,。").is_empty());
    }

    #[test]
    fn the_bottom_of_a_long_list_is_its_smallest_distinct_values() {
        let mut rng = 7u64;
        let mut random = || {
            rng = mix(rng);
            (rng >> 40) as u32
        };
        for (n, k) in [(5000, 256), (1000, 256), (321, 256), (40, 8)] {
            // Half of the values repeat, so the first cut must look past duplicates.
            let values: Vec<u32> = (0..n).map(|i| if i % 2 == 0 { random() } else { 3 }).collect();
            let mut expected = values.clone();
            expected.sort_unstable();
            expected.dedup();
            expected.truncate(k);
            let mut cut = values.clone();
            bottom(&mut cut, k);
            assert_eq!(cut, expected, "{n} values, k = {k}");
        }
        let mut same = vec![9u32; 3000];
        bottom(&mut same, 256);
        assert_eq!(same, [9]);
    }

    #[test]
    fn containment_is_exact_for_short_documents() {
        let a = words(100, "a");
        let b = format!("{a} {}", words(100, "b"));
        let (sa, sb) = (sketch(&a), sketch(&b));
        assert_eq!(containment(&sa, &sb), Some(1.0));
        // b holds 196 shingles; 96 of them are a's.
        assert_eq!(containment(&sb, &sa), Some(96.0 / 196.0));
        assert_eq!(containment(&sa, &sketch(&words(100, "c"))), Some(0.0));
        assert_eq!(containment(&[], &sb), None);
    }

    #[test]
    fn containment_of_long_documents_is_estimated_closely() {
        // 60 % of a's 4,000 words reappear verbatim in b, in one passage.
        let a: Vec<String> = (0..4000).map(|i| format!("w{i}")).collect();
        let mut b = a[..2400].to_vec();
        b.extend((0..1600).map(|i| format!("x{i}")));
        let (sa, sb) = (sketch(&a.join(" ")), sketch(&b.join(" ")));
        let share = containment(&sa, &sb).unwrap();
        let truth = 2396.0 / 3996.0;
        assert!((share - truth).abs() < 0.05, "{share} against {truth}");
    }

    #[test]
    fn chinese_text_is_compared_by_characters() {
        let a = normalize("国家统计局今天发布了十月份的居民消费价格数据，同比上涨百分之二。");
        let b = normalize("据新华社报道，国家统计局今天发布了十月份的居民消费价格数据，同比上涨百分之二。");
        let (sa, sb) = (sketch(&a), sketch(&b));
        assert_eq!(containment(&sa, &sb), Some(1.0));
        let share = containment(&sb, &sa).unwrap();
        assert!(share > 0.7 && share < 1.0, "{share}");
    }
}
