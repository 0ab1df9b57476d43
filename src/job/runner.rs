//! Runs the pipeline: registers inputs, executes the statements of `sql/` in
//! order, computes connected components between two of them, and commits the
//! outputs with their summary.
//!
//! Intermediate tables go to `_work/` inside the staging folder (Parquet, so
//! the same plan runs on a cluster), and are removed before the commit. Every
//! table is written as a single file: a `COPY` into a folder writes no file
//! at all for an empty result, which would read back as a missing table.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, UInt64Type};
use datafusion::prelude::SessionContext;

use super::config::{FingerprintOptions, JobSpec, JoinOptions, KeepRule};
use super::candidates::{eligible_without, near_pairs, term_sets};
use super::inputs::{check_ids, name_bad_file, register_documents};
use super::plan::dry_run;
use super::nightly;
use super::store_run::StoreRun;
use super::progress::{Progress, RunOptions};
use super::query::{collect, collect_with, column_u64, scalar_u64};
use super::tables::{create_view, materialize, FileMetadata, METADATA_KEY};
use super::sql::{self, render, table, Param};
use super::summary::{FingerprintSettings, IdfSummary, InputSummary, RunCommand, Summary};
use crate::error::{Error, Result};
use crate::minhash::MinHashPlan;
use crate::session::context;
use crate::sets::Verify;
use crate::storage::lease::Lease;
use crate::storage::{copy_file, parquet_key_values, register_parquet, InputSpec, OutputDir};

/// Settings for the segmentation statement. Segmentation costs far more per
/// row than reading, so it must be spread over every core even when an
/// input is one Parquet row group: the scan is not split by byte ranges (the
/// ranges of one row group leave all rows in one partition) but read in
/// small batches, which DataFusion then deals round robin to all partitions.
const SEGMENTATION_SETTINGS: &[(&str, &str)] =
    &[("datafusion.optimizer.repartition_file_scans", "false"), ("datafusion.execution.batch_size", "256")];

/// Commit the output with the summary, or remove what was staged.
pub(super) async fn finish(out: OutputDir, result: Result<Summary>, progress: Progress) -> Result<Summary> {
    let mut summary = match result {
        Ok(summary) => summary,
        Err(e) => {
            out.abort().await;
            return Err(e);
        }
    };
    summary.total_ms = progress.started.elapsed().as_millis() as u64;
    summary.timings_ms = progress.timings;
    let committed = async {
        out.remove_work().await?;
        out.commit(&serde_json::to_string_pretty(&summary).expect("summary serialises")).await
    };
    committed.await?;
    Ok(summary)
}

/// Run `neardup dedup`: fingerprints, pairs and clusters of the inputs.
pub async fn run_dedup(spec: &JobSpec, options: &RunOptions) -> Result<Summary> {
    run_documents(spec, options, true).await
}

/// Run `neardup fingerprint`: the fingerprints of the inputs only (the
/// first three stages of `dedup`, with the same output layout and summary).
pub async fn run_fingerprint(spec: &JobSpec, options: &RunOptions) -> Result<Summary> {
    run_documents(spec, options, false).await
}

