//! What one MinHash signature costs, by set size: the band keys of 2,000
//! random sets of each size under the default plan (32 × 4), twenty times.
//! Sparse sets are the ones densification fills (a post of ten terms leaves
//! about 118 of 128 bins empty).
//!
//!     cargo run --release --example minhash_bench

use std::time::Instant;

use neardup::minhash::MinHashPlan;

fn main() {
    let plan = MinHashPlan::default();
    let mut hasher = plan.hasher();
    println!("| terms | ns per set |");
    println!("|---|---|");
    for n in [1u64, 3, 6, 10, 15, 30, 50, 70, 100, 200, 400] {
        let sets: Vec<Vec<u64>> = (0..2000u64).map(|s| (0..n).map(|i| (s * 1_000_003 + i).wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect()).collect();
        let (mut keys, mut checksum) = (Vec::new(), 0u64);
        let started = Instant::now();
        for _ in 0..20 {
            for set in &sets {
                keys.clear();
                hasher.keys_into(set, &mut keys);
                checksum = checksum.wrapping_add(keys[0]);
            }
        }
        let ns = started.elapsed().as_nanos() as f64 / (20.0 * sets.len() as f64);
        // The checksum keeps the work from being optimised away.
        println!("| {n} | {ns:.0} |{}", if checksum == 0 { " (checksum 0)" } else { "" });
    }
}
