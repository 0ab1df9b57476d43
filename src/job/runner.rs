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
use std::time::Instant;

use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::SessionContext;

use super::config::{Candidates, DuplicateIds, FingerprintOptions, JobSpec, JoinOptions, KeepRule};
use super::nightly::{self, StoreRun};
use super::sql::{self, render};
use super::summary::{BandPlanSummary, FingerprintSettings, IdfSummary, InputSummary, Plan, PlanInput, Summary};
use crate::cluster::components;
use crate::error::{Error, Result};
use crate::join::BandPlan;
use crate::minhash::MinHashPlan;
use crate::session::{context, EngineOptions};
use crate::sets::Verify;
use crate::storage::lease::Lease;
use crate::storage::{copy_file, ident, literal, parquet_key_values, register_parquet, InputSpec, OutputDir};

/// The Parquet key-value metadata key of neardup's tables, added to each
/// footer after the write (see [`crate::storage::footer`]).
pub const METADATA_KEY: &str = "neardup";

/// What `METADATA_KEY` holds: the fingerprint settings, and N for tables
/// made with corpus document frequencies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileMetadata {
    pub settings: FingerprintSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idf_n_docs: Option<u64>,
    /// Store runs: the digest of the store's frozen IDF model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idf_model: Option<String>,
    /// The MinHash plan of the `minhash` column, when it holds band keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minhash: Option<MinHashPlan>,
}

impl FileMetadata {
    fn json(&self) -> String {
        serde_json::to_string(self).expect("metadata serialises")
    }
}

/// Give the table written at `path` neardup's footer: `meta` under
/// [`METADATA_KEY`] (when known), no engine-dependent entries.
pub(super) async fn seal(ctx: &SessionContext, path: &str, meta: Option<&FileMetadata>) -> Result<()> {
    let json = meta.map(FileMetadata::json);
    crate::storage::footer::rewrite_footer(ctx, path, json.as_deref().map(|j| (METADATA_KEY, j))).await
}

/// How a run reports progress.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// No progress lines on standard error.
    pub quiet: bool,
    /// Check everything that can be checked without writing, print the plan, stop.
    pub dry_run: bool,
    pub log_format: LogFormat,
}

/// Progress and error lines on standard error: for people, or one JSON object per line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Plain,
    Json,
}

impl LogFormat {
    /// Write one log line: `event` (a stage name, `plan`, `error`…) with its
    /// message and extra fields.
    pub fn line(self, level: &str, event: &str, message: &str, fields: serde_json::Value) {
        let line = match self {
            LogFormat::Plain => format!("neardup: {message}"),
            LogFormat::Json => {
                let mut object = serde_json::json!({
                    "time": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                    "level": level,
                    "event": event,
                    "message": message,
                });
                if let (Some(o), serde_json::Value::Object(extra)) = (object.as_object_mut(), fields) {
                    o.extend(extra);
                }
                object.to_string()
            }
        };
        eprintln!("{line}");
    }
}

/// A `pairs` run: the join and clustering over an existing fingerprint table.
#[derive(Debug, Clone)]
pub struct PairsSpec {
    pub fingerprints: InputSpec,
    pub output: String,
    pub overwrite: bool,
    pub join: JoinOptions,
    pub keep: String,
    pub engine: EngineOptions,
}

pub(super) struct Progress {
    started: Instant,
    stage: Instant,
    timings: BTreeMap<String, u64>,
    quiet: bool,
    format: LogFormat,
    bar: crate::progress::Bar,
}

impl Progress {
    fn new(options: &RunOptions) -> Progress {
        Progress {
            started: Instant::now(),
            stage: Instant::now(),
            timings: BTreeMap::new(),
            quiet: options.quiet,
            format: options.log_format,
            bar: crate::progress::Bar::new(!options.quiet && options.log_format == LogFormat::Plain),
        }
    }

    /// Draw the running stage on a terminal (with `total` documents when known).
    pub(super) fn begin(&self, stage: &str, total: Option<u64>) {
        self.bar.begin(stage, total);
    }

    /// Whether a bar is drawn (so that its total is worth counting).
    pub(super) fn shows_bar(&self) -> bool {
        self.bar.is_drawn()
    }

    pub(super) fn done(&mut self, stage: &str, detail: impl std::fmt::Display) {
        self.bar.clear();
        let ms = self.stage.elapsed().as_millis() as u64;
        if !self.quiet {
            let message = match self.format {
                LogFormat::Plain => format!("{stage:<14} {ms:>8} ms  {detail}"),
                LogFormat::Json => detail.to_string(),
            };
            self.format.line("info", stage, &message, serde_json::json!({ "ms": ms }));
        }
        self.timings.insert(stage.to_string(), ms);
        self.stage = Instant::now();
    }
}

/// Run one statement. With `NEARDUP_EXPLAIN=1` in the environment, print
/// its physical plan to standard error first (a debugging aid).
pub(super) async fn collect(ctx: &SessionContext, statement: &str) -> Result<Vec<RecordBatch>> {
    let df = ctx.sql(statement).await?;
    if std::env::var_os("NEARDUP_EXPLAIN").is_some_and(|v| v == "1") {
        let plan = df.clone().create_physical_plan().await?;
        eprintln!(
            "neardup: plan of\n{statement}\n{}",
            datafusion::physical_plan::displayable(plan.as_ref()).indent(true)
        );
    }
    let started = Instant::now();
    let batches = df.collect().await?;
    log::debug!("{:>6} ms  {}", started.elapsed().as_millis(), statement_label(statement));
    Ok(batches)
}