async fn run_documents(spec: &JobSpec, options: &RunOptions, with_join: bool) -> Result<Summary> {
    let keep = spec.validate()?;
    // Once per run: it hashes the word-list files.
    let settings = FingerprintSettings::of(&spec.fingerprint);
    let ctx = context(&spec.engine).await?;
    let mut progress = Progress::new(options);
    let Some(store_options) = &spec.store else {
        register_documents(&ctx, spec, &keep, table::DOCUMENTS).await?;
        let dropped = match check_ids(&ctx, table::DOCUMENTS, spec.columns.duplicate_ids).await {
            Ok(n) => n,
            Err(e) => return Err(name_bad_file(&ctx, spec, e).await),
        };
        progress.done("inputs", format!("{} input(s) checked", spec.inputs.len()));
        if options.dry_run {
            return dry_run(&ctx, spec, &settings, with_join, None, spec.overwrite).await;
        }
        let out = OutputDir::prepare(&ctx, &spec.output, spec.overwrite).await?;
        let result = dedup_stages(&ctx, spec, &settings, &keep, &out, &mut progress, with_join, None).await;
        let result = match result {
            Err(e) => Err(name_bad_file(&ctx, spec, e).await),
            Ok(summary) => Ok(Summary { duplicate_ids_dropped: dropped, ..summary }),
        };
        return finish(out, result, progress).await;
    };
    if !with_join {
        return Err(Error::input("a store run finds pairs: use neardup dedup or neardup run with a [store] section"));
    }
    // One writer at a time: a night holds the store's lease from before it
    // reads the store until after it has committed (a dry run writes nothing).
    let lease = match options.dry_run {
        true => None,
        false => {
            crate::job::config::check_run_id(store_options.run_id.as_deref().unwrap_or_default())?;
            let holder = format!("run '{}'", store_options.run_id.as_deref().unwrap_or_default());
            Some(Lease::acquire(&ctx, &store_options.url, &holder).await?)
        }
    };
    let result = store_night(&ctx, spec, &settings, options, store_options, &keep, progress, lease.as_ref()).await;
    if let Some(lease) = lease {
        lease.release().await;
    }
    result
}

/// A night against a store (under its lease, unless a dry run).
async fn store_night(
    ctx: &SessionContext,
    spec: &JobSpec,
    settings: &FingerprintSettings,
    options: &RunOptions,
    store_options: &crate::job::StoreOptions,
    keep: &KeepRule,
    mut progress: Progress,
    lease: Option<&Lease>,
) -> Result<Summary> {
    let minhash = spec.join.candidates.minhash().then_some(spec.join.minhash);
    let mut store =
        StoreRun::open(&ctx, store_options, settings, &keep, minhash, spec.fingerprint.idf_model.as_deref()).await?;
    register_documents(&ctx, spec, &keep, table::DOCUMENTS_INPUT).await?;
    let dropped = match check_ids(&ctx, table::DOCUMENTS_INPUT, spec.columns.duplicate_ids).await {
        Ok(n) => n,
        Err(e) => return Err(name_bad_file(&ctx, spec, e).await),
    };
    store.register_earlier(&ctx).await?;
    let (already, reads) = store.already_stored(&ctx).await?;
    let already_stored = already.len() as u64;
    progress.done(
        "inputs",
        format!(
            "{} input(s) checked; store '{}': {} earlier run(s), {already_stored} input document(s) already stored",
            spec.inputs.len(),
            store.url(),
            store.earlier_runs()
        ),
    );
    // A store freezes its IDF model: every run after the first uses it.
    let mut run_spec = spec.clone();
    if store.manifest.is_some() && spec.fingerprint.weighting.needs_idf() {
        run_spec.fingerprint.idf_model = Some(store.model_url());
    }
    let overwrite = spec.overwrite || nightly::is_report_of(&ctx, &spec.output, &store.run_id).await;
    if options.dry_run {
        return store_dry_run(ctx, &run_spec, settings, &store, already_stored, overwrite).await;
    }
    let out = OutputDir::prepare(&ctx, &spec.output, overwrite).await?;
    let result = match nightly::documents_not_stored(&ctx, &out, &already).await {
        Ok(()) => {
            let store = Some((&mut store, already_stored, reads, lease));
            dedup_stages(&ctx, &run_spec, settings, &keep, &out, &mut progress, true, store).await
        }
        Err(e) => Err(e),
    };
    let result = match result {
        Err(e) => Err(name_bad_file(&ctx, spec, e).await),
        Ok(summary) => Ok(Summary { duplicate_ids_dropped: dropped, ..summary }),
    };
    finish(out, result, progress).await
}

