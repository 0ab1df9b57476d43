//! MinHash buckets to candidate pairs in one pass, when a run's term sets
//! are held in memory: the pairs that sql/51_shared_keys_by_sort.sql,
//! sql/51_minhash_buckets.sql and sql/52_minhash_candidates.sql find
//! together, without their tables in between.
//!
//! The statements unnest every row's band keys to join them with the
//! shared ones (Weibo: 13.6 million rows for 1.09 million members), gather
//! the members' term sets of each hot bucket with `array_agg`, and group
//! every pair found to drop the ones found in several buckets (2.66 million
//! for 858,000). Here the rows are looked at where they lie: every key is
//! dealt with its row, the keys a filter has seen twice are sorted, as the
//! statement's aggregate sorts them, and each run of one key is a bucket
//! ([`Buckets::of`]), whose members are indices of rows; a hot bucket's term
//! sets are slices of the table's.
//!
//! The pairs are the statements' exactly (tested against them): a bucket of
//! at most `hot` members lists each pair of two different fingerprints with
//! at least one of tonight's; a larger one gives those of its pairs whose
//! Jaccard similarity reaches the threshold ([`crate::setjoin::jaccard_pairs`]).
//! That holds when every fingerprint is on one row, as in a one-shot run's
//! term sets, and when each bucket is one band (two keys of different bands
//! are equal only by a chance of 2^-48). Otherwise the statements run.

use crate::minhash::{narrow, tagged, KEY_BITS};
use crate::parallel::{claimed, cut, merge_distinct, on_threads, PARTS_A_THREAD};
use crate::setjoin::jaccard_pairs;

/// The rows of a table of term sets, by column: a row's fingerprint, whether
/// it is tonight's, its MinHash band keys and its term set.
pub struct TermSets<'a> {
    pub fingerprints: &'a [u64],
    pub tonight: &'a [bool],
    pub keys: &'a [&'a [u64]],
    pub sets: &'a [&'a [u64]],
}

/// Which buckets list their pairs, and which give only those that pass a
/// Jaccard check.
#[derive(Debug, Clone, Copy)]
pub struct Listing {
    /// Members above which a bucket is hot.
    pub hot: u64,
    /// The Jaccard threshold of a hot bucket's pairs.
    pub threshold: f64,
}

