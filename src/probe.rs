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
    word_mask: u64,
}

/// The filter word of `key` (from its high bits) and its three bits (three
/// 6-bit fields of its low bits): keys are uniform hashes already.
#[inline]
fn filter_slot(key: u64, word_mask: u64) -> (usize, u64) {
    let bits = 1u64 << (key & 63) | 1u64 << (key >> 6 & 63) | 1u64 << (key >> 12 & 63);
    ((key >> 32 & word_mask) as usize, bits)
}

impl Multimap {
    fn new(mut pairs: Vec<(u64, u64)>) -> Multimap {
        pairs.sort_unstable();
        pairs.dedup();
        // About 16 filter bits per key (at most 2^32 words).
        let words = (pairs.len().max(1) * 16 / 64).next_power_of_two().min(1 << 32);
        let mut map = Multimap { filter: vec![0; words], word_mask: words as u64 - 1, ..Multimap::default() };
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            let key = group[0].0;
            map.slots.insert(key, (map.values.len() as u32, group.len() as u32));
            map.values.extend(group.iter().map(|p| p.1));
            let (word, bits) = filter_slot(key, map.word_mask);
            map.filter[word] |= bits;
        }
        map
    }

    /// Ask the CPU to bring `key`'s filter word into cache: a row's keys hit
    /// random words of a filter larger than the cache, and fetching them all
    /// at once overlaps their misses instead of taking them one by one.
    #[inline]
    fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let word = &self.filter[filter_slot(key, self.word_mask).0] as *const u64;
            // SAFETY: a prefetch is a hint; the address is that of an element of `self.filter`.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(word as *const i8) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    #[inline]
    fn get(&self, key: u64) -> &[u64] {
        let (word, bits) = filter_slot(key, self.word_mask);
        if self.filter[word] & bits != bits {
            return &[];
        }
        match self.slots.get(&key) {
            Some(&(start, len)) => &self.values[start as usize..(start + len) as usize],
            None => &[],
        }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }
}

/// A SimHash band key as one `u64`: the band's index folded into its bits.
#[inline]
fn band_key(band: u32, key: u64) -> u64 {
    crate::minhash::mix(key ^ (u64::from(band) << 56 | 0x00ff_0000_0000_0000))
}

/// Tonight's fingerprints and MinHash keys, ready to be probed.
#[derive(Debug)]
pub struct NightIndex {
    plan: Option<BandPlan>,
    exact: HashKeyed<()>,
    simhash_bands: Multimap,
    minhash: Multimap,
}

impl NightIndex {
    /// Index tonight's documents, given as `(fingerprint, MinHash band keys)`;
    /// `plan` enables the SimHash probe (distance `plan.k`), and documents
    /// without MinHash keys (an empty list) take part through SimHash only.
    pub fn new<'a>(plan: Option<BandPlan>, documents: impl IntoIterator<Item = (u64, &'a [u64])>) -> NightIndex {
        let mut exact = HashKeyed::default();
        let mut minhash = Vec::new();
        for (fingerprint, keys) in documents {
            exact.insert(fingerprint, ());
            minhash.extend(keys.iter().map(|&k| (k, fingerprint)));
        }
        let mut bands = Vec::new();
        if let Some(plan) = &plan {
            for &fingerprint in exact.keys() {
                bands.extend(plan.keys(fingerprint).map(|(b, key)| (band_key(b, key), fingerprint)));
            }
        }
        NightIndex { plan, exact, simhash_bands: Multimap::new(bands), minhash: Multimap::new(minhash) }
    }

    /// Tonight's distinct fingerprints.
    pub fn len(&self) -> usize {
        self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    /// Distinct MinHash keys indexed.
    pub fn minhash_keys(&self) -> usize {
        self.minhash.len()
    }

    /// Tonight's partners of the stored fingerprint `s` with MinHash keys
    /// `keys`, appended to `out` sorted and without repeats.
    pub fn partners(&self, s: u64, keys: &[u64], out: &mut Vec<u64>) {
        let start = out.len();
        if self.exact.contains_key(&s) {
            out.push(s);
        }
        if let Some(plan) = &self.plan {
            for (b, key) in plan.keys(s) {
                for &t in self.simhash_bands.get(band_key(b, key)) {
                    if (s ^ t).count_ones() <= plan.k {
                        out.push(t);
                    }
                }
            }
        }
        for &key in keys {
            self.minhash.prefetch(key);
        }
        for &key in keys {
            out.extend_from_slice(self.minhash.get(key));
        }
        if out.len() - start > 1 {
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
    }
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
}
