//! The banded self-join of docs/algorithm.md §5, as plain arithmetic over `u64`.
//!
//! The 64 bits are split into `m` contiguous blocks. Two fingerprints within
//! Hamming distance `k` differ in at most `k` blocks, so they agree exactly on
//! at least `m − k` of them. There is one *band* (table) per choice of `m − k`
//! blocks, `C(m, k)` in all; a fingerprint's key in a band is its value with
//! every other bit cleared. An equi-join on `(band, key)` therefore yields
//! every pair within distance `k` (no false negatives), plus candidates that
//! the exact Hamming distance removes. A pair that agrees in several bands is
//! kept only from the first of them ([`BandPlan::first_common_band`]), so it
//! is reported once without a DISTINCT over all candidates.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

/// Largest number of bands a plan may have: each is one row per fingerprint.
pub const MAX_BANDS: u64 = 4096;
/// Largest distance the join accepts (beyond it, SimHash says little).
pub const MAX_HAMMING: u32 = 32;

/// A choice of blocks and bands for distance `k`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BandPlan {
    pub k: u32,
    pub m: u32,
    /// Bit mask of each band: the bits of its `m − k` blocks.
    #[serde(skip)]
    pub masks: Vec<u64>,
    /// Fewest key bits of any band.
    pub min_key_bits: u32,
}

fn binomial(n: u64, k: u64) -> u64 {
    let k = k.min(n - k);
    (0..k).fold(1u64, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

impl BandPlan {
    /// A plan for distance `k` with `m` blocks (`k < m ≤ 64`).
    pub fn new(k: u32, m: u32) -> Result<BandPlan, String> {
        if k > MAX_HAMMING {
            return Err(format!("max Hamming distance {k} is too large: use 0 to {MAX_HAMMING}"));
        }
        if m <= k || m > 64 {
            return Err(format!("band blocks m = {m} must be more than k = {k} and at most 64"));
        }
        let bands = binomial(u64::from(m), u64::from(k));
        if bands > MAX_BANDS {
            return Err(format!(
                "k = {k} with m = {m} blocks needs {bands} bands (more than {MAX_BANDS}): choose a smaller m"
            ));
        }
        // Block widths: 64 / m, the first 64 % m blocks one bit wider.
        let (base, extra) = (64 / m, 64 % m);
        let mut blocks = Vec::with_capacity(m as usize);
        let mut start = 0u32;
        for b in 0..m {
            let width = base + u32::from(b < extra);
            let mask = if width == 64 { u64::MAX } else { ((1u64 << width) - 1) << start };
            blocks.push(mask);
            start += width;
        }
        // Bands in lexicographic order of the chosen blocks.
        let keep = (m - k) as usize;
        let mut masks = Vec::with_capacity(bands as usize);
        let mut chosen: Vec<usize> = (0..keep).collect();
        loop {
            masks.push(chosen.iter().fold(0u64, |acc, &b| acc | blocks[b]));
            // Advance to the next combination.
            let mut i = keep;
            loop {
                if i == 0 {
                    let min_key_bits = masks.iter().map(|m| m.count_ones()).min().unwrap_or(64);
                    return Ok(BandPlan { k, m, masks, min_key_bits });
                }
                i -= 1;
                if chosen[i] < m as usize - keep + i {
                    break;
                }
            }
            chosen[i] += 1;
            for j in i + 1..keep {
                chosen[j] = chosen[j - 1] + 1;
            }
        }
    }

    /// The plan with the cheapest expected cost for `n` distinct fingerprints:
    /// rows written (`n · bands`) plus candidate pairs (`bands · n² / 2^(key bits+1)`).
    pub fn auto(k: u32, n: u64) -> Result<BandPlan, String> {
        if k > MAX_HAMMING {
            return Err(format!("max Hamming distance {k} is too large: use 0 to {MAX_HAMMING}"));
        }
        let n = n.max(1) as f64;
        let mut best: Option<(f64, u32)> = None;
        for m in k + 1..=64.min(k + 24) {
            let bands = binomial(u64::from(m), u64::from(k));
            if bands > MAX_BANDS {
                break;
            }
            let key_bits = (64 / m) * (m - k); // a lower bound, good enough to rank
            let b = bands as f64;
            let cost = n * b + b * n * n / 2f64.powi(key_bits as i32 + 1);
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, m));
            }
        }
        let (_, m) = best.ok_or_else(|| format!("no band plan for k = {k}"))?;
        BandPlan::new(k, m)
    }

    pub fn bands(&self) -> usize {
        self.masks.len()
    }

    /// `(band, key)` of a fingerprint in every band.
    pub fn keys(&self, fingerprint: u64) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.masks.iter().enumerate().map(move |(i, mask)| (i as u32, fingerprint & mask))
    }

    /// A band's key and the band's index as one `u64` (a mix of both): what
    /// an equi-join on one column compares. Two different (band, key) can
    /// share it, rarely, so a join on it checks the band apart (see
    /// sql/50_near_pairs.sql).
    #[inline]
    pub fn bucket(band: u32, key: u64) -> u64 {
        crate::minhash::mix(key ^ (u64::from(band) << 56 | 0x00ff_0000_0000_0000))
    }

    /// The first band in which `a` and `b` have the same key, if any.
    pub fn first_common_band(&self, a: u64, b: u64) -> Option<u32> {
        let diff = a ^ b;
        self.masks.iter().position(|mask| diff & mask == 0).map(|i| i as u32)
    }
}