/// The candidate pairs of `rows`' MinHash buckets, as (smaller, larger)
/// fingerprint, sorted and distinct; the work is cut in `parts`, each on a
/// thread of its own. `None` when a fingerprint is on more than one row or
/// a bucket mixes bands (see the module docs).
pub fn bucket_pairs(rows: &TermSets, listing: Listing, parts: usize) -> Option<Vec<(u64, u64)>> {
    if !one_row_each(rows.fingerprints) {
        return None;
    }
    let chunks = cut(rows.fingerprints.len(), parts, |_| 1);
    let buckets = Buckets::of(rows, &chunks)?;
    // A bucket costs about the pairs of its members; a hot one less.
    let ranges = cut(buckets.len(), parts * PARTS_A_THREAD, |b| buckets.members(b).len().pow(2) as u64);
    let found = claimed(ranges, parts, |range| {
        let mut pairs = Vec::new();
        for b in range {
            let members = buckets.members(b);
            match members.len() as u64 <= listing.hot {
                true => listed(rows, members, &mut pairs),
                false => checked(rows, (buckets.bands[b], members), listing.threshold, &mut pairs),
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs
    });
    // The ranges' runs, each in order, merged (sorting them all on one
    // thread took Weibo's client 50 ms).
    Some(merge_distinct(&found, parts))
}

/// Whether no fingerprint is on two rows.
fn one_row_each(fingerprints: &[u64]) -> bool {
    let mut sorted = fingerprints.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

/// Parts of the key space [`Buckets::of`] sifts one by one.
const SPLIT: usize = 64;

/// Two bits a slot, 8 slots a key or more: whether a key has landed on the
/// slot, and whether a second one has. A key held twice is always seen
/// twice; a key held once is when another landed on its slot (at most about
/// one in eight).
struct SeenTwice {
    once: Vec<u64>,
    twice: Vec<u64>,
    mask: u64,
}

impl SeenTwice {
    fn new(keys: usize) -> SeenTwice {
        let slots = (keys * 8).next_power_of_two().clamp(1 << 12, 1 << 32);
        SeenTwice { once: vec![0; slots / 64], twice: vec![0; slots / 64], mask: slots as u64 - 1 }
    }

    fn see(&mut self, key: u64) {
        let (word, bit) = self.slot(key);
        self.twice[word] |= self.once[word] & bit;
        self.once[word] |= bit;
    }

    fn twice(&self, key: u64) -> bool {
        let (word, bit) = self.slot(key);
        self.twice[word] & bit != 0
    }

    fn slot(&self, key: u64) -> (usize, u64) {
        let slot = key & self.mask;
        ((slot / 64) as usize, 1 << (slot % 64))
    }
}

/// A row's key as it is dealt: the key, the band it is (where it lies in
/// its row's list, in the bits above the key) and whether the row is
/// tonight's (the top bit).
fn dealt_key(key: u64, band: usize, tonight: bool) -> u64 {
    tagged(key, tonight) | (band as u64) << KEY_BITS
}

/// Bands a row may hold for [`dealt_key`] to keep its band, in the bits
/// between the key and the top one (a plan holds at most
/// [`crate::minhash::MAX_PERMUTATIONS`]).
const MAX_BANDS: usize = 1 << (63 - KEY_BITS);

/// The band of a [`dealt_key`].
fn band_of(dealt: u64) -> u32 {
    ((dealt & !(1 << 63)) >> KEY_BITS) as u32
}

/// The buckets of the keys held by two rows or more, one of them tonight's
/// (sql/51_shared_keys_by_sort.sql and sql/51_minhash_buckets.sql), each
/// with its members (row indices, ascending) and the band it is.
struct Buckets {
    starts: Vec<usize>,
    rows: Vec<u32>,
    bands: Vec<u32>,
}

impl Buckets {
    /// The buckets of `rows`, whose `chunks` are dealt on threads of their
    /// own; `None` when a bucket mixes bands or a row holds too many.
    ///
    /// Almost every key is held once (Weibo: 13.6 million keys, 1.1 million
    /// of them a shared key's), and one sort of them all, a hundred
    /// megabytes a core, took most of the pass. So each chunk of rows' keys
    /// is dealt by its high bits to [`SPLIT`] parts of the key space, each
    /// key with its row; each part (Weibo: 212,000 keys), which fits in a
    /// core's cache, is sifted by a filter ([`SeenTwice`]) that drops the
    /// keys it saw once, and the rest are sorted, their runs of one key
    /// being the buckets. Before, the shared keys were found first and every
    /// row's keys looked up among them again: a second pass over all the
    /// keys, about 0.6 s of a core on Weibo.
    fn of(rows: &TermSets, chunks: &[std::ops::Range<usize>]) -> Option<Buckets> {
        if rows.keys.iter().any(|k| k.len() > MAX_BANDS) {
            return None;
        }
        let shift = KEY_BITS - SPLIT.trailing_zeros();
        let dealt: Vec<(Vec<(Vec<u64>, Vec<u32>)>, u64)> = on_threads(chunks.to_vec(), |chunk| {
            // Each part sized for its share and a little more: growing 64
            // vectors key by key copied them again and again.
            let keys: usize = rows.keys[chunk.clone()].iter().map(|k| k.len()).sum();
            let room = keys / SPLIT + keys / (8 * SPLIT) + 16;
            let mut parts: Vec<(Vec<u64>, Vec<u32>)> = (0..SPLIT).map(|_| (Vec::with_capacity(room), Vec::with_capacity(room))).collect();
            let mut every = 0;
            for r in chunk {
                for (band, &key) in rows.keys[r].iter().enumerate() {
                    every |= key;
                    let part = &mut parts[(narrow(key) >> shift) as usize];
                    part.0.push(dealt_key(key, band, rows.tonight[r]));
                    part.1.push(r as u32);
                }
            }
            (parts, every)
        });
        // A wide key (a store's, from before keys were cut) is counted among
        // its key's holders by the statements but never joined to its
        // bucket: they run instead.
        if dealt.iter().any(|&(_, every)| narrow(every) != every) {
            return None;
        }
        let dealt: Vec<Vec<(Vec<u64>, Vec<u32>)>> = dealt.into_iter().map(|(parts, _)| parts).collect();
        let found = on_threads(cut(SPLIT, chunks.len(), |_| 1), |parts| {
            let mut buckets = Buckets::empty();
            for part in parts {
                let held: usize = dealt.iter().map(|chunk| chunk[part].0.len()).sum();
                let mut seen = SeenTwice::new(held);
                dealt.iter().flat_map(|chunk| &chunk[part].0).for_each(|&t| seen.see(narrow(t)));
                // The keys seen twice with their rows, in the rows' order:
                // the sort is stable, so each bucket lists its members so.
                let mut twice: Vec<(u64, u32)> = Vec::new();
                for chunk in &dealt {
                    let (keys, held_by) = &chunk[part];
                    twice.extend(keys.iter().zip(held_by).filter(|(&t, _)| seen.twice(narrow(t))).map(|(&t, &r)| (t, r)));
                }
                radsort::sort_by_key(&mut twice, |&(t, _)| narrow(t));
                for run in twice.chunk_by(|a, b| narrow(a.0) == narrow(b.0)) {
                    // A key the filter let through by chance is held once.
                    if run.len() > 1 && run.iter().any(|&(t, _)| t >> 63 == 1) {
                        buckets.push(run)?;
                    }
                }
            }
            Some(buckets)
        });
        drop(dealt);
        let mut buckets = Buckets::empty();
        for part in found {
            let part = part?;
            let offset = buckets.rows.len();
            buckets.starts.extend(part.starts[1..].iter().map(|s| s + offset));
            buckets.rows.extend(part.rows);
            buckets.bands.extend(part.bands);
        }
        Some(buckets)
    }

    /// No buckets yet.
    fn empty() -> Buckets {
        Buckets { starts: vec![0], rows: Vec::new(), bands: Vec::new() }
    }

    /// Add the bucket of a run of one key's [`dealt_key`]s with their rows;
    /// `None` when they are of different bands (two bands' keys met by a
    /// chance of 2^-48: then the statements run).
    fn push(&mut self, run: &[(u64, u32)]) -> Option<()> {
        let band = band_of(run[0].0);
        if run.iter().any(|&(t, _)| band_of(t) != band) {
            return None;
        }
        self.rows.extend(run.iter().map(|&(_, r)| r));
        self.starts.push(self.rows.len());
        self.bands.push(band);
        Some(())
    }

    fn len(&self) -> usize {
        self.bands.len()
    }

    fn members(&self, bucket: usize) -> &[u32] {
        &self.rows[self.starts[bucket]..self.starts[bucket + 1]]
    }
}

/// Every pair of a bucket's members with two different fingerprints and
/// one of tonight's, tonight's pairs once (52_minhash_candidates.sql, `listed`).
fn listed(rows: &TermSets, members: &[u32], pairs: &mut Vec<(u64, u64)>) {
    let f = rows.fingerprints;
    for &a in members.iter().filter(|&&a| rows.tonight[a as usize]) {
        let x = f[a as usize];
        for &b in members {
            let y = f[b as usize];
            if x != y && (!rows.tonight[b as usize] || x < y) {
                pairs.push((x.min(y), x.max(y)));
            }
        }
    }
}

/// The pairs of the hot bucket of band `band` whose Jaccard similarity
/// reaches `t` (52_minhash_candidates.sql, `hot`), each from one bucket only.
///
/// Near copies share most of their bands, and the statement found and
/// checked such a pair in every hot bucket it shared (Weibo: 2.66 million
/// pairs found in all, 0.80 million with the rule below, for 575,170
/// candidates). Here a pair is looked at only in the bucket of
/// the first band the two rows share. That bucket gives it if it is hot and
/// the pair passes; if it is not hot, it lists the pair anyway. Either way
/// the pair is found as the statement finds it.
fn checked(rows: &TermSets, (band, members): (u32, &[u32]), t: f64, pairs: &mut Vec<(u64, u64)>) {
    let sets: Vec<&[u64]> = members.iter().map(|&r| rows.sets[r as usize]).collect();
    // The members' fingerprints, flags and keys of the earlier bands, side
    // by side: every pair looked at reads both members', and reading them
    // where the table holds them missed the caches at every pair (Weibo: 17 %
    // of this pass's samples, 4 % since).
    let band = band as usize;
    let f: Vec<u64> = members.iter().map(|&r| rows.fingerprints[r as usize]).collect();
    let tonight: Vec<bool> = members.iter().map(|&r| rows.tonight[r as usize]).collect();
    let earlier = EarlierBands::of(rows, members, band);
    let here = |i: usize, j: usize| f[i] != f[j] && !earlier.share_one(i, j);
    let found = jaccard_pairs(&sets, t, |i| tonight[i], here);
    pairs.extend(found.into_iter().map(|(i, j)| (f[i].min(f[j]), f[i].max(f[j]))));
}

/// The keys a bucket's members hold in the bands before the bucket's, for
/// [`EarlierBands::share_one`].
struct EarlierBands<'a> {
    rows: &'a TermSets<'a>,
    members: &'a [u32],
    band: usize,
    /// `band` keys a member, one member after another; empty when they are
    /// more than [`GATHERED_KEYS`] (then read where the table holds them).
    gathered: Vec<u64>,
}

/// The most keys a bucket's members gather side by side (16 MB): a bucket
/// of many members in a late band of a plan of many bands reads them in place.
const GATHERED_KEYS: usize = 1 << 21;

impl<'a> EarlierBands<'a> {
    fn of(rows: &'a TermSets<'a>, members: &'a [u32], band: usize) -> EarlierBands<'a> {
        let held = |r: u32| rows.keys[r as usize];
        let mut gathered = Vec::new();
        // Every member holds the bucket's key in `band`, so one in each band before it.
        if members.len() * band <= GATHERED_KEYS && members.iter().all(|&r| held(r).len() > band) {
            gathered.reserve(members.len() * band);
            members.iter().for_each(|&r| gathered.extend_from_slice(&held(r)[..band]));
        }
        EarlierBands { rows, members, band, gathered }
    }

    /// Whether members `i` and `j` hold one key in a band before the
    /// bucket's. Both hold the bucket's key in its band, so this is false
    /// exactly when that band is the first they share.
    fn share_one(&self, i: usize, j: usize) -> bool {
        let (a, b) = match self.gathered.is_empty() {
            false => (&self.gathered[i * self.band..][..self.band], &self.gathered[j * self.band..][..self.band]),
            true => (self.rows.keys[self.members[i] as usize], self.rows.keys[self.members[j] as usize]),
        };
        a.iter().zip(b).take(self.band).any(|(x, y)| x == y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::MinHashPlan;
    use crate::sets::jaccard;

    /// What the statements find, pair by pair: every two rows sharing a
    /// key; listed when the key's holders are few, checked when many.
    fn by_every_pair(rows: &TermSets, listing: Listing) -> Vec<(u64, u64)> {
        let n = rows.fingerprints.len();
        let mut holders: std::collections::HashMap<u64, Vec<usize>> = Default::default();
        for r in 0..n {
            for &k in rows.keys[r] {
                holders.entry(k).or_default().push(r);
            }
        }
        let mut pairs = Vec::new();
        for members in holders.values().filter(|m| m.len() > 1 && m.iter().any(|&r| rows.tonight[r])) {
            for &a in members {
                for &b in members {
                    let (x, y) = (rows.fingerprints[a], rows.fingerprints[b]);
                    let tonight = rows.tonight[a] || rows.tonight[b];
                    let passes = members.len() as u64 <= listing.hot || jaccard(rows.sets[a], rows.sets[b]) >= listing.threshold;
                    if a != b && x != y && tonight && passes {
                        pairs.push((x.min(y), x.max(y)));
                    }
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs
    }

    /// Short posts over a small vocabulary, so that buckets are shared and
    /// some are hot; every third row stored.
    fn posts(n: usize) -> (Vec<u64>, Vec<bool>, Vec<Vec<u64>>, Vec<Vec<u64>>) {
        let plan = MinHashPlan { bands: 8, rows: 2 };
        let mut state = 11u64;
        let mut next = || {
            state = crate::minhash::mix(state);
            state
        };
        let sets: Vec<Vec<u64>> = (0..n)
            .map(|_| {
                let len = 1 + (next() % 5) as usize;
                let mut set: Vec<u64> = (0..len).map(|_| next() % 12).collect();
                set.sort_unstable();
                set.dedup();
                set
            })
            .collect();
        let fingerprints: Vec<u64> = (0..n as u64).map(|i| crate::minhash::mix(i + 1)).collect();
        let tonight = (0..n).map(|r| r % 3 != 0).collect();
        let keys = sets.iter().map(|s| plan.keys(s)).collect();
        (fingerprints, tonight, keys, sets)
    }

    #[test]
    fn bucket_pairs_are_those_of_every_pair_of_every_bucket() {
        let (fingerprints, tonight, keys, sets) = posts(400);
        let (keys, sets): (Vec<&[u64]>, Vec<&[u64]>) = (keys.iter().map(Vec::as_slice).collect(), sets.iter().map(Vec::as_slice).collect());
        let rows = TermSets { fingerprints: &fingerprints, tonight: &tonight, keys: &keys, sets: &sets };
        for listing in [Listing { hot: 4, threshold: 0.5 }, Listing { hot: 2, threshold: 0.8 }, Listing { hot: u64::MAX, threshold: 1.0 }] {
            let expected = by_every_pair(&rows, listing);
            assert!(expected.len() > 100, "{} pairs", expected.len());
            for parts in [1, 2, 3] {
                assert_eq!(bucket_pairs(&rows, listing, parts).unwrap(), expected, "{listing:?}, {parts} parts");
            }
        }
        // Hot buckets give fewer pairs than listing them all.
        let all = by_every_pair(&rows, Listing { hot: u64::MAX, threshold: 1.0 });
        assert!(by_every_pair(&rows, Listing { hot: 4, threshold: 0.5 }).len() < all.len());
    }

    #[test]
    fn a_fingerprint_on_two_rows_is_found_wherever_they_are() {
        let mut fingerprints: Vec<u64> = (0..5000u64).map(|i| crate::minhash::mix(i)).collect();
        assert!(one_row_each(&fingerprints));
        fingerprints[4321] = fingerprints[17];
        assert!(!one_row_each(&fingerprints));
        assert!(!one_row_each(&[9, 3, 7, 3]));
        assert!(one_row_each(&[]));
    }

    #[test]
    fn tables_the_first_band_rule_does_not_fit_are_left_to_the_statements() {
        let sets: Vec<&[u64]> = vec![&[5], &[6]];
        // One fingerprint on two rows; row 0's first key as row 1's second
        // (one bucket of two bands).
        for (fingerprints, keys) in [([7, 7], [[1, 2], [1, 3]]), ([7, 8], [[1, 2], [3, 1]])] {
            let keys: Vec<&[u64]> = keys.iter().map(|k| k.as_slice()).collect();
            let rows = TermSets { fingerprints: &fingerprints, tonight: &[true, false], keys: &keys, sets: &sets };
            assert!(bucket_pairs(&rows, Listing { hot: 4, threshold: 0.5 }, 2).is_none(), "{fingerprints:?} {keys:?}");
        }
        // A store's wide key, whose low bits are row 1's key.
        let keys: Vec<&[u64]> = vec![&[1 << 60 | 2], &[2]];
        let rows = TermSets { fingerprints: &[7, 8], tonight: &[true, false], keys: &keys, sets: &sets };
        assert!(bucket_pairs(&rows, Listing { hot: 4, threshold: 0.5 }, 1).is_none());
        let keys: Vec<&[u64]> = vec![&[2], &[2]];
        let rows = TermSets { keys: &keys, ..rows };
        assert_eq!(bucket_pairs(&rows, Listing { hot: 4, threshold: 0.5 }, 1), Some(vec![(7, 8)]));
    }

    #[test]
    fn an_earlier_shared_band_is_one_before_the_bucket_s() {
        let keys: Vec<&[u64]> = vec![&[1, 4, 9], &[2, 4, 9], &[1, 3, 5], &[3, 1, 5], &[7], &[7]];
        let rows = TermSets { fingerprints: &[0; 6], tonight: &[true; 6], keys: &keys, sets: &[&[][..]; 6] };
        // (members, band, whether the first two share a band before it), the
        // keys gathered and read in place alike.
        for (members, band, shared) in [([0, 1], 1, false), ([0, 1], 2, true), ([2, 3], 2, false), ([4, 5], 0, false)] {
            let earlier = EarlierBands::of(&rows, &members, band);
            assert_eq!(earlier.gathered.len(), 2 * band);
            assert_eq!(earlier.share_one(0, 1), shared, "{members:?} band {band}");
            let in_place = EarlierBands { gathered: Vec::new(), ..earlier };
            assert_eq!(in_place.share_one(1, 0), shared, "{members:?} band {band}, in place");
        }
    }

    #[test]
    fn the_buckets_are_the_keys_held_twice_with_their_holders() {
        // Keys held once, twice and three times or more, in rows of
        // tonight's and stored ones.
        let keys: Vec<Vec<u64>> = (0..3000u64).map(|r| vec![crate::minhash::mix(r) >> 16, crate::minhash::mix(r % 700 + 10_000) >> 16, r % 900]).collect();
        let held: Vec<&[u64]> = keys.iter().map(Vec::as_slice).collect();
        let tonight: Vec<bool> = (0..3000).map(|r| r % 5 != 0).collect();
        let (fingerprints, sets) = (vec![0; 3000], vec![&[][..]; 3000]);
        let rows = TermSets { fingerprints: &fingerprints, tonight: &tonight, keys: &held, sets: &sets };
        let mut holders: std::collections::BTreeMap<u64, (Vec<u32>, bool, u32)> = Default::default();
        for (r, keys) in keys.iter().enumerate() {
            for (band, &k) in keys.iter().enumerate() {
                let e = holders.entry(narrow(k)).or_default();
                e.0.push(r as u32);
                e.1 |= tonight[r];
                e.2 = band as u32;
            }
        }
        let mut expected: Vec<(Vec<u32>, u32)> = holders.into_values().filter(|(rows, tonight, _)| rows.len() > 1 && *tonight).map(|(rows, _, band)| (rows, band)).collect();
        expected.sort();
        // The keys whose holders are all stored (every fifth row) are not shared.
        assert_eq!(expected.len(), 700 + 900 - 700 / 5 - 900 / 5);
        for parts in [1, 2, 3] {
            let buckets = Buckets::of(&rows, &cut(3000, parts, |_| 1)).unwrap();
            let mut found: Vec<(Vec<u32>, u32)> = (0..buckets.len()).map(|b| (buckets.members(b).to_vec(), buckets.bands[b])).collect();
            found.sort();
            assert_eq!(found, expected, "{parts} parts");
        }
    }

    #[test]
    fn a_key_seen_once_is_rarely_taken_for_one_seen_twice() {
        let mut seen = SeenTwice::new(10_000);
        let keys: Vec<u64> = (0..10_000u64).map(crate::minhash::mix).collect();
        keys.iter().for_each(|&k| seen.see(k));
        seen.see(keys[7]);
        assert!(seen.twice(keys[7]));
        let taken = keys.iter().filter(|&&k| seen.twice(k)).count();
        assert!(taken < 1500, "{taken} of 10,000 keys seen once pass");
    }
}