/// A statement's first words after its comments, for the debug log.
fn statement_label(statement: &str) -> String {
    let code = statement.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join(" ");
    code.split_whitespace().take(12).collect::<Vec<_>>().join(" ")
}

/// Run one statement and measure the bytes its Parquet scans read (0 when
/// the engine does not report them, as on a cluster).
pub(super) async fn collect_measured(ctx: &SessionContext, statement: &str) -> Result<(Vec<RecordBatch>, u64)> {
    let plan = ctx.sql(statement).await?.create_physical_plan().await?;
    let batches = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await?;
    fn scanned(plan: &dyn datafusion::physical_plan::ExecutionPlan) -> u64 {
        let own = plan.metrics().and_then(|m| m.sum_by_name("bytes_scanned")).map_or(0, |v| v.as_usize() as u64);
        own + plan.children().into_iter().map(|c| scanned(c.as_ref())).sum::<u64>()
    }
    Ok((batches, scanned(plan.as_ref())))
}

pub(super) fn column_u64(batch: &RecordBatch, index: usize) -> Result<UInt64Array> {
    let casted = cast(batch.column(index), &DataType::UInt64)?;
    Ok(casted.as_primitive::<UInt64Type>().clone())
}

/// A column as text.
pub(super) fn strings(batch: &RecordBatch, index: usize) -> Result<Vec<String>> {
    let casted = cast(batch.column(index), &DataType::Utf8)?;
    Ok(casted.as_string::<i32>().iter().map(|v| v.unwrap_or_default().to_string()).collect())
}

/// The single integer a statement returns.
pub(super) async fn scalar_u64(ctx: &SessionContext, statement: &str) -> Result<u64> {
    let batches = collect(ctx, statement).await?;
    let batch = batches.iter().find(|b| b.num_rows() > 0).ok_or_else(|| Error::runtime("query returned no rows"))?;
    Ok(column_u64(batch, 0)?.value(0))
}

/// Settings for the segmentation statement. Segmentation costs far more per
/// row than reading, so it must be spread over every core even when an
/// input is one Parquet row group: the scan is not split by byte ranges (the
/// ranges of one row group leave all rows in one partition) but read in
/// small batches, which DataFusion then deals round robin to all partitions.
const SEGMENTATION_SETTINGS: &[(&str, &str)] =
    &[("datafusion.optimizer.repartition_file_scans", "false"), ("datafusion.execution.batch_size", "256")];

/// Run `statement` with session settings changed, restoring them afterwards.
async fn collect_with(ctx: &SessionContext, settings: &[(&str, &str)], statement: &str) -> Result<Vec<RecordBatch>> {
    let options = ctx.state().config().options().clone();
    let mut previous = Vec::new();
    for (key, value) in settings {
        let old = options.entries().into_iter().find(|e| e.key == *key).and_then(|e| e.value);
        previous.push((key, old.ok_or_else(|| Error::runtime(format!("no engine setting {key}")))?));
        collect(ctx, &format!("SET {key} = {value}")).await?;
    }
    let result = collect(ctx, statement).await;
    for (key, old) in previous {
        collect(ctx, &format!("SET {key} = {old}")).await?;
    }
    result
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// The field `column` of an input, or an error naming the input and its columns.
fn field<'a>(schema: &'a Schema, column: &str, input: &InputSpec, role: &str, flag: &str) -> Result<&'a Field> {
    schema.field_with_name(column).map_err(|_| {
        let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        Error::input(format!(
            "input '{}' ({}) has no column '{column}' for the {role}; its columns are: {}. Name the right one with {flag}",
            input.name,
            input.url,
            columns.join(", ")
        ))
    })
}

fn check_text(f: &Field, input: &InputSpec, role: &str) -> Result<()> {
    if is_text(f.data_type()) {
        Ok(())
    } else {
        Err(Error::input(format!(
            "column '{}' of input '{}' ({}) holds {}, but the {role} must be text (string)",
            f.name(),
            input.name,
            input.url,
            f.data_type()
        )))
    }
}

fn check_id(f: &Field, input: &InputSpec) -> Result<()> {
    let t = f.data_type();
    if is_text(t) || t.is_integer() || matches!(t, DataType::Date32 | DataType::Date64 | DataType::Decimal128(..)) {
        Ok(())
    } else {
        Err(Error::input(format!(
            "id column '{}' of input '{}' ({}) holds {t}: ids must be text or integers",
            f.name(),
            input.name,
            input.url
        )))
    }
}