/// A dry run of a night: the plan, and what the store holds.
async fn store_dry_run(
    ctx: &SessionContext,
    spec: &JobSpec,
    settings: &FingerprintSettings,
    store: &StoreRun,
    already_stored: u64,
    overwrite: bool,
) -> Result<Summary> {
    let mut summary = dry_run(ctx, spec, settings, true, Some(store), overwrite).await?;
    summary.store = Some(crate::job::StoreSummary {
        url: store.url().to_string(),
        run_id: store.run_id.clone(),
        earlier_runs: store.earlier_runs(),
        already_stored,
        idf_model: store.manifest.as_ref().map_or_else(|| "(created by this run)".into(), |m| m.idf_model.clone()),
        created: store.manifest.is_none(),
        ..Default::default()
    });
    Ok(summary)
}

async fn dedup_stages(
    ctx: &SessionContext,
    spec: &JobSpec,
    settings: &FingerprintSettings,
    keep: &KeepRule,
    out: &OutputDir,
    progress: &mut Progress,
    with_join: bool,
    store: Option<(&mut StoreRun, u64, crate::job::summary::StoreReads, Option<&Lease>)>,
) -> Result<Summary> {
    let keep_key = if keep.column().is_some() { ", keep_key" } else { "" };
    let (boilerplate, boilerplate_lines) = boilerplate_stage(ctx, &spec.fingerprint, progress).await?;
    let corpus_n = segment_stage(ctx, &spec.fingerprint, keep_key, boilerplate.as_deref(), out, progress).await?;
    let idf = corpus_df_stage(ctx, &spec.fingerprint, settings, corpus_n, out, progress).await?;
    let meta = fingerprint_stage(ctx, spec, settings, keep_key, &idf, corpus_n, out, progress).await?;

    let mut summary = if let Some((store, already_stored, reads, lease)) = store {
        let night = nightly::Night {
            spec,
            keep,
            settings,
            model: idf.model.as_ref().map(|m| m.location.as_str()),
            idf_n_docs: idf.summary.as_ref().map_or(0, |i| i.n_docs),
            already_stored,
            reads,
            lease,
        };
        nightly::store_stages(ctx, store, night, out, progress).await?
    } else if with_join {
        join_stages(ctx, &spec.join, keep, out, Some(&meta), progress).await?
    } else {
        let distinct_fingerprints = scalar_u64(ctx, "SELECT count(DISTINCT simhash) FROM fingerprints").await?;
        Summary { distinct_fingerprints, ..Summary::default() }
    };
    if spec.survivors && with_join {
        survivors_stage(ctx, spec, out, progress).await?;
    }

    summary.command = if with_join { RunCommand::Dedup } else { RunCommand::Fingerprint };
    summary.output = out.url().to_string();
    summary.settings = Some(settings.clone());
    summary.idf = idf.summary;
    summary.boilerplate_lines = boilerplate_lines;
    summary.inputs = input_counts(ctx, &spec.inputs).await?;
    summary.documents = summary.inputs.iter().map(|i| i.documents).sum();
    summary.documents_without_terms = summary.inputs.iter().map(|i| i.documents_without_terms).sum();
    Ok(summary)
}

/// Stage `boilerplate` (optional): the hashes of lines found in at least
/// `--boilerplate-lines` documents, as the set that segmentation leaves out
/// (none: `None`), and how many there are.
async fn boilerplate_stage(ctx: &SessionContext, fp: &FingerprintOptions, progress: &mut Progress) -> Result<(Option<String>, u64)> {
    let Some(n) = fp.boilerplate_lines else {
        return Ok((None, 0));
    };
    let batches = collect(ctx, &render(sql::BOILERPLATE_LINES, &[("min_docs", Param::Int(u64::from(n)))])).await?;
    let mut hashes = Vec::new();
    for b in &batches {
        hashes.extend_from_slice(column_u64(b, 0)?.values());
    }
    let lines = hashes.len() as u64;
    progress.done("boilerplate", format!("{lines} lines in at least {n} documents"));
    Ok((Some(crate::text::format_set(&hashes)), lines))
}

