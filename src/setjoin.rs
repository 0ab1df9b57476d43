//! An exact Jaccard join within one group of term sets: every pair at or
//! above a threshold, without comparing every pair.
//!
//! MinHash band keys of short posts make *hot buckets*: a key that thousands
//! of two- and three-term posts share because one frequent term fills all
//! the bins of its band. Listing every pair of such a bucket checked
//! millions of candidates on `weibo_reposts` to keep a few percent of them.
//! Inside a bucket, the pairs that pass the term-set check are found
//! instead by a set-similarity join (AllPairs with the positional filter of
//! PPJoin: Bayardo et al., WWW 2007; Xiao et al., WWW 2008):
//!
//! - terms are ordered rarest first *within the group*, so the term the
//!   bucket shares comes last and rarely decides anything;
//! - two sets with Jaccard ≥ t share at least ⌈t·n⌉ of the larger one's n
//!   terms, so each shares a term within its first n − ⌈t·n⌉ + 1 (its
//!   *prefix*); only pairs that meet in their prefixes are looked at;
//! - sets are taken smallest first, so a set is only ever looked up by
//!   sets at least as large, with which it shares at least ⌈2t/(1+t)·n⌉ of
//!   its own n terms: it is posted for its first n − ⌈2t/(1+t)·n⌉ + 1
//!   terms (PPJoin's indexing prefix), fewer than it looks up with;
//! - a pair whose sizes differ too much (n_small < t·n_large) cannot reach t;
//! - when a pair meets at positions i and j, the terms after them bound the
//!   overlap it can still reach; below the overlap that t needs, the pair is
//!   dropped.
//!
//! Every pair that survives is checked with [`jaccard`], the function of the
//! SQL check, so the result is exactly the pairs of the group that the check
//! keeps: the same pairs as listing them all, in a small fraction of the
//! work. Bounds are taken with a small slack so that rounding never drops a
//! pair that the check would keep.

use crate::sets::jaccard;
use crate::text::HashKeyed;

/// Slack on real-valued bounds: a bound is lowered by it, never raised.
const SLACK: f64 = 1e-9;

/// The least overlap with a set of `n` terms that Jaccard `t` allows,
/// whatever the other set's size.
fn least_overlap(n: usize, t: f64) -> usize {
    ((t * n as f64 - SLACK).ceil().max(1.0) as usize).min(n)
}

/// The least overlap with a set of `n` terms that Jaccard `t` allows with a
/// set at least as large: t/(1+t)·(n+m) for m ≥ n is at least 2t/(1+t)·n
/// (the bound of a set's indexing prefix; see the module docs).
fn least_overlap_with_larger(n: usize, t: f64) -> usize {
    least_overlap(n, 2.0 * t / (1.0 + t))
}

/// Whether two sets of `n` and `m` terms that share `overlap` can reach
/// Jaccard `t`: they need t/(1+t)·(n+m) shared terms (`share` is t/(1+t)).
/// A whole number reaches a real bound exactly when it reaches the bound's
/// ceiling, so the bound is not rounded up: `ceil` is a call into the C
/// library at every posting looked at (Weibo: 10.9 million calls in the
/// first 200,000 posts, 1.7 % of a run's instructions).
fn reaches(overlap: i64, (n, m): (usize, usize), share: f64) -> bool {
    overlap as f64 >= share * (n + m) as f64 - SLACK
}

/// A set's entry in the postings of a term of its prefix: the set, the
/// term's position in it, and its size (read here, not from the set, so
/// that a posting looked at touches one line of memory).
#[derive(Clone, Copy)]
struct Posting {
    set: u32,
    at: u32,
    size: u32,
}

