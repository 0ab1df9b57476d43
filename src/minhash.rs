//! MinHash signatures and LSH band keys, computed once per document.
//!
//! Classic MinHash applies every one of its `K = bands × rows` hash
//! functions to every term: O(terms × K) per document, which made MinHash
//! the costliest part of the join on long articles and had to be redone for
//! every stored document each night. This module follows **one-permutation
//! hashing with optimal densification** (Shrivastava, ICML 2017):
//!
//! 1. each term is hashed once; the hash picks one of `K` bins (its high bits,
//!    by multiply-shift) and the bin keeps its smallest hash: O(terms);
//! 2. a bin that no term fell into borrows the value of a non-empty bin,
//!    chosen by probing `bin_hash(empty bin, attempt)` until it hits one that
//!    was filled in step 1. Two sets with the same pattern of filled bins
//!    borrow from the same bins, so the bins stay *consistent* (a pair agrees
//!    in a bin with probability equal to its Jaccard similarity, as with K
//!    independent functions), and the variance is no worse than classic
//!    MinHash's (ibid., Theorem 3).
//!
//! Why not C-MinHash (Li & Li 2021)? It has slightly lower variance but still
//! costs O(terms × K) per set unless its circulant permutation is
//! precomputed over the whole term universe, which a corpus of 64-bit term
//! hashes does not have.
//!
//! Densification by probing costs O((K − f) · K / f) mixes for `f` filled
//! bins: nothing for long documents (all bins filled), but thousands for a
//! post of two or three terms. Each bin's probe sequence is the same for
//! every set, so it is tabled once ([`visits`]): sparse sets take the filled
//! bin of least rank in each bin's order of visits, for all bins at once in
//! f passes over a column of K ranks (a minimum that vectorises), the others
//! the first filled bin in that order, in O((K − f) · K / f) lookups.
//!
//! The band keys are what the join and the store use: band `b`'s key hashes
//! its `rows` bin values together with `b`, so keys of different bands never
//! meet in an equi-join on the key alone, and a list of `bands` keys is all a
//! document keeps. A key keeps [`KEY_BITS`] bits of that hash: every night
//! reads every stored key, so each byte of a key is a byte read per stored
//! document per night, while 48 bits still make a chance collision rare (a
//! night of 10^5 documents against 10^9 stored ones, 32 keys each, meets
//! about 360 keys by chance, and each costs one fetched row and one check).

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

/// Largest number of MinHash bins (bands × rows).
pub const MAX_PERMUTATIONS: u32 = 1024;

/// MinHash with LSH banding: `bands × rows` bins; two sets become candidates
/// when all `rows` values of some band agree. A pair with Jaccard similarity
/// s is a candidate with probability 1 − (1 − s^rows)^bands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct MinHashPlan {
    pub bands: u32,
    pub rows: u32,
}

impl Default for MinHashPlan {
    fn default() -> Self {
        MinHashPlan { bands: 32, rows: 4 }
    }
}

/// A strong 64-bit mixer (splitmix64's finaliser).
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Bits kept of a band key (see the module docs); the store writes keys in
/// six bytes each ([`pack_keys`]).
pub const KEY_BITS: u32 = 48;
const KEY_MASK: u64 = (1 << KEY_BITS) - 1;

/// A key as this release compares it. Stores written before keys were cut
/// to [`KEY_BITS`] hold 64-bit keys whose low bits are today's key, so a
/// reader narrows what it reads and such a store needs no rewriting.
#[inline]
pub fn narrow(key: u64) -> u64 {
    key & KEY_MASK
}

/// Whether every key already has at most [`KEY_BITS`] bits.
pub fn all_narrow(keys: &[u64]) -> bool {
    keys.iter().fold(0, |high, &k| high | k) <= KEY_MASK
}

/// Bytes of a key packed for the store ([`pack_keys`]).
pub const PACKED_KEY_BYTES: usize = (KEY_BITS / 8) as usize;