/// Stage `segment`: every document segmented once, into the work table
/// `terms`; returns the documents with terms.
async fn segment_stage(
    ctx: &SessionContext,
    fp: &FingerprintOptions,
    keep_key: &str,
    boilerplate: Option<&str>,
    out: &OutputDir,
    progress: &mut Progress,
) -> Result<u64> {
    let terms_path = out.staged("_work/terms.parquet");
    if progress.shows_bar() {
        progress.begin("segment", Some(scalar_u64(ctx, "SELECT count(*) FROM documents").await?));
    }
    collect_with(
        ctx,
        SEGMENTATION_SETTINGS,
        &render(
            sql::TERMS,
            &[
                ("keep_key", Param::Sql(keep_key)),
                ("tokenizer", Param::Text(&fp.tokenizer)),
                ("analyzer_options", Param::Text(&fp.analyzer_options().to_options_string())),
                ("with_pos", Param::Bool(fp.weighting.needs_pos())),
                ("boilerplate", Param::TextOrNull(boilerplate)),
                ("path", Param::Text(&terms_path)),
            ],
        ),
    )
    .await?;
    register_parquet(ctx, table::TERMS, &terms_path).await?;
    let corpus_n = scalar_u64(ctx, &render(sql::CORPUS_SIZE, &[])).await?;
    progress.done("segment", format!("{corpus_n} documents with terms"));
    Ok(corpus_n)
}

/// The document frequencies the fingerprints are weighted with.
struct IdfModel {
    /// Its files and version, as `idf_simhash` takes them.
    files: (String, String),
    n_docs: u64,
    /// The df table: a work file or the model the run was given.
    location: String,
}

/// What stage `corpus_df` leaves: its summary, and the model the
/// fingerprints use (none for a weighting without idf).
struct Idf {
    summary: Option<IdfSummary>,
    model: Option<IdfModel>,
}

/// Stage `corpus_df`: corpus document frequencies, or a saved model.
/// Computed also for weightings without idf when a model is to be saved.
async fn corpus_df_stage(
    ctx: &SessionContext,
    fp: &FingerprintOptions,
    settings: &FingerprintSettings,
    corpus_n: u64,
    out: &OutputDir,
    progress: &mut Progress,
) -> Result<Idf> {
    progress.begin("corpus_df", None);
    if !fp.weighting.needs_idf() && fp.save_idf_model.is_none() {
        return Ok(Idf { summary: None, model: None });
    }
    let (n_docs, source, location) = match &fp.idf_model {
        Some(model) => (load_idf_model(ctx, model, settings).await?, model.clone(), model.clone()),
        None => {
            let df_path = out.staged("_work/corpus_df.parquet");
            let meta = FileMetadata { settings: settings.for_idf_model(), idf_n_docs: Some(corpus_n), idf_model: None, minhash: None };
            materialize(ctx, sql::CORPUS_DF, &[], &df_path, table::CORPUS_DF, Some(&meta)).await?;
            if let Some(save) = &fp.save_idf_model {
                copy_file(ctx, &df_path, save).await?;
            }
            (corpus_n, "corpus".to_string(), df_path)
        }
    };
    let terms = scalar_u64(ctx, "SELECT count(*) FROM corpus_df").await?;
    progress.done("corpus_df", format!("{terms} terms over {n_docs} documents"));
    let model = match fp.weighting.needs_idf() {
        true => Some(IdfModel { files: model_files(ctx, &location).await?, n_docs, location }),
        false => None,
    };
    Ok(Idf { summary: Some(IdfSummary { source, n_docs, terms, saved_to: fp.save_idf_model.clone() }), model })
}

