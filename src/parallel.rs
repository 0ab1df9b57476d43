//! Work cut into parts of about equal cost, each part on a thread of its
//! own: what the client does itself beside the engine (the MinHash pass,
//! the check of shared copies, the sorts of held partitions).

/// `0..n` cut into at most `parts` ranges of about equal `cost`.
pub fn cut(n: usize, parts: usize, cost: impl Fn(usize) -> u64) -> Vec<std::ops::Range<usize>> {
    let total: u64 = (0..n).map(&cost).sum();
    let parts = parts.max(1) as u64;
    let (mut ranges, mut start, mut done) = (Vec::new(), 0, 0u64);
    for i in 0..n {
        done += cost(i);
        // Range r ends once the items so far cost (r + 1) / parts of the whole.
        if done * parts >= (ranges.len() as u64 + 1) * total && ranges.len() as u64 + 1 < parts {
            ranges.push(start..i + 1);
            start = i + 1;
        }
    }
    ranges.push(start..n);
    ranges
}

/// `work` applied to each of `parts` on a thread of its own, the results
/// in the parts' order.
pub fn on_threads<P: Send, T: Send>(parts: Vec<P>, work: impl Fn(P) -> T + Sync) -> Vec<T> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = parts.into_iter().map(|p| scope.spawn(|| work(p))).collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// How many parts a thread's share of work is cut in for [`claimed`].
pub const PARTS_A_THREAD: usize = 8;

/// `work` applied to each of `parts` by at most `threads` threads, each
/// taking the next part when it is done with one; the results in the parts'
/// order. Work cut into more parts than threads ends together on every
/// thread even where [`cut`]'s estimate of a part's cost is off: the MinHash
/// pass's hot buckets, whose check costs less than the pairs of their
/// members, left one of two threads working alone for 150 ms of Weibo's.
pub fn claimed<P: Send, T: Send>(parts: Vec<P>, threads: usize, work: impl Fn(P) -> T + Sync) -> Vec<T> {
    let threads = threads.clamp(1, parts.len().max(1));
    let queue = std::sync::Mutex::new(parts.into_iter().enumerate());
    // The lock is held only to take a part: a panic in `work` cannot poison it.
    let next = || queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next();
    let done = on_threads(vec![(); threads], |()| {
        let mut done = Vec::new();
        while let Some((i, part)) = next() {
            done.push((i, work(part)));
        }
        done
    });
    let mut done: Vec<(usize, T)> = done.into_iter().flatten().collect();
    done.sort_unstable_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, result)| result).collect()
}

/// The items of `runs`, each run sorted, in order and each once, merged by
/// `parts` threads: every run is cut at the same values ([`bounds`]), so
/// that each thread merges one range of values, and equal items meet on one
/// thread. Merged on one thread, the MinHash pass's runs of pairs (Weibo:
/// 575,170 pairs in 16 runs) kept the other core idle for 40–60 ms.
pub fn merge_distinct<T: Ord + Copy + Send + Sync, R: AsRef<[T]> + Sync>(runs: &[R], parts: usize) -> Vec<T> {
    let bounds = bounds(runs, parts);
    let parts = bounds.len() + 1;
    // Range p: the items at least bound p − 1 and less than bound p.
    let ranges = (0..parts).map(|p| {
        let slices: Vec<&[T]> = runs
            .iter()
            .map(|run| {
                let run = run.as_ref();
                let start = p.checked_sub(1).map_or(0, |b| run.partition_point(|x| *x < bounds[b]));
                let end = bounds.get(p).map_or(run.len(), |bound| run.partition_point(|x| x < bound));
                &run[start..end]
            })
            .collect();
        slices
    });
    let merged = on_threads(ranges.collect(), |slices: Vec<&[T]>| {
        // The stable sort finds the runs and merges them.
        let mut items = slices.concat();
        items.sort();
        items.dedup();
        items
    });
    merged.concat()
}

/// Items of each run [`bounds`] looks at, for every part asked for.
const SAMPLES_A_PART: usize = 64;