/// Register every input and build the view `view` (the documents) over them.
async fn register_documents(ctx: &SessionContext, spec: &JobSpec, keep: &KeepRule, view: &str) -> Result<Vec<SchemaRef>> {
    let mut schemas = Vec::new();
    for (i, input) in spec.inputs.iter().enumerate() {
        let table = format!("input_{i}");
        let schema = register_parquet(ctx, &table, &input.url).await.map_err(|e| e.context(format!("input '{}'", input.name)))?;
        schemas.push(schema);
    }
    // The keep rule's column may be missing from some inputs (their
    // documents rank last), but not from all.
    let keep_type = match keep.column() {
        Some(c) => {
            let found = schemas.iter().find_map(|s| s.field_with_name(c).ok().map(|f| f.data_type().clone()));
            Some(found.ok_or_else(|| {
                Error::input(format!("no input has the column '{c}' that the keep rule '{keep}' orders by: check --keep"))
            })?)
        }
        None => None,
    };
    let mut selects = Vec::new();
    for (i, (input, schema)) in spec.inputs.iter().zip(&schemas).enumerate() {
        let table = format!("input_{i}");
        check_id(field(&schema, &spec.columns.id, input, "document id", "--id-col")?, input)?;
        check_text(field(&schema, &spec.columns.text, input, "document text", "--text-col")?, input, "document text")?;
        let title = match &spec.columns.title {
            Some(t) if t.is_empty() => "CAST(NULL AS VARCHAR)".into(),
            Some(t) => {
                check_text(field(&schema, t, input, "title", "--title-col")?, input, "title")?;
                ident(t)
            }
            None => match schema.field_with_name("title") {
                Ok(f) if is_text(f.data_type()) => ident("title"),
                _ => "CAST(NULL AS VARCHAR)".into(),
            },
        };
        let keep_key = match (keep.column(), &keep_type) {
            (Some(c), Some(t)) if schema.field_with_name(c).is_ok() => format!(",\n       arrow_cast({}, '{t}') AS keep_key", ident(c)),
            (Some(_), Some(t)) => format!(",\n       arrow_cast(NULL, '{t}') AS keep_key"),
            _ => String::new(),
        };
        selects.push(render(
            sql::DOCUMENTS,
            &[
                ("source", &literal(&input.name)),
                ("id", &ident(&spec.columns.id)),
                ("text", &ident(&spec.columns.text)),
                ("title", &title),
                ("keep_key", &keep_key),
                ("table", &ident(&table)),
            ],
        ));
    }
    collect(ctx, &format!("CREATE VIEW {view}_rows AS\n{}", selects.join("\nUNION ALL\n"))).await?;
    let rows = format!("{view}_rows");
    let statement = match spec.columns.duplicate_ids {
        DuplicateIds::Error => format!("CREATE VIEW {view} AS SELECT * FROM {rows}"),
        // One row per id, the same whatever the order rows are read in.
        DuplicateIds::KeepFirst => format!(
            "CREATE VIEW {view} AS SELECT * EXCLUDE (duplicate_rank) FROM (\
             SELECT *, row_number() OVER (PARTITION BY source, id ORDER BY text, title) AS duplicate_rank FROM {rows}) \
             WHERE duplicate_rank = 1"
        ),
    };
    collect(ctx, &statement).await?;
    Ok(schemas)
}

/// Every document needs an id, unique within its input: a duplicate or
/// missing id is bad input (named, with the input), never silently merged.
/// Returns the rows dropped as repeated ids (with `--duplicate-ids keep-first`).
async fn check_ids(ctx: &SessionContext, view: &str, duplicates: DuplicateIds) -> Result<u64> {
    let repeated = match duplicates {
        DuplicateIds::Error => "count(*) > 1 OR id IS NULL",
        DuplicateIds::KeepFirst => "id IS NULL",
    };
    let batches = collect(
        ctx,
        &format!(
            "SELECT source, id, count(*) AS n FROM {view}_rows GROUP BY source, id HAVING {repeated} \
             ORDER BY n DESC, source, id LIMIT 5"
        ),
    )
    .await?;
    let mut found = Vec::new();
    for b in &batches {
        let (sources, counts) = (strings(b, 0)?, column_u64(b, 2)?);
        let ids = b.column(1);
        for r in 0..b.num_rows() {
            found.push(match ids.is_null(r) {
                true => format!("input '{}': {} document(s) without an id", sources[r], counts.value(r)),
                false => format!("input '{}': id '{}' on {} documents", sources[r], strings(b, 1)?[r], counts.value(r)),
            });
        }
    }
    if !found.is_empty() {
        return Err(Error::input(format!(
            "document ids must be present and unique within an input: {}. Remove the duplicates, keep one \
             row per id with --duplicate-ids keep-first, or give the right id column with --id-col",
            found.join("; ")
        )));
    }
    match duplicates {
        DuplicateIds::Error => Ok(0),
        DuplicateIds::KeepFirst => {
            scalar_u64(
                ctx,
                &format!(
                    "SELECT COALESCE(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM {view}_rows GROUP BY source, id HAVING count(*) > 1)"
                ),
            )
            .await
        }
    }
}

/// After a failed read: find the input file that cannot be decoded (damaged
/// pages, text that is not UTF-8) and name it, reading each file alone.
/// Returns `error` unchanged when every file reads.
async fn name_bad_file(ctx: &SessionContext, spec: &JobSpec, error: Error) -> Error {
    if !matches!(&error, Error::Runtime(m) if m.contains("Parquet") || m.contains("Arrow error")) {
        return error;
    }
    for input in &spec.inputs {
        let Ok((table_url, files)) = crate::storage::list_parquet_files(ctx, &input.url).await else { continue };
        for f in files {
            let url = format!("{}{}", table_url.object_store().as_str(), f.location);
            let probe = async {
                let schema = register_parquet(ctx, "probe_file", &url).await?;
                // Functions of every value: a bare count could be answered from statistics.
                let mut columns = vec![format!("sum(length(CAST({} AS VARCHAR)))", ident(&spec.columns.id))];
                for c in [Some(&spec.columns.text), spec.columns.title.as_ref()].into_iter().flatten() {
                    if schema.field_with_name(c).is_ok() && !c.is_empty() {
                        columns.push(format!("sum(length({}))", ident(c)));
                    }
                }
                collect(ctx, &format!("SELECT {} FROM probe_file", columns.join(", "))).await
            }
            .await;
            let _ = ctx.deregister_table("probe_file");
            if let Err(e) = probe {
                return Error::input(format!(
                    "input '{}': file '{}' cannot be read: {e}. The file is damaged or its text is not valid \
                     UTF-8: repair it or remove it from the input",
                    input.name,
                    crate::storage::display_location(&url)
                ));
            }
        }
    }
    error
}

