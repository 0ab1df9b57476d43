//! Tonight's keys, held in memory, probed by every stored fingerprint.
//!
//! A night against a store must find every stored fingerprint that can pair
//! with one of tonight's, without joining the store with itself and without
//! recomputing anything stored. Tonight is small (10^5 documents) and the
//! store large (10^7–10^9), so tonight's keys go into hash tables and each
//! stored row is one sequential read of its 8-byte fingerprint and its MinHash
//! band keys, a few table probes, and nothing else. Which rows it touches is
//! then all a night reads of the store's bulky columns
//! ([`crate::storage::fetch`]).
//!
//! A stored fingerprint `s` is a *partner* of tonight's `t` when
//! - `s == t` (the same fingerprint: its term sets and representatives matter);
//! - `hamming(s, t) <= k`, found exactly through the bands of a [`BandPlan`]
//!   (every pair within `k` shares a band key, see [`crate::join`]);
//! - or `s` and one of tonight's documents with fingerprint `t` share a MinHash
//!   band key.
//!
//! This is a superset of the pairs the night's SQL then finds among tonight's
//! and the touched stored fingerprints, so that SQL gives the same result as
//! if it had read the whole store.

use crate::join::BandPlan;
use crate::minhash::mix;
use crate::text::HashKeyed;

/// Keys → fingerprints, as one flat list per key (CSR layout): fewer
/// allocations than a `Vec` per key, and a key's fingerprints side by side.
#[derive(Debug, Default)]
struct Multimap {
    slots: HashKeyed<(u32, u32)>,
    values: Vec<u64>,
    /// A Bloom filter blocked in 64-bit words: a key sets three bits of one
    /// word, so a test is one load. Most stored keys match nothing, and a
    /// word test is far cheaper than a miss in the hash map, which does not
    /// fit the cache. At 16 bits a key, three bits in one word pass a
    /// stranger with probability about 0.5 % (one bit a key passed 6 %, and
    /// each pass cost a lookup answered from memory).
    filter: Vec<u64>,
    /// The filter's first word in `filter` (see [`huge_page_words`]).
    first_word: usize,
    word_mask: u64,
}

/// How many keys ahead [`Multimap::candidates`] asks for filter words: about
/// the loads a core keeps in flight.
const AHEAD: usize = 32;

/// `key` with its uniform bits spread over all 64. MinHash keys are 48-bit
/// hashes ([`crate::minhash::KEY_BITS`]): their top bits are zero, and both
/// the filter (its word from the high bits) and the hash map (its control
/// bytes from the top 7 bits) need them uniform. A multiply by an odd
/// constant is a bijection whose high bits depend on every bit of the key.
#[inline]
fn spread(key: u64) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The filter word of a [`spread`] key (from its high bits) and its three
/// bits (three 6-bit fields of its low bits).
#[inline]
fn filter_slot(key: u64, word_mask: u64) -> (usize, u64) {
    let bits = 1u64 << (key & 63) | 1u64 << (key >> 6 & 63) | 1u64 << (key >> 12 & 63);
    ((key >> 32 & word_mask) as usize, bits)
}

/// `n` zeroed words, as a buffer and the index of the first: on Linux the
/// words start on a 2 MiB boundary and the kernel is asked to back them with
/// huge pages (before they are first written). The filter is tested at
/// random: with 4 KiB pages each of its megabytes spans 256 pages, and a
/// random test misses the TLB as well as the cache; with 2 MiB pages the whole
/// filter stays in the TLB.
fn huge_page_words(n: usize) -> (Vec<u64>, usize) {
    const HUGE: usize = 2 << 20;
    if !cfg!(target_os = "linux") || n * 8 < HUGE {
        return (vec![0; n], 0);
    }
    // Whole huge pages from a 2 MiB boundary: room for `n` words rounded up
    // to a huge page, plus the distance to the first boundary.
    let advised = (n * 8).next_multiple_of(HUGE);
    let buffer = vec![0u64; advised / 8 + HUGE / 8];
    let start = buffer.as_ptr() as usize;
    let first = (start.next_multiple_of(HUGE) - start) / 8;
    #[cfg(target_os = "linux")]
    // SAFETY: `first * 8 < HUGE`, so the `advised` bytes from word `first`
    // lie inside `buffer`; the advice changes no content.
    unsafe {
        libc::madvise(buffer.as_ptr().add(first) as *mut libc::c_void, advised, libc::MADV_HUGEPAGE)
    };
    (buffer, first)
}