/// Values that cut the items of `runs` (each sorted) into at most `parts`
/// ranges of about as many items: every run's items at evenly spaced places,
/// each standing for the items after it up to the next, sorted, and the ones
/// at each share of all the items. Cut at evenly spaced items of the longest
/// run alone, Weibo's MinHash pairs (a hot bucket's many pairs with one
/// fingerprint in the longest run) were merged in ranges of 8 and 28 ms.
fn bounds<T: Ord + Copy, R: AsRef<[T]>>(runs: &[R], parts: usize) -> Vec<T> {
    let parts = parts.max(1);
    let mut samples: Vec<(T, usize)> = Vec::new();
    for run in runs.iter().map(AsRef::as_ref) {
        let step = (run.len() / (SAMPLES_A_PART * parts)).max(1);
        samples.extend(run.chunks(step).map(|chunk| (chunk[0], chunk.len())));
    }
    samples.sort_unstable_by_key(|&(item, _)| item);
    let total: usize = samples.iter().map(|&(_, items)| items).sum();
    let mut bounds = Vec::with_capacity(parts.saturating_sub(1));
    let mut before = 0;
    for (item, items) in samples {
        // Bound p is the first item with at least p / parts of all before it.
        while bounds.len() + 1 < parts && before * parts >= (bounds.len() + 1) * total {
            bounds.push(item);
        }
        before += items;
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_cut_in_ranges_of_about_equal_cost() {
        assert_eq!(cut(10, 2, |_| 1), vec![0..5, 5..10]);
        assert_eq!(cut(4, 2, |i| if i == 0 { 9 } else { 1 }), vec![0..1, 1..4]);
        assert_eq!(cut(0, 3, |_| 1), vec![0..0]);
        assert_eq!(cut(3, 8, |_| 1).iter().map(|r| r.len()).sum::<usize>(), 3);
    }

    #[test]
    fn runs_merge_into_their_distinct_items_in_order_whatever_the_threads() {
        let runs = vec![vec![1, 3, 3, 5, 9], vec![], vec![2, 3, 4, 9, 10, 11], vec![0, 9]];
        for parts in [0, 1, 2, 3, 8, 50] {
            assert_eq!(merge_distinct(&runs, parts), [0, 1, 2, 3, 4, 5, 9, 10, 11], "{parts} threads");
        }
        // Bounds that repeat (the longest run holds one value) leave empty ranges.
        assert_eq!(merge_distinct(&[vec![7; 10], vec![6, 7, 8]], 4), [6, 7, 8]);
        assert_eq!(merge_distinct::<u64, Vec<u64>>(&[], 2), Vec::<u64>::new());
    }

    #[test]
    fn runs_are_cut_into_ranges_of_about_as_many_items() {
        // The longest run holds one value many times (a hub's pairs); the
        // others spread over every value.
        let hub: Vec<u64> = vec![500_000; 40_000];
        let spread: Vec<Vec<u64>> = (0..4u64).map(|r| (0..30_000u64).map(|i| i * 37 + r).collect()).collect();
        let mut runs = spread.clone();
        runs.push(hub);
        let all: usize = runs.iter().map(Vec::len).sum();
        for parts in [2, 3, 8] {
            let cut = bounds(&runs, parts);
            assert_eq!(cut.len(), parts - 1);
            assert!(cut.windows(2).all(|w| w[0] <= w[1]));
            // Items of each range: none holds more than its share and a
            // half, but the hub's, which cannot be cut.
            let mut edges = vec![0u64];
            edges.extend(&cut);
            edges.push(u64::MAX);
            for w in edges.windows(2) {
                let items: usize = runs.iter().map(|r| r.iter().filter(|&&x| x >= w[0] && x < w[1]).count()).sum();
                let hub_items = if (w[0]..w[1]).contains(&500_000) { 40_000 } else { 0 };
                assert!(items - hub_items <= all * 3 / (2 * parts), "{parts} parts: {items} items in {w:?}");
            }
        }
        assert_eq!(bounds::<u64, Vec<u64>>(&[], 4), Vec::<u64>::new());
        assert_eq!(bounds(&[vec![1u64, 2, 3, 4]], 2), vec![3]);
    }

    #[test]
    fn results_come_in_the_parts_order() {
        assert_eq!(on_threads(vec![3, 1, 2], |p| p * 10), [30, 10, 20]);
    }

    #[test]
    fn claimed_parts_are_each_done_once_and_come_in_order() {
        let parts: Vec<u64> = (0..100).collect();
        // Parts that take longer than others, so that threads take them out of turn.
        let work = |p: u64| {
            std::thread::sleep(std::time::Duration::from_micros((p % 7) * 50));
            (p * 3, std::thread::current().id())
        };
        let done = claimed(parts, 3, work);
        assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), (0..100).map(|p| p * 3).collect::<Vec<_>>());
        assert!(done.iter().map(|d| d.1).collect::<std::collections::HashSet<_>>().len() <= 3);
        assert_eq!(claimed(Vec::<u8>::new(), 4, |p| p), Vec::<u8>::new());
        assert_eq!(claimed(vec![5], 0, |p| p + 1), [6]);
    }
}
