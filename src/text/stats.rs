//! Per-document term statistics: everything the weightings of docs/algorithm.md §3 need
//! about one document, computed in a single pass over its tokens.

use std::collections::hash_map::Entry;

use super::learned_tags::{RecentFactors, Wanted};
use super::{Analyzer, Mode, Token};
use crate::fingerprint::hash64;
use crate::weight::TermFactors;

/// Statistics of one distinct kept term of a document.
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// Buffers [`DocStats::compute`] reuses document after document, so that
/// a corpus of short posts does not allocate and grow them per post.
#[derive(Default)]
pub struct StatsScratch {
    /// Position in the document's word list of each distinct word, by hash.
    index: HashIndex,
    /// Whether each distinct word, in order of first occurrence, is a feature.
    kept: Vec<bool>,
    chars: Vec<usize>,
    title_hashes: Vec<u64>,
    /// The terms' hashes and positions, sorted ([`sort_by_hash`]).
    order: Vec<(u64, u32)>,
    /// The terms whose POS factor is not among the recent ones.
    wanted: Vec<Wanted>,
    /// The thread's recent POS factors (learned_tags.rs), taken at the
    /// first document that needs them.
    recent: Option<RecentFactors>,
}

/// The part-of-speech factor of docs/algorithm.md §3: nouns 3, verbs 2, anything else 1.
pub fn pos_factor(pos: &str) -> u8 {
    match pos.as_bytes().first() {
        Some(b'n') => 3,
        Some(b'v') => 2,
        _ => 1,
    }
}

