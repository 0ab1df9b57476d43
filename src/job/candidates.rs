//! Candidates, the check and components: the join's steps that one-shot and
//! store runs share. Each reads tonight's `fingerprints` (or `eligible`) and
//! the `stored` rows (none in a one-shot run).

use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::prelude::SessionContext;

use super::config::{Candidates, JoinOptions};
use super::progress::Progress;
use super::query::{collect, collect_with, column_u64, scalar_u64, with_wide_rows, work_table};
use super::sql::{self, render, table, Param, Statement};
use super::summary::{BandPlanSummary, Summary};
use super::in_memory::{self, HeldCandidates};
use super::report::NearMisses;
use super::tables::{components_parquet, create_view, view_without};
use super::KeepRule;
use crate::buckets::Listing;
use crate::minhash::MinHashPlan;
use crate::cluster::components;
use crate::error::{Error, Result};
use crate::join::{self, BandPlan, TooManyPairs};
use crate::sets::{MinShared, Verify};
use crate::storage::{register_parquet, OutputDir};

/// The view `eligible`: the fingerprints without the `rejected` documents
/// (kept in the work folder as `unconfirmed`).
pub(super) async fn eligible_without(ctx: &SessionContext, out: &OutputDir, rejected: &[(String, String)]) -> Result<()> {
    view_without(ctx, out, table::ELIGIBLE, table::FINGERPRINTS, "unconfirmed", rejected).await
}

/// What [`near_pairs`] found.
pub(super) struct NearPairs {
    pub plan: Option<BandPlan>,
    pub candidates: u64,
    /// Candidates that passed the check, before the duplication policy
    /// (all of them without a check).
    pub checked: u64,
    /// Pairs of fingerprints that passed the check and the policy (table
    /// `near_pairs`).
    pub edges: Vec<(u64, u64)>,
    /// The report's near misses, when the check in the client counted them
    /// (else the report counts them, sql/97_near_misses.sql).
    pub near_misses: Option<NearMisses>,
}

impl NearPairs {
    /// What the check and the policy kept, for the progress line: the
    /// candidates checked per pair kept is the join's own measure of waste.
    pub(super) fn describe_check(&self, join: &JoinOptions) -> String {
        let checked = match join.verify.measure() {
            Some((measure, threshold)) => format!("{} of {} candidates pass the check ({measure} >= {threshold})", self.checked, self.candidates),
            None => format!("{} candidates", self.candidates),
        };
        match join.min_shared() {
            Some(policy) => format!("{checked}, {} of them share >= {} of the shorter text", self.edges.len(), policy.value()),
            None => checked,
        }
    }

    /// Label every fingerprint of a pair with its connected component, into
    /// the work table `components` (`simhash`, `cluster_id`); returns the
    /// summary fields of the join, which one-shot and store runs share.
    pub(super) async fn into_components(
        self,
        ctx: &SessionContext,
        out: &OutputDir,
        join: &JoinOptions,
        keep: &KeepRule,
        unconfirmed: u64,
    ) -> Result<Summary> {
        let summary = Summary {
            neardup_version: env!("CARGO_PKG_VERSION").into(),
            near_fingerprint_pairs: self.edges.len() as u64,
            checked_pairs: self.checked,
            max_hamming: join.max_hamming,
            band_plan: self.plan.as_ref().map(|plan| BandPlanSummary::of(plan, join.blocks.is_none())),
            candidates: candidates_name(join),
            candidate_pairs: self.candidates,
            verify: join.verify.to_string(),
            min_shared: join.min_shared(),
            unconfirmed_copies: unconfirmed,
            keep: keep.to_string(),
            near_misses: self.near_misses,
            ..Summary::default()
        };
        out.put("_work/components.parquet", components_parquet(&components(self.edges))?).await?;
        register_parquet(ctx, table::COMPONENTS, &out.staged("_work/components.parquet")).await?;
        Ok(summary)
    }
}

/// Members above which a MinHash bucket is *hot*: its pairs are found by an
/// exact Jaccard join (`jaccard_pairs`) rather than listed. Below it, listing
/// is cheaper than gathering the members' term sets. Measured on
/// `weibo_reposts` (52_minhash_candidates.sql alone; candidates, seconds):
/// 2 members 428,495 in 1.03 s, 4: 570,624 in 0.79 s, 8: 784,598 in 1.05 s,
/// 16: 1,096,441 in 1.18 s, 64: 2,110,405 in 1.86 s; listing every bucket
/// gave 11.6 million.
const HOT_BUCKET: u64 = 4;

