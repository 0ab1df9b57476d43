//! Hot MinHash buckets on real text. A bucket of more than a few members
//! (`HOT_BUCKET` in src/job/runner.rs) gives only its pairs that pass the
//! Jaccard check, found by `jaccard_pairs`, instead of listing every pair.
//! The check must then keep exactly the pairs it keeps when every pair of
//! every bucket is listed. Checked on the real term sets and MinHash keys of
//! `weibo_reposts` posts (whose reposts and template comments fill buckets of
//! hundreds), through the pipeline's own statements (sql/57, 51, 52, 55; the
//! shared keys both ways, which must agree): as
//! a one-shot run, and as a night whose other half is stored. The pairs
//! found in one pass over the term sets (src/buckets.rs, what a run whose
//! work stays in memory does) must be the statements' candidates.

use std::collections::BTreeSet;
use std::path::Path;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::UInt64Type;
use neardup::buckets::{bucket_pairs, Listing, TermSets};
use neardup::job::sql::{render, Param, MINHASH_BUCKETS, MINHASH_CANDIDATES, SHARED_KEYS_BY_GROUP, SHARED_KEYS_BY_SORT, TERM_SETS, VERIFIED_PAIRS};

mod common;
use common::{neardup, ok, read_dir, shared_data, u64s};

/// What one way of finding MinHash pairs gave.
struct Found {
    /// Fingerprint pairs kept by the check.
    kept: BTreeSet<(u64, u64)>,
    /// Candidate pairs checked.
    candidates: usize,
    /// Buckets above the hot bound.
    hot_buckets: usize,
}

async fn minhash_pairs(fingerprints: &Path, split: bool, hot: u64, work: &Path) -> Found {
    let ctx = neardup::session::new_context(&Default::default()).unwrap();
    let all = fingerprints.display().to_string();
    neardup::storage::register_parquet(&ctx, "fingerprinted", &all).await.unwrap();
    // A one-shot run's fingerprints leave their MinHash keys NULL; a store's
    // runs keep the keys this computes.
    let keys = "CREATE VIEW everything AS SELECT * REPLACE (minhash_keys(term_set, 32, 4) AS minhash) FROM fingerprinted";
    ctx.sql(keys).await.unwrap().collect().await.unwrap();
    // A night: the posts of even fingerprint are tonight's, the rest stored.
    let (tonight, stored) = if split { ("simhash % 2 = 0", "simhash % 2 = 1") } else { ("true", "false") };
    for view in [
        format!("CREATE VIEW fingerprints AS SELECT * FROM everything WHERE {tonight}"),
        format!("CREATE VIEW stored AS SELECT * FROM everything WHERE {stored}"),
        // As a night's fetch keeps them: each stored fingerprint's first document.
        format!(
            "CREATE VIEW stored_term_sets AS SELECT simhash, source, id, term_set, minhash, shingles, vector FROM \
             (SELECT *, row_number() OVER (PARTITION BY simhash ORDER BY source, id) AS r FROM everything WHERE {stored}) \
             WHERE r = 1"
        ),
    ] {
        ctx.sql(&view).await.unwrap().collect().await.unwrap();
    }
    let run = |statement: String| {
        let ctx = ctx.clone();
        async move { ctx.sql(&statement).await.unwrap().collect().await.unwrap() }
    };
    let path = |name: &str| work.join(name).display().to_string();
    run(render(TERM_SETS, &[("tonight", Param::Ident("fingerprints")), ("path", Param::Text(&path("term_sets.parquet")))])).await;
    neardup::storage::register_parquet(&ctx, "term_sets", &path("term_sets.parquet")).await.unwrap();
    // The shared keys both ways (in memory, and under a memory limit or on
    // a cluster): the same keys and counts.
    for (statement, name) in [(SHARED_KEYS_BY_GROUP, "by_group"), (SHARED_KEYS_BY_SORT, "shared_minhash_keys")] {
        run(render(statement, &[("path", Param::Text(&path(&format!("{name}.parquet"))))])).await;
        neardup::storage::register_parquet(&ctx, name, &path(&format!("{name}.parquet"))).await.unwrap();
    }
    let compared = "SELECT CAST(count(*) AS BIGINT), \
                    CAST(sum(CASE WHEN g.key IS NULL OR s.key IS NULL OR g.members <> s.members THEN 1 ELSE 0 END) AS BIGINT) \
                    FROM by_group g FULL JOIN shared_minhash_keys s ON g.key = s.key";
    let compared = run(compared.to_string()).await;
    let count = |c: usize| compared[0].column(c).as_primitive::<datafusion::arrow::datatypes::Int64Type>().value(0);
    // The same keys, with the same counts.
    assert!(count(0) > 1000, "{} shared keys", count(0));
    assert_eq!(count(1), 0, "the two ways differ on {} of {} keys", count(1), count(0));
    run(render(MINHASH_BUCKETS, &[("path", Param::Text(&path("buckets/buckets.parquet")))])).await;
    neardup::storage::register_parquet(&ctx, "minhash_buckets", &path("buckets/buckets.parquet")).await.unwrap();
    let candidates = path("candidates/minhash.parquet");
    run(render(MINHASH_CANDIDATES, &[("path", Param::Text(&candidates)), ("hot", Param::Int(hot)), ("threshold", Param::Float(0.5))])).await;
    neardup::storage::register_parquet(&ctx, "candidates", &path("candidates/")).await.unwrap();
    // The same candidates found in one pass over the term sets, as a run
    // whose work stays in memory finds them (src/buckets.rs).
    let statements: BTreeSet<(u64, u64)> = pairs_of(&read_dir(&work.join("candidates")));
    assert_eq!(in_one_pass(&run("SELECT simhash, tonight, minhash, term_set FROM term_sets".into()).await, hot), statements, "hot bound {hot}");
    run(render(VERIFIED_PAIRS, &[("path", Param::Text(&path("near/near.parquet"))), ("measure", Param::Text("jaccard")), ("threshold", Param::Float(0.5))])).await;

    let kept = pairs_of(&read_dir(&work.join("near")));
    let candidates = u64s(&read_dir(&work.join("candidates")), "simhash_a").len();
    let buckets = read_dir(&work.join("buckets"));
    let (keys, members) = (u64s(&buckets, "key"), u64s(&buckets, "members"));
    let hot_buckets = keys.iter().zip(&members).filter(|(_, m)| m.unwrap() > 4).map(|(k, _)| k.unwrap()).collect::<BTreeSet<_>>().len();
    Found { kept, candidates, hot_buckets }
}

