//! Per-document term statistics: everything the weightings of docs/algorithm.md §3 need
//! about one document, computed in a single pass over its tokens.

use super::{Analyzer, Mode, Token};
use crate::fingerprint::hash64;
use crate::weight::TermFactors;

/// Statistics of one distinct kept term of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct TermStat<'a> {
    pub term: &'a str,
    /// `hash64(term)`: the feature hash SimHash uses and the key of the IDF table.
    pub hash: u64,
    /// Count, tf and the factors of the improved weight.
    pub factors: TermFactors,
}

/// The distinct kept terms of a document, sorted by hash (then term), with
/// the document's total number of kept term occurrences.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DocStats<'a> {
    pub total: u32,
    pub terms: Vec<TermStat<'a>>,
}

type HashIndex = super::HashKeyed<usize>;

/// The part-of-speech factor of docs/algorithm.md §3: nouns 3, verbs 2, anything else 1.
pub fn pos_factor(pos: &str) -> u8 {
    match pos.as_bytes().first() {
        Some(b'n') => 3,
        Some(b'v') => 2,
        _ => 1,
    }
}

impl<'a> DocStats<'a> {
    /// Term statistics of a document whose text and title are already normalised.
    pub fn compute(
        analyzer: &'a Analyzer,
        text: &'a str,
        title: Option<&'a str>,
        mode: Mode,
        with_pos: bool,
        tokens: &mut Vec<Token<'a>>,
    ) -> DocStats<'a> {
        tokens.clear();
        analyzer.tokens(text, mode, with_pos, tokens);
        let mut index = HashIndex::default();
        let mut terms: Vec<TermStat<'a>> = Vec::new();
        for token in tokens.iter() {
            let hash = hash64(token.term.as_bytes());
            let cx = pos_factor(token.pos);
            match index.get(&hash) {
                Some(&i) => {
                    let stat = &mut terms[i].factors;
                    stat.count += 1;
                    stat.cx = stat.cx.max(cx);
                }
                None => {
                    index.insert(hash, terms.len());
                    let factors = TermFactors { count: 1, tf: 0.0, cx, len: 0.0, logo: 0, title: 0 };
                    terms.push(TermStat { term: token.term, hash, factors });
                }
            }
        }
        let total = tokens.len() as u32;
        if terms.is_empty() {
            return DocStats { total, terms };
        }

        let title_hashes: Vec<u64> = match title {
            Some(title) if !title.is_empty() => {
                tokens.clear();
                analyzer.tokens(title, mode, false, tokens);
                let mut h: Vec<u64> = tokens.iter().map(|t| hash64(t.term.as_bytes())).collect();
                h.sort_unstable();
                h
            }
            _ => Vec::new(),
        };

        let chars: Vec<usize> = terms.iter().map(|t| t.term.chars().count()).collect();
        let (min, max) = (chars.iter().copied().min().unwrap_or(0), chars.iter().copied().max().unwrap_or(0));
        for (stat, &n) in terms.iter_mut().zip(&chars) {
            let f = &mut stat.factors;
            f.tf = f64::from(f.count) / f64::from(total);
            f.len = if max > min { (n - min) as f64 / (max - min) as f64 } else { 0.0 };
            f.logo = if analyzer.has_signal_word(stat.term) { 5 } else { 0 };
            f.title = if title_hashes.binary_search(&stat.hash).is_ok() { 5 } else { 0 };
        }
        terms.sort_unstable_by(|a, b| a.hash.cmp(&b.hash).then_with(|| a.term.cmp(b.term)));
        DocStats { total, terms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_a_small_document() {
        let a = Analyzer::get("").unwrap();
        let mut tokens = Vec::new();
        let stats = DocStats::compute(&a, "北京 北京 天安门 总之 研究", Some("天安门"), Mode::Precise, true, &mut tokens);
        assert_eq!(stats.total, 5);
        let by_term = |t: &str| stats.terms.iter().find(|s| s.term == t).unwrap().factors;
        let beijing = by_term("北京");
        assert_eq!((beijing.count, beijing.cx, beijing.title, beijing.logo), (2, 3, 0, 0));
        assert!((beijing.tf - 0.4).abs() < 1e-12);
        assert_eq!(beijing.len, 0.0);
        let tam = by_term("天安门");
        assert_eq!((tam.title, tam.len), (5, 1.0));
        assert_eq!(by_term("总之").logo, 5);
        assert_eq!(by_term("研究").cx, 2, "研究 is tagged vn: a verb");
        let hashes: Vec<u64> = stats.terms.iter().map(|t| t.hash).collect();
        let mut sorted = hashes.clone();
        sorted.sort();
        assert_eq!(hashes, sorted);
    }

    #[test]
    fn a_document_of_stop_words_has_no_terms() {
        let a = Analyzer::get("").unwrap();
        let stats = DocStats::compute(&a, "的 了 是 the", None, Mode::Precise, true, &mut Vec::new());
        assert_eq!(stats, DocStats::default());
    }

    #[test]
    fn pos_factor_follows_the_tag_set() {
        assert_eq!([pos_factor("n"), pos_factor("nr"), pos_factor("vn"), pos_factor("eng"), pos_factor("x")], [3, 3, 2, 1, 1]);
    }
}
