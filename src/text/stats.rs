//! Per-document term statistics: everything the weightings of docs/algorithm.md §3 need
//! about one document, computed in a single pass over its tokens.

use std::collections::hash_map::Entry;

use super::learned_tags::{RecentFactors, Wanted, WordFacts};
use super::{recycle, Analyzer, Mode, Token};
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

/// Buffers [`DocStats::of_words`] reuses document after document, so that
/// a corpus of short posts does not allocate and grow them per post.
#[derive(Default)]
pub struct StatsScratch {
    /// Position in the document's word list of each distinct word, by hash.
    index: HashIndex,
    /// Whether each distinct word, in order of first occurrence, is a feature.
    kept: Vec<bool>,
    /// Each distinct word's length in characters (0 for a word not kept),
    /// then each kept term's.
    chars: Vec<usize>,
    title_hashes: Vec<u64>,
    /// The terms' hashes and positions, sorted ([`sort_by_hash`]).
    order: Vec<(u64, u32)>,
    /// The terms whose POS factor is not among the recent ones.
    wanted: Vec<Wanted>,
    /// The thread's recent words' facts (learned_tags.rs), taken at the
    /// first document that needs them.
    recent: Option<RecentFactors>,
    /// The title's words, kept for its next document.
    title_words: Vec<Token<'static>>,
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

/// The signal-word factor of docs/algorithm.md §3.
fn logo_factor(signal: bool) -> u8 {
    if signal {
        5
    } else {
        0
    }
}

/// Whether each of `terms` (a document's distinct words, untagged) is kept,
/// into `kept`, with its length in characters into `chars` (0 for a word
/// not kept), its POS factor and its signal-word factor: from the thread's
/// `recent` facts, else worked out, each factor found or learned once a
/// word ([`Analyzer::find_or_learn_pos_factors`]), and put in `recent`.
fn word_facts<'a>(analyzer: &'a Analyzer, text: &'a str, terms: &mut [TermStat<'a>], (kept, chars, wanted): (&mut Vec<bool>, &mut Vec<usize>, &mut Vec<Wanted>), recent: &mut RecentFactors) {
    kept.clear();
    chars.clear();
    wanted.clear();
    for (i, term) in terms.iter_mut().enumerate() {
        match recent.get(term.hash) {
            Some(facts) => {
                kept.push(facts.feature);
                chars.push(facts.chars);
                term.factors.cx = facts.cx;
                term.factors.logo = logo_factor(facts.signal);
            }
            None if analyzer.is_feature_hashed(term.term, term.hash) => {
                kept.push(true);
                chars.push(term.term.chars().count());
                wanted.push((term.hash, i, 0));
            }
            None => {
                kept.push(false);
                chars.push(0);
                recent.put(term.hash, WordFacts { feature: false, cx: 1, signal: false, chars: 0 });
            }
        }
    }
    if wanted.is_empty() {
        return;
    }
    let learn = |i: usize| pos_factor(analyzer.tag_in_place(text, terms[i].term));
    analyzer.find_or_learn_pos_factors(recent, wanted, learn);
    for &(hash, i, cx) in wanted.iter() {
        let signal = analyzer.has_signal_word(terms[i].term);
        terms[i].factors.cx = cx;
        terms[i].factors.logo = logo_factor(signal);
        recent.put(hash, WordFacts { feature: true, cx, signal, chars: chars[i] });
    }
}

