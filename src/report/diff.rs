//! Word-level differences between a member and its representative, by
//! `similar` (Myers' algorithm over word tokens). No deadline is set, so the
//! result never depends on the machine's speed; texts are cut to
//! [`super::MAX_TEXT_CHARS`] first, which bounds the work.

use similar::{capture_diff_slices, Algorithm, DiffOp};

use super::escape;

/// Splits a text into word tokens that cover it whole (spaces and
/// punctuation included), so that the tokens joined give the text back.
pub type Words<'w> = &'w dyn for<'a> Fn(&'a str) -> Vec<&'a str>;

/// Unicode word boundaries (UAX #29): words for alphabetic scripts, one
/// character at a time for Chinese. `job::report` passes jieba's words instead.
pub fn unicode_words(text: &str) -> Vec<&str> {
    use unicode_segmentation::UnicodeSegmentation;
    text.split_word_bounds().collect()
}

/// The member's text as HTML, with what it adds to the representative in
/// `<ins>` and what it lacks of it in `<del>`; and the share of the
/// representative's words it keeps.
pub fn against(representative: &str, member: &str, words: Words<'_>) -> (String, f64) {
    let old = words(representative);
    let new = words(member);
    let mut html = String::with_capacity(member.len() * 2);
    let mut kept = 0usize;
    let mut push = |tag: Option<&str>, tokens: &[&str]| {
        let text = escape(&tokens.concat());
        match tag {
            Some(t) if !text.trim().is_empty() => html.push_str(&format!("<{t}>{text}</{t}>")),
            _ => html.push_str(&text),
        }
    };
    for op in capture_diff_slices(Algorithm::Myers, &old, &new) {
        match op {
            DiffOp::Equal { old_index, len, .. } => {
                kept += old[old_index..old_index + len].iter().filter(|w| !w.trim().is_empty()).count();
                push(None, &old[old_index..old_index + len]);
            }
            DiffOp::Delete { old_index, old_len, .. } => push(Some("del"), &old[old_index..old_index + old_len]),
            DiffOp::Insert { new_index, new_len, .. } => push(Some("ins"), &new[new_index..new_index + new_len]),
            DiffOp::Replace { old_index, old_len, new_index, new_len } => {
                push(Some("del"), &old[old_index..old_index + old_len]);
                push(Some("ins"), &new[new_index..new_index + new_len]);
            }
        }
    }
    let total = old.iter().filter(|w| !w.trim().is_empty()).count();
    let share = if total == 0 { 1.0 } else { kept as f64 / total as f64 };
    (html, share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_what_was_added_and_removed_by_word() {
        let (html, share) = against("the quick brown fox", "the slow brown fox jumps", &unicode_words);
        assert_eq!(html, "the <del>quick</del><ins>slow</ins> brown fox<ins> jumps</ins>");
        assert!((share - 0.75).abs() < 1e-9, "{share}");
    }

    #[test]
    fn hostile_text_stays_text() {
        let (html, _) = against("a", "a <script>alert(1)</script>", &unicode_words);
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }

    #[test]
    fn identical_texts_keep_everything() {
        let (html, share) = against("新闻报道", "新闻报道", &unicode_words);
        assert_eq!((html.as_str(), share), ("新闻报道", 1.0));
    }
}