/// Every pair of `fingerprints` (distinct) within the plan's distance `k`
/// with at least one of them `tonight`, as (smaller, larger, distance), in
/// order: the pairs of the banded self-join (sql/50_near_pairs.sql), found
/// in memory. Each band's keys are radix-sorted with their fingerprints'
/// indices, and each run of equal keys gives the pairs whose first common
/// band it is. The SQL join built a hash table of every band row and probed
/// it with every band row (Weibo: 4.24 million rows each side for 424,296
/// fingerprints); a sort per band needs neither. The bands are shared among
/// the cores.
pub fn banded_pairs(plan: &BandPlan, fingerprints: &[u64], tonight: &[bool]) -> Vec<(u64, u64, u32)> {
    banded_pairs_within(plan, fingerprints, tonight, usize::MAX).expect("no bound on pairs")
}

/// [`banded_pairs`], stopping once more than `max_pairs` pairs are found:
/// a run under a memory limit sets memory aside for so many, and joins
/// instead when they do not fit.
pub fn banded_pairs_within(plan: &BandPlan, fingerprints: &[u64], tonight: &[bool], max_pairs: usize) -> Result<Vec<(u64, u64, u32)>, TooManyPairs> {
    assert_eq!(fingerprints.len(), tonight.len(), "one tonight flag per fingerprint");
    assert!(u32::try_from(fingerprints.len()).is_ok(), "at most 2^32 fingerprints in memory");
    let threads = band_threads(plan);
    let found = AtomicUsize::new(0);
    let budget = Budget { found: &found, max_pairs };
    let bands: Vec<Option<Vec<(u64, u64, u32)>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || (t..plan.bands()).step_by(threads).map(|band| band_pairs(plan, band, fingerprints, tonight, budget)).collect::<Vec<_>>()))
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a band's worker does not panic")).collect()
    });
    let mut pairs = Vec::with_capacity(found.load(Ordering::Relaxed).min(max_pairs));
    for band in bands {
        pairs.extend(band.ok_or(TooManyPairs { max_pairs })?);
    }
    pairs.sort_unstable();
    Ok(pairs)
}

/// How many threads [`banded_pairs`] sorts bands on.
pub fn band_threads(plan: &BandPlan) -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, plan.bands())
}