/// A row's keys as the store keeps them: [`PACKED_KEY_BYTES`] little-endian
/// bytes each, appended to `out`. Every night reads every stored row's keys
/// (the probe), and a list of integers costs its reader repetition and
/// definition levels, a validity bitmap and growing buffers per key, while
/// one binary value per row is a copy: a tenth of the time to decode, in the
/// same bytes (a key's two zero bytes are not written at all).
pub fn pack_keys(keys: &[u64], out: &mut Vec<u8>) {
    out.reserve(keys.len() * PACKED_KEY_BYTES);
    for &key in keys {
        out.extend_from_slice(&narrow(key).to_le_bytes()[..PACKED_KEY_BYTES]);
    }
}

/// The keys of one row packed by [`pack_keys`], appended to `out`; `None`
/// when `packed` is not a whole number of keys (a damaged or foreign value).
pub fn unpack_keys(packed: &[u8], out: &mut Vec<u64>) -> Option<()> {
    if packed.len() % PACKED_KEY_BYTES != 0 {
        return None;
    }
    out.extend(packed.chunks_exact(PACKED_KEY_BYTES).map(|b| {
        let mut bytes = [0u8; 8];
        bytes[..PACKED_KEY_BYTES].copy_from_slice(b);
        u64::from_le_bytes(bytes)
    }));
    Some(())
}

/// Seeds: fixed, because signatures are stored and compared across runs.
const TERM_SEED: u64 = 0x6d69_6e68_6173_6831;
const PROBE_SEED: u64 = 0x6465_6e73_6966_7921;

/// The bin of `hash` among `bins` (multiply-shift: the high bits decide).
#[inline]
fn bin_of(hash: u64, bins: usize) -> usize {
    ((hash as u128 * bins as u128) >> 64) as usize
}

impl MinHashPlan {
    pub fn new(bands: u32, rows: u32) -> Result<MinHashPlan, String> {
        if bands == 0 || rows == 0 || bands.saturating_mul(rows) > MAX_PERMUTATIONS {
            return Err(format!(
                "MinHash plan {bands}x{rows} is invalid: bands and rows must be positive with bands × rows <= {MAX_PERMUTATIONS}"
            ));
        }
        Ok(MinHashPlan { bands, rows })
    }

    /// Number of bins (the signature's length).
    pub fn bins(&self) -> usize {
        (self.bands * self.rows) as usize
    }

    /// Probability that a pair with Jaccard similarity `s` becomes a candidate.
    pub fn candidate_probability(&self, s: f64) -> f64 {
        1.0 - (1.0 - s.powi(self.rows as i32)).powi(self.bands as i32)
    }

    /// A hasher for this plan, reusing its buffers set after set.
    pub fn hasher(&self) -> MinHasher {
        MinHasher {
            plan: *self,
            bins: Vec::with_capacity(self.bins()),
            filled: Vec::with_capacity(self.bins()),
            filled_list: Vec::with_capacity(self.bins()),
            nearest: Vec::with_capacity(self.bins()),
            signature: Vec::with_capacity(self.bins()),
            visits: None,
            seeds: (0..u64::from(self.bands)).map(|band| mix(band ^ TERM_SEED)).collect(),
        }
    }

    /// The densified signature of a non-empty set (empty for an empty set).
    pub fn signature(&self, set: &[u64]) -> Vec<u64> {
        self.hasher().signature(set).to_vec()
    }

    /// The band keys of a set, one per band (none for an empty set).
    pub fn keys(&self, set: &[u64]) -> Vec<u64> {
        let mut keys = Vec::new();
        self.hasher().keys_into(set, &mut keys);
        keys
    }
}

/// Sets with at most this many filled bins are densified by columns of
/// ranks ([`MinHasher::signature`]); measured the faster way up to here for
/// 128 bins.
const SPARSE: usize = 48;

/// A bin's rank in another's order of visits is a `u16`.
const _: () = assert!(MAX_PERMUTATIONS <= 1 << 16);