/// Commit the output with the summary, or remove what was staged.
async fn finish(out: OutputDir, result: Result<Summary>, progress: Progress) -> Result<Summary> {
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
    let ctx = context(&spec.engine).await?;
    let mut progress = Progress::new(options);
    let Some(store_options) = &spec.store else {
        register_documents(&ctx, spec, &keep, "documents").await?;
        let dropped = match check_ids(&ctx, "documents", spec.columns.duplicate_ids).await {
            Ok(n) => n,
            Err(e) => return Err(name_bad_file(&ctx, spec, e).await),
        };
        progress.done("inputs", format!("{} input(s) checked", spec.inputs.len()));
        if options.dry_run {
            return dry_run(&ctx, spec, with_join, None, spec.overwrite).await;
        }
        let out = OutputDir::prepare(&ctx, &spec.output, spec.overwrite).await?;
        let result = dedup_stages(&ctx, spec, &keep, &out, &mut progress, with_join, None).await;
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
    let result = store_night(&ctx, spec, options, store_options, &keep, progress, lease.as_ref()).await;
    if let Some(lease) = lease {
        lease.release().await;
    }
    result
}

/// A night against a store (under its lease, unless a dry run).
async fn store_night(
    ctx: &SessionContext,
    spec: &JobSpec,
    options: &RunOptions,
    store_options: &crate::job::StoreOptions,
    keep: &KeepRule,
    mut progress: Progress,
    lease: Option<&Lease>,
) -> Result<Summary> {
    let settings = FingerprintSettings::of(&spec.fingerprint);
    let minhash = spec.join.candidates.minhash().then_some(spec.join.minhash);
    let mut store =
        StoreRun::open(&ctx, store_options, &settings, &keep, minhash, spec.fingerprint.idf_model.as_deref()).await?;
    register_documents(&ctx, spec, &keep, "documents_input").await?;
    let dropped = match check_ids(&ctx, "documents_input", spec.columns.duplicate_ids).await {
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
        let mut summary = dry_run(&ctx, &run_spec, true, Some(&store), overwrite).await?;
        summary.store = Some(crate::job::StoreSummary {
            url: store.url().to_string(),
            run_id: store.run_id.clone(),
            earlier_runs: store.earlier_runs(),
            already_stored,
            idf_model: store.manifest.as_ref().map_or_else(|| "(created by this run)".into(), |m| m.idf_model.clone()),
            created: store.manifest.is_none(),
            ..Default::default()
        });
        return Ok(summary);
    }
    let out = OutputDir::prepare(&ctx, &spec.output, overwrite).await?;
    let result = match nightly::documents_not_stored(&ctx, &out, &already).await {
        Ok(()) => dedup_stages(&ctx, &run_spec, &keep, &out, &mut progress, true, Some((&mut store, already_stored, reads, lease))).await,
        Err(e) => Err(e),
    };
    let result = match result {
        Err(e) => Err(name_bad_file(&ctx, spec, e).await),
        Ok(summary) => Ok(Summary { duplicate_ids_dropped: dropped, ..summary }),
    };
    finish(out, result, progress).await
}

async fn dedup_stages(
    ctx: &SessionContext,
    spec: &JobSpec,
    keep: &KeepRule,
    out: &OutputDir,
    progress: &mut Progress,
    with_join: bool,
    store: Option<(&mut StoreRun, u64, crate::job::summary::StoreReads, Option<&Lease>)>,
) -> Result<Summary> {
    let settings = FingerprintSettings::of(&spec.fingerprint);
    let keep_key = if keep.column().is_some() { ", keep_key" } else { "" };
    let (boilerplate, boilerplate_lines) = boilerplate_stage(ctx, &spec.fingerprint, progress).await?;
    let corpus_n = segment_stage(ctx, &spec.fingerprint, keep_key, &boilerplate, out, progress).await?;
    let idf = corpus_df_stage(ctx, &spec.fingerprint, &settings, corpus_n, out, progress).await?;
    let meta = fingerprint_stage(ctx, spec, &settings, keep_key, &idf, corpus_n, out, progress).await?;

    let mut summary = if let Some((store, already_stored, reads, lease)) = store {
        let night = nightly::Night {
            spec,
            keep,
            settings: &settings,
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

    summary.command = if with_join { "dedup" } else { "fingerprint" }.into();
    summary.output = out.url().to_string();
    summary.settings = Some(settings);
    summary.idf = idf.summary;
    summary.boilerplate_lines = boilerplate_lines;
    summary.inputs = input_counts(ctx, &spec.inputs).await?;
    summary.documents = summary.inputs.iter().map(|i| i.documents).sum();
    summary.documents_without_terms = summary.inputs.iter().map(|i| i.documents_without_terms).sum();
    Ok(summary)
}

/// Stage `boilerplate` (optional): the hashes of lines found in at least
/// `--boilerplate-lines` documents, as the SQL set literal that segmentation
/// leaves out (`NULL`: none), and how many there are.
async fn boilerplate_stage(ctx: &SessionContext, fp: &FingerprintOptions, progress: &mut Progress) -> Result<(String, u64)> {
    let Some(n) = fp.boilerplate_lines else {
        return Ok(("NULL".to_string(), 0));
    };
    let batches = collect(ctx, &render(sql::BOILERPLATE_LINES, &[("min_docs", &n.to_string())])).await?;
    let mut hashes = Vec::new();
    for b in &batches {
        hashes.extend_from_slice(column_u64(b, 0)?.values());
    }
    let lines = hashes.len() as u64;
    progress.done("boilerplate", format!("{lines} lines in at least {n} documents"));
    Ok((literal(&crate::text::format_set(&hashes)), lines))
}

/// Stage `segment`: every document segmented once, into the work table
/// `terms`; returns the documents with terms.
async fn segment_stage(
    ctx: &SessionContext,
    fp: &FingerprintOptions,
    keep_key: &str,
    boilerplate: &str,
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
                ("keep_key", keep_key),
                ("tokenizer", &literal(&fp.tokenizer)),
                ("analyzer_options", &literal(&fp.analyzer_options().to_options_string())),
                ("with_pos", if fp.weighting.needs_pos() { "true" } else { "false" }),
                ("boilerplate", boilerplate),
                ("path", &literal(&terms_path)),
            ],
        ),
    )
    .await?;
    register_parquet(ctx, "terms", &terms_path).await?;
    let corpus_n = scalar_u64(ctx, sql::CORPUS_SIZE).await?;
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
            collect(ctx, &render(sql::CORPUS_DF, &[("path", &literal(&df_path))])).await?;
            seal(ctx, &df_path, Some(&meta)).await?;
            register_parquet(ctx, "corpus_df", &df_path).await?;
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
    let ((urls, version), n_docs) = match &idf.model {
        Some(IdfModel { files: (urls, version), n_docs, .. }) => ((literal(urls), literal(version)), n_docs.to_string()),
        None => (("NULL".into(), "NULL".into()), "NULL".into()),
    };
    let fp_path = out.staged("fingerprints/part-00000.parquet");
    let minhash = spec.join.candidates.minhash().then_some(spec.join.minhash);
    let meta = FileMetadata { settings: settings.clone(), idf_n_docs: idf.summary.as_ref().map(|i| i.n_docs), idf_model: None, minhash };
    collect(
        ctx,
        &render(
            sql::FINGERPRINTS,
            &[
                ("model", &urls),
                ("model_version", &version),
                ("n_docs", &n_docs),
                ("weighting", &literal(&fp.weighting.to_string())),
                ("formula", &literal(fp.idf.as_str())),
                ("top_k", &fp.top_k.map_or("NULL".to_string(), |k| k.to_string())),
                ("minhash", &minhash_expression(minhash, "term_set")),
                ("keep_key", keep_key),
                ("path", &literal(&fp_path)),
            ],
        ),
    )
    .await?;
    seal(ctx, &fp_path, Some(&meta)).await?;
    register_parquet(ctx, "fingerprints", &fp_path).await?;
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
                ("table", &ident(&format!("input_{i}"))),
                ("source", &literal(&input.name)),
                ("id", &ident(&spec.columns.id)),
                ("path", &literal(&path)),
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
    register_parquet(ctx, "corpus_df", model).await?;
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

/// `(source, id)` rows as Parquet.
pub(super) fn documents_parquet(rows: &[(String, String)]) -> Result<Vec<u8>> {
    let schema = Arc::new(Schema::new(vec![Field::new("source", DataType::Utf8, false), Field::new("id", DataType::Utf8, false)]));
    let sources: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str())));
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str())));
    write_parquet(schema, vec![sources, ids])
}