/// Rows per batch, at least, of the SimHash join (sql/50_near_pairs.sql). It
/// sorts both sides by bucket, spilling: the engine sorts each batch it
/// holds and merges them, so longer batches leave fewer runs to merge. 10^7
/// fingerprints under `--memory-limit 2G`: the statement alone 75.1 s with
/// 8,192 rows a batch, 49.9 s with 65,536 (peak 0.96 → 1.00 GB); the whole
/// `neardup pairs` 88.6 → 61.3 s side by side; 131,072 rows: 61.2 s at 1.42
/// GB, 262,144: 62.4 s at 2.9 GB.
const SORTED_BATCH_ROWS: usize = 65_536;

/// Partitions, at least, of the SimHash join under a memory limit. With as
/// many as cores, a partition whose sort spills holds up the rows meant for
/// it (the plan's senders waited 15-20 s of the statement's 53 s) and the
/// cores wait; with more, they sort the other partitions meanwhile. 10^7
/// fingerprints under `--memory-limit 2G` on 2 cores, with SORTED_BATCH_ROWS:
/// 2 partitions 60.6 s (peak 1.03 GB), 4: 54.7 s (1.26 GB), 8: 50.7 s (1.94
/// GB). With one partition the engine would plan a hash join, which cannot
/// spill, and run out of memory.
const JOIN_PARTITIONS: usize = 4;

/// Candidate pairs from the SimHash banded join and MinHash bands (the
/// statements given: one run's, or a store run's), one file each in
/// `_work/candidates/`, checked on their term sets when asked; registers
/// `candidates` and `near_pairs`. The band plan is chosen for `distinct`
/// fingerprints. The stage `join` ends (with `describe(candidates,
/// sources)`) before the check begins.
pub(super) async fn near_pairs(
    ctx: &SessionContext,
    join: &JoinOptions,
    out: &OutputDir,
    distinct: u64,
    progress: &mut Progress,
    describe: impl Fn(u64, &str) -> String,
) -> Result<NearPairs> {
    let k = join.max_hamming;
    let mut plan = None;
    let mut sources = Vec::new();
    if join.candidates.simhash() {
        let p = match join.blocks {
            Some(m) => BandPlan::new(k, m),
            None => BandPlan::auto(k, distinct),
        }
        .map_err(Error::input)?;
        simhash_pairs(ctx, &p, &out.staged("_work/candidates/simhash.parquet"), distinct).await?;
        sources.push(format!("k = {k}, m = {}, {} bands", p.m, p.bands()));
        plan = Some(p);
    }
    let mut minhash = None;
    if join.candidates.minhash() {
        minhash = minhash_candidates(ctx, join, out).await?;
        sources.push(format!("MinHash {}", join.minhash));
    }
    let candidates_path = out.staged("_work/candidates/");
    // In memory, the client reads the candidates once, to count and to check.
    let held = match crate::session::work_in_memory(ctx) {
        true => Some(in_memory::held_candidates(ctx, (&candidates_path, join.candidates.simhash()), minhash).await?),
        false => {
            register_parquet(ctx, table::CANDIDATES, &candidates_path).await?;
            None
        }
    };
    let candidates = match &held {
        Some(held) => held.pairs.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)).count() as u64,
        None => scalar_u64(ctx, "SELECT count(*) FROM (SELECT DISTINCT simhash_a, simhash_b FROM candidates)").await?,
    };
    let sources = sources.join("; ");
    progress.done("join", describe(candidates, &sources));
    progress.begin("verify", None);
    let (checked, near_misses) = match join.verify.measure() {
        // Unchecked candidates are the pairs; their shares of shared text
        // are measured on the anchors (70_pairs.sql).
        None => {
            let unchecked = "SELECT *, CAST(NULL AS DOUBLE) AS shared_a, CAST(NULL AS DOUBLE) AS shared_b FROM candidates";
            create_view(ctx, table::NEAR_PAIRS, unchecked).await?;
            (candidates, None)
        }
        Some((measure, threshold)) => {
            let checked = check(ctx, out, held.as_ref(), (join.verify, measure, threshold)).await?;
            let policy = [("min_shared", Param::FloatOrNull(join.min_shared().map(MinShared::value)))];
            create_view(ctx, table::NEAR_PAIRS, &render(sql::KEPT_PAIRS, &policy)).await?;
            checked
        }
    };
    let mut edges = Vec::new();
    for b in &collect(ctx, "SELECT simhash_a, simhash_b FROM near_pairs").await? {
        let (a, c) = (column_u64(b, 0)?, column_u64(b, 1)?);
        edges.extend(a.values().iter().copied().zip(c.values().iter().copied()));
    }
    Ok(NearPairs { plan, candidates, checked, edges, near_misses })
}