/// Stage `fingerprints`: weights, SimHash fingerprints and MinHash keys,
/// into `fingerprints/`; returns the metadata its files carry.
async fn fingerprint_stage(
    ctx: &SessionContext,
    spec: &JobSpec,
    settings: &FingerprintSettings,
    keep_key: &str,
    idf: &Idf,
    corpus_n: u64,
    out: &OutputDir,
    progress: &mut Progress,
) -> Result<FileMetadata> {
    let fp = &spec.fingerprint;
    progress.begin("fingerprints", Some(corpus_n));
    let model = idf.model.as_ref();
    let fp_path = out.staged("fingerprints/part-00000.parquet");
    let minhash = spec.join.candidates.minhash().then_some(spec.join.minhash);
    let meta = FileMetadata { settings: settings.clone(), idf_n_docs: idf.summary.as_ref().map(|i| i.n_docs), idf_model: None, minhash };
    let params = [
        ("model", Param::TextOrNull(model.map(|m| m.files.0.as_str()))),
        ("model_version", Param::TextOrNull(model.map(|m| m.files.1.as_str()))),
        ("n_docs", Param::IntOrNull(model.map(|m| m.n_docs))),
        ("weighting", Param::Text(&fp.weighting.to_string())),
        ("formula", Param::Text(fp.idf.as_str())),
        ("top_k", Param::IntOrNull(fp.top_k.map(|k| k as u64))),
        ("minhash", Param::Sql(&minhash_expression(minhash, "term_set"))),
        ("keep_key", Param::Sql(keep_key)),
    ];
    materialize(ctx, sql::FINGERPRINTS, &params, &fp_path, table::FINGERPRINTS, Some(&meta)).await?;
    progress.done("fingerprints", format!("weighting {}", fp.weighting));
    Ok(meta)
}

/// Stage `survivors` (`--survivors`): each input's rows without the
/// duplicates, in `survivors/<input>/`.
async fn survivors_stage(ctx: &SessionContext, spec: &JobSpec, out: &OutputDir, progress: &mut Progress) -> Result<()> {
    for (i, input) in spec.inputs.iter().enumerate() {
        let path = out.staged(&format!("survivors/{}/part-00000.parquet", input.name));
        let statement = render(
            sql::SURVIVORS,
            &[
                ("table", Param::Ident(&format!("input_{i}"))),
                ("source", Param::Text(&input.name)),
                ("id", Param::Ident(&spec.columns.id)),
                ("path", Param::Text(&path)),
            ],
        );
        collect(ctx, &statement).await?;
    }
    progress.done("survivors", format!("{} input(s)", spec.inputs.len()));
    Ok(())
}

async fn input_counts(ctx: &SessionContext, inputs: &[InputSpec]) -> Result<Vec<InputSummary>> {
    let batches = collect(
        ctx,
        "SELECT source, count(*), sum(CASE WHEN simhash IS NULL THEN 1 ELSE 0 END) FROM fingerprints GROUP BY source",
    )
    .await?;
    let mut counts = BTreeMap::new();
    for b in &batches {
        let names = cast(b.column(0), &DataType::Utf8)?;
        let names = names.as_string::<i32>();
        let (docs, empty) = (column_u64(b, 1)?, column_u64(b, 2)?);
        for r in 0..b.num_rows() {
            counts.insert(names.value(r).to_string(), (docs.value(r), empty.value(r)));
        }
    }
    Ok(inputs
        .iter()
        .map(|i| {
            let (documents, documents_without_terms) = counts.get(&i.name).copied().unwrap_or((0, 0));
            InputSummary { name: i.name.clone(), url: i.url.clone(), documents, documents_without_terms }
        })
        .collect())
}