/// Record batches of one schema as an in-memory Parquet file.
pub(super) fn write_batches(schema: SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut buffer = Vec::new();
    // A work file, read once: dictionaries of hashes and ids would cost
    // more to build than they save.
    let props = WriterProperties::builder().set_dictionary_enabled(false).build();
    let mut writer = ArrowWriter::try_new(&mut buffer, schema.clone(), Some(props))?;
    for batch in batches {
        writer.write(&conform(batch, &schema)?)?;
    }
    writer.close()?;
    Ok(buffer)
}

/// `batch` with the column types of `schema`: files written by other
/// versions or engines may hold a column in another layout of the same type
/// (Utf8 and Utf8View).
pub(super) fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch.columns().iter().zip(schema.fields()).map(|(c, f)| cast(c, f.data_type())).collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// One record batch as an in-memory Parquet file.
fn write_parquet(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<Vec<u8>> {
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, schema, None)?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(buffer)
}

/// `(simhash, cluster_id)` for every fingerprint with a near pair, as Parquet.
pub(super) fn components_parquet(labels: &[(u64, u64)]) -> Result<Vec<u8>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("simhash", DataType::UInt64, false),
        Field::new("cluster_id", DataType::UInt64, false),
    ]));
    let nodes: ArrayRef = Arc::new(UInt64Array::from_iter_values(labels.iter().map(|l| l.0)));
    let ids: ArrayRef = Arc::new(UInt64Array::from_iter_values(labels.iter().map(|l| l.1)));
    write_parquet(schema, vec![nodes, ids])
}

