//! Nightly runs against a fingerprint store.
//!
//! A store is a folder (local or on an object store) that grows by one
//! partition per run:
//!
//! ```text
//! STORE/store.json                     settings, IDF model, keep rule (written once)
//! STORE/idf/model.parquet              the frozen IDF model (hash, term, df)
//! STORE/runs/run=ID/part-00000.parquet the run's documents, sorted by fingerprint: fingerprints,
//!                                      MinHash band keys, term sets, representatives
//! STORE/runs/run=ID/_SUCCESS           written last: a run without it does not exist
//! ```
//!
//! A run with id ID reads the committed runs with smaller ids (in string
//! order: dates sort), skips input documents they already hold, finds pairs
//! with at least one of tonight's fingerprints (never re-joining the store
//! with itself), assigns representatives without changing any earlier run
//! (sql/94_store_run.sql), then commits its partition, and only then the
//! night's report. Rerunning an id recomputes the same partition from the
//! same earlier runs and replaces it: a retried run never duplicates entries.
//!
//! What a night costs per stored document is one sequential read of its
//! compact columns (`doc_key`, `simhash`, `minhash`): the probe
//! (sql/89_store_probe.sql) finds the stored fingerprints tonight touches,
//! and only their rows are fetched, page by page through the page index
//! ([`crate::storage::fetch`]). Nothing stored is recomputed or rewritten.

use datafusion::prelude::SessionContext;

use super::line_set::LineSet;
use super::candidates::{eligible_without, near_pairs, term_sets, NearPairs};
use super::config::JoinOptions;
use super::context::{Job, Run};
use super::stages::Idf;
use super::progress::Progress;
use super::query::{collect, column_u64, scalar_u64, strings, with_settings, with_wide_rows, work_table, LATE_MATERIALIZATION};
use super::sql::{self, render, table, Param};
use super::store_run::StoreRun;
use super::summary::{content_identity, SharedText, StoreReads, StoreSummary, Summary};
use super::tables::{create_view, materialize, pairs_table, seal, view_without, FileMetadata};
use super::touched::fetch_touched;
use crate::error::{Error, Result};
use crate::sets::MinShared;
use crate::text::shingles::SKETCH_SCHEME;
use crate::storage::{literal, read_object, register_parquet, OutputDir};

/// Make `documents` the input documents (view `documents_input`) less
/// those an earlier run holds (`already`, from [`StoreRun::already_stored`],
/// kept in the work folder for the anti-join).
pub async fn documents_not_stored(ctx: &SessionContext, out: &OutputDir, already: &[(String, String)]) -> Result<()> {
    if already.is_empty() {
        create_view(ctx, table::DOCUMENTS, "SELECT * FROM documents_input").await?;
        return Ok(());
    }
    view_without(ctx, out, table::DOCUMENTS, table::DOCUMENTS_INPUT, "already_stored", already).await
}

/// The store a night runs against, and what the inputs stage found of it.
pub(super) struct NightStore<'a> {
    pub store: &'a mut StoreRun,
    pub already_stored: u64,
    /// What finding the already stored documents read.
    pub reads: StoreReads,
    /// The store's lease, checked before the run is committed (none in tests of the stages alone).
    pub lease: Option<&'a crate::storage::lease::Lease>,
}