/// The SimHash pairs of `plan` into the file `path`. In memory, sorting
/// each band (sql/50_near_pairs_by_sort.sql) finds them faster than a hash
/// join of every band row. Under a memory limit too, when the limit has
/// room for the sort ([`SortRoom`]); else, or when there are more pairs
/// than that room holds, the join of sql/50_near_pairs.sql, which spills.
/// On a cluster the client's pool has no limit and the join spreads over
/// the executors.
async fn simhash_pairs(ctx: &SessionContext, plan: &BandPlan, path: &str, distinct: u64) -> Result<()> {
    let params = [("path", Param::Text(path)), ("k", Param::Int(u64::from(plan.k))), ("m", Param::Int(u64::from(plan.m)))];
    let by_sort = |max_pairs: Option<u64>| render(sql::NEAR_PAIRS_BY_SORT, &[&params[..], &[("max_pairs", Param::IntOrNull(max_pairs))]].concat());
    if crate::session::work_in_memory(ctx) {
        return collect(ctx, &by_sort(None)).await.map(drop);
    }
    if let Some(room) = SortRoom::reserve(ctx, plan, distinct).await? {
        match collect(ctx, &by_sort(Some(room.max_pairs))).await {
            Ok(_) => return Ok(()),
            Err(e) if e.caused_by::<TooManyPairs>() => {
                log::debug!("SimHash pairs: more than {} by sorting in memory; joining instead", room.max_pairs);
            }
            Err(e) => return Err(e),
        }
    }
    let state = ctx.state();
    let rows = state.config().batch_size().max(SORTED_BATCH_ROWS).to_string();
    let partitions = state.config().target_partitions().max(JOIN_PARTITIONS).to_string();
    let settings = [("datafusion.execution.batch_size", rows.as_str()), ("datafusion.execution.target_partitions", partitions.as_str())];
    collect_with(ctx, &settings, &render(sql::NEAR_PAIRS, &params)).await.map(drop)
}

/// Memory set aside under a limit for the SimHash pairs by sorting, held
/// from the memory pool while the statement runs (the sort's vectors are
/// the function's own, which the pool does not see; the lists it is given
/// are the aggregate's, which the pool does): the sort's work
/// ([`crate::join::sort_bytes`]) and room for `max_pairs` pairs, in at
/// most half the limit, so that the aggregate, the scan and the writer keep
/// the rest. 10^7 fingerprints on two cores need 0.9 GB: under
/// `--memory-limit 2G` they sort (`neardup pairs` 15.0 s), under 1G they
/// join (64.2 s).
struct SortRoom {
    max_pairs: u64,
    _reservation: MemoryReservation,
}

/// The fewest pairs worth sorting for: with less room, join.
const MIN_SORTED_PAIRS: u64 = 1 << 16;

impl SortRoom {
    async fn reserve(ctx: &SessionContext, plan: &BandPlan, distinct: u64) -> Result<Option<SortRoom>> {
        let pool = ctx.runtime_env().memory_pool.clone();
        let MemoryLimit::Finite(limit) = pool.memory_limit() else {
            return Ok(None);
        };
        let rows = scalar_u64(ctx, "SELECT (SELECT count(simhash) FROM fingerprints) + (SELECT count(simhash) FROM stored)").await?;
        let work = join::sort_bytes(plan, rows, distinct);
        let room = (limit as u64 / 2).min(work.saturating_add(distinct.max(MIN_SORTED_PAIRS).saturating_mul(join::BYTES_PER_PAIR)));
        let max_pairs = room.saturating_sub(work) / join::BYTES_PER_PAIR;
        if max_pairs < MIN_SORTED_PAIRS {
            log::debug!("SimHash pairs: {rows} fingerprints need {work} bytes to sort, more than the limit has room for; joining");
            return Ok(None);
        }
        let reservation = MemoryConsumer::new("SimHash pairs by sorting").register(&pool);
        if reservation.try_grow(room as usize).is_err() {
            log::debug!("SimHash pairs: the memory pool cannot set {room} bytes aside; joining");
            return Ok(None);
        }
        Ok(Some(SortRoom { max_pairs, _reservation: reservation }))
    }
}

