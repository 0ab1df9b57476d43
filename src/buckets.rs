//! MinHash buckets to candidate pairs in one pass, when a run's term sets
//! are held in memory: the pairs that sql/51_shared_keys_by_sort.sql,
//! sql/51_minhash_buckets.sql and sql/52_minhash_candidates.sql find
//! together, without their tables in between.
//!
//! The statements unnest every row's band keys to join them with the
//! shared ones (Weibo: 13.6 million rows for 1.09 million members), gather
//! the members' term sets of each hot bucket with `array_agg`, and group
//! every pair found to drop the ones found in several buckets (2.66 million
//! for 858,000). Here the rows are looked at where they lie: the shared keys
//! are found by sorting, as the statement's aggregate finds them, but only
//! the keys a filter has seen twice ([`shared_keys`]); each row's keys are
//! looked up among them, a bucket's members are indices
//! of rows, and a hot bucket's term sets are slices of the table's.
//!
//! The pairs are the statements' exactly (tested against them): a bucket of
//! at most `hot` members lists each pair of two different fingerprints with
//! at least one of tonight's; a larger one gives those of its pairs whose
//! Jaccard similarity reaches the threshold ([`crate::setjoin::jaccard_pairs`]).
//! That holds when every fingerprint is on one row, as in a one-shot run's
//! term sets, and when each bucket is one band (two keys of different bands
//! are equal only by a chance of 2^-48). Otherwise the statements run.

