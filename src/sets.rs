//! Term sets: exact set similarity for verifying candidate pairs (MinHash,
//! the second way to find candidates, is in [`crate::minhash`]).
//!
//! A document's term set is the sorted, distinct 64-bit hashes of its kept
//! terms (the same hashes SimHash votes with). Two measures compare sets:
//! Jaccard |A ∩ B| / |A ∪ B|, and the overlap coefficient
//! |A ∩ B| / min(|A|, |B|), which stays high when one document contains
//! the other (truncation, a prepended comment, a wrapped template).

use std::fmt;
use std::str::FromStr;

/// How candidate pairs are checked (written as text: `none`, `jaccard:T`,
/// `overlap:T`, `cosine:T`): on their term sets, or on their SimHash vectors.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Verify {
    /// Keep every candidate (SimHash distance alone decides).
    #[default]
    None,
    /// Keep pairs whose Jaccard similarity is at least the threshold.
    Jaccard(f64),
    /// Keep pairs whose overlap coefficient is at least the threshold.
    Overlap(f64),
    /// Keep pairs whose SimHash vectors' cosine is at least the threshold
    /// (SimHash-cosine, paper 001 §2.3(2)): 64 bytes a document instead of a
    /// term set (`crate::fingerprint::SimHasher::vector`).
    Cosine(f64),
}

/// What the check compares of one document: its term set, and its SimHash
/// vector (none where it was not kept).
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    pub terms: &'a [u64],
    pub vector: Option<&'a [i8]>,
}

impl Verify {
    /// The measure's SQL name and threshold, or `None` when not verifying.
    pub fn measure(&self) -> Option<(&'static str, f64)> {
        match *self {
            Verify::None => None,
            Verify::Jaccard(t) => Some(("jaccard", t)),
            Verify::Overlap(t) => Some(("overlap", t)),
            Verify::Cosine(t) => Some(("cosine", t)),
        }
    }

    /// Whether the check reads SimHash vectors rather than term sets.
    pub fn reads_vectors(&self) -> bool {
        matches!(self, Verify::Cosine(_))
    }

    /// The similarity the check measures (`None` without a check, or when
    /// a vector is missing or all zeros).
    pub fn similarity(&self, a: Evidence, b: Evidence) -> Option<f64> {
        match *self {
            Verify::None => None,
            Verify::Jaccard(_) => Some(jaccard(a.terms, b.terms)),
            Verify::Overlap(_) => Some(overlap(a.terms, b.terms)),
            Verify::Cosine(_) => crate::fingerprint::cosine(a.vector?, b.vector?),
        }
    }

    /// Whether two documents pass the check (always, without one; never
    /// when the similarity cannot be measured).
    pub fn passes(&self, a: Evidence, b: Evidence) -> bool {
        match self.measure() {
            None => true,
            Some((_, threshold)) => self.similarity(a, b).is_some_and(|s| s >= threshold),
        }
    }
}

/// A set measure by its SQL name: `jaccard` or `overlap`.
pub fn measure_by_name(name: &str) -> Option<fn(&[u64], &[u64]) -> f64> {
    match name {
        "jaccard" => Some(jaccard),
        "overlap" => Some(overlap),
        _ => None,
    }
}

impl Eq for Verify {}

impl FromStr for Verify {
    type Err = String;
    fn from_str(s: &str) -> Result<Verify, String> {
        let usage = "use none, jaccard:T, overlap:T or cosine:T with 0 < T <= 1 (e.g. jaccard:0.5)";
        if s == "none" {
            return Ok(Verify::None);
        }
        let (name, threshold) = s.split_once(':').ok_or_else(|| format!("unknown verification '{s}': {usage}"))?;
        let t: f64 = threshold.parse().map_err(|_| format!("verification threshold '{threshold}' is not a number: {usage}"))?;
        if !(t > 0.0 && t <= 1.0) {
            return Err(format!("verification threshold {t} is out of range: {usage}"));
        }
        match name {
            "jaccard" => Ok(Verify::Jaccard(t)),
            "overlap" => Ok(Verify::Overlap(t)),
            "cosine" => Ok(Verify::Cosine(t)),
            _ => Err(format!("unknown verification measure '{name}': {usage}")),
        }
    }
}