/// Ask the CPU to bring `word` into cache.
#[inline]
fn prefetch(word: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint, and the address is that of a live `u64`.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(word as *const u64 as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = word;
}

impl Multimap {
    fn new(mut pairs: Vec<(u64, u64)>) -> Multimap {
        pairs.sort_unstable();
        pairs.dedup();
        // About 16 filter bits per key (at most 2^32 words).
        let words = (pairs.len().max(1) * 16 / 64).next_power_of_two().min(1 << 32);
        let (filter, first_word) = huge_page_words(words);
        let mut map = Multimap { filter, first_word, word_mask: words as u64 - 1, ..Multimap::default() };
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            let key = spread(group[0].0);
            map.slots.insert(key, (map.values.len() as u32, group.len() as u32));
            map.values.extend(group.iter().map(|p| p.1));
            let (word, bits) = filter_slot(key, map.word_mask);
            map.filter[map.first_word + word] |= bits;
        }
        map
    }

    /// Indices of the `keys` that pass the filter, appended to `out` in
    /// order. Most stored keys match nothing, and the filter (megabytes for a
    /// night of 10^5 documents) does not fit the core's cache, so each test
    /// waits on memory; asking for the word of the key [`AHEAD`] places
    /// later first keeps that many loads in flight instead of one.
    fn candidates(&self, keys: &[u64], out: &mut Vec<u32>) {
        let filter = &self.filter[self.first_word..];
        for (j, &key) in keys.iter().enumerate() {
            if let Some(&later) = keys.get(j + AHEAD) {
                prefetch(&filter[filter_slot(spread(later), self.word_mask).0]);
            }
            let (word, bits) = filter_slot(spread(key), self.word_mask);
            if filter[word] & bits == bits {
                out.push(j as u32);
            }
        }
    }

    /// Which of `keys` are in the map, in order: the filter first, with
    /// many of its loads in flight (see [`Multimap::candidates`]), then the
    /// map for the few that pass.
    fn have(&self, keys: &[u64]) -> Vec<bool> {
        let mut passed = Vec::new();
        self.candidates(keys, &mut passed);
        let mut held = vec![false; keys.len()];
        for j in passed {
            held[j as usize] = self.slots.contains_key(&spread(keys[j as usize]));
        }
        held
    }

    /// Whether `key` is in the map (the filter first: most are not).
    #[inline]
    fn contains(&self, key: u64) -> bool {
        let (word, bits) = filter_slot(spread(key), self.word_mask);
        self.filter[self.first_word + word] & bits == bits && self.slots.contains_key(&spread(key))
    }

    /// The values of a key that passed the filter.
    #[inline]
    fn lookup(&self, key: u64) -> &[u64] {
        match self.slots.get(&spread(key)) {
            Some(&(start, len)) => &self.values[start as usize..(start + len) as usize],
            None => &[],
        }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }
}

/// Tonight's fingerprints and MinHash keys, ready to be probed.
#[derive(Debug)]
pub struct NightIndex {
    plan: Option<BandPlan>,
    /// Tonight's fingerprints, keyed by their mixed bits: SimHash bits are
    /// not uniform, and the filter takes its word and bits from the key.
    exact: Multimap,
    simhash_bands: Multimap,
    minhash: Multimap,
}

/// A set of keys, asked about many keys that it mostly does not hold: the
/// filter of a [`Multimap`] answers most of them without a lookup in the
/// set, which does not fit the cache (a hash set answered the 4 million keys
/// of the tenth Weibo night's touched rows at 24 ns a key).
#[derive(Debug)]
pub struct KeySet(Multimap);

impl KeySet {
    pub fn new(keys: impl IntoIterator<Item = u64>) -> KeySet {
        KeySet(Multimap::new(keys.into_iter().map(|k| (k, 0)).collect()))
    }