use crate::minhash::{narrow, shared_keys_of_runs, sort_tagged, tagged, KEY_BITS};
use crate::parallel::{cut, on_threads};
use crate::setjoin::jaccard_pairs;
use crate::text::HashKeyed;

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
    let shared = shared_keys(rows, &chunks);
    let buckets = Buckets::of(rows, &shared, &chunks);
    if !buckets.banded() {
        return None;
    }
    // A bucket costs about the pairs of its members.
    let ranges = cut(shared.len(), parts, |b| buckets.members(b).len().pow(2) as u64);
    let found = on_threads(ranges, |range| {
        let mut pairs = Vec::new();
        for b in range {
            match shared[b].1 <= listing.hot {
                true => listed(rows, buckets.members(b), &mut pairs),
                false => checked(rows, (buckets.bands[b], buckets.members(b)), listing.threshold, &mut pairs),
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs
    });
    // The threads' runs, each in order, merged: the stable sort finds the
    // runs and merges them (sorting them all on one thread took Weibo's
    // client 50 ms).
    let mut pairs: Vec<(u64, u64)> = found.concat();
    pairs.sort();
    pairs.dedup();
    Some(pairs)
}

/// Whether no fingerprint is on two rows.
fn one_row_each(fingerprints: &[u64]) -> bool {
    let mut sorted = fingerprints.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

/// The keys held by two rows or more, one of them tonight's, with their
/// holders (sql/51_shared_keys_by_sort.sql), in key order. Almost every key
/// is held once (Weibo: 13.6 million keys, 1.1 million of them a shared
/// key's), and one sort of them all, a hundred megabytes a core, took most
/// of the pass. Here each chunk of rows' keys is dealt by its high bits to
/// [`SPLIT`] parts of the key space, and each part (Weibo: 212,000 keys),
/// which fits in a core's cache, is sifted by a filter ([`SeenTwice`]) that
/// drops the keys it saw once; the rest are sorted. The parts are ranges of
/// keys in order, so their sorted keys, one after another, are one sorted
/// run, whose keys the filter let through by chance are held once there.
fn shared_keys(rows: &TermSets, chunks: &[std::ops::Range<usize>]) -> Vec<(u64, u64)> {
    let shift = KEY_BITS - SPLIT.trailing_zeros();
    let dealt: Vec<Vec<Vec<u64>>> = on_threads(chunks.to_vec(), |chunk| {
        // Each part sized for its share and a little more: growing 64
        // vectors key by key copied them again and again.
        let keys: usize = rows.keys[chunk.clone()].iter().map(|k| k.len()).sum();
        let mut parts: Vec<Vec<u64>> = (0..SPLIT).map(|_| Vec::with_capacity(keys / SPLIT + keys / (8 * SPLIT) + 16)).collect();
        for r in chunk {
            for &key in rows.keys[r] {
                parts[(narrow(key) >> shift) as usize].push(tagged(key, rows.tonight[r]));
            }
        }
        parts
    });
    let sifted = on_threads(cut(SPLIT, chunks.len(), |_| 1), |parts| {
        let mut run = Vec::new();
        for part in parts {
            let mut keys = Vec::with_capacity(dealt.iter().map(|chunk| chunk[part].len()).sum());
            dealt.iter().for_each(|chunk| keys.extend_from_slice(&chunk[part]));
            let mut seen = SeenTwice::new(keys.len());
            keys.iter().for_each(|&t| seen.see(narrow(t)));
            keys.retain(|&t| seen.twice(narrow(t)));
            sort_tagged(&mut keys);
            run.extend(keys);
        }
        run
    });
    drop(dealt);
    shared_keys_of_runs(&[&sifted.concat()])
}

/// Parts of the key space [`shared_keys`] sifts one by one.
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

/// The members (row indices) of every shared key, bucket after bucket in
/// the keys' order (sql/51_minhash_buckets.sql), with the band each bucket
/// is: where its key lies in its members' lists of keys.
struct Buckets {
    starts: Vec<usize>,
    rows: Vec<u32>,
    bands: Vec<u32>,
}

/// Bands of a bucket whose members hold its key in different places (the
/// keys of two bands met by chance).
const MIXED: u32 = u32::MAX;

impl Buckets {
    fn of(rows: &TermSets, shared: &[(u64, u64)], chunks: &[std::ops::Range<usize>]) -> Buckets {
        let index: HashKeyed<u32> = shared.iter().enumerate().map(|(b, &(key, _))| (key, b as u32)).collect();
        let filter = KeyFilter::of(shared.iter().map(|s| s.0), shared.len());
        // A row's keys as stored, as the statement joins them.
        let found = on_threads(chunks.to_vec(), |chunk| {
            let mut held = Vec::new();
            for r in chunk {
                let shared = rows.keys[r].iter().enumerate().filter(|&(_, &k)| filter.may_hold(k));
                held.extend(shared.filter_map(|(band, k)| Some((*index.get(k)?, r as u32, band as u32))));
            }
            held
        });
        let mut starts = vec![0usize; shared.len() + 1];
        let mut bands = vec![None; shared.len()];
        for &(b, _, band) in found.iter().flatten() {
            starts[b as usize + 1] += 1;
            let seen = bands[b as usize].get_or_insert(band);
            if *seen != band {
                *seen = MIXED;
            }
        }
        for b in 0..shared.len() {
            starts[b + 1] += starts[b];
        }
        let mut next = starts.clone();
        let mut members = vec![0u32; starts[shared.len()]];
        for &(b, r, _) in found.iter().flatten() {
            members[next[b as usize]] = r;
            next[b as usize] += 1;
        }
        Buckets { starts, rows: members, bands: bands.into_iter().map(|b| b.unwrap_or(MIXED)).collect() }
    }

    fn members(&self, bucket: usize) -> &[u32] {
        &self.rows[self.starts[bucket]..self.starts[bucket + 1]]
    }

    /// Whether every bucket is one band: then two rows share a bucket
    /// exactly where their keys of one band are equal.
    fn banded(&self) -> bool {
        !self.bands.contains(&MIXED)
    }
}

/// A bit a key, set for the shared ones: most keys are held once, and a
/// bit of a few megabytes answers for them without the hash table's cache
/// misses (Weibo: 13.6 million keys looked up among 0.3 million).
struct KeyFilter {
    bits: Vec<u64>,
    mask: u64,
}

impl KeyFilter {
    fn of(keys: impl Iterator<Item = u64>, count: usize) -> KeyFilter {
        // About 64 bits a key: one key held once in 64 passes.
        let size = (count * 64).next_power_of_two().clamp(1 << 12, 1 << 30);
        let mut filter = KeyFilter { bits: vec![0; size / 64], mask: size as u64 - 1 };
        for key in keys {
            let bit = key & filter.mask;
            filter.bits[(bit / 64) as usize] |= 1 << (bit % 64);
        }
        filter
    }

    fn may_hold(&self, key: u64) -> bool {
        let bit = key & self.mask;
        self.bits[(bit / 64) as usize] >> (bit % 64) & 1 == 1
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
    let row = |i: usize| members[i] as usize;
    let f = |i: usize| rows.fingerprints[row(i)];
    let here = |i: usize, j: usize| f(i) != f(j) && first_shared_band(rows.keys[row(i)], rows.keys[row(j)]) == Some(band as usize);
    let found = jaccard_pairs(&sets, t, |i| rows.tonight[row(i)], here);
    pairs.extend(found.into_iter().map(|(i, j)| (f(i).min(f(j)), f(i).max(f(j)))));
}

/// The first band in which two rows hold one key that can be a bucket's (a
/// key as this release compares it: [`crate::minhash::narrow`]; a store's
/// older, wider key never is).
fn first_shared_band(a: &[u64], b: &[u64]) -> Option<usize> {
    a.iter().zip(b).position(|(&x, &y)| x == y && narrow(x) == x)
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
    fn tables_the_first_band_rule_does_not_fit_are_left_to_the_statements() {
        let sets: Vec<&[u64]> = vec![&[5], &[6]];
        // One fingerprint on two rows; row 0's first key as row 1's second
        // (one bucket of two bands).
        for (fingerprints, keys) in [([7, 7], [[1, 2], [1, 3]]), ([7, 8], [[1, 2], [3, 1]])] {
            let keys: Vec<&[u64]> = keys.iter().map(|k| k.as_slice()).collect();
            let rows = TermSets { fingerprints: &fingerprints, tonight: &[true, false], keys: &keys, sets: &sets };
            assert!(bucket_pairs(&rows, Listing { hot: 4, threshold: 0.5 }, 2).is_none(), "{fingerprints:?} {keys:?}");
        }
    }

    #[test]
    fn the_first_shared_band_holds_a_narrow_key() {
        assert_eq!(first_shared_band(&[1, 4, 9], &[2, 4, 9]), Some(1));
        assert_eq!(first_shared_band(&[1, 3], &[3, 1]), None);
        assert_eq!(first_shared_band(&[], &[2]), None);
        // A store's 64-bit key is never a bucket's.
        assert_eq!(first_shared_band(&[u64::MAX, 5], &[u64::MAX, 5]), Some(1));
    }

    #[test]
    fn the_shared_keys_are_those_held_twice() {
        // Keys held once, twice and three times, in rows of tonight's and
        // stored ones, with 64-bit stored keys narrowed as they are compared.
        let keys: Vec<Vec<u64>> = (0..3000u64).map(|r| vec![crate::minhash::mix(r) >> 16, crate::minhash::mix(r % 700 + 10_000) >> 16, (r % 900) | 1 << 63]).collect();
        let held: Vec<&[u64]> = keys.iter().map(Vec::as_slice).collect();
        let tonight: Vec<bool> = (0..3000).map(|r| r % 5 != 0).collect();
        let (fingerprints, sets) = (vec![0; 3000], vec![&[][..]; 3000]);
        let rows = TermSets { fingerprints: &fingerprints, tonight: &tonight, keys: &held, sets: &sets };
        let mut expected: std::collections::BTreeMap<u64, (u64, bool)> = Default::default();
        for (r, keys) in keys.iter().enumerate() {
            for &k in keys {
                let e = expected.entry(narrow(k)).or_default();
                *e = (e.0 + 1, e.1 || tonight[r]);
            }
        }
        let expected: Vec<(u64, u64)> = expected.into_iter().filter(|(_, (n, tonight))| *n > 1 && *tonight).map(|(k, (n, _))| (k, n)).collect();
        // The keys whose holders are all stored (every fifth row) are not shared.
        assert_eq!(expected.len(), 700 + 900 - 700 / 5 - 900 / 5);
        for parts in [1, 2, 3] {
            assert_eq!(shared_keys(&rows, &cut(3000, parts, |_| 1)), expected, "{parts} parts");
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

    #[test]
    fn the_filter_passes_every_shared_key() {
        let keys: Vec<u64> = (0..1000u64).map(crate::minhash::mix).collect();
        let filter = KeyFilter::of(keys.iter().copied(), keys.len());
        assert!(keys.iter().all(|&k| filter.may_hold(k)));
        let others = (1000..101_000u64).map(crate::minhash::mix).filter(|&k| filter.may_hold(k)).count();
        assert!(others < 3000, "{others} of 100,000 other keys pass");
    }
}
