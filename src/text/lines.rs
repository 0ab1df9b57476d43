//! Boilerplate lines: lines that recur across many documents of a corpus
//! (site navigation, footers, copyright notices, share buttons). They are
//! found by counting, per line, the documents that contain it; lines at or
//! above a threshold are dropped from every document before segmentation.
//!
//! A line is compared after normalisation ([`normalize_into`]), so width,
//! case and spacing variants of a template line are one line.

use std::collections::HashSet;

use super::normalize_at_most;
use crate::fingerprint::hash64;

/// Longest line, in characters after normalisation, that can count as
/// boilerplate. Site furniture is short (menus, bylines, notices); a long
/// line is a paragraph, and a paragraph many sites reprint is content.
pub const MAX_BOILERPLATE_CHARS: usize = 80;

/// The normal form of `line` in `buf` if it may be boilerplate (non-empty
/// and short): the hash of its normalised bytes.
fn eligible(line: &str, buf: &mut String) -> Option<u64> {
    let short = normalize_at_most(line, buf, MAX_BOILERPLATE_CHARS);
    (short && !buf.is_empty()).then(|| hash64(buf.as_bytes()))
}

/// The lines of a text: split at every `\n` and `\r`. Both are ASCII, so
/// never inside a longer character, and one search for either byte finds
/// them: `str::split` at two characters decodes every character of the
/// text (85 ms a pass over Heybox's 65 MB on one core), and a split at one
/// and then the other searched every text twice, a word at a time, with a
/// call's set-up for each of Weibo's short posts (8 % of the boilerplate
/// statement's samples).
fn raw_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let breaks = memchr::memchr2_iter(b'\n', b'\r', text.as_bytes());
    breaks.chain(std::iter::once(text.len())).map(move |end| {
        let line = &text[start..end];
        start = end + 1;
        line
    })
}

/// The sorted, distinct hashes of a text's normalised lines that may be
/// boilerplate (non-empty, at most [`MAX_BOILERPLATE_CHARS`] characters).
pub fn line_hashes(text: &str, buf: &mut String) -> Vec<u64> {
    let mut out = Vec::new();
    line_hashes_into(text, buf, &mut out);
    out
}

/// [`line_hashes`] of `text` appended to `out`, which keeps what it held: the
/// boilerplate statement runs it over every document, and a vector of its
/// own a document, grown and freed, cost a tenth of the statement's
/// instructions on short posts (Weibo, whose every post is one line).
pub fn line_hashes_into(text: &str, buf: &mut String, out: &mut Vec<u64>) {
    // A text of one line: its hash, if it may be boilerplate; no split, no sort.
    if memchr::memchr2(b'\n', b'\r', text.as_bytes()).is_none() {
        out.extend(eligible(text, buf));
        return;
    }
    let start = out.len();
    out.extend(raw_lines(text).filter_map(|line| eligible(line, buf)));
    let own = &mut out[start..];
    own.sort_unstable();
    let distinct = dedup_sorted(own);
    out.truncate(start + distinct);
}

/// Move the distinct values of sorted `values` to its front; returns how many.
fn dedup_sorted(values: &mut [u64]) -> usize {
    let mut kept = 0;
    for i in 0..values.len() {
        if kept == 0 || values[i] != values[kept - 1] {
            values[kept] = values[i];
            kept += 1;
        }
    }
    kept
}

/// Write into `out` the lines of `text` whose normalised hash is not in
/// `boilerplate`, one per line. When every non-empty line is boilerplate
/// the text is kept whole (a document is never emptied by this step: it may
/// be one that many sites reprint word for word). Returns whether any line
/// was dropped.
pub fn strip_lines(text: &str, boilerplate: &HashSet<u64>, buf: &mut String, out: &mut String) -> bool {
    out.clear();
    // One line is kept whatever it is (boilerplate alone, it is the whole
    // document): most short posts need no look at all.
    if memchr::memchr2(b'\n', b'\r', text.as_bytes()).is_none() {
        out.push_str(text);
        return false;
    }
    let mut dropped = false;
    for line in raw_lines(text) {
        let hash = eligible(line, buf);
        if hash.is_none() && buf.is_empty() {
            continue;
        }
        if hash.is_some_and(|h| boilerplate.contains(&h)) {
            dropped = true;
        } else {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(line);
        }
    }
    if out.is_empty() {
        out.push_str(text);
        return false;
    }
    dropped
}