/// Bytes [`banded_pairs`] and the function that calls it
/// (src/udf/banded_pairs.rs) hold beyond their input lists, for `rows`
/// listed fingerprints of which `distinct` are distinct, before any pair:
/// each row as a plain number, with the radix sort's buffer or the merge's
/// copy of as many (16), each distinct fingerprint with its flag (9),
/// and on each thread a band's keys with their indices (16) and the radix
/// sort's buffer of as many (16).
pub fn sort_bytes(plan: &BandPlan, rows: u64, distinct: u64) -> u64 {
    rows * 16 + distinct * (9 + 32 * band_threads(plan) as u64)
}

/// Bytes a pair costs from [`banded_pairs`] to the file of candidates: the
/// tuple (24), its columns (20), and the copies that unnesting them and
/// sorting them make (20 each), rounded up.
pub const BYTES_PER_PAIR: u64 = 96;

/// More pairs than [`banded_pairs_within`] was given room for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyPairs {
    pub max_pairs: usize,
}

impl std::fmt::Display for TooManyPairs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "more than {} pairs within distance k: more than the memory set aside for them holds", self.max_pairs)
    }
}

impl std::error::Error for TooManyPairs {}

/// The pairs every band's worker has found, against the most allowed.
#[derive(Clone, Copy)]
struct Budget<'a> {
    found: &'a AtomicUsize,
    max_pairs: usize,
}

impl Budget<'_> {
    /// Count one more pair; false once there are too many.
    fn take(self) -> bool {
        self.found.fetch_add(1, Ordering::Relaxed) < self.max_pairs
    }
    fn spent(self) -> bool {
        self.found.load(Ordering::Relaxed) > self.max_pairs
    }
}

/// The pairs of [`banded_pairs`] whose first common band is `band`; `None`
/// when the budget ran out (here or in another band).
fn band_pairs(plan: &BandPlan, band: usize, fingerprints: &[u64], tonight: &[bool], budget: Budget) -> Option<Vec<(u64, u64, u32)>> {
    if budget.spent() {
        return None;
    }
    let mask = plan.masks[band];
    let mut keyed: Vec<(u64, u32)> = fingerprints.iter().enumerate().map(|(i, &f)| (f & mask, i as u32)).collect();
    radsort::sort_by_key(&mut keyed, |&(key, _)| key);
    let mut pairs = Vec::new();
    for run in keyed.chunk_by(|x, y| x.0 == y.0).filter(|run| run.len() > 1) {
        for (i, &(_, x)) in run.iter().enumerate() {
            for &(_, y) in &run[i + 1..] {
                let (fx, fy) = (fingerprints[x as usize], fingerprints[y as usize]);
                let d = (fx ^ fy).count_ones();
                let either_tonight = tonight[x as usize] || tonight[y as usize];
                if fx != fy && either_tonight && d <= plan.k && plan.first_common_band(fx, fy) == Some(band as u32) {
                    if !budget.take() {
                        return None;
                    }
                    pairs.push((fx.min(fy), fx.max(fy), d));
                }
            }
        }
    }
    Some(pairs)
}

