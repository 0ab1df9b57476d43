//! 64-bit SimHash (docs/algorithm.md §4): stable feature hashes, the weighted bit vote,
//! Hamming distance and similarity, and SimHash-cosine: the vote vector kept
//! before its sign step and compared by cosine (paper 001, §2.3(2)).
//!
//! Votes are summed in fixed point (weights scaled by 2^24 and rounded to
//! integers). Integer addition is associative, so a fingerprint does not
//! depend on the order in which its terms arrive: partial sums from any
//! number of partitions or threads merge to exactly the same bits. With
//! floating-point sums a vote that lands near zero could flip with the
//! partitioning.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of [`hash64`]. Part of the fingerprint settings: changing it changes
/// every fingerprint.
pub const HASH_SEED: u64 = 0x6e65_6172_6475_7031; // "neardup1"

/// Name of the feature hash, recorded with every output.
pub const HASH_NAME: &str = "xxh3-64-seed-0x6e65617264757031";

/// Fixed-point scale of votes: 2^24 keeps ~7 significant decimal digits of a
/// weight while leaving room for 2^39 maximal votes before saturation.
const SCALE: f64 = (1u64 << 24) as f64;

/// Stable 64-bit hash of UTF-8 bytes (xxh3 with a fixed seed), the same on
/// every machine, release and platform.
#[inline]
pub fn hash64(bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, HASH_SEED)
}

/// A weight as a fixed-point vote. Non-finite or negative weights vote nothing.
#[inline]
pub fn fixed_weight(weight: f64) -> i64 {
    if weight.is_finite() && weight > 0.0 {
        (weight * SCALE).round().min(i64::MAX as f64 / 4.0) as i64
    } else {
        0
    }
}

/// The running vote of SimHash: one signed sum per bit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimHasher {
    votes: [i64; 64],
}

impl Default for SimHasher {
    fn default() -> Self {
        SimHasher { votes: [0; 64] }
    }
}

impl SimHasher {
    /// Add a feature with hash `hash` and weight `weight`.
    #[inline]
    pub fn add(&mut self, hash: u64, weight: f64) {
        self.add_fixed(hash, fixed_weight(weight));
    }

    /// Add a feature whose weight is already a fixed-point vote.
    #[inline]
    pub fn add_fixed(&mut self, hash: u64, w: i64) {
        if w == 0 {
            return;
        }
        for (j, v) in self.votes.iter_mut().enumerate() {
            let bit = ((hash >> j) & 1) as i64; // 1 or 0
            *v = v.saturating_add(w * (2 * bit - 1));
        }
    }

    /// Add the fixed-point features `features` at once: the same votes as
    /// [`SimHasher::add_fixed`] of each in turn. A bit's vote is settled
    /// once at the end as what the terms whose hash sets it gained less what
    /// the others did (`gained_by_bit`). Where a vote could reach the
    /// bounds of `i64`, whose saturation makes the order matter, the terms
    /// are added one by one instead.
    pub fn add_all_fixed(&mut self, features: &[(u64, i64)]) {
        let start = self.votes.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
        let bound = features.iter().try_fold(start, |t, &(_, w)| t.checked_add(w.unsigned_abs()));
        if bound.is_none_or(|b| b > i64::MAX as u64) {
            features.iter().for_each(|&(hash, w)| self.add_fixed(hash, w));
            return;
        }
        // No partial sum below exceeds the bound, so none overflows, and
        // integer sums do not depend on the order they are taken in.
        let all: i64 = features.iter().map(|&(_, w)| w).sum();
        let gained = gained_by_bit(features);
        for (v, g) in self.votes.iter_mut().zip(gained) {
            *v += g - (all - g);
        }
    }

    /// Merge another partial vote into this one.
    pub fn merge(&mut self, other: &SimHasher) {
        for (v, o) in self.votes.iter_mut().zip(other.votes.iter()) {
            *v = v.saturating_add(*o);
        }
    }

    /// Bit j of the fingerprint is 1 exactly when its vote is positive.
    pub fn finish(&self) -> u64 {
        self.votes
            .iter()
            .enumerate()
            .fold(0u64, |acc, (j, &v)| if v > 0 { acc | (1u64 << j) } else { acc })
    }

    /// The votes as 512 little-endian bytes (aggregate state between nodes).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.votes.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Read votes written by [`SimHasher::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Option<SimHasher> {
        if bytes.len() != 64 * 8 {
            return None;
        }
        let mut votes = [0i64; 64];
        for (v, chunk) in votes.iter_mut().zip(bytes.chunks_exact(8)) {
            *v = i64::from_le_bytes(chunk.try_into().ok()?);
        }
        Some(SimHasher { votes })
    }
}