/// Stage `night`: pairs with tonight's fingerprints, representatives, the
/// run's partition (committed here) and the night's report (staged in the
/// run's output, committed by the caller); `idf` is what the fingerprints
/// were weighted with, `boilerplate` the lines segmentation dropped (a new
/// store freezes both). The candidates, the check and the components are
/// those of a one-shot run ([`near_pairs`]); a night differs in what it
/// reads (`stored`, [`fetch_touched`]) and what it writes (a run).
pub(super) async fn store_stages(run: &mut Run<'_>, night: NightStore<'_>, idf: &Idf, boilerplate: Option<&LineSet>) -> Result<Summary> {
    let (ctx, out, job) = (run.ctx, run.out, run.job);
    let progress = &mut *run.progress;
    let store = night.store;
    let join = &job.spec.join;
    let keep_key = job.keep_key();
    progress.begin("join", None);
    let stored_documents =
        if store.is_first() { 0 } else { scalar_u64(ctx, "SELECT count(*) FROM stored_runs").await? };
    let mut reads = night.reads.clone();
    fetch_touched(ctx, store, join, out, keep_key, stored_documents, &mut reads).await?;
    let unconfirmed = tonight_eligible(ctx, join, out).await?;

    let found = tonight_pairs(ctx, join, out, unconfirmed, progress).await?;
    let joined = found.into_components(ctx, out, join, &job.keep, unconfirmed).await?;

    let created = store.manifest.is_none();
    let model = idf.model.as_ref().map(|m| m.location.as_str());
    let idf_n_docs = idf.summary.as_ref().map_or(0, |i| i.n_docs);
    let (run_out, meta) = stage_run(ctx, store, job, (model, idf_n_docs), boilerplate).await?;
    progress.done("representatives", format!("run '{}' staged", store.run_id));
    progress.begin("store", None);
    let report = night_report(ctx, out, &meta, &store.run_id).await?;

    // Commit: the store's model and manifest first (for its first run), then
    // the run, then (the caller) the report.
    if created {
        store.create(ctx, (model, idf_n_docs), boilerplate, &job.settings, &job.keep).await?;
    }
    let store_summary = StoreSummary {
        url: store.url().to_string(),
        run_id: store.run_id.clone(),
        earlier_runs: store.earlier_runs(),
        stored_documents,
        already_stored: night.already_stored,
        added: report.added,
        duplicates_of_stored: report.of_stored,
        idf_model: meta.idf_model.clone().unwrap_or_default(),
        created,
        read: reads,
    };
    if let Some(lease) = night.lease {
        lease.check_held().await?;
    }
    run_out.commit(&serde_json::to_string_pretty(&store_summary).expect("summary serialises")).await?;
    let added = report.added;
    progress.done("store", format!("run '{}' committed: {added} documents added, {} earlier runs", store.run_id, store.earlier_runs()));

    Ok(Summary {
        distinct_fingerprints: scalar_u64(ctx, "SELECT count(DISTINCT simhash) FROM fingerprints").await?,
        pairs: report.pairs,
        clusters: report.clusters,
        documents_in_clusters: report.in_clusters,
        duplicates: report.duplicates,
        shared_text: Some(report.shared_text),
        store: Some(store_summary),
        ..joined
    })
}

/// Candidates of tonight's fingerprints against every known one, checked.
async fn tonight_pairs(ctx: &SessionContext, join: &JoinOptions, out: &OutputDir, unconfirmed: u64, progress: &mut Progress) -> Result<NearPairs> {
    let known = scalar_u64(
        ctx,
        "SELECT count(*) FROM (SELECT simhash FROM fingerprints WHERE simhash IS NOT NULL \
         UNION SELECT simhash FROM stored WHERE simhash IS NOT NULL)",
    )
    .await?;
    let found = near_pairs(ctx, join, out, known, progress, |n, sources| {
        format!("{n} candidate pairs of tonight's fingerprints among {known} known ({sources})")
    })
    .await?;
    if join.verify.measure().is_some() {
        progress.done("verify", format!("{}; {unconfirmed} copies rejected", found.describe_check(join)));
    }
    Ok(found)
}

/// Tonight's term sets (`term_sets`, beside the fetched stored ones) and the
/// documents that take part (`eligible`): all, or with a check all but the
/// copies whose term set fails against their fingerprint's first document,
/// stored or new (sql/93_store_unconfirmed.sql). Returns how many failed.
async fn tonight_eligible(ctx: &SessionContext, join: &JoinOptions, out: &OutputDir) -> Result<u64> {
    term_sets(ctx, out, table::FINGERPRINTS).await?;
    let Some((measure, threshold)) = join.verify.measure() else {
        create_view(ctx, table::ELIGIBLE, "SELECT * FROM fingerprints").await?;
        return Ok(0);
    };
    let params = [
        ("measure", Param::Text(measure)),
        ("threshold", Param::Float(threshold)),
        ("min_shared", Param::FloatOrNull(join.min_shared().map(MinShared::value))),
    ];
    let statement = render(sql::STORE_UNCONFIRMED, &params);
    let mut rejected = Vec::new();
    for b in collect(ctx, &statement).await? {
        let (sources, ids) = (strings(&b, 0)?, strings(&b, 1)?);
        rejected.extend(sources.into_iter().zip(ids));
    }
    eligible_without(ctx, out, &rejected).await?;
    Ok(rejected.len() as u64)
}