/// All pairs `(i, j)`, `i < j`, of `fingerprints` within distance `k`, by
/// comparing every pair: the reference the banded join is tested against.
pub fn brute_force_pairs(fingerprints: &[u64], k: u32) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::new();
    for i in 0..fingerprints.len() {
        for j in i + 1..fingerprints.len() {
            let d = (fingerprints[i] ^ fingerprints[j]).count_ones();
            if d <= k {
                out.push((i, j, d));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banded_pairs_in_memory_equal_brute_force() {
        // Random fingerprints, near copies at distances 0..=5 and a chain;
        // every third one is tonight's.
        let mut fps: Vec<u64> = (1..=2000u64).map(crate::minhash::mix).collect();
        for i in 0..300usize {
            let flips = (i % 6) as u32;
            fps.push((0..flips).fold(fps[i * 5], |f, b| f ^ (1 << ((i as u32 * 11 + b * 17) % 64))));
        }
        fps.sort_unstable();
        fps.dedup();
        let tonight: Vec<bool> = (0..fps.len()).map(|i| i % 3 == 0).collect();
        for (k, m) in [(0, 1), (3, 4), (3, 6), (4, 6)] {
            let plan = BandPlan::new(k, m).unwrap();
            let expected: Vec<(u64, u64, u32)> = brute_force_pairs(&fps, k)
                .into_iter()
                .filter(|&(i, j, _)| tonight[i] || tonight[j])
                .map(|(i, j, d)| (fps[i], fps[j], d))
                .collect();
            assert_eq!(banded_pairs(&plan, &fps, &tonight), expected, "k = {k}, m = {m}");
            assert!(expected.len() >= 20 * k as usize, "k = {k}: {} pairs", expected.len());
        }
    }

    #[test]
    fn pairs_beyond_the_budget_stop_the_sort() {
        // 40 fingerprints one bit from 0: 40 pairs with 0, 780 among them at
        // distance 2, all tonight's.
        let mut fps: Vec<u64> = (0..40).map(|b| 1u64 << b).collect();
        fps.push(0);
        fps.sort_unstable();
        let tonight = vec![true; fps.len()];
        let plan = BandPlan::new(2, 4).unwrap();
        let all = banded_pairs(&plan, &fps, &tonight);
        assert_eq!(all.len(), 40 + 780);
        assert_eq!(banded_pairs_within(&plan, &fps, &tonight, all.len()).unwrap(), all);
        assert_eq!(banded_pairs_within(&plan, &fps, &tonight, all.len() - 1), Err(TooManyPairs { max_pairs: all.len() - 1 }));
        assert_eq!(banded_pairs_within(&plan, &fps, &tonight, 0), Err(TooManyPairs { max_pairs: 0 }));
    }

    #[test]
    fn plan_shapes() {
        let p = BandPlan::new(3, 4).unwrap();
        assert_eq!((p.bands(), p.min_key_bits), (4, 16));
        let p = BandPlan::new(3, 6).unwrap();
        assert_eq!(p.bands(), 20);
        assert_eq!(p.min_key_bits, 31); // blocks 11,11,11,11,10,10
        let p = BandPlan::new(0, 1).unwrap();
        assert_eq!(p.masks, [u64::MAX]);
        assert!(BandPlan::new(3, 3).is_err());
        assert!(BandPlan::new(12, 40).unwrap_err().contains("bands"));
    }

    #[test]
    fn every_band_keeps_m_minus_k_blocks() {
        for (k, m) in [(1, 2), (2, 5), (3, 4), (3, 6), (4, 7)] {
            let p = BandPlan::new(k, m).unwrap();
            assert_eq!(p.bands() as u64, binomial(m as u64, k as u64));
            let mut masks = p.masks.clone();
            masks.sort();
            masks.dedup();
            assert_eq!(masks.len(), p.bands(), "bands are distinct");
        }
    }

    #[test]
    fn pairs_within_k_share_a_band() {
        let p = BandPlan::new(3, 5).unwrap();
        let a = 0x0123_4567_89ab_cdefu64;
        for bits in [[0, 1, 2], [0, 20, 63], [13, 26, 39], [60, 61, 62]] {
            let b = bits.iter().fold(a, |x, &i| x ^ (1u64 << i));
            assert!(p.first_common_band(a, b).is_some(), "{bits:?}");
        }
    }

    #[test]
    fn auto_plan_grows_with_the_corpus() {
        assert_eq!(BandPlan::auto(3, 20_000).unwrap().m, 4);
        assert!(BandPlan::auto(3, 10_000_000).unwrap().m >= 5);
        assert_eq!(BandPlan::auto(0, 5).unwrap().m, 1);
    }

    #[test]
    fn brute_force_finds_planted_pairs() {
        let fps = [0u64, 1, 3, u64::MAX];
        assert_eq!(brute_force_pairs(&fps, 1), [(0, 1, 1), (1, 2, 1)]);
    }
}