/// The files of a df table as idf_simhash takes them: their locations, one
/// per line, and a version that changes when any of them does.
async fn model_files(ctx: &SessionContext, url: &str) -> Result<(String, String)> {
    let (table, files) = crate::storage::list_parquet_files(ctx, url).await?;
    let store = table.object_store();
    let locations: Vec<String> = files.iter().map(|f| format!("{}{}", store.as_str(), f.location)).collect();
    let versions: Vec<String> = files
        .iter()
        .map(|f| format!("{}:{}:{}", f.size, f.last_modified.timestamp_millis(), f.e_tag.as_deref().unwrap_or("")))
        .collect();
    Ok((locations.join("\n"), versions.join(",")))
}

/// Check a saved IDF model against the run's settings, register it as
/// `corpus_df` and return its N.
async fn load_idf_model(ctx: &SessionContext, model: &str, settings: &FingerprintSettings) -> Result<u64> {
    let files = parquet_key_values(ctx, model).await?;
    let (file, kv) = files.first().ok_or_else(|| Error::input(format!("IDF model '{model}' has no files")))?;
    let stored = kv.get(METADATA_KEY).ok_or_else(|| {
        Error::input(format!("'{file}' is not a neardup IDF model (no '{METADATA_KEY}' metadata): save one with --save-idf-model"))
    })?;
    let stored: FileMetadata = serde_json::from_str(stored)
        .map_err(|e| Error::input(format!("IDF model '{file}' has unreadable metadata: {e}")))?;
    let n = stored.idf_n_docs.ok_or_else(|| Error::input(format!("'{file}' is not an IDF model (no document count)")))?;
    let stored = stored.settings;
    if stored != settings.for_idf_model() {
        return Err(Error::input(format!(
            "IDF model '{file}' was built with other settings ({}) than this run ({}): rebuild it with these settings",
            serde_json::to_string(&stored).unwrap_or_default(),
            serde_json::to_string(&settings.for_idf_model()).unwrap_or_default()
        )));
    }
    register_parquet(ctx, table::CORPUS_DF, model).await?;
    Ok(n)
}

/// The documents left out of their fingerprint group by the term-set check,
/// from rows `(simhash, source, id, term_set)` ordered by simhash, source, id.
fn unconfirmed_copies(batches: &[RecordBatch], verify: Verify) -> Result<Vec<(String, String)>> {
    let mut rows: Vec<(u64, String, String, Vec<u64>)> = Vec::new();
    for b in batches {
        let simhash = column_u64(b, 0)?;
        let (source, id) = (cast(b.column(1), &DataType::Utf8)?, cast(b.column(2), &DataType::Utf8)?);
        let (source, id) = (source.as_string::<i32>(), id.as_string::<i32>());
        let sets = cast(b.column(3), &DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))))?;
        let sets = sets.as_list::<i32>();
        for r in 0..b.num_rows() {
            let set = sets.value(r);
            let set = set.as_primitive::<UInt64Type>().values().to_vec();
            rows.push((simhash.value(r), source.value(r).to_string(), id.value(r).to_string(), set));
        }
    }
    let mut rejected = Vec::new();
    for group in rows.chunk_by(|a, b| a.0 == b.0) {
        let sets: Vec<&[u64]> = group.iter().map(|r| r.3.as_slice()).collect();
        for i in crate::sets::split_group(&sets, |a, b| verify.passes(a, b)) {
            rejected.push((group[i].1.clone(), group[i].2.clone()));
        }
    }
    Ok(rejected)
}