/// The check of every candidate, into the table `checked_pairs`; returns
/// how many passed. By the client when it holds the candidates (`held`, the
/// work in memory), which also counts the report's near misses, else by
/// sql/55_verified_pairs.sql into `_work/checked_pairs.parquet`.
async fn check(ctx: &SessionContext, out: &OutputDir, held: Option<&HeldCandidates>, (verify, measure, threshold): (Verify, &str, f64)) -> Result<(u64, Option<NearMisses>)> {
    if let Some(held) = held {
        if let Some(done) = in_memory::check(ctx, held, verify).await? {
            return Ok((done.passed, Some(done.near_misses)));
        }
    }
    let path = out.staged("_work/checked_pairs.parquet");
    let params = [("path", Param::Text(&path)), ("measure", Param::Text(measure)), ("threshold", Param::Float(threshold))];
    // Each candidate meets both term sets: wide rows.
    with_wide_rows(ctx, collect(ctx, &render(sql::VERIFIED_PAIRS, &params))).await?;
    register_parquet(ctx, table::CHECKED_PAIRS, &path).await?;
    Ok((scalar_u64(ctx, "SELECT count(*) FROM checked_pairs").await?, None))
}

/// The table `term_sets` (sql/57_term_sets.sql) of tonight's rows (the
/// view `tonight`) and the stored ones, written to the work folder. Its rows
/// are wide (term sets, sketches, vectors): 3,000 long articles as a store's
/// first night under `--memory-limit 256M` ran out of memory in its sort.
pub(super) async fn term_sets(ctx: &SessionContext, out: &OutputDir, tonight: &str) -> Result<()> {
    let path = out.staged("_work/term_sets.parquet");
    let statement = render(sql::TERM_SETS, &[("tonight", Param::Ident(tonight)), ("path", Param::Text(&path))]);
    with_wide_rows(ctx, work_table(ctx, &statement, &path, table::TERM_SETS)).await
}

/// The MinHash candidates: found by the client when the run's work stays in
/// memory (src/buckets.rs), and returned; else, or when the client cannot,
/// by sql/51_minhash_buckets.sql and sql/52_minhash_candidates.sql, into
/// `_work/candidates/`.
async fn minhash_candidates(ctx: &SessionContext, join: &JoinOptions, out: &OutputDir) -> Result<Option<Vec<(u64, u64)>>> {
    // Hot buckets give only pairs that pass a Jaccard check; other
    // checks take every pair of every bucket.
    let (hot, threshold) = match join.verify {
        Verify::Jaccard(t) => (HOT_BUCKET, t),
        _ => (i64::MAX as u64, 1.0),
    };
    if crate::session::work_in_memory(ctx) {
        if let Some(pairs) = in_memory::bucket_candidates(ctx, Listing { hot, threshold }).await? {
            return Ok(Some(pairs));
        }
    }
    let buckets = out.staged("_work/minhash_buckets.parquet");
    // In memory, a radix sort finds the shared keys in less memory than a
    // GROUP BY; the GROUP BY spills, and spreads over a cluster.
    let shared = out.staged("_work/shared_minhash_keys.parquet");
    let by = in_memory_or(ctx, sql::SHARED_KEYS_BY_SORT, sql::SHARED_KEYS_BY_GROUP);
    work_table(ctx, &render(by, &[("path", Param::Text(&shared))]), &shared, table::SHARED_MINHASH_KEYS).await?;
    work_table(ctx, &render(sql::MINHASH_BUCKETS, &[("path", Param::Text(&buckets))]), &buckets, table::MINHASH_BUCKETS).await?;
    let path = out.staged("_work/candidates/minhash.parquet");
    let params = [("path", Param::Text(&path)), ("hot", Param::Int(hot)), ("threshold", Param::Float(threshold))];
    // Its hot buckets' members come with their term sets: wide rows.
    with_wide_rows(ctx, collect(ctx, &render(sql::MINHASH_CANDIDATES, &params))).await?;
    Ok(None)
}

/// `sort`, a statement that holds its input in memory, when the run's work
/// stays in memory; else `spilling`, its twin that spills and spreads over a
/// cluster (the same rows).
fn in_memory_or(ctx: &SessionContext, sort: Statement, spilling: Statement) -> Statement {
    match crate::session::work_in_memory(ctx) {
        true => sort,
        false => spilling,
    }
}

/// The summary's name of where candidates come from.
pub(super) fn candidates_name(join: &JoinOptions) -> String {
    match join.candidates {
        Candidates::Simhash => "simhash".to_string(),
        Candidates::Minhash => format!("minhash:{}", join.minhash),
        Candidates::Both => format!("simhash+minhash:{}", join.minhash),
    }
}

/// The SQL of a `minhash` column: the band keys of the term set in column
/// `set` with `plan`, or NULL without MinHash candidates.
pub(super) fn minhash_expression(plan: Option<MinHashPlan>, set: &str) -> String {
    match plan {
        Some(p) => format!("minhash_keys({set}, {}, {})", p.bands, p.rows),
        None => "CAST(NULL AS BIGINT UNSIGNED[])".to_string(),
    }
}