/// One-permutation MinHash of one plan, applied set after set.
pub struct MinHasher {
    plan: MinHashPlan,
    bins: Vec<u64>,
    /// Whether a term fell into each bin.
    filled: Vec<bool>,
    filled_list: Vec<usize>,
    /// Per bin, the least rank of a filled bin in its order of visits seen
    /// so far (sparse sets, [`MinHasher::signature`]).
    nearest: Vec<u16>,
    /// The densified signature (`bins` with the empty bins filled).
    signature: Vec<u64>,
    /// [`visits`] of the plan's bins, shared by every hasher.
    visits: Option<Arc<Visits>>,
    /// Each band's first value of its key (a mix of the band's number).
    seeds: Vec<u64>,
}

/// The `attempt`-th bin of empty bin `i`'s probe sequence among `k`.
#[inline]
fn probe_step(i: usize, attempt: u64, k: usize) -> usize {
    bin_of(mix(PROBE_SEED ^ ((i as u64) << 32 | attempt)), k)
}

/// A band key with its row's `tonight` flag in the top bit (keys are
/// [`KEY_BITS`] wide), for [`shared_keys`].
pub fn tagged(key: u64, tonight: bool) -> u64 {
    narrow(key) | u64::from(tonight) << 63
}

/// The buckets that can give a pair (sql/51_minhash_buckets.sql): of the
/// [`tagged`] keys of every row, each key held more than once, with at least
/// one of tonight's rows among its holders, and how many rows hold it; in
/// key order. By sorting: a batch of posts holds millions of keys, almost
/// all held once, and a sorted vector of 8 bytes a key needs a fraction of
/// the memory of a hash table with a count per key. A radix sort (six
/// passes over the 48-bit keys) costs about what the hash table did.
pub fn shared_keys(tagged: &mut [u64]) -> Vec<(u64, u64)> {
    sort_tagged(tagged);
    shared_keys_of_runs(&[tagged])
}

/// [`tagged`] keys sorted by key, for [`shared_keys_of_runs`].
pub fn sort_tagged(tagged: &mut [u64]) {
    radsort::sort_by_key(tagged, |&t| narrow(t));
}

/// [`shared_keys`] of several runs of [`tagged`] keys, each sorted by
/// [`sort_tagged`] (one a partition, each sorted on its own core): merged
/// where they lie rather than copied into one run and sorted again, which
/// took twice their memory. The merge is the aggregate's final step, on one
/// thread while the other cores wait (Weibo: 13.6 million keys, about
/// 0.15 s), so a large one is cut into ranges of keys, one a core
/// ([`shared_keys_in_parts`]).
pub fn shared_keys_of_runs(runs: &[&[u64]]) -> Vec<(u64, u64)> {
    let keys: usize = runs.iter().map(|r| r.len()).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    shared_keys_in_parts(runs, if keys < PARALLEL_MERGE { 1 } else { cores })
}

/// Keys below which [`shared_keys_of_runs`] merges on one thread.
const PARALLEL_MERGE: usize = 1 << 20;

/// [`shared_keys_of_runs`] in `parts` ranges of keys, each merged on a
/// thread of its own and the results joined in key order. The ranges are
/// cut at keys of the longest run, so every holder of a key is in one range
/// and each range's buckets are those the whole merge finds there.
fn shared_keys_in_parts(runs: &[&[u64]], parts: usize) -> Vec<(u64, u64)> {
    let Some(longest) = runs.iter().max_by_key(|r| r.len()).filter(|r| parts > 1 && r.len() >= parts) else {
        return merge_runs(runs);
    };
    let mut cuts: Vec<u64> = (1..parts).map(|i| narrow(longest[longest.len() * i / parts])).collect();
    cuts.dedup();
    // Range i holds the keys in [cuts[i - 1], cuts[i]).
    let split = |run: &[u64]| -> Vec<usize> {
        let mut bounds = vec![0];
        bounds.extend(cuts.iter().map(|&cut| run.partition_point(|&t| narrow(t) < cut)));
        bounds.push(run.len());
        bounds
    };
    let bounds: Vec<Vec<usize>> = runs.iter().map(|r| split(r)).collect();
    let ranges: Vec<Vec<&[u64]>> = (0..=cuts.len()).map(|i| runs.iter().zip(&bounds).map(|(run, b)| &run[b[i]..b[i + 1]]).collect()).collect();
    crate::parallel::on_threads(ranges, |ranges| merge_runs(&ranges)).into_iter().flatten().collect()
}

