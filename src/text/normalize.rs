//! Text normalisation applied before any segmentation (docs/algorithm.md §2).
//!
//! NFKC folds full-width digits, Latin letters and punctuation to their
//! half-width forms, cased scripts are lower-cased and every run of white
//! space becomes one ASCII space, trimmed at both ends. White space between
//! two Han characters is dropped altogether: Chinese does not separate words
//! with spaces, so a space there is layout (a wrapped line in the crawled
//! HTML) and would otherwise cut a word in two. The result is what every
//! tokenizer sees, so two crawls of the same article that differ only in
//! width, case or spacing produce the same features.

use unicode_normalization::UnicodeNormalization;

use super::is_han;

/// Normalise `text` into `out` (cleared first). Reusing `out` across rows
/// keeps the hot path free of allocations.
///
/// NFKC runs only where it can change something. ASCII, the unified Han
/// block, CJK punctuation and kana are stable code points (NFKC quick check
/// Yes, combining class 0): nothing before them composes with them, so the
/// text can be cut before each one and normalised piece by piece (UAX #15,
/// "safe boundaries"). A piece that is one stable character is its own
/// normal form and skips the normaliser, and so does a full-width form of
/// ASCII, whose normal form is that ASCII character ([`Kind`]); only the
/// rest (a letter with a combining accent, a ligature …) goes through it.
pub fn normalize_into(text: &str, out: &mut String) {
    normalize_at_most(text, out, usize::MAX);
}

/// Normalise `text` into `out` as [`normalize_into`] does, if its normal
/// form has at most `max_chars` characters; otherwise stop as soon as it
/// has more (normalisation only appends, so a longer prefix cannot shrink)
/// and return false, with a prefix in `out`. Boilerplate lines are short,
/// and this spares the long lines (paragraphs) most of the work.
pub fn normalize_at_most(text: &str, out: &mut String, max_chars: usize) -> bool {
    out.clear();
    out.reserve(text.len().min(max_chars.saturating_mul(4)));
    let mut writer = Writer { out, pending_space: false, chars: 0 };
    let mut pos = 0;
    while pos < text.len() && writer.chars <= max_chars {
        if !writer.pending_space {
            pos += writer.copy_plain(&text[pos..], max_chars);
            if pos == text.len() || writer.chars > max_chars {
                break;
            }
        }
        // One piece: the character at `pos` (stable or wide, unless it
        // opens the text) and the characters after it that may compose
        // with it.
        let rest = &text[pos..];
        let first = rest.chars().next().unwrap_or_default();
        let end = rest.char_indices().skip(1).find(|&(_, c)| kind(c) != Kind::Other).map_or(rest.len(), |(i, _)| i);
        writer.piece(&rest[..end], if end == first.len_utf8() { kind(first) } else { Kind::Other });
        pos += end;
    }
    writer.chars <= max_chars
}

/// How [`Writer::copy_plain`] treats a character of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Written as it stands: ASCII but white space and capitals, and the
    /// other stable characters.
    Copy,
    /// Written as this one ASCII byte: a capital, lower-cased, or a wide
    /// form, narrowed (and lower-cased).
    Byte(u8),
    /// Stable or wide, but white space: left to [`Writer::push`].
    Space,
    /// May compose with the character before it ([`Kind::Other`]).
    Composes,
}

/// The length and [`Class`] of the character that starts at byte `i` of
/// `bytes` (a `str`'s), or `None` at the end.
///
/// Always inlined: `#[inline]` left it a call for every character of
/// [`Writer::copy_plain`], whose answer came back through memory.
#[inline(always)]
fn classify(bytes: &[u8], i: usize) -> Option<(usize, Class)> {
    let b = *bytes.get(i)?;
    if b < 0x80 {
        let class = match b {
            b' ' | b'\t'..=b'\r' => Class::Space,
            b'A'..=b'Z' => Class::Byte(b.to_ascii_lowercase()),
            _ => Class::Copy,
        };
        return Some((1, class));
    }
    // Most of Chinese text: U+4E00–U+9FFF, stable, known by its first two
    // bytes without decoding it (half the normaliser's instructions went to
    // classifying, most of them to these).
    if is_unified_han(b, bytes[i + 1..].first().copied().unwrap_or(0)) {
        return Some((3, Class::Copy));
    }
    classify_decoded(bytes, i, b)
}

/// Whether a character whose UTF-8 begins with bytes `b0`, `b1` is in
/// U+4E00–U+9FFF (lead byte E4 with a second byte from B8, or E5–E9).
/// The shingle sketch's tokens use it too (shingles.rs).
#[inline]
pub(super) fn is_unified_han(b0: u8, b1: u8) -> bool {
    matches!(b0, 0xE5..=0xE9) || (b0 == 0xE4 && b1 >= 0xB8)
}

/// The code point of the three-byte UTF-8 character at `bytes[i]`.
#[inline]
pub(super) fn three_byte_code(bytes: &[u8], i: usize) -> u32 {
    u32::from(bytes[i] & 0x0F) << 12 | u32::from(bytes[i + 1] & 0x3F) << 6 | u32::from(bytes[i + 2] & 0x3F)
}