/// The join, components, clusters and pairs over a registered `fingerprints`
/// table with columns source, id, simhash (and n_chars / keep_key for the
/// keep rules that use them).
/// The view `eligible`: the fingerprints without the `rejected` documents
/// (kept in the work folder as `unconfirmed`).
pub(super) async fn eligible_without(ctx: &SessionContext, out: &OutputDir, rejected: &[(String, String)]) -> Result<()> {
    out.put("_work/unconfirmed.parquet", documents_parquet(rejected)?).await?;
    register_parquet(ctx, "unconfirmed", &out.staged("_work/unconfirmed.parquet")).await?;
    collect(
        ctx,
        "CREATE VIEW eligible AS SELECT * FROM fingerprints f \
         WHERE NOT EXISTS (SELECT 1 FROM unconfirmed u WHERE u.source = f.source AND u.id = f.id)",
    )
    .await?;
    Ok(())
}

/// What [`near_pairs`] found.
pub(super) struct NearPairs {
    pub plan: Option<BandPlan>,
    pub candidates: u64,
    /// Pairs of fingerprints that passed the check (table `near_pairs`).
    pub edges: Vec<(u64, u64)>,
}

impl NearPairs {
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
            max_hamming: join.max_hamming,
            band_plan: self.plan.as_ref().map(|plan| BandPlanSummary::of(plan, join.blocks.is_none())),
            candidates: candidates_name(join),
            candidate_pairs: self.candidates,
            verify: join.verify.to_string(),
            unconfirmed_copies: unconfirmed,
            keep: keep.to_string(),
            ..Summary::default()
        };
        out.put("_work/components.parquet", components_parquet(&components(self.edges))?).await?;
        register_parquet(ctx, "components", &out.staged("_work/components.parquet")).await?;
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
        .map_err(Error::Input)?;
        let path = out.staged("_work/candidates/simhash.parquet");
        collect(ctx, &render(sql::NEAR_PAIRS, &[("path", &literal(&path)), ("k", &k.to_string()), ("m", &p.m.to_string())])).await?;
        sources.push(format!("k = {k}, m = {}, {} bands", p.m, p.bands()));
        plan = Some(p);
    }
    if join.candidates.minhash() {
        let buckets = out.staged("_work/minhash_buckets.parquet");
        collect(ctx, &render(sql::MINHASH_BUCKETS, &[("path", &literal(&buckets))])).await?;
        register_parquet(ctx, "minhash_buckets", &buckets).await?;
        let path = out.staged("_work/candidates/minhash.parquet");
        // Hot buckets give only pairs that pass a Jaccard check; other
        // checks take every pair of every bucket.
        let (hot, threshold) = match join.verify {
            Verify::Jaccard(t) => (HOT_BUCKET.to_string(), format!("{t:?}")),
            _ => (i64::MAX.to_string(), "1.0".to_string()),
        };
        let target = literal(&path);
        collect(ctx, &render(sql::MINHASH_CANDIDATES, &[("path", &target), ("hot", &hot), ("threshold", &threshold)])).await?;
        sources.push(format!("MinHash {}", join.minhash));
    }
    let candidates_path = out.staged("_work/candidates/");
    register_parquet(ctx, "candidates", &candidates_path).await?;
    let candidates = scalar_u64(ctx, "SELECT count(*) FROM (SELECT DISTINCT simhash_a, simhash_b FROM candidates)").await?;
    let sources = sources.join("; ");
    progress.done("join", describe(candidates, &sources));
    progress.begin("verify", None);
    let near_path = match join.verify.measure() {
        None => candidates_path,
        Some((measure, threshold)) => {
            let near_path = out.staged("_work/near_pairs.parquet");
            let statement = render(
                sql::VERIFIED_PAIRS,
                &[("path", &literal(&near_path)), ("measure", &literal(measure)), ("threshold", &format!("{threshold:?}"))],
            );
            collect(ctx, &statement).await?;
            near_path
        }
    };
    register_parquet(ctx, "near_pairs", &near_path).await?;
    let mut edges = Vec::new();
    for b in &collect(ctx, "SELECT simhash_a, simhash_b FROM near_pairs").await? {
        let (a, c) = (column_u64(b, 0)?, column_u64(b, 1)?);
        edges.extend(a.values().iter().copied().zip(c.values().iter().copied()));
    }
    Ok(NearPairs { plan, candidates, edges })
}