/// [`shared_keys_of_runs`] on this thread.
fn merge_runs(runs: &[&[u64]]) -> Vec<(u64, u64)> {
    let mut heads: Vec<&[u64]> = runs.iter().copied().filter(|r| !r.is_empty()).collect();
    let mut shared = Vec::new();
    let mut heap = std::collections::BinaryHeap::new();
    // A few runs (one a core) are scanned for their least head; many go
    // through a heap, whose cost does not grow with their number.
    let few = heads.len() <= 4;
    if !few {
        heap.extend(heads.iter().enumerate().map(|(r, run)| std::cmp::Reverse((narrow(run[0]), r))));
    }
    loop {
        let key = match few {
            true => heads.iter().filter_map(|run| run.first()).map(|&t| narrow(t)).min(),
            false => heap.peek().map(|top| top.0 .0),
        };
        let Some(key) = key else { break };
        let (mut holders, mut tonight) = (0u64, false);
        let mut take = |run: &mut &[u64]| {
            let n = run.iter().take_while(|&&t| narrow(t) == key).count();
            holders += n as u64;
            tonight |= run[..n].iter().any(|&t| t >> 63 == 1);
            *run = &run[n..];
        };
        match few {
            true => heads.iter_mut().for_each(&mut take),
            false => {
                while let Some(&std::cmp::Reverse((k, r))) = heap.peek() {
                    if k != key {
                        break;
                    }
                    heap.pop();
                    take(&mut heads[r]);
                    if let Some(&next) = heads[r].first() {
                        heap.push(std::cmp::Reverse((narrow(next), r)));
                    }
                }
            }
        }
        if holders > 1 && tonight {
            shared.push((key, holders));
        }
    }
    shared
}

/// The first filled bin of empty bin `i`'s probe sequence: what the tables
/// of [`visits`] answer, kept to prove that they do.
#[cfg(test)]
fn probe(i: usize, k: usize, filled: &[bool]) -> usize {
    (1u64..).map(|attempt| probe_step(i, attempt, k)).find(|&j| filled[j]).expect("at least one bin is filled")
}

/// Where each bin's probe sequence goes, for every bin of a plan: computed
/// once per number of bins and shared (about K · ln K mixes a bin: 0.1 ms
/// for 128 bins).
struct Visits {
    /// For every bin `i`, `i` itself and then the other bins in the order
    /// its probe sequence first reaches them (`k` a row): the first filled
    /// one of the row is `i` when `i` is filled, else the bin probing finds,
    /// without a mix per attempt.
    order: Vec<u16>,
    /// For every bin `j` and every bin `i`, the place of `j` in `i`'s row of
    /// `order` (`rank[j * k + i]`, 0 on the diagonal): the first filled bin
    /// of `i`'s row is the filled bin of least rank. A filled bin's column,
    /// contiguous, is compared with every bin's least so far at once, 16
    /// bits a bin: eight bins an SSE2 instruction (`u32` first visits took
    /// about five instructions for four bins, as SSE2 has no unsigned 32-bit
    /// minimum), and the table of 128 bins is 32 KiB, within a core's L1
    /// cache. With at most [`NAMED_BINS`] bins the entry is the place in
    /// its high byte and `j` in its low one (`rank_names_bin`): a row's
    /// places are distinct, so the least entry is the nearest filled bin
    /// itself, and its value is read from `bins` without a look into `order`
    /// at a place a bin (`examples/minhash_bench`, 128 bins: a set of ten
    /// terms 516-523 -> 474-482 ns, of one term 424-428 -> 385-387 ns).
    rank: Vec<u16>,
    rank_names_bin: bool,
}

/// Plans of at most this many bins keep a bin's number beside its rank in
/// [`Visits::rank`]: both fit in a byte.
const NAMED_BINS: usize = 256;