pub(super) async fn join_stages(
    ctx: &SessionContext,
    join: &JoinOptions,
    keep: &KeepRule,
    out: &OutputDir,
    meta: Option<&FileMetadata>,
    progress: &mut Progress,
) -> Result<Summary> {
    progress.begin("join", None);
    // A one-shot run is a store's first night: nothing is stored (the
    // shared statements 50, 57 and 70 read `stored`, and 57 `stored_term_sets`).
    create_view(ctx, table::STORED, "SELECT * FROM fingerprints WHERE false").await?;
    let distinct = scalar_u64(ctx, "SELECT count(DISTINCT simhash) FROM fingerprints").await?;
    let verify = join.verify;

    let unconfirmed = eligible(ctx, out, verify).await?;

    // Candidate pairs of distinct fingerprints: the banded join, MinHash
    // bands, or both; then the term-set check.
    let found = near_pairs(ctx, join, out, distinct, progress, |n, sources| {
        format!("{n} candidate pairs among {distinct} distinct fingerprints ({sources})")
    })
    .await?;
    if let Some((measure, threshold)) = verify.measure() {
        let (near_count, candidate_count) = (found.edges.len(), found.candidates);
        progress.done(
            "verify",
            format!("{near_count} of {candidate_count} candidates kept, {unconfirmed} identical-fingerprint copies rejected ({measure} >= {threshold})"),
        );
    }

    progress.begin("clusters", None);
    let joined = found.into_components(ctx, out, join, keep, unconfirmed).await?;
    let (clusters, in_clusters) = clusters_stage(ctx, out, keep, meta, progress).await?;
    progress.begin("pairs", None);
    materialize(ctx, sql::PAIRS, &[], &out.staged("pairs/part-00000.parquet"), table::PAIRS, meta).await?;
    let pairs = scalar_u64(ctx, "SELECT count(*) FROM pairs").await?;
    progress.done("pairs", format!("{pairs} pairs"));

    Ok(Summary {
        distinct_fingerprints: distinct,
        pairs,
        clusters,
        documents_in_clusters: in_clusters,
        duplicates: in_clusters - clusters,
        ..joined
    })
}

/// The documents that take part (view `eligible`): all, or with a check all
/// but the copies a shared fingerprint's largest consistent subgroup leaves
/// out (sql/56_unconfirmed_copies.sql), whose term sets are then written
/// (sql/57_term_sets.sql). Returns how many copies were left out.
async fn eligible(ctx: &SessionContext, out: &OutputDir, verify: Verify) -> Result<u64> {
    if verify.measure().is_none() {
        create_view(ctx, table::ELIGIBLE, "SELECT * FROM fingerprints").await?;
        return Ok(0);
    }
    let batches = collect(ctx, &render(sql::UNCONFIRMED_COPIES, &[])).await?;
    let rejected = unconfirmed_copies(&batches, verify)?;
    eligible_without(ctx, out, &rejected).await?;
    super::touched::no_stored_term_sets(ctx).await?;
    term_sets(ctx, out, table::ELIGIBLE).await?;
    Ok(rejected.len() as u64)
}

/// Stage `clusters` (sql/60_clusters.sql): returns the clusters and the
/// documents they hold.
async fn clusters_stage(ctx: &SessionContext, out: &OutputDir, keep: &KeepRule, meta: Option<&FileMetadata>, progress: &mut Progress) -> Result<(u64, u64)> {
    let path = out.staged("clusters/part-00000.parquet");
    materialize(ctx, sql::CLUSTERS, &[("keep_order", Param::Sql(keep.order_by()))], &path, table::CLUSTERS, meta).await?;
    let batches = collect(ctx, "SELECT count(DISTINCT cluster_id), count(*) FROM clusters").await?;
    let (clusters, in_clusters) = (column_u64(&batches[0], 0)?.value(0), column_u64(&batches[0], 1)?.value(0));
    progress.done("clusters", format!("{clusters} clusters holding {in_clusters} documents"));
    Ok((clusters, in_clusters))
}


/// The SQL of a `minhash` column: the band keys of the term set in column
/// `set` with `plan`, or NULL without MinHash candidates.
pub(super) fn minhash_expression(plan: Option<MinHashPlan>, set: &str) -> String {
    match plan {
        Some(p) => format!("minhash_keys({set}, {}, {})", p.bands, p.rows),
        None => "CAST(NULL AS BIGINT UNSIGNED[])".to_string(),
    }
}