/// Tonight's partition, written and sealed beside the store's runs (not yet
/// committed) and registered as `night`; on failure nothing is left staged.
async fn stage_run(
    ctx: &SessionContext,
    store: &StoreRun,
    job: &Job,
    (model, idf_n_docs): (Option<&str>, u64),
    boilerplate: Option<&LineSet>,
) -> Result<(OutputDir, FileMetadata)> {
    let keep_key = job.keep_key();
    let idf_model = match (&store.manifest, model) {
        (Some(m), _) => m.idf_model.clone(),
        (None, Some(model)) => content_identity(&read_object(ctx, model).await?),
        (None, None) => "none".into(),
    };
    let boilerplate_set = match &store.manifest {
        Some(m) => m.boilerplate_set.clone(),
        None => boilerplate.map(|set| set.identity.clone()),
    };
    let run_out = OutputDir::prepare(ctx, &store.run_url(&store.run_id), true).await?;
    let run_path = run_out.staged("part-00000.parquet");
    let written = async {
        let statement = render(
            sql::STORE_RUN,
            &[
                ("keep_key", Param::Sql(keep_key)),
                ("keep_key_f", Param::Sql(if keep_key.is_empty() { "" } else { ", f.keep_key" })),
                ("keep_order", Param::Sql(job.keep.order_by())),
                ("run", Param::Text(&store.run_id)),
            ],
        );
        // Its rows are wide: term set, MinHash keys, shingle sketch, vector.
        with_wide_rows(ctx, crate::storage::sorted::write_query(ctx, &statement, &run_path)).await?;
        let meta = FileMetadata {
            settings: job.settings.clone(),
            idf_n_docs: Some(idf_n_docs),
            idf_model: Some(idf_model),
            minhash: store.minhash,
            shingles: Some(SKETCH_SCHEME.into()),
            vectors: job.vector_scheme(),
            min_shared: job.spec.join.min_shared(),
            boilerplate_set: boilerplate_set.clone(),
        };
        seal(ctx, &run_path, Some(&meta)).await?;
        register_parquet(ctx, table::NIGHT, &run_path).await?;
        Ok::<_, Error>(meta)
    }
    .await;
    match written {
        Ok(meta) => Ok((run_out, meta)),
        Err(e) => {
            run_out.abort().await;
            Err(e)
        }
    }
}

/// The counts of a night's report.
struct NightReport {
    in_clusters: u64,
    duplicates: u64,
    /// Tonight's duplicates whose representative an earlier run stored.
    of_stored: u64,
    clusters: u64,
    pairs: u64,
    added: u64,
    shared_text: SharedText,
}

/// The night's report, staged in `out`: tonight's clusters
/// (sql/95_store_clusters.sql) and pairs (sql/70_pairs.sql, as `dedup`).
async fn night_report(ctx: &SessionContext, out: &OutputDir, meta: &FileMetadata, run_id: &str) -> Result<NightReport> {
    materialize(ctx, sql::STORE_CLUSTERS, &[], &out.staged("clusters/part-00000.parquet"), table::CLUSTERS, Some(meta)).await?;
    // The documents the pairs are drawn from: tonight's in clusters. The
    // fingerprints are made distinct first: the engine builds its semi join
    // on the subquery, and probing a key held by 38,000 reposts walks all of
    // them for each (Weibo as a night: the anchors and the pairs 8 s each).
    // Made once, with what the anchors and the pairs read of it: they read it
    // three times, and as a view each read scanned tonight's fingerprints
    // and probed the clusters again.
    let members = out.staged("_work/in_clusters.parquet");
    let statement = format!(
        "COPY (SELECT source, id, simhash, shingles FROM eligible WHERE simhash IN (SELECT DISTINCT simhash FROM clusters)) TO {} STORED AS PARQUET {}",
        literal(&members),
        sql::WORK_FILE
    );
    with_settings(ctx, &[LATE_MATERIALIZATION], work_table(ctx, &statement, &members, table::IN_CLUSTERS)).await?;
    let shared_text = pairs_table(ctx, out, Some(meta)).await?;
    let counts = collect(
        ctx,
        &format!(
            "SELECT count(*), \
                    COALESCE(sum(CASE WHEN NOT is_representative THEN 1 ELSE 0 END), 0), \
                    COALESCE(sum(CASE WHEN NOT is_representative AND representative_run <> {run} THEN 1 ELSE 0 END), 0) \
             FROM clusters",
            run = literal(run_id)
        ),
    )
    .await?;
    let c = &counts[0];
    Ok(NightReport {
        in_clusters: column_u64(c, 0)?.value(0),
        duplicates: column_u64(c, 1)?.value(0),
        of_stored: column_u64(c, 2)?.value(0),
        // Not count(DISTINCT (a, b)): DataFusion 55 reserves an absurd amount of
        // memory for a distinct struct, which a --memory-limit pool refuses.
        clusters: scalar_u64(ctx, "SELECT count(*) FROM (SELECT DISTINCT representative_source, representative_id FROM clusters)")
            .await?,
        pairs: scalar_u64(ctx, "SELECT count(*) FROM pairs").await?,
        added: scalar_u64(ctx, "SELECT count(*) FROM night").await?,
        shared_text,
    })
}

/// Whether the report folder at `url` is a committed report of run `run_id`
/// (so that a rerun may replace it).
pub async fn is_report_of(ctx: &SessionContext, url: &str, run_id: &str) -> bool {
    let Ok(bytes) = read_object(ctx, &format!("{}/summary.json", url.trim_end_matches('/'))).await else { return false };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("store")?.get("run_id")?.as_str().map(|id| id == run_id))
        .unwrap_or(false)
}