async fn join_stages(
    ctx: &SessionContext,
    join: &JoinOptions,
    keep: &KeepRule,
    out: &OutputDir,
    meta: Option<&FileMetadata>,
    progress: &mut Progress,
) -> Result<Summary> {
    progress.begin("join", None);
    // A one-shot run is a store's first night: nothing is stored (the
    // shared statements 50, 51 and 57 read `stored`).
    collect(ctx, "CREATE VIEW stored AS SELECT * FROM fingerprints WHERE false").await?;
    let distinct = scalar_u64(ctx, "SELECT count(DISTINCT simhash) FROM fingerprints").await?;
    let verify = join.verify;

    // The documents that take part: all, or with verification all but the
    // copies a shared fingerprint's largest consistent subgroup leaves out
    // (sql/56_unconfirmed_copies.sql).
    let unconfirmed = match verify.measure() {
        None => {
            collect(ctx, "CREATE VIEW eligible AS SELECT * FROM fingerprints").await?;
            0
        }
        Some(_) => {
            let batches = collect(ctx, sql::UNCONFIRMED_COPIES).await?;
            let rejected = unconfirmed_copies(&batches, verify)?;
            eligible_without(ctx, out, &rejected).await?;
            let sets_path = out.staged("_work/term_sets.parquet");
            collect(ctx, &render(sql::TERM_SETS, &[("tonight", "eligible"), ("path", &literal(&sets_path))])).await?;
            register_parquet(ctx, "term_sets", &sets_path).await?;
            rejected.len() as u64
        }
    };

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

    let clusters_path = out.staged("clusters/part-00000.parquet");
    collect(ctx, &render(sql::CLUSTERS, &[("path", &literal(&clusters_path)), ("keep_order", keep.order_by())])).await?;
    seal(ctx, &clusters_path, meta).await?;
    register_parquet(ctx, "clusters", &clusters_path).await?;
    let batches = collect(ctx, "SELECT count(DISTINCT cluster_id), count(*) FROM clusters").await?;
    let (clusters, in_clusters) = (column_u64(&batches[0], 0)?.value(0), column_u64(&batches[0], 1)?.value(0));
    progress.done("clusters", format!("{clusters} clusters holding {in_clusters} documents"));
    progress.begin("pairs", None);

    let pairs_path = out.staged("pairs/part-00000.parquet");
    collect(ctx, &render(sql::PAIRS, &[("path", &literal(&pairs_path))])).await?;
    seal(ctx, &pairs_path, meta).await?;
    register_parquet(ctx, "pairs", &pairs_path).await?;
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

/// A dry run: the inputs are registered and checked (columns, types,
/// Parquet files), the output is checked to be writable; nothing is written.
async fn dry_run(ctx: &SessionContext, spec: &JobSpec, with_join: bool, store: Option<&StoreRun>, overwrite: bool) -> Result<Summary> {
    let mut inputs = Vec::new();
    for (i, input) in spec.inputs.iter().enumerate() {
        let (_, files) = crate::storage::list_parquet_files(ctx, &input.url).await?;
        let rows = scalar_u64(ctx, &format!("SELECT count(*) FROM {}", ident(&format!("input_{i}")))).await?;
        inputs.push(PlanInput {
            name: input.name.clone(),
            url: input.url.clone(),
            files: files.len() as u64,
            bytes: files.iter().map(|f| f.size).sum(),
            rows,
        });
    }
    let output_action = OutputDir::check(ctx, &spec.output, overwrite).await?.to_string();
    let fp = &spec.fingerprint;
    let idf = match (&fp.idf_model, fp.weighting.needs_idf(), store) {
        (_, false, _) => "none (weighting without IDF)".to_string(),
        (Some(model), true, Some(s)) if s.manifest.is_some() => format!("the store's frozen model {model}"),
        (Some(model), true, _) => format!("saved model {model}"),
        (None, true, Some(_)) => "this run's documents (frozen into the new store)".to_string(),
        (None, true, None) => "this run's documents (corpus document frequencies)".to_string(),
    };
    let mut stages: Vec<&str> = vec!["segment (20_terms.sql)"];
    if fp.weighting.needs_idf() && fp.idf_model.is_none() {
        stages.push("corpus_df (31_corpus_df.sql)");
    }
    stages.push("fingerprints (40_fingerprints.sql)");
    if store.is_some() {
        stages.extend([
            "term sets (57_term_sets.sql)",
            "candidates of tonight's fingerprints (50_near_pairs.sql, 51_minhash_buckets.sql, 52_minhash_candidates.sql)",
            "verify (55_verified_pairs.sql)",
            "representatives, the run's partition (94_store_run.sql)",
            "report (95_store_clusters.sql, 70_pairs.sql)",
        ]);
    } else if with_join {
        stages.extend(["candidates (50_near_pairs.sql, 51_minhash_buckets.sql, 52_minhash_candidates.sql)", "verify (55_verified_pairs.sql)", "clusters (60_clusters.sql)", "pairs (70_pairs.sql)"]);
    }
    Ok(Summary {
        neardup_version: env!("CARGO_PKG_VERSION").into(),
        command: if with_join { "dedup" } else { "fingerprint" }.into(),
        output: spec.output.clone(),
        settings: Some(FingerprintSettings::of(fp)),
        keep: spec.keep.clone(),
        plan: Some(Plan { inputs, output: spec.output.clone(), output_action, idf, stages: stages.into_iter().map(String::from).collect() }),
        ..Summary::default()
    })
}

/// The SQL of a `minhash` column: the band keys of the term set in column
/// `set` with `plan`, or NULL without MinHash candidates.
fn minhash_expression(plan: Option<MinHashPlan>, set: &str) -> String {
    match plan {
        Some(p) => format!("minhash_keys({set}, {}, {})", p.bands, p.rows),
        None => "CAST(NULL AS BIGINT UNSIGNED[])".to_string(),
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

/// Run `neardup pairs`: the join and clustering over existing fingerprints.
pub async fn run_pairs(spec: &PairsSpec, options: &RunOptions) -> Result<Summary> {
    let keep = KeepRule::parse(&spec.keep)?;
    spec.join.validate()?;
    crate::storage::check_input_names(std::slice::from_ref(&spec.fingerprints))?;
    let ctx = context(&spec.engine).await?;
    let mut progress = Progress::new(options);
    let input = &spec.fingerprints;
    let settings = check_fingerprint_settings(&ctx, &input.url).await?;
    let schema = register_parquet(&ctx, "fingerprints_input", &input.url).await?;
    let simhash = field(&schema, "simhash", input, "fingerprint", "a column named simhash")?;
    if !simhash.data_type().is_integer() {
        return Err(Error::input(format!(
            "column 'simhash' of '{}' holds {}, but fingerprints must be 64-bit unsigned integers",
            input.url,
            simhash.data_type()
        )));
    }
    check_id(field(&schema, "id", input, "document id", "a column named id")?, input)?;
    let source = match schema.field_with_name("source") {
        Ok(_) => format!("COALESCE(CAST(source AS VARCHAR), {})", literal(&input.name)),
        Err(_) => literal(&input.name),
    };
    let extra = match &keep {
        KeepRule::SmallestId => String::new(),
        KeepRule::Longest => {
            field(&schema, "n_chars", input, "keep rule 'longest'", "--keep smallest-id")?;
            ", n_chars".into()
        }
        KeepRule::Earliest(c) | KeepRule::Latest(c) => {
            field(&schema, c, input, "keep rule", "--keep")?;
            format!(", {} AS keep_key", ident(c))
        }
    };
    // MinHash band keys: the file's own when made with this plan, else
    // computed here, once per document.
    let plan = spec.join.candidates.minhash().then_some(spec.join.minhash);
    let stored_plan = parquet_key_values(&ctx, &input.url)
        .await?
        .iter()
        .filter_map(|(_, kv)| serde_json::from_str::<FileMetadata>(kv.get(METADATA_KEY)?).ok())
        .map(|m| m.minhash)
        .reduce(|a, b| if a == b { a } else { None })
        .flatten();
    let minhash = if plan.is_some() && plan == stored_plan && schema.field_with_name("minhash").is_ok() {
        "minhash".to_string()
    } else {
        minhash_expression(plan, "term_set")
    };
    let term_set = match schema.field_with_name("term_set") {
        Ok(_) => format!(", term_set, {minhash} AS minhash"),
        Err(_) if spec.join.verify != Verify::None => {
            return Err(Error::input(format!(
                "'{}' has no term_set column, which --verify and --candidates minhash compare: \
                 recompute the fingerprints with this version of neardup dedup",
                input.url
            )))
        }
        Err(_) => String::new(),
    };
    collect(
        &ctx,
        &format!(
            "CREATE VIEW fingerprints AS SELECT {source} AS source, CAST(id AS VARCHAR) AS id, \
             CAST(simhash AS BIGINT UNSIGNED) AS simhash{term_set}{extra} FROM fingerprints_input"
        ),
    )
    .await?;
    progress.done("inputs", format!("fingerprints from '{}'", input.url));
    let out = OutputDir::prepare(&ctx, &spec.output, spec.overwrite).await?;
    let result = async {
        let meta = settings.clone().map(|settings| FileMetadata { settings, idf_n_docs: None, idf_model: None, minhash: None });
        let mut summary = join_stages(&ctx, &spec.join, &keep, &out, meta.as_ref(), &mut progress).await?;
        summary.command = "pairs".into();
        summary.output = out.url().to_string();
        summary.settings = settings;
        // The table's documents, whatever sources they carry.
        let batches = collect(&ctx, "SELECT count(*), count(*) - count(simhash) FROM fingerprints").await?;
        let (documents, documents_without_terms) = (column_u64(&batches[0], 0)?.value(0), column_u64(&batches[0], 1)?.value(0));
        summary.inputs =
            vec![InputSummary { name: input.name.clone(), url: input.url.clone(), documents, documents_without_terms }];
        summary.documents = documents;
        summary.documents_without_terms = documents_without_terms;
        Ok(summary)
    }
    .await;
    finish(out, result, progress).await
}

/// The settings all files of a fingerprint table were made with; an error
/// if they differ. `None` for tables without neardup metadata.
async fn check_fingerprint_settings(ctx: &SessionContext, url: &str) -> Result<Option<FingerprintSettings>> {
    let mut found: Option<(String, FingerprintSettings)> = None;
    for (file, kv) in parquet_key_values(ctx, url).await? {
        let Some(meta) = kv.get(METADATA_KEY) else { continue };
        let meta: FileMetadata = serde_json::from_str(meta)
            .map_err(|e| Error::input(format!("'{file}' has unreadable neardup metadata: {e}")))?;
        match &found {
            None => found = Some((file, meta.settings)),
            Some((first, seen)) if *seen != meta.settings => {
                let json = |s: &FingerprintSettings| serde_json::to_string(s).expect("settings serialise");
                return Err(Error::input(format!(
                    "fingerprints in '{first}' and '{file}' were made with different settings ({} vs {}): \
                     they cannot be compared; recompute one of them with the other's settings",
                    json(seen),
                    json(&meta.settings)
                )));
            }
            _ => {}
        }
    }
    Ok(found.map(|(_, settings)| settings))
}