/// Every pair `(i, j)`, `i < j`, of `sets` (sorted, distinct term hashes)
/// with Jaccard similarity at least `t` (0 < t ≤ 1), at least one of them
/// `tonight`, for which `wanted(i, j)` holds, in ascending order.
///
/// Sets not of tonight (a store's, in a hot bucket that one of tonight's
/// posts shares) are never compared with each other: their own pairs were
/// found on earlier nights. They are posted apart, and only a set of
/// tonight's looks them up.
pub fn jaccard_pairs(sets: &[&[u64]], t: f64, tonight: impl Fn(usize) -> bool, wanted: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    let tonights: Vec<usize> = (0..sets.len()).filter(|&i| tonight(i) && !sets[i].is_empty()).collect();
    if tonights.len() <= FEW_TONIGHT || sets.len() <= SMALL_GROUP {
        return few_tonight(sets, t, (&tonights, &tonight), wanted);
    }
    let ranked = rank_rarest_first(sets);
    let mut order: Vec<usize> = (0..sets.len()).filter(|&i| !sets[i].is_empty()).collect();
    order.sort_by_key(|&i| (sets[i].len(), i));
    // Prefix postings, tonight's and the others': term rank → postings, in
    // the order of the sets' sizes.
    let mut postings: [Vec<Vec<Posting>>; 2] = [vec![Vec::new(); ranked.terms], vec![Vec::new(); ranked.terms]];
    // Where each list's sets large enough for the set at hand begin: sizes
    // only grow in a list and in `order`, so a set too small for one set is
    // too small for every later one, and is passed over once, not at every
    // look (PPJoin's size filter).
    let mut large_enough: [Vec<usize>; 2] = [vec![0; ranked.terms], vec![0; ranked.terms]];
    // Overlap met so far with each earlier set (PRUNED once dropped).
    const PRUNED: i64 = i64::MIN / 2;
    let mut met = vec![0i64; sets.len()];
    let (mut touched, mut pairs) = (Vec::new(), Vec::new());
    let share = t / (1.0 + t);
    for &x in &order {
        let terms = &ranked.sets[x];
        let n = terms.len();
        let prefix = n - least_overlap(n, t) + 1;
        let posted = n - least_overlap_with_larger(n, t) + 1;
        let smallest = t * n as f64 - SLACK;
        let (ours, sides) = match tonight(x) {
            true => (0, 0..2),
            false => (1, 0..1),
        };
        for (i, &w) in terms[..prefix].iter().enumerate() {
            for side in sides.clone() {
                let (list, start) = (&postings[side][w as usize], &mut large_enough[side][w as usize]);
                while list.get(*start).is_some_and(|p| (p.size as f64) < smallest) {
                    *start += 1;
                }
                for &Posting { set: y, at: j, size: m } in &list[*start..] {
                    let (y, j, m) = (y as usize, j as usize, m as usize);
                    if met[y] == PRUNED {
                        continue;
                    }
                    if met[y] == 0 {
                        touched.push(y);
                    }
                    let reachable = met[y] + 1 + (n - i - 1).min(m - j - 1) as i64;
                    met[y] = if reaches(reachable, (n, m), share) { met[y] + 1 } else { PRUNED };
                }
            }
        }
        for y in touched.drain(..) {
            if met[y] > 0 && wanted(x.min(y), x.max(y)) && jaccard(sets[x], sets[y]) >= t {
                pairs.push((x.min(y), x.max(y)));
            }
            met[y] = 0;
        }
        for (i, &w) in terms[..posted].iter().enumerate() {
            postings[ours][w as usize].push(Posting { set: x as u32, at: i as u32, size: n as u32 });
        }
    }
    pairs.sort_unstable();
    pairs
}

/// Sets of tonight in a group at or below which each is compared with every
/// other set directly ([`few_tonight`]). A store night's hot bucket holds
/// one or two of tonight's posts among thousands of stored ones, which are
/// never compared with each other: ranking and posting every stored set's
/// terms cost more than a size check and a merge of each with tonight's few.
const FEW_TONIGHT: usize = 4;

/// Groups of at most this many sets compare every pair directly
/// ([`few_tonight`]): most hot buckets hold a few dozen short posts, and
/// ranking their terms and posting prefixes cost more than the comparisons
/// it saves.
const SMALL_GROUP: usize = 32;