    /// Which of `keys` the set holds, in order.
    pub fn have(&self, keys: &[u64]) -> Vec<bool> {
        self.0.have(keys)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

/// Reusable buffers of [`NightIndex::partners_batch`].
#[derive(Debug, Default)]
pub struct ProbeScratch {
    exact_keys: Vec<u64>,
    band_keys: Vec<u64>,
    exact: Vec<u32>,
    bands: Vec<u32>,
    minhash: Vec<u32>,
}

/// The indices in `passed` (sorted) below `end`, taken from its front.
fn take_below<'a>(passed: &'a [u32], cursor: &mut usize, end: usize) -> &'a [u32] {
    let start = *cursor;
    while *cursor < passed.len() && (passed[*cursor] as usize) < end {
        *cursor += 1;
    }
    &passed[start..*cursor]
}

impl NightIndex {
    /// Index tonight's documents, given as `(fingerprint, MinHash band keys)`;
    /// `plan` enables the SimHash probe (distance `plan.k`), and documents
    /// without MinHash keys (an empty list) take part through SimHash only.
    pub fn new<'a>(plan: Option<BandPlan>, documents: impl IntoIterator<Item = (u64, &'a [u64])>) -> NightIndex {
        let mut exact = Vec::new();
        let mut minhash = Vec::new();
        for (fingerprint, keys) in documents {
            exact.push((mix(fingerprint), fingerprint));
            minhash.extend(keys.iter().map(|&k| (k, fingerprint)));
        }
        let exact = Multimap::new(exact);
        let mut bands = Vec::new();
        if let Some(plan) = &plan {
            for &fingerprint in &exact.values {
                bands.extend(plan.keys(fingerprint).map(|(b, key)| (BandPlan::bucket(b, key), fingerprint)));
            }
        }
        NightIndex { plan, exact, simhash_bands: Multimap::new(bands), minhash: Multimap::new(minhash) }
    }

    /// Tonight's distinct fingerprints.
    pub fn len(&self) -> usize {
        self.exact.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.values.is_empty()
    }

    /// Whether one of tonight's documents has the fingerprint `s`.
    pub fn has_fingerprint(&self, s: u64) -> bool {
        self.exact.contains(mix(s)) && self.exact.lookup(mix(s)).contains(&s)
    }

    /// Which of `keys` (MinHash band keys) one of tonight's documents has, in
    /// order.
    pub fn have_minhash_keys(&self, keys: &[u64]) -> Vec<bool> {
        self.minhash.have(keys)
    }

    /// Distinct MinHash keys indexed.
    pub fn minhash_keys(&self) -> usize {
        self.minhash.len()
    }

    /// Tonight's partners of the stored fingerprint `s` with MinHash keys
    /// `keys`, appended to `out` sorted and without repeats.
    pub fn partners(&self, s: u64, keys: &[u64], out: &mut Vec<u64>) {
        let mut ends = Vec::new();
        self.partners_batch(&[Some(s)], &[0, keys.len()], keys, &mut ProbeScratch::default(), out, &mut ends);
    }

    /// Tonight's partners of a batch of stored rows: row `i` has the
    /// fingerprint `fingerprints[i]` (`None`: no partners) and the MinHash
    /// keys `keys[bounds[i]..bounds[i + 1]]`. Each row's partners are appended
    /// to `out`, sorted and without repeats, and the end of its list in `out`
    /// to `ends`.
    ///
    /// A batch at a time, because almost every stored key fails the filter
    /// and the filter's loads are the cost: each kind of key is tested in
    /// one tight pass ([`Multimap::candidates`]), and only the few that pass
    /// are looked up, row by row.
    pub fn partners_batch(
        &self,
        fingerprints: &[Option<u64>],
        bounds: &[usize],
        keys: &[u64],
        scratch: &mut ProbeScratch,
        out: &mut Vec<u64>,
        ends: &mut Vec<usize>,
    ) {
        self.each_row(fingerprints, bounds, keys, scratch, |row| {
            let start = out.len();
            if let Some(row) = row {
                if row.equal() {
                    out.push(row.fingerprint);
                }
                row.near(|t| out.push(t));
                row.sharing(|tonight| out.extend_from_slice(tonight));
                sort_unique_from(out, start);
            }
            ends.push(out.len());
        });
    }

    /// Whether each stored row of a batch (as in [`Self::partners_batch`]) has
    /// a partner tonight, appended to `out`: all the probe needs to choose
    /// the rows to fetch. It stops at the first partner, and so lists none
    /// of the hundreds that a key of a popular repost holds.
    pub fn touched_batch(&self, fingerprints: &[Option<u64>], bounds: &[usize], keys: &[u64], scratch: &mut ProbeScratch, out: &mut Vec<bool>) {
        self.each_row(fingerprints, bounds, keys, scratch, |row| {
            out.push(row.is_some_and(|row| row.equal() || row.any_near() || row.shares_a_key()));
        });
    }

    /// Run `f` on each row of a batch, in order, with the keys of it that
    /// passed the filter (`None` for a row without a fingerprint).
    fn each_row(
        &self,
        fingerprints: &[Option<u64>],
        bounds: &[usize],
        keys: &[u64],
        scratch: &mut ProbeScratch,
        mut f: impl FnMut(Option<Row<'_>>),
    ) {
        assert_eq!(bounds.len(), fingerprints.len() + 1, "a probe batch: one bound per row, and one more");
        let first_key = bounds[0];
        let keys = &keys[first_key..bounds[fingerprints.len()]];
        self.filter_batch(fingerprints, keys, scratch);
        let ProbeScratch { exact_keys, band_keys, exact, bands, minhash } = scratch;
        let per_row = self.plan.as_ref().map_or(0, BandPlan::bands);
        let (mut at_exact, mut at_band, mut at_minhash) = (0, 0, 0);
        for (i, s) in fingerprints.iter().enumerate() {
            let passed_exact = take_below(exact, &mut at_exact, i + 1);
            let passed_bands = take_below(bands, &mut at_band, (i + 1) * per_row);
            let passed_minhash = take_below(minhash, &mut at_minhash, bounds[i + 1] - first_key);
            f(s.map(|fingerprint| Row {
                index: self,
                fingerprint,
                exact_key: (!passed_exact.is_empty()).then(|| exact_keys[i]),
                bands: passed_bands,
                band_keys,
                minhash: passed_minhash,
                keys,
            }));
        }
    }

    /// The filter passes of a batch: each row's exact and band keys into
    /// `scratch`, and the indices of the keys of each kind that pass.
    fn filter_batch(&self, fingerprints: &[Option<u64>], keys: &[u64], scratch: &mut ProbeScratch) {
        let ProbeScratch { exact_keys, band_keys, exact, bands, minhash } = scratch;
        exact_keys.clear();
        band_keys.clear();
        for s in fingerprints {
            let s = s.unwrap_or_default();
            exact_keys.push(mix(s));
            if let Some(plan) = &self.plan {
                band_keys.extend(plan.keys(s).map(|(b, key)| BandPlan::bucket(b, key)));
            }
        }
        for (passed, map, keys) in [(exact, &self.exact, &exact_keys[..]), (bands, &self.simhash_bands, &band_keys[..]), (minhash, &self.minhash, keys)] {
            passed.clear();
            map.candidates(keys, passed);
        }
    }
}

