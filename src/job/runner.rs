//! The commands `dedup` and `fingerprint`: the job parsed once
//! ([`Job`]), the inputs registered and checked, the store's lease held for
//! a night, the stages of [`stages`] run (`pipeline.rs`) or, for a dry run,
//! listed, and the outputs committed with their summary.
//!
//! Intermediate tables go to `_work/` inside the staging folder (Parquet, so
//! the same plan runs on a cluster), and are removed before the commit. Every
//! table is written as a single file: a `COPY` into a folder writes no file
//! at all for an empty result, which would read back as a missing table.
//! Work files are written without compression or dictionaries (`OPTIONS`
//! in each statement that writes one): each is read once or twice on the
//! machine that wrote it, and zstd with dictionaries cost a `weibo_reposts`
//! run 7 % of its time (docs/performance.md). Outputs keep zstd.

use std::collections::BTreeMap;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::prelude::SessionContext;

use super::config::{JobSpec, OnBadFile};
use super::footprint;
use super::context::{Job, Run};
use super::inputs::{check_ids, check_inputs, find_bad_file, keep_one_per_id, name_bad_file, register_documents, CheckedInputs};
use super::nightly;
use super::pipeline::{run_stages, stages, Stage};
use super::plan::dry_run;
use super::progress::{Progress, RunOptions};
use super::query::{collect, column_u64};
use super::sql::table;
use super::store_run::StoreRun;
use super::summary::{InputSummary, RunCommand, SkippedFile, Summary};
use crate::error::{Error, Kind, Result};
use crate::session::{context, WorkTables};
use crate::storage::lease::Lease;
use crate::storage::{InputSpec, OutputDir};

/// What a run that finds pairs needs to draw its report: its session (with
/// the run's tables still registered) and its join options.
pub(super) type ReportOf<'a> = Option<(&'a SessionContext, &'a crate::job::JoinOptions)>;