/// [`word_facts`] of words tagged as they were cut: their factors are those
/// of their tags, and nothing is kept between documents.
fn tagged_word_facts(analyzer: &Analyzer, terms: &mut [TermStat<'_>], (kept, chars): (&mut Vec<bool>, &mut Vec<usize>)) {
    kept.clear();
    chars.clear();
    for term in terms.iter_mut() {
        let feature = analyzer.is_feature_hashed(term.term, term.hash);
        kept.push(feature);
        chars.push(if feature { term.term.chars().count() } else { 0 });
        if feature {
            term.factors.logo = logo_factor(analyzer.has_signal_word(term.term));
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
        doc: (&'a str, Option<&'a str>),
        (mode, with_pos): (Mode, bool),
        (tokens, terms): (&mut Vec<Token<'a>>, Vec<TermStat<'a>>),
        scratch: &mut StatsScratch,
    ) -> DocStats<'a> {
        tokens.clear();
        let untagged = analyzer.words_untagged(doc.0, mode, with_pos, tokens);
        Self::of_words(analyzer, doc, (mode, untagged), (tokens, terms), scratch)
    }

    /// The statistics of a document from its words (`tokens`), as
    /// [`Analyzer::words_untagged`] cut them (`untagged` is its answer).
    /// [`DocStats::compute`] cuts and counts a document; a caller that cuts
    /// many documents before it counts any keeps each step's code in the
    /// core's instruction cache.
    pub fn of_words(
        analyzer: &'a Analyzer,
        (text, title): (&'a str, Option<&'a str>),
        (mode, untagged): (Mode, bool),
        (tokens, mut terms): (&[Token<'a>], Vec<TermStat<'a>>),
        scratch: &mut StatsScratch,
    ) -> DocStats<'a> {
        let StatsScratch { index, kept, chars, title_hashes, order, wanted, recent, title_words } = scratch;
        index.clear();
        terms.clear();
        for token in tokens.iter() {
            let hash = hash64(token.term.as_bytes());
            // One probe of the index a token, whether the word is new or not.
            match index.entry(hash) {
                Entry::Occupied(seen) => {
                    let stat = &mut terms[*seen.get()].factors;
                    stat.count += 1;
                    if !untagged {
                        stat.cx = stat.cx.max(pos_factor(token.pos));
                    }
                }
                Entry::Vacant(new) => {
                    new.insert(terms.len());
                    let factors = TermFactors { count: 1, tf: 0.0, cx: pos_factor(token.pos), len: 0.0, logo: 0, title: 0 };
                    terms.push(TermStat { term: token.term, hash, factors });
                }
            }
        }
        // The facts of each distinct word, looked up in a loop of their own
        // after the words are counted: the lookups (most of them misses of
        // the L1 cache) do not wait behind each word's counting, nor each other.
        match untagged {
            true => word_facts(analyzer, text, &mut terms, (kept, chars, wanted), analyzer.recent_pos_factors(recent)),
            false => tagged_word_facts(analyzer, &mut terms, (kept, chars)),
        }
        let total = terms.iter().zip(kept.iter()).filter(|(_, &k)| k).map(|(t, _)| t.factors.count).sum();
        // One flag a term, pushed together.
        let mut is_kept = kept.iter().copied();
        terms.retain(|_| is_kept.next().unwrap_or(false));
        let mut is_kept = kept.iter().copied();
        chars.retain(|_| is_kept.next().unwrap_or(false));
        if terms.is_empty() {
            return DocStats { total, terms };
        }

        title_hashes.clear();
        if let Some(title) = title.filter(|t| !t.is_empty()) {
            let mut tokens = recycle(std::mem::take(title_words));
            analyzer.tokens(title, mode, false, &mut tokens);
            title_hashes.extend(tokens.iter().map(|t| hash64(t.term.as_bytes())));
            title_hashes.sort_unstable();
            *title_words = recycle(tokens);
        }

        let (min, max) = (chars.iter().copied().min().unwrap_or(0), chars.iter().copied().max().unwrap_or(0));
        for (stat, &n) in terms.iter_mut().zip(chars.iter()) {
            let f = &mut stat.factors;
            f.tf = f64::from(f.count) / f64::from(total);
            f.len = if max > min { (n - min) as f64 / (max - min) as f64 } else { 0.0 };
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
    fn facts_kept_from_earlier_documents_are_those_worked_out() {
        // Signal words, stop words, nouns and verbs of several lengths:
        // every factor as the words' tags, the word lists and the words'
        // lengths give it, the first time and again from the thread's
        // recent facts.
        let a = Analyzer::get("").unwrap();
        let text = "总之，国家统计局今天发布了数据。总之研究表明北京的天安门广场很大，我们的国家很大！";
        let mut tagged = Vec::new();
        a.tokens(text, Mode::Precise, true, &mut tagged);
        let mut expected: Vec<(&str, u32, u8, u8, usize)> = Vec::new();
        for t in &tagged {
            match expected.iter_mut().find(|e| e.0 == t.term) {
                Some(e) => (e.1, e.2) = (e.1 + 1, e.2.max(pos_factor(t.pos))),
                None => expected.push((t.term, 1, pos_factor(t.pos), if a.has_signal_word(t.term) { 5 } else { 0 }, t.term.chars().count())),
            }
        }
        let (min, max) = (expected.iter().map(|e| e.4).min().unwrap(), expected.iter().map(|e| e.4).max().unwrap());
        let len = |chars: usize| (chars - min) as f64 / (max - min) as f64;
        let mut expected: Vec<(&str, u32, u8, u8, f64)> = expected.into_iter().map(|(w, n, cx, logo, chars)| (w, n, cx, logo, len(chars))).collect();
        expected.sort_by(|x, y| x.0.cmp(y.0));
        assert!(expected.iter().any(|e| e.3 == 5) && expected.iter().any(|e| e.2 == 3) && expected.iter().any(|e| e.2 == 2) && max > min + 1);
        let mut scratch = StatsScratch::default();
        for pass in 0..3 {
            let stats = DocStats::compute(&a, (text, None), (Mode::Precise, true), (&mut Vec::new(), Vec::new()), &mut scratch);
            let mut got: Vec<(&str, u32, u8, u8, f64)> = stats.terms.iter().map(|t| (t.term, t.factors.count, t.factors.cx, t.factors.logo, t.factors.len)).collect();
            got.sort_by(|x, y| x.0.cmp(y.0));
            assert_eq!(got, expected, "pass {pass}");
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
