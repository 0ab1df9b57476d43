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