/// [`classify`] of a character that is not ASCII, from its code point.
fn classify_decoded(bytes: &[u8], i: usize, b: u8) -> Option<(usize, Class)> {
    // Every stable or wide character is three bytes long in UTF-8.
    if b & 0xF0 != 0xE0 {
        return Some((if b >= 0xF0 { 4 } else { 2 }, Class::Composes));
    }
    let c = char::from_u32(three_byte_code(bytes, i)).unwrap_or(char::REPLACEMENT_CHARACTER);
    let class = match kind(c) {
        Kind::Stable => Class::Copy,
        Kind::Wide if narrow(c).is_whitespace() => Class::Space,
        Kind::Wide => Class::Byte(narrow(c).to_ascii_lowercase() as u8),
        Kind::Other => Class::Composes,
    };
    Some((3, class))
}

/// What NFKC does to a code point, as far as cutting the text before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Its own NFKC form, and never composes with what precedes it.
    Stable,
    /// A full-width form of an ASCII character (U+FF01–U+FF5E), or the
    /// ideographic space: NFKC maps it to that one ASCII character, which
    /// never composes with what precedes it. Chinese text is full of them
    /// (，：！？（）), and this spares each its own trip through the
    /// normaliser.
    Wide,
    /// Anything else: normalised with its neighbours.
    Other,
}

/// The [`Kind`] of `c`. The stable ranges are ASCII, the unified Han block,
/// CJK punctuation, kana and the typographic quotes, less the marks that
/// combine (the test checks every code point of them against the
/// normaliser's own tables).
fn kind(c: char) -> Kind {
    match c as u32 {
        0x00..=0x7F | 0x4E00..=0x9FFF => Kind::Stable,
        0x3001..=0x3029 | 0x3030..=0x3035 | 0x303B..=0x303F | 0x3041..=0x3098 | 0x309D..=0x309E | 0x30A0..=0x30FE => Kind::Stable,
        0x2018..=0x201F => Kind::Stable,
        0xFF01..=0xFF5E | 0x3000 => Kind::Wide,
        _ => Kind::Other,
    }
}

/// The one ASCII character NFKC gives a [`Kind::Wide`] code point.
fn narrow(c: char) -> char {
    match c as u32 {
        0x3000 => ' ',
        wide => char::from_u32(wide - 0xFEE0).unwrap_or(c),
    }
}

struct Writer<'a> {
    out: &'a mut String,
    pending_space: bool,
    /// Characters written so far.
    chars: usize,
}

impl Writer<'_> {
    /// A piece of the text cut before a stable or wide code point; `one`
    /// is the kind of its one character, `Other` for a longer piece.
    fn piece(&mut self, piece: &str, one: Kind) {
        match one {
            Kind::Stable => piece.chars().for_each(|c| self.push(c)),
            Kind::Wide => piece.chars().for_each(|c| self.push(narrow(c))),
            Kind::Other => piece.nfkc().for_each(|c| self.push(c)),
        }
    }

    /// Write the longest prefix of `text` whose characters are pieces of
    /// their own that [`Writer::push`] appends without a thought: not white
    /// space, and not followed by a character that may compose with them
    /// (Chinese text is mostly that). Runs of them are copied at once. Stops
    /// once more than `max_chars` characters are written. Returns the
    /// prefix's length in bytes.
    ///
    /// Only without a pending space, which the next push would settle.
    fn copy_plain(&mut self, text: &str, max_chars: usize) -> usize {
        debug_assert!(!self.pending_space);
        let bytes = text.as_bytes();
        let (mut at, mut unwritten) = (0, 0);
        let mut current = classify(bytes, 0);
        while let Some((len, class)) = current {
            if !matches!(class, Class::Copy | Class::Byte(_)) || self.chars > max_chars {
                break;
            }
            let next = classify(bytes, at + len);
            if matches!(next, Some((_, Class::Composes))) {
                break;
            }
            if let Class::Byte(b) = class {
                self.out.push_str(&text[unwritten..at]);
                self.out.push(char::from(b));
                unwritten = at + len;
            }
            self.chars += 1;
            at += len;
            current = next;
        }
        self.out.push_str(&text[unwritten..at]);
        at
    }

    /// One NFKC character: white space collapsed (dropped between Han
    /// characters), cased letters lower-cased.
    fn push(&mut self, c: char) {
        if c.is_whitespace() {
            self.pending_space = !self.out.is_empty();
            return;
        }
        if self.pending_space {
            let between_han = is_han(c) && self.out.chars().next_back().is_some_and(is_han);
            if !between_han {
                self.out.push(' ');
                self.chars += 1;
            }
            self.pending_space = false;
        }
        self.chars += 1;
        if c.is_ascii() {
            self.out.push(c.to_ascii_lowercase());
        } else if matches!(c as u32, 0x3000..=0x9FFF) {
            // CJK punctuation, kana and Han: no case (and a quick test).
            self.out.push(c);
        } else if c.is_uppercase() {
            let lower = c.to_lowercase();
            // Counted once above; a few letters lower-case to two.
            self.chars += lower.len() - 1;
            self.out.extend(lower);
        } else {
            self.out.push(c);
        }
    }
}

