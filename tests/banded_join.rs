//! The banded self-join equals brute force: on random fingerprints with
//! planted pairs at every distance 0..=k+1, for several (k, m), it reports
//! exactly the pairs within k, each once.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use neardup::job::sql::{render, Param, Statement, NEAR_PAIRS, NEAR_PAIRS_BY_SORT};
use neardup::join::{brute_force_pairs, BandPlan};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

/// Random fingerprints plus, for each distance 0..=max_d, `per_distance`
/// planted partners of random fingerprints, and a few chains.
fn planted(n: usize, max_d: u32, per_distance: usize, seed: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fps: Vec<u64> = (0..n).map(|_| rng.random()).collect();
    for d in 0..=max_d {
        for _ in 0..per_distance {
            let base = fps[rng.random_range(0..n)];
            let mut bits = BTreeSet::new();
            while bits.len() < d as usize {
                bits.insert(rng.random_range(0..64u32));
            }
            fps.push(bits.iter().fold(base, |x, b| x ^ (1u64 << b)));
        }
    }
    // A chain of close fingerprints, so some have several neighbours.
    let mut x: u64 = rng.random();
    for _ in 0..20 {
        x ^= 1u64 << rng.random_range(0..64u32);
        fps.push(x);
    }
    fps
}

/// The pairs `statement` (the join, or the sort in memory) finds.
async fn banded_pairs(statement: Statement, fps: &[u64], k: u32, m: u32, partitions: usize) -> BTreeSet<(u64, u64, u32)> {
    let ctx = neardup::session::new_context(&neardup::session::EngineOptions {
        target_partitions: Some(partitions),
        ..Default::default()
    })
    .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("source", DataType::Utf8, false),
        Field::new("id", DataType::Utf8, false),
        Field::new("simhash", DataType::UInt64, true),
    ]));
    // Split the rows over several batches so partitions see different parts.
    let batches: Vec<Vec<RecordBatch>> = fps
        .chunks(fps.len().div_ceil(partitions))
        .enumerate()
        .map(|(c, chunk)| {
            let ids: Vec<String> = (0..chunk.len()).map(|i| format!("{c}-{i}")).collect();
            vec![RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(vec!["s"; chunk.len()])),
                    Arc::new(StringArray::from(ids)),
                    Arc::new(UInt64Array::from(chunk.to_vec())),
                ],
            )
            .unwrap()]
        })
        .collect();
    ctx.register_table("fingerprints", Arc::new(MemTable::try_new(schema, batches).unwrap())).unwrap();
    // A one-shot run: nothing stored (the statement joins tonight with `stored` too).
    ctx.sql("CREATE VIEW stored AS SELECT * FROM fingerprints WHERE false").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("near/near.parquet").display().to_string();
    let mut params = vec![("path", Param::Text(&path)), ("k", Param::Int(u64::from(k))), ("m", Param::Int(u64::from(m)))];
    if statement.params.contains(&"max_pairs") {
        params.push(("max_pairs", Param::IntOrNull(None)));
    }
    let statement = render(statement, &params);
    ctx.sql(&statement).await.unwrap().collect().await.unwrap();
    let batches = common::read_dir(&dir.path().join("near"));
    let (a, b, h) = (common::u64s(&batches, "simhash_a"), common::u64s(&batches, "simhash_b"), common::u64s(&batches, "hamming"));
    let found: Vec<(u64, u64, u32)> = (0..a.len()).map(|i| (a[i].unwrap(), b[i].unwrap(), h[i].unwrap() as u32)).collect();
    let set: BTreeSet<_> = found.iter().copied().collect();
    assert_eq!(set.len(), found.len(), "a pair was reported twice (k = {k}, m = {m})");
    set
}

fn brute(fps: &[u64], k: u32) -> BTreeSet<(u64, u64, u32)> {
    let mut distinct: Vec<u64> = fps.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    brute_force_pairs(&distinct, k).into_iter().map(|(i, j, d)| (distinct[i], distinct[j], d)).collect()
}

#[tokio::test]
async fn banded_join_equals_brute_force() {
    for (seed, (k, m)) in [(0, 1), (1, 2), (2, 3), (3, 4), (3, 5), (3, 6), (4, 6), (5, 7), (6, 8)].into_iter().enumerate() {
        let fps = planted(1500, k + 1, 15, seed as u64);
        let expected = brute(&fps, k);
        let got = banded_pairs(NEAR_PAIRS, &fps, k, m, 3).await;
        assert_eq!(got, expected, "banded join differs from brute force at k = {k}, m = {m}");
        let sorted = banded_pairs(NEAR_PAIRS_BY_SORT, &fps, k, m, 3).await;
        assert_eq!(sorted, expected, "banded pairs in memory differ from brute force at k = {k}, m = {m}");
        // The planted pairs at every distance up to k must be among them.
        for d in 1..=k {
            assert!(expected.iter().any(|p| p.2 == d), "no planted pair at distance {d} (k = {k})");
        }
        assert!(got.iter().all(|p| p.2 <= k));
    }
}

#[tokio::test]
async fn auto_plan_and_partitioning_do_not_change_pairs() {
    let fps = planted(3000, 4, 25, 42);
    let expected = brute(&fps, 3);
    assert!(expected.len() >= 100, "the test needs many planted pairs, got {}", expected.len());
    let plan = BandPlan::auto(3, fps.len() as u64).unwrap();
    for partitions in [1, 4] {
        assert_eq!(banded_pairs(NEAR_PAIRS, &fps, 3, plan.m, partitions).await, expected, "{partitions} partitions");
        assert_eq!(banded_pairs(NEAR_PAIRS_BY_SORT, &fps, 3, plan.m, partitions).await, expected, "{partitions} partitions, in memory");
    }
}