/// [`jaccard_pairs`] of a small group, or of one with few sets of tonight
/// (`tonights`, the non-empty ones): each against every other set, the pairs of two of
/// tonight's once, sizes first (Jaccard is at most the ratio of the sizes),
/// then the check's own [`jaccard`].
fn few_tonight(sets: &[&[u64]], t: f64, (tonights, tonight): (&[usize], impl Fn(usize) -> bool), wanted: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for &x in tonights {
        let n = sets[x].len() as f64;
        for (y, set) in sets.iter().enumerate() {
            let m = set.len() as f64;
            let (lo, hi) = (x.min(y), x.max(y));
            // Pairs of two of tonight's are looked at from the first of them.
            // (A set of tonight's is among `tonights` unless it is empty,
            // and empty sets are passed over.)
            let seen = y < x && tonight(y);
            if y == x || set.is_empty() || seen || n.min(m) < t * n.max(m) - SLACK || !wanted(lo, hi) {
                continue;
            }
            if jaccard(sets[x], set) >= t {
                pairs.push((lo, hi));
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

/// The sets as term ranks, rarest first (ties by hash), and the number of
/// distinct terms.
struct Ranked {
    sets: Vec<Vec<u32>>,
    terms: usize,
}

fn rank_rarest_first(sets: &[&[u64]]) -> Ranked {
    let mut counts: HashKeyed<u32> = HashKeyed::default();
    for set in sets {
        for &term in *set {
            *counts.entry(term).or_default() += 1;
        }
    }
    let mut terms: Vec<(u32, u64)> = counts.iter().map(|(&term, &count)| (count, term)).collect();
    terms.sort_unstable();
    let rank: HashKeyed<u32> = terms.iter().enumerate().map(|(r, &(_, term))| (term, r as u32)).collect();
    let sets = sets
        .iter()
        .map(|set| {
            let mut ranks: Vec<u32> = set.iter().map(|term| rank[term]).collect();
            ranks.sort_unstable();
            ranks
        })
        .collect();
    Ranked { sets, terms: terms.len() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn brute_force(sets: &[Vec<u64>], t: f64, wanted: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
        let mut pairs = Vec::new();
        for i in 0..sets.len() {
            for j in i + 1..sets.len() {
                if wanted(i, j) && jaccard(&sets[i], &sets[j]) >= t {
                    pairs.push((i, j));
                }
            }
        }
        pairs
    }

    /// A hot bucket: short sets that nearly all hold term 0, drawn from a
    /// small vocabulary so that many pairs sit at and around every threshold.
    fn bucket(rng: &mut rand::rngs::StdRng, n: usize, vocabulary: u64) -> Vec<Vec<u64>> {
        (0..n)
            .map(|_| {
                let size = rng.random_range(0..9);
                let mut set: Vec<u64> = (0..size).map(|_| rng.random_range(1..vocabulary)).collect();
                if rng.random_bool(0.9) {
                    set.push(0);
                }
                set.sort_unstable();
                set.dedup();
                set
            })
            .collect()
    }

    #[test]
    fn equals_brute_force_at_every_threshold() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for (n, vocabulary) in [(300, 12), (300, 40), (120, 400)] {
            let sets = bucket(&mut rng, n, vocabulary);
            let views: Vec<&[u64]> = sets.iter().map(Vec::as_slice).collect();
            for t in [0.1, 1.0 / 3.0, 0.5, 0.6, 2.0 / 3.0, 0.75, 0.8, 1.0] {
                let expected = brute_force(&sets, t, |_, _| true);
                assert_eq!(jaccard_pairs(&views, t, |_| true, |_, _| true), expected, "n {n}, vocabulary {vocabulary}, t {t}");
            }
            assert!(!brute_force(&sets, 0.5, |_, _| true).is_empty());
        }
    }

    #[test]
    fn sets_of_every_size_equal_brute_force() {
        // Sets of 1 to 40 terms, whose posted prefixes are shorter than the
        // prefixes they look up with by up to a third (at t = 0.5), at seven
        // thresholds; all of them tonight's, then half of them.
        let mut rng = rand::rngs::StdRng::seed_from_u64(19);
        let mut sets: Vec<Vec<u64>> = Vec::new();
        for i in 0..250 {
            let mut set: Vec<u64> = match (i % 5, sets.last()) {
                // A near copy of the set before: one term swapped for another,
                // so that pairs sit near every threshold.
                (4, Some(before)) => before.iter().skip(1).copied().chain([rng.random_range(0..60)]).collect(),
                _ => (0..rng.random_range(1..=40)).map(|_| rng.random_range(0..60)).collect(),
            };
            set.sort_unstable();
            set.dedup();
            sets.push(set);
        }
        let views: Vec<&[u64]> = sets.iter().map(Vec::as_slice).collect();
        let tonight = |i: usize| i % 2 == 0;
        for t in [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9] {
            let expected = brute_force(&sets, t, |_, _| true);
            assert_eq!(jaccard_pairs(&views, t, |_| true, |_, _| true), expected, "t {t}");
            let with_tonight = brute_force(&sets, t, |i, j| tonight(i) || tonight(j));
            assert_eq!(jaccard_pairs(&views, t, tonight, |_, _| true), with_tonight, "t {t}, half tonight's");
            assert!(!with_tonight.is_empty(), "t {t}");
        }
    }

    #[test]
    fn only_wanted_pairs_are_kept() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let sets = bucket(&mut rng, 200, 10);
        let views: Vec<&[u64]> = sets.iter().map(Vec::as_slice).collect();
        // As in a store night: a pair needs one of tonight's sets (even indices here).
        let tonight = |i: usize, j: usize| i % 2 == 0 || j % 2 == 0;
        let found = jaccard_pairs(&views, 0.5, |i| i % 2 == 0, |_, _| true);
        assert_eq!(found, brute_force(&sets, 0.5, tonight));
        // And a predicate on top: pairs of different parity only.
        let mixed = |i: usize, j: usize| (i + j) % 2 == 1;
        assert_eq!(jaccard_pairs(&views, 0.5, |i| i % 2 == 0, mixed), brute_force(&sets, 0.5, mixed));
        assert!(found.len() < brute_force(&sets, 0.5, |_, _| true).len());
    }

    #[test]
    fn few_of_tonights_sets_among_many_are_compared_directly() {
        // A store night's hot bucket: one to six of tonight's sets among
        // hundreds of stored ones, on both sides of FEW_TONIGHT.
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        let sets = bucket(&mut rng, 400, 12);
        let views: Vec<&[u64]> = sets.iter().map(Vec::as_slice).collect();
        for few in 1..=6usize {
            let is_tonight = |i: usize| i % 67 == 0 && i / 67 < few;
            let wanted = |i: usize, j: usize| is_tonight(i) || is_tonight(j);
            for t in [1.0 / 3.0, 0.5, 2.0 / 3.0, 1.0] {
                let expected = brute_force(&sets, t, wanted);
                assert_eq!(jaccard_pairs(&views, t, is_tonight, |_, _| true), expected, "{few} of tonight's, t {t}");
                assert!(t == 1.0 || !expected.is_empty());
            }
        }
        // The same pairs whichever way they are found: more of tonight's
        // than FEW_TONIGHT, so that `jaccard_pairs` posts the prefixes, and
        // the direct comparison of each of them with every set.
        let tonights: Vec<usize> = (0..FEW_TONIGHT + 3).collect();
        let is_tonight = |i: usize| i < tonights.len();
        let wanted = |i: usize, j: usize| is_tonight(i) || is_tonight(j);
        let direct = few_tonight(&views, 0.5, (&tonights, is_tonight), wanted);
        assert_eq!(direct, brute_force(&sets, 0.5, wanted));
        assert!(!direct.is_empty());
        assert_eq!(jaccard_pairs(&views, 0.5, is_tonight, |_, _| true), direct);
    }

    #[test]
    fn small_groups_are_compared_directly() {
        // Groups on both sides of SMALL_GROUP, all of tonight's: every pair
        // checked, or the prefixes posted; the same pairs.
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        for n in [5, SMALL_GROUP - 1, SMALL_GROUP, SMALL_GROUP + 1, 2 * SMALL_GROUP] {
            let sets = bucket(&mut rng, n, 8);
            let views: Vec<&[u64]> = sets.iter().map(Vec::as_slice).collect();
            for t in [1.0 / 3.0, 0.5, 1.0] {
                let expected = brute_force(&sets, t, |_, _| true);
                assert_eq!(jaccard_pairs(&views, t, |_| true, |_, _| true), expected, "{n} sets, t {t}");
                assert!(t == 1.0 || !expected.is_empty());
            }
        }
    }

    #[test]
    fn small_cases_and_bounds() {
        let sets: Vec<&[u64]> = vec![&[], &[1], &[1, 2], &[1, 2, 3], &[5, 6], &[1, 2]];
        // {1} and {1,2} meet at 0.5; {1,2} and {1,2,3} at 2/3; the two {1,2} at 1.
        assert_eq!(jaccard_pairs(&sets, 0.5, |_| true, |_, _| true), [(1, 2), (1, 5), (2, 3), (2, 5), (3, 5)]);
        assert_eq!(jaccard_pairs(&sets, 1.0, |_| true, |_, _| true), [(2, 5)]);
        assert!(jaccard_pairs(&[], 0.5, |_| true, |_, _| true).is_empty());
        assert_eq!(least_overlap(3, 0.5), 2);
        assert_eq!(least_overlap(4, 0.5), 2);
        // With a set at least as large: 2 of 2, 2 of 3, 3 of 4 for 0.5; so
        // sets of 2 and 4 terms are posted for 1 and 2 of them, not 2 and 3.
        assert_eq!([2, 3, 4, 9].map(|n| least_overlap_with_larger(n, 0.5)), [2, 2, 3, 6]);
        assert_eq!(least_overlap_with_larger(5, 1.0), 5);
        // Sets of 2 and 3 terms need 2 shared for 0.5; of 4 and 4, 3 for 0.6.
        let share = |t: f64| t / (1.0 + t);
        assert!(reaches(2, (2, 3), share(0.5)) && !reaches(1, (2, 3), share(0.5)));
        assert!(reaches(3, (4, 4), share(0.6)) && !reaches(2, (4, 4), share(0.6)));
    }
}