/// Normalise `text` into a new string.
pub fn normalize(text: &str) -> String {
    let mut out = String::new();
    normalize_into(text, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_normalisation_agrees_with_the_whole_one() {
        let texts = ["", "  ", "首页 > 新闻", "ＡＢＣ １２３", "e\u{301} İstanbul ﬁ ㈱", "한국어 텍스트", "x y  z\t"];
        for text in texts.iter().flat_map(|t| [t.to_string(), t.repeat(9), t.repeat(40)]) {
            let whole = normalize(&text);
            let n = whole.chars().count();
            for max in [0, 1, 5, n.saturating_sub(1), n, n + 1, 80] {
                let mut out = String::new();
                let short = normalize_at_most(&text, &mut out, max);
                assert_eq!(short, n <= max, "{text:?} at most {max}");
                if short {
                    assert_eq!(out, whole);
                } else {
                    assert!(whole.starts_with(&out) && out.chars().count() > max, "{text:?}: {out:?}");
                }
            }
        }
    }

    #[test]
    fn full_width_becomes_half_width() {
        assert_eq!(normalize("ＡＢＣ１２３，中文"), "abc123,中文");
    }

    #[test]
    fn whitespace_is_collapsed_and_trimmed() {
        assert_eq!(normalize("  a \t\n b\u{3000}c  "), "a b c");
    }

    #[test]
    fn spaces_between_han_characters_are_layout() {
        assert_eq!(normalize("北京大  学在 海淀 区"), "北京大学在海淀区");
        assert_eq!(normalize("北京 2024 年 Beijing 大学"), "北京 2024 年 beijing 大学");
    }

    #[test]
    fn cased_scripts_are_lower_cased() {
        assert_eq!(normalize("Hello ΣΟΦΙΑ Straße"), "hello σοφια straße");
    }

    /// The normaliser as first written: NFKC over the whole text, then the
    /// same per-character rules.
    fn reference(text: &str) -> String {
        let mut writer = Writer { out: &mut String::new(), pending_space: false, chars: 0 };
        text.nfkc().for_each(|c| writer.push(c));
        writer.out.clone()
    }

    #[test]
    fn piecewise_nfkc_equals_nfkc_of_the_whole_text() {
        // Characters that compose with their neighbours (combining marks,
        // Hangul jamo), compatibility forms, and the stable ones around them.
        let pool: Vec<char> = "aeAZ1 ,.中文\u{301}\u{308}\u{30A}\u{327}\u{3099}かは\u{1100}\u{1161}\u{11A8}ＡＢ，。\
                               \u{3000}“”、ー\u{302A}\u{F900}ﬁ①㍿\u{FF76}\u{FF9E}Σσ\u{2126}\u{212B}\t\n"
            .chars()
            .collect();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            let len = (state % 12) as usize;
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    pool[(state % pool.len() as u64) as usize]
                })
                .collect();
            assert_eq!(normalize(&text), reference(&text), "{text:?}");
        }
        assert_eq!(normalize("e\u{301}中a\u{30A}"), "é中å");
    }

    #[test]
    fn fast_kinds_agree_with_the_normaliser() {
        use unicode_normalization::char::canonical_combining_class;
        use unicode_normalization::{is_nfkc_quick, IsNormalized};
        for c in (0..=0xFFFFu32).filter_map(char::from_u32) {
            let nfkc: String = c.nfkc().collect();
            match kind(c) {
                Kind::Stable => {
                    assert_eq!(nfkc, c.to_string(), "{c:?} is its own form");
                    assert_eq!((canonical_combining_class(c), is_nfkc_quick(std::iter::once(c))), (0, IsNormalized::Yes), "{c:?}");
                }
                Kind::Wide => {
                    assert_eq!(nfkc, narrow(c).to_string(), "{c:?}");
                    assert_eq!(canonical_combining_class(c), 0, "{c:?}");
                }
                Kind::Other => {}
            }
        }
        // What a wide form maps to never composes with what precedes it.
        for c in (0xFF01..=0xFF5Eu32).filter_map(char::from_u32) {
            assert!(narrow(c).is_ascii());
        }
    }

    #[test]
    fn unified_han_is_known_by_two_bytes() {
        for c in (0x80..=0xFFFFu32).filter_map(char::from_u32) {
            let mut buf = [0u8; 4];
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            let han = is_unified_han(bytes[0], bytes.get(1).copied().unwrap_or(0));
            assert_eq!(han, (0x4E00..=0x9FFF).contains(&u32::from(c)), "{c:?}");
            if han {
                assert_eq!(classify_decoded(bytes, 0, bytes[0]), Some((3, Class::Copy)), "{c:?}");
            }
        }
    }

    #[test]
    fn the_cjk_fast_path_skips_no_cased_letter() {
        for c in (0x3000..=0x9FFFu32).filter_map(char::from_u32) {
            assert!(!c.is_uppercase() && c.to_lowercase().eq([c]), "{c:?} has a lower case");
        }
    }

    #[test]
    fn empty_stays_empty() {
        assert_eq!(normalize(" \n "), "");
    }
}