/// The pairs `(simhash_a, simhash_b)` of a table.
fn pairs_of(batches: &[RecordBatch]) -> BTreeSet<(u64, u64)> {
    let (a, b) = (u64s(batches, "simhash_a"), u64s(batches, "simhash_b"));
    a.into_iter().zip(b).map(|(a, b)| (a.unwrap(), b.unwrap())).collect()
}

/// [`neardup::buckets::bucket_pairs`] of term-set rows (simhash, tonight,
/// minhash, term_set), on three threads.
fn in_one_pass(batches: &[RecordBatch], hot: u64) -> BTreeSet<(u64, u64)> {
    let list = |b: &RecordBatch, c: usize, r: usize| -> Vec<u64> {
        let lists = b.column(c).as_list::<i32>();
        if lists.is_null(r) {
            return Vec::new();
        }
        lists.value(r).as_primitive::<UInt64Type>().values().to_vec()
    };
    let (mut fingerprints, mut tonight, mut keys, mut sets) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for b in batches {
        fingerprints.extend(b.column(0).as_primitive::<UInt64Type>().values().iter().copied());
        tonight.extend(b.column(1).as_boolean().iter().map(|t| t == Some(true)));
        keys.extend((0..b.num_rows()).map(|r| list(b, 2, r)));
        sets.extend((0..b.num_rows()).map(|r| list(b, 3, r)));
    }
    let (keys, sets): (Vec<&[u64]>, Vec<&[u64]>) = (keys.iter().map(Vec::as_slice).collect(), sets.iter().map(Vec::as_slice).collect());
    let rows = TermSets { fingerprints: &fingerprints, tonight: &tonight, keys: &keys, sets: &sets };
    let pairs = bucket_pairs(&rows, Listing { hot, threshold: 0.5 }, 3).expect("one row a fingerprint, one band a bucket");
    pairs.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_buckets_keep_the_pairs_of_listing_every_pair_on_real_text() {
    let Some(weibo) = shared_data("weibo_reposts.parquet") else { return };
    let dir = tempfile::tempdir().unwrap();
    // The first 40,000 posts by id, one row per id.
    let posts = dir.path().join("posts.parquet");
    let slice = format!(
        "COPY (SELECT id, text FROM (SELECT id, text, row_number() OVER (ORDER BY id, text) AS n FROM w) WHERE n <= 40000 \
         ORDER BY id, text) TO '{}' STORED AS PARQUET",
        posts.display()
    );
    ok(&neardup(&["sql", "-t", &format!("w={}", weibo.display()), "-c", &slice]));
    let out = dir.path().join("fp");
    let input = format!("w={}", posts.display());
    ok(&neardup(&["fingerprint", "-q", "-i", &input, "--duplicate-ids", "keep-first", "-o", out.to_str().unwrap()]));
    let fingerprints = out.join("fingerprints");

    for split in [false, true] {
        let work = |name: &str| {
            let p = dir.path().join(format!("{name}-{split}"));
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let hot = minhash_pairs(&fingerprints, split, 4, &work("hot")).await;
        let listed = minhash_pairs(&fingerprints, split, i64::MAX as u64, &work("listed")).await;
        // The test means something only if hot buckets are there and
        // listing their pairs costs many more candidates.
        assert!(hot.hot_buckets >= 100, "only {} hot buckets (split: {split})", hot.hot_buckets);
        assert!(listed.candidates > 2 * hot.candidates, "{} listed against {} (split: {split})", listed.candidates, hot.candidates);
        assert!(listed.kept.len() > 1000, "only {} pairs kept (split: {split})", listed.kept.len());
        assert_eq!(hot.kept, listed.kept, "hot buckets changed the pairs kept (split: {split})");
        eprintln!(
            "split {split}: {} hot buckets; {} candidates against {} listed; {} pairs kept by both",
            hot.hot_buckets,
            hot.candidates,
            listed.candidates,
            hot.kept.len()
        );
    }
}
