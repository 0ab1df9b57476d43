//! Text normalisation applied before any segmentation (spec §2).
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
pub fn normalize_into(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    let mut pending_space = false;
    for c in text.nfkc() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            let between_han = is_han(c) && out.chars().next_back().is_some_and(is_han);
            if !between_han {
                out.push(' ');
            }
            pending_space = false;
        }
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else if c.is_uppercase() {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
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

    #[test]
    fn empty_stays_empty() {
        assert_eq!(normalize(" \n "), "");
    }
}