impl fmt::Display for Verify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.measure() {
            None => f.write_str("none"),
            Some((name, t)) => write!(f, "{name}:{t}"),
        }
    }
}


/// A duplication policy in the user's terms (`--min-shared S`): a pair is a
/// duplicate only when at least the share S of the shorter document's text
/// is found in the other (containment of shingle sketches,
/// `crate::text::shingles`), beside the term-set check.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "f64", try_from = "f64")]
pub struct MinShared(f64);

impl MinShared {
    /// The default policy's share (docs/quality.md).
    pub const SEVENTY_PERCENT: MinShared = MinShared(0.7);

    pub fn value(self) -> f64 {
        self.0
    }

    /// Whether a pair whose shares are `shared_a` and `shared_b` passes:
    /// the share of the shorter document (the larger of the two) must reach
    /// the policy's; a pair whose share cannot be measured does not pass.
    pub fn passes(self, shared_a: Option<f64>, shared_b: Option<f64>) -> bool {
        shared_a.into_iter().chain(shared_b).any(|s| s >= self.0)
    }
}

// Always a finite number in (0, 1]: equality is total.
impl Eq for MinShared {}

impl TryFrom<f64> for MinShared {
    type Error = String;
    fn try_from(s: f64) -> Result<MinShared, String> {
        if s > 0.0 && s <= 1.0 {
            Ok(MinShared(s))
        } else {
            Err(format!("shared share {s} is out of range: use a fraction 0 < S <= 1 of the shorter document (e.g. 0.5)"))
        }
    }
}

impl From<MinShared> for f64 {
    fn from(s: MinShared) -> f64 {
        s.0
    }
}

impl FromStr for MinShared {
    type Err = String;
    fn from_str(s: &str) -> Result<MinShared, String> {
        let value: f64 = s.parse().map_err(|_| format!("'{s}' is not a number: use a fraction 0 < S <= 1 of the shorter document (e.g. 0.5)"))?;
        MinShared::try_from(value)
    }
}

impl fmt::Display for MinShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The duplication policy a run asks for (`--min-shared S|none`, or
/// `min_shared` in a job file): not named (the default: the project's
/// default share with a check, or a store's own policy), none, or a share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SharePolicy {
    #[default]
    Default,
    Off,
    At(MinShared),
}

impl FromStr for SharePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<SharePolicy, String> {
        match s {
            "none" => Ok(SharePolicy::Off),
            _ => s.parse().map(SharePolicy::At).map_err(|e| format!("{e}, or none")),
        }
    }
}

impl fmt::Display for SharePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SharePolicy::Default => f.write_str("default"),
            SharePolicy::Off => f.write_str("none"),
            SharePolicy::At(s) => write!(f, "{s}"),
        }
    }
}

// In a job file: `min_shared = 0.7` or `min_shared = "none"`; absent is the default.
impl serde::Serialize for SharePolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SharePolicy::At(share) => s.serialize_f64(share.value()),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

impl<'de> serde::Deserialize<'de> for SharePolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SharePolicy, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Given {
            Share(f64),
            Text(String),
        }
        match Given::deserialize(d)? {
            Given::Share(s) => MinShared::try_from(s).map(SharePolicy::At),
            Given::Text(t) if t == "default" => Ok(SharePolicy::Default),
            Given::Text(t) => t.parse(),
        }
        .map_err(serde::de::Error::custom)
    }
}

/// Text forms for job files and summaries, through `Display` and `FromStr`.
macro_rules! text_form {
    ($t:ty) => {
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.to_string()
            }
        }
        impl TryFrom<String> for $t {
            type Error = String;
            fn try_from(s: String) -> Result<$t, String> {
                s.parse()
            }
        }
    };
}
text_form!(Verify);

