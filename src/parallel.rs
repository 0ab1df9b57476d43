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
}