/// How a SimHash vector is kept, recorded with fingerprints and stores: the 64
/// votes scaled so that the largest magnitude is 127, rounded half away from
/// zero to 8-bit integers.
pub const VECTOR_SCHEME: &str = "simhash-votes:64xi8";

impl SimHasher {
    /// The votes before the sign step, kept at 8 bits: 64 bytes a document,
    /// where its term set takes 8 bytes a term. Cosine ignores scale, so
    /// scaling to the largest vote loses only the rounding (at most 1/254 of
    /// the largest vote per dimension). Integer arithmetic keeps the vector
    /// the same on every machine; all-zero votes give all zeros.
    pub fn vector(&self) -> [i8; 64] {
        let max = self.votes.iter().map(|v| i128::from(*v).abs()).max().unwrap_or(0);
        let mut out = [0i8; 64];
        if max == 0 {
            return out;
        }
        for (q, &v) in out.iter_mut().zip(self.votes.iter()) {
            let v = i128::from(v);
            // round(127 · v / max), halves away from zero; |result| ≤ 127.
            let scaled = (2 * 127 * v.abs() + max) / (2 * max);
            *q = (v.signum() * scaled) as i8;
        }
        out
    }
}

/// Cosine of two SimHash vectors ([`SimHasher::vector`]), or `None` when
/// either is all zeros or their lengths differ.
pub fn cosine(a: &[i8], b: &[i8]) -> Option<f64> {
    if a.len() != b.len() {
        return None;
    }
    let (mut dot, mut aa, mut bb) = (0i64, 0i64, 0i64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (i64::from(x), i64::from(y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0 || bb == 0 {
        return None;
    }
    Some(dot as f64 / ((aa as f64).sqrt() * (bb as f64).sqrt()))
}

/// SimHash of `(hash, weight)` features.
pub fn simhash<I: IntoIterator<Item = (u64, f64)>>(features: I) -> u64 {
    let mut h = SimHasher::default();
    for (hash, weight) in features {
        h.add(hash, weight);
    }
    h.finish()
}

/// Number of differing bits.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Similarity as the source blog reports it: `(64 − hamming) / 64`.
#[inline]
pub fn similarity(a: u64, b: u64) -> f64 {
    f64::from(64 - hamming(a, b)) / 64.0
}

/// For each bit, the sum of the weights of the features whose hash sets it.
///
/// Adding each weight to the bits its hash sets, found one by one by their
/// trailing zeros, took about 30 ns a term, most of it in mispredicted
/// branches (it was a fifth of Heybox's fingerprints' statement). A few
/// terms (a short post's) are added nibble by nibble under a mask of the
/// bits each nibble's value sets ([`gained_term_by_term`]); more are summed
/// by the value of each of the hash's 16 nibbles, and each bit's sum taken
/// once from the values that set it ([`gained_by_nibble_value`]), which
/// costs more at first and less a term. Where they cross was measured in
/// instructions (valgrind's callgrind, docs/performance.md).
fn gained_by_bit(features: &[(u64, i64)]) -> [i64; 64] {
    match features.len() <= FEW_TERMS {
        true => gained_term_by_term(features),
        false => gained_by_nibble_value(features),
    }
}

/// Terms up to which [`gained_term_by_term`] takes fewer instructions than
/// [`gained_by_nibble_value`] (about 44 a term against 65, and 270 a
/// document against 860).
const FEW_TERMS: usize = 4;

/// For each value of a nibble, a mask a bit: all ones where the value sets it.
const NIBBLE_MASKS: [[i64; 4]; 16] = {
    let mut out = [[0i64; 4]; 16];
    let mut value = 0;
    while value < 16 {
        let mut bit = 0;
        while bit < 4 {
            out[value][bit] = -((value as i64 >> bit) & 1);
            bit += 1;
        }
        value += 1;
    }
    out
};

/// [`gained_by_bit`] a term at a time: each nibble of its hash adds the
/// weight to the four bits its value sets, through a mask, with no branch.
fn gained_term_by_term(features: &[(u64, i64)]) -> [i64; 64] {
    let mut gained = [0i64; 64];
    for &(hash, w) in features {
        for (n, four) in gained.chunks_exact_mut(4).enumerate() {
            let masks = &NIBBLE_MASKS[((hash >> (4 * n)) & 15) as usize];
            for (g, mask) in four.iter_mut().zip(masks) {
                *g += w & mask;
            }
        }
    }
    gained
}

/// [`gained_by_bit`] by nibble value: the weights summed by the value of
/// each nibble (16 additions a term); then, for each nibble, its values
/// folded in halves: bit 3 is set by values 8 to 15; folding the upper half
/// onto the lower leaves the sums by value modulo 8, of which 4 to 7 set
/// bit 2; folding again, 2 and 3 modulo 4 set bit 1, and 1 and 3 bit 0 (24
/// additions a nibble, where taking each bit's eight values one by one took
/// 28 and as many loads).
fn gained_by_nibble_value(features: &[(u64, i64)]) -> [i64; 64] {
    let mut by_nibble = [[0i64; 16]; 16];
    for &(hash, w) in features {
        for (n, sums) in by_nibble.iter_mut().enumerate() {
            sums[((hash >> (4 * n)) & 15) as usize] += w;
        }
    }
    let mut gained = [0i64; 64];
    for (sums, four) in by_nibble.iter().zip(gained.chunks_exact_mut(4)) {
        let mut mod8 = [0i64; 8];
        for (v, m) in mod8.iter_mut().enumerate() {
            *m = sums[v] + sums[v + 8];
        }
        let mod4 = [mod8[0] + mod8[4], mod8[1] + mod8[5], mod8[2] + mod8[6], mod8[3] + mod8[7]];
        four[3] = sums[8..].iter().sum();
        four[2] = mod8[4] + mod8[5] + mod8[6] + mod8[7];
        four[1] = mod4[2] + mod4[3];
        four[0] = mod4[1] + mod4[3];
    }
    gained
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash64_is_stable() {
        // Pinned values: if these change, every stored fingerprint is invalid.
        assert_eq!(hash64("北京".as_bytes()), 1_801_876_706_691_949_400);
        assert_eq!(hash64(b""), 527_878_933_107_901_043);
        assert_eq!(hash64(b"a"), 11_805_050_980_613_610_814);
    }

    #[test]
    fn single_feature_fingerprint_is_its_hash() {
        let h = hash64(b"term");
        assert_eq!(simhash([(h, 1.0)]), h);
    }

    #[test]
    fn heavier_feature_wins_each_bit() {
        let (a, b) = (0xFFFF_0000_FFFF_0000u64, 0x00FF_00FF_00FF_00FFu64);
        assert_eq!(simhash([(a, 2.0), (b, 1.0)]), a);
        assert_eq!(simhash([(a, 1.0), (b, 2.0)]), b);
    }

    #[test]
    fn ties_and_empty_input_give_zero_bits() {
        assert_eq!(simhash([]), 0);
        assert_eq!(simhash([(u64::MAX, 1.0), (0, 1.0)]), 0);
        assert_eq!(simhash([(u64::MAX, 0.0), (u64::MAX, f64::NAN)]), 0);
    }

    #[test]
    fn order_and_grouping_do_not_matter() {
        let features: Vec<(u64, f64)> =
            (0..200u64).map(|i| (hash64(&i.to_le_bytes()), 0.1 + (i % 7) as f64 / 3.0)).collect();
        let forward = simhash(features.iter().copied());
        let backward = simhash(features.iter().rev().copied());
        let mut left = SimHasher::default();
        let mut right = SimHasher::default();
        for (i, &(h, w)) in features.iter().enumerate() {
            if i % 3 == 0 { left.add(h, w) } else { right.add(h, w) }
        }
        right.merge(&SimHasher::from_bytes(&left.to_bytes()).unwrap());
        assert_eq!(forward, backward);
        assert_eq!(right.finish(), forward);
    }

    /// A xorshift generator of hashes from `seed`, for the tests' features.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    #[test]
    fn both_ways_of_summing_by_bit_are_the_definition() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        for n in [0usize, 1, 2, 3, 4, 5, 9, 64] {
            let features: Vec<(u64, i64)> = (0..n).map(|_| (next(), (next() % 2_000_001) as i64 - 1_000_000)).collect();
            let defined: [i64; 64] = std::array::from_fn(|j| features.iter().filter(|(h, _)| h >> j & 1 == 1).map(|(_, w)| w).sum());
            assert_eq!(gained_term_by_term(&features), defined, "{n} terms, term by term");
            assert_eq!(gained_by_nibble_value(&features), defined, "{n} terms, by nibble value");
        }
    }

    #[test]
    fn votes_added_at_once_are_the_votes_added_one_by_one() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for n in [0usize, 1, 2, 7, 15, 16, 17, 64, 500] {
            let features: Vec<(u64, i64)> = (0..n).map(|i| (next(), (next() % 5_000_000) as i64 - (i % 3 == 0) as i64 * 1_000_000)).collect();
            let (mut one, mut all) = (SimHasher::default(), SimHasher::default());
            one.add_fixed(7, 3);
            all.add_fixed(7, 3);
            features.iter().for_each(|&(h, w)| one.add_fixed(h, w));
            all.add_all_fixed(&features);
            assert_eq!(one, all, "{n} features");
        }
        // Near the bounds, where votes saturate, the order is kept.
        let huge = [(u64::MAX, i64::MAX / 2), (u64::MAX, i64::MAX / 2), (u64::MAX, i64::MAX / 2), (0, i64::MAX / 2)];
        let (mut one, mut all) = (SimHasher::default(), SimHasher::default());
        huge.iter().for_each(|&(h, w)| one.add_fixed(h, w));
        all.add_all_fixed(&huge);
        assert_eq!(one, all);
        assert_eq!(all.votes[0], i64::MAX - i64::MAX / 2);
    }

    #[test]
    fn a_vector_keeps_the_votes_to_eight_bits() {
        let mut h = SimHasher::default();
        h.add_fixed(u64::MAX, 254);
        h.add_fixed(0xFFFF_FFFF, 127);
        // Bits 0–31 have 254 + 127, bits 32–63 have 254 − 127.
        let v = h.vector();
        assert_eq!(v[0], 127);
        assert_eq!(v[63], 42, "127 · 127 / 381 = 42.33");
        assert_eq!(SimHasher::default().vector(), [0i8; 64]);
        let mut neg = SimHasher::default();
        neg.add_fixed(0, 10);
        assert_eq!(neg.vector(), [-127i8; 64]);
        // The sign of each kept vote is the fingerprint's bit.
        let features: Vec<(u64, f64)> = (0..50u64).map(|i| (hash64(&i.to_le_bytes()), 1.0 + i as f64)).collect();
        let mut h = SimHasher::default();
        features.iter().for_each(|&(x, w)| h.add(x, w));
        for (j, &q) in h.vector().iter().enumerate() {
            assert!(q == 0 || (q > 0) == ((h.finish() >> j) & 1 == 1));
        }
    }

    #[test]
    fn eight_bits_keep_the_cosine_of_the_votes() {
        // Two documents sharing 40 of 60 weighted terms: the cosine of the
        // 8-bit vectors against that of the exact votes.
        let terms: Vec<(u64, f64)> = (0..80u64).map(|i| (hash64(&i.to_le_bytes()), 0.5 + (i % 9) as f64)).collect();
        let (mut a, mut b) = (SimHasher::default(), SimHasher::default());
        terms[..60].iter().for_each(|&(h, w)| a.add(h, w));
        terms[20..].iter().for_each(|&(h, w)| b.add(h, w));
        let exact = {
            let dot = |x: &[i64; 64], y: &[i64; 64]| x.iter().zip(y).map(|(&p, &q)| p as f64 * q as f64).sum::<f64>();
            dot(&a.votes, &b.votes) / (dot(&a.votes, &a.votes).sqrt() * dot(&b.votes, &b.votes).sqrt())
        };
        let kept = cosine(&a.vector(), &b.vector()).unwrap();
        assert!(exact > 0.3 && exact < 0.9, "{exact}");
        assert!((kept - exact).abs() < 0.005, "{kept} against {exact}");
    }

    #[test]
    fn cosine_of_vectors() {
        let a = [3i8, 4, 0];
        assert_eq!(cosine(&a, &a), Some(1.0));
        assert_eq!(cosine(&a, &[-3, -4, 0]), Some(-1.0));
        assert_eq!(cosine(&a, &[4, -3, 5]), Some(0.0));
        assert_eq!(cosine(&a, &[0, 0, 0]), None);
        assert_eq!(cosine(&a, &[1, 2]), None);
        // Scale does not matter.
        assert!((cosine(&[1, 2, 3], &[2, 4, 6]).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn hamming_and_similarity() {
        assert_eq!(hamming(0b1011, 0b0001), 2);
        assert_eq!(hamming(0, u64::MAX), 64);
        assert_eq!(similarity(7, 7), 1.0);
        assert_eq!(similarity(0, 0b1111), 0.9375);
    }
}