fn visits(k: usize) -> Arc<Visits> {
    static TABLES: Mutex<Vec<(usize, Arc<Visits>)>> = Mutex::new(Vec::new());
    let mut tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, table)) = tables.iter().find(|(bins, _)| *bins == k) {
        return table.clone();
    }
    let mut rank = vec![u16::MAX; k * k];
    let mut order = Vec::with_capacity(k * k);
    for i in 0..k {
        rank[i * k + i] = 0;
        order.push(i as u16);
        // K ln K attempts see every bin, on average: 620 for 128 bins.
        let mut attempt = 1u64;
        for place in 1..k {
            let j = loop {
                let j = probe_step(i, attempt, k);
                attempt += 1;
                if rank[j * k + i] == u16::MAX {
                    break j;
                }
            };
            rank[j * k + i] = place as u16;
            order.push(j as u16);
        }
    }
    let rank_names_bin = k <= NAMED_BINS;
    if rank_names_bin {
        for (j, column) in rank.chunks_exact_mut(k).enumerate() {
            column.iter_mut().for_each(|place| *place = *place << 8 | j as u16);
        }
    }
    let table = Arc::new(Visits { order, rank, rank_names_bin });
    tables.push((k, table.clone()));
    table
}

impl MinHasher {
    /// The densified one-permutation signature: `bands × rows` values, or
    /// nothing for an empty set. The set's order does not matter.
    pub fn signature(&mut self, set: &[u64]) -> &[u64] {
        let k = self.plan.bins();
        let MinHasher { bins, filled, filled_list, nearest, signature, visits: tables, .. } = self;
        signature.clear();
        if set.is_empty() {
            return signature;
        }
        bins.clear();
        bins.resize(k, u64::MAX);
        // A flag a bin: a bit a bin made each term's store wait for the one
        // before it in the same word (long documents: 1.4 -> 1.7 us a set).
        filled.clear();
        filled.resize(k, false);
        for &term in set {
            let h = mix(term ^ TERM_SEED);
            let b = bin_of(h, k);
            filled[b] = true;
            bins[b] = bins[b].min(h);
        }
        // The filled bins listed without a branch a bin: which bins a short
        // post fills is a coin toss for the branch predictor, and its misses
        // were a fifth of this function's time.
        filled_list.clear();
        filled_list.resize(k, 0);
        let list = &mut filled_list[..];
        let mut f = 0;
        for (j, &is_filled) in filled.iter().enumerate() {
            list[f] = j;
            f += usize::from(is_filled);
        }
        filled_list.truncate(f);
        if f == k {
            return bins;
        }
        // Optimal densification: an empty bin borrows from the first filled
        // bin its own probe sequence reaches (at least one bin is filled).
        // Probing costs about K / f mixes per empty bin, which for a post of
        // two or three terms is thousands per document. The tables answer the
        // same question by lookups: for a sparse set, the least rank among
        // the f filled bins, found for all bins at once by comparing each
        // filled bin's column of ranks with the least so far (f passes over
        // K values, which vectorise); for a denser one, the first
        // filled bin in the order of visits (about K / f lookups a bin, no
        // mix). The values are copied into `signature`, apart from `bins`:
        // written in place, each read had to wait for the writes before it.
        // Borrowed, not cloned: the count of a shared `Arc`, changed by every
        // thread for every set, would move between the cores' caches.
        let visits: &Visits = tables.get_or_insert_with(|| visits(k));
        let (bins, filled) = (&bins[..], &filled[..]);
        if f <= SPARSE {
            nearest.clear();
            nearest.resize(k, u16::MAX);
            for &j in filled_list.iter() {
                let column = &visits.rank[j * k..(j + 1) * k];
                for (nearest, &rank) in nearest.iter_mut().zip(column) {
                    *nearest = (*nearest).min(rank);
                }
            }
            // A filled bin is first in its own row, so it keeps its value.
            if visits.rank_names_bin {
                signature.extend(nearest.iter().map(|&entry| bins[usize::from(entry & 0xFF)]));
            } else {
                let rows = visits.order.chunks_exact(k);
                signature.extend(nearest.iter().zip(rows).map(|(&place, row)| bins[row[usize::from(place)] as usize]));
            }
        } else {
            signature.extend_from_slice(bins);
            for (i, value) in signature.iter_mut().enumerate().filter(|&(i, _)| !filled[i]) {
                let row = &visits.order[i * k..(i + 1) * k];
                *value = bins[row.iter().map(|&j| j as usize).find(|&j| filled[j]).expect("a filled bin")];
            }
        }
        signature
    }