/// One stored row of a probe batch, with its keys that passed the filter.
struct Row<'a> {
    index: &'a NightIndex,
    fingerprint: u64,
    /// Its fingerprint's key, when that passed.
    exact_key: Option<u64>,
    /// Indices into `band_keys` and `keys` of its keys that passed.
    bands: &'a [u32],
    band_keys: &'a [u64],
    minhash: &'a [u32],
    keys: &'a [u64],
}

impl Row<'_> {
    /// Whether tonight has its fingerprint.
    fn equal(&self) -> bool {
        self.exact_key.is_some_and(|key| self.index.exact.lookup(key).contains(&self.fingerprint))
    }

    /// Tonight's fingerprints within k of it, through the bands (with repeats).
    fn near(&self, mut f: impl FnMut(u64)) {
        let Some(plan) = &self.index.plan else { return };
        for &j in self.bands {
            for &t in self.index.simhash_bands.lookup(self.band_keys[j as usize]) {
                if (self.fingerprint ^ t).count_ones() <= plan.k {
                    f(t);
                }
            }
        }
    }

    fn any_near(&self) -> bool {
        let Some(plan) = &self.index.plan else { return false };
        self.bands.iter().any(|&j| {
            let near = self.index.simhash_bands.lookup(self.band_keys[j as usize]);
            near.iter().any(|&t| (self.fingerprint ^ t).count_ones() <= plan.k)
        })
    }

    /// Tonight's fingerprints sharing each of its MinHash keys that passed.
    fn sharing<'b>(&'b self, mut f: impl FnMut(&'b [u64])) {
        for &j in self.minhash {
            f(self.index.minhash.lookup(self.keys[j as usize]));
        }
    }

    fn shares_a_key(&self) -> bool {
        self.minhash.iter().any(|&j| !self.index.minhash.lookup(self.keys[j as usize]).is_empty())
    }
}