/// Parse a boilerplate set written by [`format_set`]: hex hashes separated by commas.
pub fn parse_set(s: &str) -> Result<HashSet<u64>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| u64::from_str_radix(h, 16).map_err(|_| format!("boilerplate line hash '{h}' is not hexadecimal")))
        .collect()
}

/// Write a boilerplate set as hex hashes separated by commas, sorted.
pub fn format_set(hashes: &[u64]) -> String {
    let mut sorted = hashes.to_vec();
    sorted.sort_unstable();
    sorted.iter().map(|h| format!("{h:x}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_compared_after_normalisation() {
        let mut buf = String::new();
        let a = line_hashes("首页 > 新闻\n正文第一段。\n\n正文第一段。", &mut buf);
        assert_eq!(a.len(), 2, "empty lines skipped, repeats counted once");
        let b = line_hashes("首页 ＞ 新闻\r\n正文第二段。", &mut buf);
        assert!(a.contains(&b[0]) || a.contains(&b[1]), "a full-width variant is the same line");
        let paragraph = "长".repeat(MAX_BOILERPLATE_CHARS + 1);
        assert!(line_hashes(&paragraph, &mut buf).is_empty(), "a paragraph is never boilerplate");
        assert_eq!(line_hashes(&paragraph[..MAX_BOILERPLATE_CHARS * 3], &mut buf).len(), 1);
    }

    #[test]
    fn hashes_appended_are_the_texts_own_after_what_was_there() {
        let mut buf = String::new();
        let texts = ["", "一行", "首页\n正文\n首页\n\n尾", "尾\r\n首页\r正文", &"长".repeat(MAX_BOILERPLATE_CHARS + 1), "b\na\nb\na"];
        let mut out = vec![7, 3];
        let mut expected = out.clone();
        for text in texts {
            let mut own: Vec<u64> = raw_lines(text).filter_map(|line| eligible(line, &mut buf)).collect();
            own.sort_unstable();
            own.dedup();
            assert_eq!(line_hashes(text, &mut buf), own, "{text:?}");
            expected.extend(&own);
            line_hashes_into(text, &mut buf, &mut out);
        }
        assert_eq!(out, expected);
        assert_eq!(line_hashes("b\na\nb\na", &mut buf).len(), 2);
        assert_eq!(line_hashes("一行", &mut buf), line_hashes("一行\n一行", &mut buf));
    }

    #[test]
    fn lines_are_those_of_one_split_at_both_breaks() {
        for text in ["", "一行", "a\r\nb", "\n\r首页\r\r正文\n", "x\ny\rz\r\n\n", "\r", "\n", "正文\r\n\r\n尾\r", &"长一行\n".repeat(40)] {
            assert_eq!(raw_lines(text).collect::<Vec<_>>(), text.split(['\n', '\r']).collect::<Vec<_>>(), "{text:?}");
        }
    }

    #[test]
    fn stripping_drops_boilerplate_but_never_empties_a_document() {
        let mut buf = String::new();
        let set: HashSet<u64> = line_hashes("首页 > 新闻\n版权所有", &mut buf).into_iter().collect();
        let mut out = String::new();
        assert!(strip_lines("首页 > 新闻\n正文。\n版权所有", &set, &mut buf, &mut out));
        assert_eq!(out, "正文。");
        assert!(!strip_lines("首页 > 新闻\n版权所有", &set, &mut buf, &mut out));
        assert_eq!(out, "首页 > 新闻\n版权所有");
        assert!(!strip_lines("正文。", &set, &mut buf, &mut out));
        assert_eq!(out, "正文。");
        // A document of one boilerplate line is that line.
        assert!(!strip_lines("首页 > 新闻", &set, &mut buf, &mut out));
        assert_eq!(out, "首页 > 新闻");
    }

    #[test]
    fn sets_round_trip_as_text() {
        let s = format_set(&[255, 1, u64::MAX]);
        assert_eq!(s, "1,ff,ffffffffffffffff");
        assert_eq!(parse_set(&s).unwrap(), HashSet::from([1, 255, u64::MAX]));
        assert!(parse_set("xyz").is_err());
        assert!(parse_set("").unwrap().is_empty());
    }
}