    /// Append the set's band keys (one per band; none for an empty set).
    pub fn keys_into(&mut self, set: &[u64], out: &mut Vec<u64>) {
        let rows = self.plan.rows as usize;
        let start = out.len();
        out.extend_from_slice(&self.seeds);
        let signature = self.signature(set);
        if signature.is_empty() {
            out.truncate(start);
            return;
        }
        let keys = &mut out[start..];
        // Row by row across the bands: the bands' chains of mixes are
        // independent, and the core runs them side by side (a band's chain
        // at a time waited on each mix; both folds give the same keys).
        for r in 0..rows {
            for (band, key) in keys.iter_mut().enumerate() {
                let v = signature[band * rows + r];
                *key = mix(*key ^ v).wrapping_add(v);
            }
        }
        for key in keys {
            *key &= KEY_MASK;
        }
    }
}

impl FromStr for MinHashPlan {
    type Err = String;
    fn from_str(s: &str) -> Result<MinHashPlan, String> {
        let (b, r) = s.split_once('x').ok_or_else(|| format!("MinHash plan '{s}' must be BANDSxROWS, e.g. 32x4"))?;
        let parse = |v: &str| v.parse::<u32>().map_err(|_| format!("MinHash plan '{s}' must be BANDSxROWS, e.g. 32x4"));
        MinHashPlan::new(parse(b)?, parse(r)?)
    }
}

impl fmt::Display for MinHashPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.bands, self.rows)
    }
}

impl From<MinHashPlan> for String {
    fn from(plan: MinHashPlan) -> String {
        plan.to_string()
    }
}

impl TryFrom<String> for MinHashPlan {
    type Error = String;
    fn try_from(s: String) -> Result<MinHashPlan, String> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shared_keys_are_those_a_count_and_a_tonight_flag_give() {
        // Keys 1..=40 held by up to 4 rows each, some of tonight's.
        let mut rows = Vec::new();
        for key in 1u64..=40 {
            for holder in 0..key % 5 {
                rows.push((key << 20, (key + holder) % 3 == 0));
            }
        }
        let mut expected: Vec<(u64, u64)> = (1u64..=40)
            .map(|key| (key << 20, key % 5, (0..key % 5).any(|h| (key + h) % 3 == 0)))
            .filter(|&(_, n, tonight)| n > 1 && tonight)
            .map(|(key, n, _)| (key, n))
            .collect();
        expected.sort_unstable();
        let mut tagged: Vec<u64> = rows.iter().rev().map(|&(k, t)| tagged(k, t)).collect();
        assert_eq!(shared_keys(&mut tagged.clone()), expected);
        assert!(expected.len() > 10 && expected.len() < 32, "{expected:?}");
        // Split into runs, each sorted alone: the same keys, merged (a few
        // runs and many, empty ones among them).
        for parts in [2, 3, 7, 60] {
            let mut runs: Vec<Vec<u64>> = vec![Vec::new(); parts];
            for (i, &t) in tagged.iter().enumerate() {
                runs[(i * 7 + i / 3) % parts].push(t);
            }
            runs.iter_mut().for_each(|r| sort_tagged(r));
            let runs: Vec<&[u64]> = runs.iter().map(Vec::as_slice).collect();
            assert_eq!(shared_keys_of_runs(&runs), expected, "{parts} runs");
        }
        sort_tagged(&mut tagged);
        assert_eq!(shared_keys_of_runs(&[&[], &tagged, &[]]), expected);
    }