/// Sort `out[start..]` and drop its repeats.
fn sort_unique_from(out: &mut Vec<u64>, start: usize) {
    if out.len() - start < 2 {
        return;
    }
    out[start..].sort_unstable();
    let mut kept = start + 1;
    for i in start + 1..out.len() {
        if out[i] != out[kept - 1] {
            out[kept] = out[i];
            kept += 1;
        }
    }
    out.truncate(kept);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::join::brute_force_pairs;
    use crate::minhash::{mix, MinHashPlan};

    #[test]
    fn partners_within_k_equal_brute_force() {
        // Tonight: 300 fingerprints; stored: 3,000, a tenth of them planted
        // near tonight's (1 to 5 bits flipped), the rest random.
        let night: Vec<u64> = (0..300).map(|i| mix(i + 1)).collect();
        let mut stored: Vec<u64> = (0..2700).map(|i| mix(10_000 + i)).collect();
        for (i, &t) in night.iter().enumerate() {
            let flips = (i % 5 + 1) as u32;
            stored.push((0..flips).fold(t, |f, b| f ^ (1 << ((i as u32 * 7 + b * 13) % 64))));
        }
        stored.push(night[0]);
        for k in [0u32, 3, 4] {
            let index = NightIndex::new(Some(BandPlan::auto(k, 3300).unwrap()), night.iter().map(|&t| (t, &[][..])));
            let mut found = Vec::new();
            for &s in &stored {
                let mut partners = Vec::new();
                index.partners(s, &[], &mut partners);
                found.extend(partners.into_iter().map(|t| (s, t)));
            }
            found.sort_unstable();
            let all: Vec<u64> = night.iter().chain(&stored).copied().collect();
            let mut expected: Vec<(u64, u64)> = brute_force_pairs(&all, k)
                .into_iter()
                .filter(|&(i, j, _)| i < night.len() && j >= night.len())
                .map(|(i, j, _)| (all[j], all[i]))
                .collect();
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(found, expected, "k = {k}");
            // The planted pairs within k (60 per flip count) and the equal one.
            assert!(found.len() > 60 * k.min(5) as usize, "k = {k}: {} pairs", found.len());
        }
    }

    #[test]
    fn a_key_set_holds_its_keys_and_no_others() {
        let keys: Vec<u64> = (0..5_000u64).map(|i| mix(i) >> 16).collect();
        let set = KeySet::new(keys.iter().copied().step_by(2));
        assert_eq!(set.len(), 2_500);
        let held = set.have(&keys);
        assert!(held.iter().enumerate().all(|(i, &h)| h == (i % 2 == 0)));
        let empty = KeySet::new([]);
        assert!(empty.is_empty() && empty.have(&keys).iter().all(|&h| !h));
    }

    #[test]
    fn partners_by_minhash_key_and_without_repeats() {
        let plan = MinHashPlan::new(8, 2).unwrap();
        let set: Vec<u64> = (0..40).map(mix).collect();
        let (ka, other) = (plan.keys(&set), plan.keys(&[mix(999)]));
        let index = NightIndex::new(None, [(7u64, ka.as_slice()), (9, other.as_slice())]);
        assert_eq!((index.len(), index.minhash_keys()), (2, 16));
        let mut out = Vec::new();
        index.partners(1234, &ka, &mut out);
        assert_eq!(out, vec![7]);
        // A stored row equal to tonight's fingerprint is its partner too, once.
        out.clear();
        index.partners(9, &other, &mut out);
        assert_eq!(out, vec![9]);
        out.clear();
        index.partners(5, &plan.keys(&[mix(12345)]), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_batch_gives_each_row_its_own_partners() {
        // Tonight: 50 documents; stored: 400 rows, some near tonight's
        // fingerprints, some equal, some sharing MinHash keys, some NULL, some
        // without keys. The batch (filter passes over all rows at once) must
        // give each row exactly the partners a brute-force scan finds, with
        // SimHash bands and without.
        let plan = MinHashPlan::new(8, 2).unwrap();
        let sets: Vec<Vec<u64>> = (0..50u64).map(|d| (0..20).map(|t| mix(d * 100 + t)).collect()).collect();
        let night: Vec<(u64, Vec<u64>)> = sets.iter().enumerate().map(|(d, set)| (mix(d as u64 + 7), plan.keys(set))).collect();
        for bands in [Some(BandPlan::new(3, 4).unwrap()), None] {
            let index = NightIndex::new(bands.clone(), night.iter().map(|(s, k)| (*s, k.as_slice())));
            let found = batch_against_brute_force(&index, bands.is_some(), &plan, &sets, &night);
            // A third of the rows share 15 of 20 terms with a tonight's
            // document; a seventh are equal to one, a seventh near one.
            assert!(found > if bands.is_some() { 180 } else { 120 }, "{found} rows with partners");
        }
    }

    fn batch_against_brute_force(index: &NightIndex, bands: bool, plan: &MinHashPlan, sets: &[Vec<u64>], night: &[(u64, Vec<u64>)]) -> usize {
        // The batch's keys start after keys of no row, as in a sliced list:
        // tonight's own keys, which would give partners to a row they were
        // wrongly counted in.
        let mut keys: Vec<u64> = night[0].1.clone();
        let (mut fingerprints, mut bounds) = (Vec::new(), vec![keys.len()]);
        for r in 1..=400u64 {
            let d = (r % 50) as usize;
            fingerprints.push(match r % 7 {
                0 => None,
                1 => Some(night[d].0 ^ 0b101),
                2 => Some(night[d].0),
                _ => Some(mix(r + 1_000_000)),
            });
            match r % 3 {
                0 => keys.extend(plan.keys(&sets[d][..15])),
                1 => keys.extend(plan.keys(&[mix(r + 9_000_000)])),
                _ => {}
            }
            bounds.push(keys.len());
        }
        let (mut out, mut ends) = (Vec::new(), Vec::new());
        index.partners_batch(&fingerprints, &bounds, &keys, &mut ProbeScratch::default(), &mut out, &mut ends);
        assert_eq!(ends.len(), 400);
        let (mut start, mut found) = (0, 0);
        for (i, s) in fingerprints.iter().enumerate() {
            let row_keys = &keys[bounds[i]..bounds[i + 1]];
            let mut expected: Vec<u64> = match s {
                None => Vec::new(),
                Some(s) => night
                    .iter()
                    .filter(|(t, k)| t == s || (bands && (s ^ t).count_ones() <= 3) || k.iter().any(|k| row_keys.contains(k)))
                    .map(|(t, _)| *t)
                    .collect(),
            };
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(&out[start..ends[i]], expected.as_slice(), "row {i}");
            found += usize::from(!expected.is_empty());
            start = ends[i];
        }
        // night_touched: a row is touched exactly when it has partners.
        let mut touched = Vec::new();
        index.touched_batch(&fingerprints, &bounds, &keys, &mut ProbeScratch::default(), &mut touched);
        let with_partners: Vec<bool> = (0..400).map(|i| ends[i] > if i == 0 { 0 } else { ends[i - 1] }).collect();
        assert_eq!(touched, with_partners);
        found
    }
}