/// Commit the output with the summary (and, for runs that find pairs,
/// `report.html`), or remove what was staged.
pub(super) async fn finish(out: OutputDir, result: Result<Summary>, mut progress: Progress, report: ReportOf<'_>) -> Result<Summary> {
    let with_report = async {
        let mut summary = result?;
        summary.total_ms = progress.started.elapsed().as_millis() as u64;
        summary.timings_ms = progress.timings.clone();
        if let Some((ctx, join)) = report {
            // The report shows the run up to itself; its own time is added after.
            progress.restart_stage();
            if summary.near_misses.is_none() {
                summary.near_misses = super::report::near_misses(ctx, join).await?;
            }
            super::report::write(ctx, &out, &summary).await?;
            progress.done("report", "report.html drawn");
            let ms = progress.timings["report"];
            summary.timings_ms.insert("report".into(), ms);
            summary.total_ms += ms;
        }
        Ok(summary)
    };
    let summary = match with_report.await {
        Ok(summary) => summary,
        Err(e) => {
            out.abort().await;
            return Err(e);
        }
    };
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

/// A run, again without each input file found damaged while it was read
/// (with `--on-bad-file skip`): the files' footers and columns are checked
/// before any work, but damaged pages show only when read.
async fn run_documents(spec: &JobSpec, options: &RunOptions, with_join: bool) -> Result<Summary> {
    let mut damaged = Vec::new();
    loop {
        match run_documents_without(spec, options, with_join, &damaged).await {
            Err(e) if spec.columns.on_bad_file == OnBadFile::Skip && e.kind() == Kind::Unreadable => {
                let ctx = context(&spec.engine).await?;
                match find_bad_file(&ctx, spec, &damaged).await {
                    Some(file) => damaged.push(file),
                    None => return Err(e),
                }
            }
            done => return done,
        }
    }
}

/// Say which files a run leaves out, whatever the log's form or quietness:
/// a partial result is never silent.
fn log_skipped(options: &RunOptions, skipped: &[SkippedFile]) {
    for s in skipped {
        let message = format!("skipped input '{}': {}", s.input, s.reason);
        options.log_format.line("warn", "skipped_file", &message, serde_json::json!({ "input": s.input, "file": s.file, "reason": s.reason }));
    }
}

async fn run_documents_without(spec: &JobSpec, options: &RunOptions, with_join: bool, damaged: &[SkippedFile]) -> Result<Summary> {
    let job = Job::new(spec)?;
    let command = if with_join { RunCommand::Dedup } else { RunCommand::Fingerprint };
    let ctx = context(&spec.engine).await?;
    let mut progress = Progress::new(options);
    let Some(store_options) = &spec.store else {
        let checked = check_inputs(&ctx, spec, &job.keep, damaged).await?;
        log_skipped(options, &checked.skipped);
        let contents = footprint::InputContents::of(&checked, &spec.columns);
        contents.register(&ctx);
        let settled = footprint::settle(&ctx, &spec.engine, contents);
        let work_tables = Some(if crate::session::work_in_memory(&ctx) { WorkTables::Memory } else { WorkTables::Files });
        register_documents(&ctx, spec, &checked, &job.keep, table::DOCUMENTS).await?;
        let stages = stages(&job, command, false);
        // Documents held in memory find their repeated ids as they are sorted.
        let in_hold = crate::session::work_in_memory(&ctx) && stages.contains(&Stage::Segment);
        let ids = match check_ids(&ctx, table::DOCUMENTS, spec.columns.duplicate_ids, in_hold).await {
            Ok(n) => n,
            Err(e) => return Err(name_bad_file(&ctx, spec, e).await),
        };
        let settled = settled.map(|s| format!("; {s}")).unwrap_or_default();
        progress.done("inputs", format!("{} input(s) checked{settled}", spec.inputs.len()));
        if options.dry_run {
            let summary = dry_run(&ctx, &job, command, &stages, None, spec.overwrite, &checked).await?;
            return Ok(Summary { skipped_files: checked.skipped, work_tables, ..summary });
        }
        let out = OutputDir::prepare(&ctx, &spec.output, spec.overwrite).await?;
        let mut run = Run { ctx: &ctx, job: &job, out: &out, progress: &mut progress };
        let result = match keep_one_per_id(&ctx, &out, table::DOCUMENTS, &ids, spec.columns.duplicate_ids).await {
            Ok(()) => run_stages(&mut run, &stages, None, ids.in_hold).await,
            Err(e) => Err(e),
        };
        let result = match result {
            Ok(found) => summarize(&run, command, found).await,
            Err(e) => Err(e),
        };
        let result = match result {
            Err(e) => Err(name_bad_file(&ctx, spec, e).await),
            // Counted by the check of ids, or by the held documents.
            Ok(summary) => Ok(Summary {
                duplicate_ids_dropped: ids.dropped + summary.duplicate_ids_dropped,
                skipped_files: checked.skipped,
                work_tables,
                ..summary
            }),
        };
        let report = with_join.then_some((&ctx, &job.spec.join));
        return finish(out, result, progress, report).await;
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
    let result = store_night(&ctx, &job, options, store_options, progress, lease.as_ref(), damaged).await;
    if let Some(lease) = lease {
        lease.release().await;
    }
    result
}

/// A night against a store (under its lease, unless a dry run).
async fn store_night(
    ctx: &SessionContext,
    job: &Job,
    options: &RunOptions,
    store_options: &crate::job::StoreOptions,
    mut progress: Progress,
    lease: Option<&Lease>,
    damaged: &[SkippedFile],
) -> Result<Summary> {
    let spec = &job.spec;
    let mut store = StoreRun::open(ctx, store_options, job, spec.fingerprint.idf_model.as_deref()).await?;
    // From here on the night applies the store's policy, or the one it records.
    let job = &job.with_min_shared(store.min_shared()).with_vectors(store.vectors()).with_boilerplate_lines(store.boilerplate_lines());
    let spec = &job.spec;
    let checked = check_inputs(ctx, spec, &job.keep, damaged).await?;
    log_skipped(options, &checked.skipped);
    footprint::InputContents::of(&checked, &spec.columns).register(ctx);
    register_documents(ctx, spec, &checked, &job.keep, table::DOCUMENTS_INPUT).await?;
    // A night finds its repeated ids before it leaves out the stored documents.
    let ids = match check_ids(ctx, table::DOCUMENTS_INPUT, spec.columns.duplicate_ids, false).await {
        Ok(n) => n,
        Err(e) => return Err(name_bad_file(ctx, spec, e).await),
    };
    store.register_earlier(ctx).await?;
    let (already, reads) = store.already_stored(ctx).await?;
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
    // And the boilerplate lines of its first night, if it drops any.
    if let Some(set) = store.boilerplate_url() {
        run_spec.fingerprint.boilerplate_set = Some(set);
    }
    let job = job.with_spec(run_spec);
    let overwrite = spec.overwrite || nightly::is_report_of(ctx, &spec.output, &store.run_id).await;
    let stages = stages(&job, RunCommand::Dedup, true);
    if options.dry_run {
        let summary = store_dry_run(ctx, &job, &stages, &store, already_stored, overwrite, &checked).await?;
        return Ok(Summary { skipped_files: checked.skipped, ..summary });
    }
    let out = OutputDir::prepare(ctx, &spec.output, overwrite).await?;
    let mut run = Run { ctx, job: &job, out: &out, progress: &mut progress };
    let inputs = async {
        keep_one_per_id(ctx, &out, table::DOCUMENTS_INPUT, &ids, spec.columns.duplicate_ids).await?;
        nightly::documents_not_stored(ctx, &out, &already).await
    };
    let result = match inputs.await {
        Ok(()) => {
            let night = nightly::NightStore { store: &mut store, already_stored, reads, lease };
            match run_stages(&mut run, &stages, Some(night), false).await {
                Ok(found) => summarize(&run, RunCommand::Dedup, found).await,
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    };
    let result = match result {
        Err(e) => Err(name_bad_file(ctx, spec, e).await),
        Ok(summary) => Ok(Summary { duplicate_ids_dropped: ids.dropped, skipped_files: checked.skipped, ..summary }),
    };
    finish(out, result, progress, Some((ctx, &job.spec.join))).await
}

/// A dry run of a night: the plan, and what the store holds.
async fn store_dry_run(ctx: &SessionContext, job: &Job, stages: &[Stage], store: &StoreRun, already_stored: u64, overwrite: bool, checked: &CheckedInputs) -> Result<Summary> {
    let mut summary = dry_run(ctx, job, RunCommand::Dedup, stages, Some(store), overwrite, checked).await?;
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

/// The summary of a run whose stages found `found`: with the run's
/// command, output, settings and per-input counts.
async fn summarize(run: &Run<'_>, command: RunCommand, found: Summary) -> Result<Summary> {
    let inputs = input_counts(run.ctx, &run.job.spec.inputs).await?;
    Ok(Summary {
        command,
        output: run.out.url().to_string(),
        settings: Some(run.job.settings.clone()),
        columns: Some(run.job.spec.columns.clone()),
        documents: inputs.iter().map(|i| i.documents).sum(),
        documents_without_terms: inputs.iter().map(|i| i.documents_without_terms).sum(),
        inputs,
        ..found
    })
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