    #[test]
    fn a_merge_in_ranges_of_keys_finds_what_one_merge_does() {
        // Runs of keys with many holders each, some tonight's, cut into 2
        // to 9 ranges: a key's holders are never split between two ranges.
        let mut runs: Vec<Vec<u64>> = vec![Vec::new(); 3];
        for i in 0u64..3000 {
            let key = mix(i % 700) >> 20;
            runs[(mix(i) % 3) as usize].push(tagged(key, i % 11 == 0));
        }
        runs[2].clear();
        runs.iter_mut().for_each(|r| sort_tagged(r));
        let runs: Vec<&[u64]> = runs.iter().map(Vec::as_slice).collect();
        let whole = merge_runs(&runs);
        assert!(whole.len() > 100, "{}", whole.len());
        for parts in 2..10 {
            assert_eq!(shared_keys_in_parts(&runs, parts), whole, "{parts} ranges");
        }
        // More ranges than keys, and no keys at all.
        assert_eq!(shared_keys_in_parts(&[&runs[0][..3]], 8), merge_runs(&[&runs[0][..3]]));
        assert!(shared_keys_in_parts(&[&[], &[]], 4).is_empty());
    }

    use super::*;
    use crate::sets::jaccard;

    #[test]
    fn packed_keys_unpack_to_the_narrowed_keys() {
        let keys = [0, 1, KEY_MASK, 0x0123_4567_89ab, u64::MAX, 1 << 48 | 7];
        let mut packed = Vec::new();
        pack_keys(&keys, &mut packed);
        assert_eq!(packed.len(), keys.len() * 6);
        assert_eq!(&packed[18..24], &[0xab, 0x89, 0x67, 0x45, 0x23, 0x01]);
        let mut back = vec![42];
        assert_eq!(unpack_keys(&packed, &mut back), Some(()));
        assert_eq!(back, [42, 0, 1, KEY_MASK, 0x0123_4567_89ab, KEY_MASK, 7]);
        assert_eq!(unpack_keys(&packed[..7], &mut back), None);
        assert_eq!(unpack_keys(&[], &mut back), Some(()));
        assert_eq!(back.len(), 7);
    }