/// Size of the intersection of two sorted, distinct slices (term sets, or
/// shingle sketches).
///
/// Without a branch a step: which side moves next is a coin toss for the
/// branch predictor, and its misses were most of a merge's time. Each step
/// adds the comparisons' outcomes instead: the side whose item is smaller
/// moves, or both on a match (one core, random sets of 12, 40 and 250
/// items sharing 50–70 %: 150–180 → 55–63 ns, 455 → 176 ns and 3.4 → 1.7 µs
/// a pair). The checks of candidates and copies and the hot buckets' joins
/// count with it.
pub fn intersection<T: Ord + Copy>(a: &[T], b: &[T]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        n += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    n
}

/// Jaccard similarity of two sorted, distinct sets (0 when both are empty).
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let common = intersection(a, b);
    let union = a.len() + b.len() - common;
    if union == 0 { 0.0 } else { common as f64 / union as f64 }
}

/// Overlap coefficient of two sorted, distinct sets (0 when either is empty).
pub fn overlap(a: &[u64], b: &[u64]) -> f64 {
    let smaller = a.len().min(b.len());
    if smaller == 0 { 0.0 } else { intersection(a, b) as f64 / smaller as f64 }
}

/// Split a group of documents that share one fingerprint by the check
/// (their term sets, and shared text under a policy; given in (source, id)
/// order): each document joins the first subgroup whose first member it
/// matches (`similar`), or starts a new one. The largest subgroup (on a
/// tie, the earliest) keeps the fingerprint; the indices of every other
/// member are returned, in order.
pub fn split_group<T>(docs: &[T], similar: impl Fn(&T, &T) -> bool) -> Vec<usize> {
    let mut heads: Vec<usize> = Vec::new();
    let mut member_of = Vec::with_capacity(docs.len());
    for (i, doc) in docs.iter().enumerate() {
        match heads.iter().position(|&h| similar(&docs[h], doc)) {
            Some(g) => member_of.push(g),
            None => {
                member_of.push(heads.len());
                heads.push(i);
            }
        }
    }
    let mut sizes = vec![0usize; heads.len()];
    for &g in &member_of {
        sizes[g] += 1;
    }
    let kept = (0..sizes.len()).max_by_key(|&g| (sizes[g], std::cmp::Reverse(g))).unwrap_or(0);
    member_of.iter().enumerate().filter(|&(_, &g)| g != kept).map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_on_hand_made_sets() {
        let a = [1, 2, 3, 4];
        let b = [3, 4, 5, 6, 7, 8];
        assert_eq!(intersection(&a, &b), 2);
        assert_eq!(jaccard(&a, &b), 2.0 / 8.0);
        assert_eq!(overlap(&a, &b), 0.5);
        assert_eq!(overlap(&[3, 4], &b), 1.0);
        assert_eq!(jaccard(&[], &[]), 0.0);
        assert_eq!(overlap(&[], &b), 0.0);
        assert_eq!(jaccard(&a, &a), 1.0);
    }

    #[test]
    fn intersection_counts_the_items_both_sets_hold() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        // Sets of 0 to 60 items drawn from small and large ranges: runs of
        // one side, matches at either end, one set inside the other.
        for _ in 0..2000 {
            let range = [4u64, 40, 1 << 40][rng.random_range(0..3)];
            let (n, m) = (rng.random_range(0..60), rng.random_range(0..60));
            let mut draw = |n: usize| -> std::collections::BTreeSet<u64> { (0..n).map(|_| rng.random_range(0..range)).collect() };
            let (a, b) = (draw(n), draw(m));
            let (x, y): (Vec<u64>, Vec<u64>) = (a.iter().copied().collect(), b.iter().copied().collect());
            assert_eq!(intersection(&x, &y), a.intersection(&b).count(), "{x:?} and {y:?}");
            assert_eq!(intersection(&y, &x), a.intersection(&b).count());
        }
        assert_eq!(intersection(&[5u32], &[1, 5, 9]), 1);
        assert_eq!(intersection::<u32>(&[], &[1]), 0);
    }

    #[test]
    fn a_shared_fingerprint_keeps_its_largest_consistent_subgroup() {
        let similar = |a: &&[u64], b: &&[u64]| jaccard(a, b) >= 0.5;
        let (odd, doc, copy) = (&[1u64, 2, 3][..], &[7u64, 8, 9, 10][..], &[7u64, 8, 9, 11][..]);
        // The first document is the odd one out: the other two keep the fingerprint.
        assert_eq!(split_group(&[odd, doc, copy], similar), vec![0]);
        assert_eq!(split_group(&[doc, odd, copy], similar), vec![1]);
        // All alike: nobody is rejected. A tie keeps the earliest subgroup.
        assert!(split_group(&[doc, copy, doc], similar).is_empty());
        assert_eq!(split_group(&[doc, odd], similar), vec![1]);
        assert!(split_group::<&[u64]>(&[], similar).is_empty());
    }

    #[test]
    fn a_policy_is_a_fraction_of_the_shorter_document() {
        assert_eq!("0.5".parse::<MinShared>().map(MinShared::value), Ok(0.5));
        for bad in ["0", "1.5", "-0.1", "half", "NaN"] {
            assert!(bad.parse::<MinShared>().is_err(), "{bad}");
        }
        let half = MinShared::try_from(0.5).unwrap();
        assert!(half.passes(Some(0.1), Some(0.5)));
        assert!(!half.passes(Some(0.49), None));
        assert!(!half.passes(None, None), "an unmeasured share does not pass");
        assert_eq!(serde_json::to_string(&half).unwrap(), "0.5");
        assert!(serde_json::from_str::<MinShared>("2.0").is_err());
        assert_eq!("none".parse::<SharePolicy>(), Ok(SharePolicy::Off));
        assert_eq!("0.5".parse::<SharePolicy>(), Ok(SharePolicy::At(half)));
        assert!("1.5".parse::<SharePolicy>().is_err());
        for (json, policy) in [("0.5", SharePolicy::At(half)), ("\"none\"", SharePolicy::Off), ("\"default\"", SharePolicy::Default)] {
            assert_eq!(serde_json::from_str::<SharePolicy>(json).unwrap(), policy);
            assert_eq!(serde_json::to_string(&policy).unwrap(), json);
        }
    }

    #[test]
    fn verification_parses_and_prints() {
        assert_eq!("jaccard:0.5".parse::<Verify>(), Ok(Verify::Jaccard(0.5)));
        assert_eq!("overlap:0.8".parse::<Verify>().unwrap().to_string(), "overlap:0.8");
        assert_eq!("none".parse::<Verify>(), Ok(Verify::None));
        assert_eq!("cosine:0.9".parse::<Verify>(), Ok(Verify::Cosine(0.9)));
        for bad in ["jaccard", "jaccard:1.5", "jaccard:0", "cosine:0", "euclid:0.5", "jaccard:x"] {
            assert!(bad.parse::<Verify>().is_err(), "{bad}");
        }
    }

    #[test]
    fn each_check_reads_its_own_evidence() {
        let (a, b) = ([1u64, 2, 3, 4], [3u64, 4, 5, 6]);
        let (va, vb) = ([10i8, 0, 5], [8i8, 1, 5]);
        let x = Evidence { terms: &a, vector: Some(&va) };
        let y = Evidence { terms: &b, vector: Some(&vb) };
        assert_eq!(Verify::Jaccard(0.5).similarity(x, y), Some(2.0 / 6.0));
        assert!(!Verify::Jaccard(0.5).passes(x, y));
        assert!(Verify::Overlap(0.5).passes(x, y));
        let cosine = Verify::Cosine(0.9).similarity(x, y).unwrap();
        assert!((cosine - 105.0 / (125f64.sqrt() * 90f64.sqrt())).abs() < 1e-12);
        assert!(Verify::Cosine(0.9).passes(x, y));
        // A document without a vector never passes a cosine check.
        assert!(!Verify::Cosine(0.1).passes(x, Evidence { terms: &b, vector: None }));
        assert!(Verify::None.passes(x, y));
        assert!(Verify::Cosine(0.9).reads_vectors() && !Verify::Jaccard(0.5).reads_vectors());
    }

}