/// Sort a document's terms by hash. Their hashes are distinct (a hash is
/// counted once), so this is the order of (hash, term). The sort moves
/// 16-byte keys rather than the terms, and each term is then moved once,
/// to its place, cycle by cycle: a long article's hundreds of terms took
/// 4 % of the segmentation statement's instructions to sort in place.
fn sort_by_hash(terms: &mut [TermStat<'_>], order: &mut Vec<(u64, u32)>) {
    const PLACED: u32 = u32::MAX;
    order.clear();
    order.extend(terms.iter().zip(0u32..).map(|(t, i)| (t.hash, i)));
    order.sort_unstable_by_key(|&(hash, _)| hash);
    for start in 0..order.len() {
        if order[start].1 == PLACED {
            continue;
        }
        // Fill `place` with the term that belongs there, then the place
        // that term left, until the cycle comes back to `start`.
        let first = terms[start];
        let mut place = start;
        loop {
            let from = std::mem::replace(&mut order[place].1, PLACED) as usize;
            if from == start {
                terms[place] = first;
                break;
            }
            terms[place] = terms[from];
            place = from;
        }
    }
}

impl<'a> DocStats<'a> {
    /// Term statistics of a document whose text and title are already normalised.
    ///
    /// The words are counted first and tested for being features (no stop
    /// word, a letter or digit) once each, by the hash they are counted
    /// under: the same terms and counts as counting
    /// [`Analyzer::tokens`], without hashing a word twice or looking up every
    /// occurrence of a stop word. (Two words of a document under one 64-bit
    /// hash count as one, the first of them, as they always did.)
    ///
    /// `terms` is the vector the statistics are made in (emptied first): a
    /// caller that recycles the last document's ([`DocStats::recycle`]) does
    /// not allocate and grow one per document.
    pub fn compute(
        analyzer: &'a Analyzer,
        (text, title): (&'a str, Option<&'a str>),
        (mode, with_pos): (Mode, bool),
        (tokens, mut terms): (&mut Vec<Token<'a>>, Vec<TermStat<'a>>),
        scratch: &mut StatsScratch,
    ) -> DocStats<'a> {
        tokens.clear();
        let untagged = analyzer.words_untagged(text, mode, with_pos, tokens);
        let StatsScratch { index, kept, chars, title_hashes, order, wanted, recent } = scratch;
        index.clear();
        kept.clear();
        terms.clear();
        wanted.clear();
        let recent = untagged.then(|| analyzer.recent_pos_factors(recent));
        let mut total = 0u32;
        for token in tokens.iter() {
            let hash = hash64(token.term.as_bytes());
            // One probe of the index a token, whether the word is new or not.
            match index.entry(hash) {
                Entry::Occupied(seen) => {
                    let i = *seen.get();
                    let stat = &mut terms[i].factors;
                    stat.count += 1;
                    if !untagged {
                        stat.cx = stat.cx.max(pos_factor(token.pos));
                    }
                    total += u32::from(kept[i]);
                }
                Entry::Vacant(new) => {
                    new.insert(terms.len());
                    let feature = analyzer.is_feature_hashed(token.term, hash);
                    kept.push(feature);
                    total += u32::from(feature);
                    // Untagged words take the factor learned for the word (a
                    // word's tag is the same wherever it occurs), found below.
                    // A word that is no feature is dropped: its factor is not needed.
                    let cx = match &recent {
                        None => pos_factor(token.pos),
                        Some(_) if !feature => 1,
                        Some(_) => {
                            wanted.push((hash, terms.len(), 0));
                            1
                        }
                    };
                    let factors = TermFactors { count: 1, tf: 0.0, cx, len: 0.0, logo: 0, title: 0 };
                    terms.push(TermStat { term: token.term, hash, factors });
                }
            }
        }
        if let Some(recent) = recent {
            // Looked up in a loop of their own, after the words are counted:
            // the lookups (most of them misses of the L1 cache) do not wait
            // behind each word's counting, nor each other.
            wanted.retain(|&(hash, i, _)| match recent.get(hash) {
                Some(cx) => {
                    terms[i].factors.cx = cx;
                    false
                }
                None => true,
            });
            if !wanted.is_empty() {
                let learn = |i: usize| pos_factor(analyzer.tag_in_place(text, terms[i].term));
                analyzer.find_or_learn_pos_factors(recent, wanted, learn);
                for &(_, i, cx) in wanted.iter() {
                    terms[i].factors.cx = cx;
                }
            }
        }
        // One flag a term, pushed together.
        let mut is_kept = kept.iter().copied();
        terms.retain(|_| is_kept.next().unwrap_or(false));
        if terms.is_empty() {
            return DocStats { total, terms };
        }

        title_hashes.clear();
        if let Some(title) = title.filter(|t| !t.is_empty()) {
            tokens.clear();
            analyzer.tokens(title, mode, false, tokens);
            title_hashes.extend(tokens.iter().map(|t| hash64(t.term.as_bytes())));
            title_hashes.sort_unstable();
        }

        chars.clear();
        chars.extend(terms.iter().map(|t| t.term.chars().count()));
        let (min, max) = (chars.iter().copied().min().unwrap_or(0), chars.iter().copied().max().unwrap_or(0));
        for (stat, &n) in terms.iter_mut().zip(chars.iter()) {
            let f = &mut stat.factors;
            f.tf = f64::from(f.count) / f64::from(total);
            f.len = if max > min { (n - min) as f64 / (max - min) as f64 } else { 0.0 };
            f.logo = if analyzer.has_signal_word(stat.term) { 5 } else { 0 };
            f.title = if title_hashes.binary_search(&stat.hash).is_ok() { 5 } else { 0 };
        }
        sort_by_hash(&mut terms, order);
        DocStats { total, terms }
    }

    /// The statistics' vector, emptied, for the next document's
    /// [`DocStats::compute`] (whose terms borrow another text).
    pub fn recycle<'b>(self) -> Vec<TermStat<'b>> {
        let mut terms = self.terms;
        terms.clear();
        terms.into_iter().map(|_| unreachable!("the vector is empty")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_sorted_by_hash_in_place() {
        let factors = TermFactors { count: 1, tf: 0.0, cx: 1, len: 0.0, logo: 0, title: 0 };
        let words: Vec<String> = (0..1000).map(|i| format!("w{i}")).collect();
        let mut order = Vec::new();
        for n in [0, 1, 2, 3, 17, 1000] {
            // Hashes of real words: an arbitrary permutation, with cycles of every length.
            let mut terms: Vec<TermStat> = words[..n].iter().map(|w| TermStat { term: w, hash: hash64(w.as_bytes()), factors }).collect();
            let mut expected = terms.clone();
            expected.sort_by_key(|t| t.hash);
            sort_by_hash(&mut terms, &mut order);
            assert_eq!(terms, expected, "{n} terms");
        }
    }

    #[test]
    fn statistics_of_a_small_document() {
        let a = Analyzer::get("").unwrap();
        let mut tokens = Vec::new();
        let stats = DocStats::compute(&a, ("北京 北京 天安门 总之 研究", Some("天安门")), (Mode::Precise, true), (&mut tokens, Vec::new()), &mut StatsScratch::default());
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
    fn words_are_filtered_once_each_as_if_every_occurrence_were() {
        // Real sentences with repeated stop words, punctuation and a
        // repeated feature: the statistics count what `tokens` keeps.
        let a = Analyzer::get("").unwrap();
        let text = "我们的国家统计局今天发布了数据，国家统计局说：的的的，数据是真实的！";
        let mut kept = Vec::new();
        a.tokens(text, Mode::Precise, true, &mut kept);
        let mut scratch = StatsScratch::default();
        // Twice with one scratch: nothing of the first document stays behind.
        // The second time in the first's recycled vector.
        let mut spare = Vec::new();
        for _ in 0..2 {
            let stats = DocStats::compute(&a, (text, None), (Mode::Precise, true), (&mut Vec::new(), std::mem::take(&mut spare)), &mut scratch);
            assert_eq!(stats.total as usize, kept.len());
            let mut expected: Vec<(&str, u32)> = Vec::new();
            for t in &kept {
                match expected.iter_mut().find(|(w, _)| *w == t.term) {
                    Some((_, n)) => *n += 1,
                    None => expected.push((t.term, 1)),
                }
            }
            let mut got: Vec<(&str, u32)> = stats.terms.iter().map(|t| (t.term, t.factors.count)).collect();
            expected.sort();
            got.sort();
            assert_eq!(got, expected);
            assert!(got.contains(&("国家统计局", 2)) && !got.iter().any(|(w, _)| *w == "的" || *w == "，"), "{got:?}");
            spare = stats.recycle();
            assert!(spare.is_empty() && spare.capacity() >= got.len());
        }
    }

    #[test]
    fn a_document_of_stop_words_has_no_terms() {
        let a = Analyzer::get("").unwrap();
        let stats = DocStats::compute(&a, ("的 了 是 the", None), (Mode::Precise, true), (&mut Vec::new(), Vec::new()), &mut StatsScratch::default());
        assert_eq!(stats, DocStats::default());
    }

    #[test]
    fn pos_factor_follows_the_tag_set() {
        assert_eq!([pos_factor("n"), pos_factor("nr"), pos_factor("vn"), pos_factor("eng"), pos_factor("x")], [3, 3, 2, 1, 1]);
    }

    #[test]
    fn learned_pos_factors_are_the_factors_of_the_tags() {
        // A fresh analyzer learns every factor; a second pass finds them in
        // the thread's recent slots, a third (the slots of another analyzer
        // on the thread) in the analyzer's table.
        let analyzer = Analyzer::new(&crate::text::AnalyzerOptions::default()).unwrap();
        let texts = ["韩冰冰和李易峰在2024年的Steam夏促买了《艾尔登法环》DLC，花了199.5元", "小明硕士毕业于中国科学院计算所，后在日本京都大学深造"];
        let mut scratch = StatsScratch::default();
        let mut learned = 0;
        for pass in 0..3 {
            if pass == 2 {
                scratch = StatsScratch::default();
                let other = Analyzer::new(&crate::text::AnalyzerOptions::default()).unwrap();
                DocStats::compute(&other, (texts[0], None), (Mode::Precise, true), (&mut Vec::new(), Vec::new()), &mut StatsScratch::default());
            }
            for text in texts {
                let mut tokens = Vec::new();
                let stats = DocStats::compute(&analyzer, (text, None), (Mode::Precise, true), (&mut tokens, Vec::new()), &mut scratch);
                let mut tagged = Vec::new();
                analyzer.words(text, Mode::Precise, true, &mut tagged);
                assert!(!stats.terms.is_empty());
                for term in &stats.terms {
                    let expected = tagged.iter().filter(|t| t.term == term.term).map(|t| pos_factor(t.pos)).max();
                    assert_eq!(Some(term.factors.cx), expected, "pass {pass}: {}", term.term);
                }
            }
            // Learned in the first pass, and not again.
            if pass == 0 {
                learned = analyzer.learned_words();
            }
            assert_eq!(analyzer.learned_words(), learned, "pass {pass}");
        }
        assert!(learned >= 15);
    }
}