    fn sorted(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Sets of `n` terms sharing `shared` of them: Jaccard shared / (2n − shared).
    fn pair(n: u64, shared: u64, salt: u64) -> (Vec<u64>, Vec<u64>) {
        let a: Vec<u64> = (0..n).map(|i| mix(i ^ salt << 40)).collect();
        let mut b = a[..shared as usize].to_vec();
        b.extend((n..2 * n - shared).map(|i| mix(i ^ salt << 40)));
        (sorted(a), sorted(b))
    }

    #[test]
    fn bins_agree_as_often_as_the_sets_overlap() {
        let plan = MinHashPlan::new(32, 4).unwrap();
        // Averaged over many pairs, long and short, the share of agreeing
        // bins is the Jaccard similarity (unbiased, densified or not).
        for (n, shared) in [(400u64, 300u64), (12, 8), (3, 2)] {
            let (mut agree, mut truth, trials) = (0.0, 0.0, 200);
            for salt in 0..trials {
                let (a, b) = pair(n, shared, salt);
                let (sa, sb) = (plan.signature(&a), plan.signature(&b));
                assert_eq!(sa.len(), 128);
                agree += sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as f64 / 128.0;
                truth += jaccard(&a, &b);
            }
            let (agree, truth) = (agree / trials as f64, truth / trials as f64);
            assert!((agree - truth).abs() < 0.03, "{n} terms: bins agree {agree:.3}, Jaccard {truth:.3}");
        }
    }

    #[test]
    fn keys_find_similar_sets_and_ignore_unrelated_ones() {
        let plan = MinHashPlan::default();
        let (a, b) = pair(400, 300, 1);
        let (ka, kb) = (plan.keys(&a), plan.keys(&b));
        assert_eq!(ka.len(), 32);
        assert!(ka.iter().zip(&kb).any(|(x, y)| x == y), "a Jaccard-0.6 pair shares a band");
        let c: Vec<u64> = sorted((5000..5400).map(mix).collect());
        assert!(!plan.keys(&c).iter().any(|k| ka.contains(k)), "unrelated sets share no key");
        // Keys of different bands differ, even for a one-term set whose bins all hold one value.
        let one = plan.keys(&[42]);
        assert_eq!(sorted(one.clone()).len(), 32);
        // The order of the set does not matter; identical sets share every key.
        let mut shuffled = a.clone();
        shuffled.reverse();
        assert_eq!(plan.keys(&shuffled), ka);
        assert!(plan.keys(&[]).is_empty());
        assert!((plan.candidate_probability(0.6) - 0.989).abs() < 0.001);
    }

    #[test]
    fn candidates_follow_the_banding_curve() {
        // 32 × 4: a pair at Jaccard 0.5 is a candidate with probability 1 − (1 − 1/16)^32 ≈ 0.873.
        let plan = MinHashPlan::default();
        let trials = 400;
        let found = (0..trials)
            .filter(|&salt| {
                let (a, b) = pair(200, 133, salt); // 133 / 267 ≈ 0.498
                let (ka, kb) = (plan.keys(&a), plan.keys(&b));
                ka.iter().zip(&kb).any(|(x, y)| x == y)
            })
            .count() as f64
            / trials as f64;
        let expected = plan.candidate_probability(133.0 / 267.0);
        assert!((found - expected).abs() < 0.06, "found {found:.3}, expected {expected:.3}");
    }

    #[test]
    fn signatures_are_fixed_across_releases() {
        // Stored keys are compared across runs and releases: these values must not change.
        let plan = MinHashPlan::new(2, 2).unwrap();
        assert_eq!(plan.keys(&[1, 2, 3]), [168633984951586, 265387298600474]);
        assert_eq!(plan.keys(&[3, 2, 1]), plan.keys(&[1, 2, 3]));
        let one = MinHashPlan::new(4, 1).unwrap().keys(&[42]);
        assert_eq!(one, [69060656543567, 36153571070609, 89763137448777, 202918238918117]);
        assert_eq!(format!("{:016x}", mix(1)), "5692161d100b05e5");
        assert!(all_narrow(&plan.keys(&(0..1000).collect::<Vec<_>>())));
        // A key written before keys were cut to 48 bits narrows to today's.
        assert_eq!(narrow(14766908862179386658), 168633984951586);
        assert!(!all_narrow(&[1, 14766908862179386658]));
    }

    #[test]
    fn first_visits_densify_as_probing_does() {
        // Sparse sets take the table, the others probe: both must give the
        // signature that probing alone gives, for every plan size.
        for plan in [MinHashPlan::default(), MinHashPlan::new(4, 1).unwrap(), MinHashPlan::new(64, 8).unwrap()] {
            let k = plan.bins();
            let mut hasher = plan.hasher();
            for n in [1, 2, 3, 5, 8, 11, 12, 40, 100, 300] {
                let set: Vec<u64> = sorted((0..n).map(|i| mix(i * 7919 + n)).collect());
                let mut expected: Vec<u64> = vec![u64::MAX; k];
                let mut filled = vec![false; k];
                for &term in &set {
                    let h = mix(term ^ TERM_SEED);
                    let b = bin_of(h, k);
                    filled[b] = true;
                    expected[b] = expected[b].min(h);
                }
                let probed: Vec<u64> = (0..k).map(|i| if filled[i] { expected[i] } else { expected[probe(i, k, &filled)] }).collect();
                assert_eq!(hasher.signature(&set), &probed[..], "{n} terms, {k} bins");
            }
        }
    }

    #[test]
    fn plans_parse_and_are_bounded() {
        assert_eq!("32x4".parse::<MinHashPlan>(), Ok(MinHashPlan { bands: 32, rows: 4 }));
        assert_eq!(MinHashPlan::default().to_string(), "32x4");
        for bad in ["32", "0x4", "64x64", "ax4"] {
            assert!(bad.parse::<MinHashPlan>().is_err(), "{bad}");
        }
    }
}
