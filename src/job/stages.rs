//! The stages that make fingerprints (sql/15 to 40) and the survivors
//! (sql/80): each a short function over the run's context ([`Run`]),
//! named after the step it reports.

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::prelude::SessionContext;

use super::line_set::LineSet;
use super::context::Run;
use super::inputs::{repeated_ids_table, surviving_rows, view_of_first_rows};
use super::query::{collect, collect_with, column_u64, work_table, first_per_id_in_memory, scalar_u64, sorted_in_memory, work_table_with, WHOLE_FILE_SCANS, WORK_BATCH_ROWS};
use super::sql::{self, render, table, Param};
use super::summary::{FingerprintSettings, IdfSummary};
use super::tables::{materialize, materialize_held, swap_table, FileMetadata, METADATA_KEY};
use super::candidates::minhash_expression;
use crate::error::{Error, Result};
use crate::udf::HeldDf;
use crate::storage::{copy_file, parquet_key_values, register_parquet};

/// How the statements that run a costly function on every document
/// (boilerplate lines, segmentation) read it: in batches of how many rows.
/// Over the documents held in memory (`held`, [`hold_documents`]), a work
/// table's batch: they were dealt to every core as they were read, so batches
/// that large keep every core busy, and the terms come out in batches the
/// table keeps as they are (in batches of 256 rows, joining them up took 5 %
/// of a one-core `fingerprint` over `weibo_reposts`; docs/performance.md).
/// Over the inputs themselves, the function costs far more per row than
/// reading, so it must be spread over every core even when an input is one
/// Parquet row group: inputs are read whole (`WHOLE_FILE_SCANS`), in batches
/// of about a MiB of text, which DataFusion deals round robin to all
/// partitions ([`super::footprint::document_batch_rows`]).
struct PerDocument {
    batch_rows: String,
}

impl PerDocument {
    fn of(ctx: &SessionContext, held: bool) -> PerDocument {
        let rows = match held {
            true => WORK_BATCH_ROWS as u64,
            false => super::footprint::document_batch_rows(ctx),
        };
        PerDocument { batch_rows: rows.to_string() }
    }

    /// The statements' settings: whole files, batches of these rows.
    fn settings(&self) -> [(&str, &str); 2] {
        [WHOLE_FILE_SCANS, ("datafusion.execution.batch_size", self.batch_rows.as_str())]
    }
}

/// The documents read once into memory and sorted by (source, id),
/// registered as `documents` in place of the view, which is returned to be
/// put back ([`release_documents`]) once segmentation is done; nothing when
/// the run's work does not stay in memory (sql/12_documents_in_memory.sql).
/// Its partitions, one a core, are each sorted, in batches of
/// [`WORK_BATCH_ROWS`] as the segmentation statement scans them, so
/// each partition of the table of terms comes out in (source, id) order and
/// is not sorted again (query::work_table_sorted checks it).
///
/// With `first_per_id` (`--duplicate-ids keep-first`, the repeated ids not
/// yet found: inputs.rs, `check_ids`) the held documents are one row per id
/// ([`super::first_per_id`]), and the view put back at the end leaves out
/// the other rows of the repeated ids found.
pub(super) async fn hold_documents(run: &Run<'_>, first_per_id: bool) -> Result<Option<Held>> {
    let ctx = run.ctx;
    if !crate::session::work_in_memory(ctx) {
        return match first_per_id {
            true => Err(Error::runtime("the repeated ids are left to documents held in memory, and the work is not in memory")),
            false => Ok(None),
        };
    }
    let statement = render(sql::DOCUMENTS_IN_MEMORY, &[]);
    if !first_per_id {
        let held = sorted_in_memory(ctx, &statement, &["source", "id"], WORK_BATCH_ROWS).await?;
        return Ok(Some(Held { replaced: swap_documents(ctx, held)?, duplicate_ids_dropped: 0 }));
    }
    let (held, found) = first_per_id_in_memory(ctx, &statement, WORK_BATCH_ROWS).await?;
    // The view that later readers (the report's texts) read in its place:
    // the inputs, one row per id as held here.
    ctx.deregister_table(table::DOCUMENTS)?;
    view_of_first_rows(ctx, run.out, table::DOCUMENTS, &found.repeated, (held.schema(), found.kept)).await?;
    Ok(Some(Held { replaced: swap_documents(ctx, held)?, duplicate_ids_dropped: found.dropped }))
}

/// The documents held in memory ([`hold_documents`]).
pub(super) struct Held {
    /// The view of the documents they stand in for.
    replaced: Arc<dyn TableProvider>,
    /// The rows left out as repeated ids.
    pub duplicate_ids_dropped: u64,
}

/// Put the view `documents` back in place of the documents held in memory
/// ([`hold_documents`]) for every later statement. The held rows stay, as
/// [`super::report::HELD_DOCUMENTS`], for the report's texts: the texts of
/// an input of one row group are one column chunk, and the few members'
/// texts were spread over most of its pages, so reading them back decoded
/// nearly all (Heybox: 106 of the report's 149 ms). They are the rows the
/// view gives, one per id with `--duplicate-ids keep-first`. Kept, they
/// raise Heybox's peak by about 25 MB, which the terms read once give back
/// (`query::read_once`; docs/performance.md).
pub(super) fn release_documents(ctx: &SessionContext, held: Held) -> Result<()> {
    let documents = swap_documents(ctx, held.replaced)?;
    ctx.register_table(super::report::HELD_DOCUMENTS, documents)?;
    Ok(())
}

/// Register `documents` as the table `documents`; returns the one it replaces.
fn swap_documents(ctx: &SessionContext, documents: Arc<dyn TableProvider>) -> Result<Arc<dyn TableProvider>> {
    swap_table(ctx, table::DOCUMENTS, documents)
}

/// Stage `boilerplate` (optional): the hashes of lines found in at least
/// `--boilerplate-lines` documents, the set that segmentation leaves out
/// (none: `None`). With `--boilerplate-set` (a store's frozen set, which
/// every night after its first is given) the set is read, not counted.
/// `held`: the documents are held in memory ([`hold_documents`]).
pub(super) async fn boilerplate_stage(run: &mut Run<'_>, held: bool) -> Result<Option<LineSet>> {
    let fp = &run.job.spec.fingerprint;
    let Some(n) = fp.boilerplate_min_docs() else {
        return Ok(None);
    };
    if let Some(url) = &fp.boilerplate_set {
        let set = LineSet::read(crate::storage::read_object(run.ctx, url).await?, url)?;
        run.progress.done("boilerplate", format!("{} lines of the frozen set '{url}'", set.hashes.len()));
        return Ok(Some(set));
    }
    let batches = collect_with(run.ctx, &PerDocument::of(run.ctx, held).settings(), &render(sql::BOILERPLATE_LINES, &[("min_docs", Param::Int(u64::from(n)))])).await?;
    let mut hashes = Vec::new();
    for b in &batches {
        hashes.extend_from_slice(column_u64(b, 0)?.values());
    }
    run.progress.done("boilerplate", format!("{} lines in at least {n} documents", hashes.len()));
    Ok(Some(LineSet::counted(hashes)?))
}

/// Stage `segment`: every document segmented once, into the work table
/// `terms`; returns the documents with terms. `held`: the documents are
/// held in memory ([`hold_documents`]).
pub(super) async fn segment_stage(run: &mut Run<'_>, boilerplate: Option<&str>, held: bool) -> Result<u64> {
    // The analyzer was built beside the earlier stages: its errors show here.
    run.job.analyzer_ready()?;
    let (ctx, fp) = (run.ctx, &run.job.spec.fingerprint);
    let terms_path = run.out.staged("_work/terms.parquet");
    if run.progress.shows_bar() {
        run.progress.begin("segment", Some(scalar_u64(ctx, "SELECT count(*) FROM documents").await?));
    }
    let statement = render(
        sql::TERMS,
        &[
            ("keep_key", Param::Sql(run.job.keep_key())),
            ("tokenizer", Param::Text(&run.job.tokenizer.to_string())),
            ("analyzer_options", Param::Text(&fp.analyzer_options().to_options_string())),
            ("with_pos", Param::Bool(fp.weighting.needs_pos())),
            ("boilerplate", Param::TextOrNull(boilerplate)),
            ("path", Param::Text(&terms_path)),
        ],
    );
    // In the order of 40_fingerprints.sql's output, which then needs no
    // sort; already in that order when the documents are held in memory.
    work_table_with(ctx, &PerDocument::of(ctx, held).settings(), (&statement, &terms_path, table::TERMS), &["source", "id"]).await?;
    let corpus_n = scalar_u64(ctx, &render(sql::CORPUS_SIZE, &[])).await?;
    run.progress.done("segment", format!("{corpus_n} documents with terms"));
    Ok(corpus_n)
}

/// The document frequencies the fingerprints are weighted with.
pub(super) struct IdfModel {
    /// Its files and version, as `idf_simhash` takes them.
    pub files: (String, String),
    pub n_docs: u64,
    /// The df table: a work file, the model the run was given, or the
    /// location of `held`.
    pub location: String,
    /// The df table in memory, kept for as long as the run lasts (only
    /// dropped: `idf_simhash` finds it by its location).
    _held: Option<HeldDf>,
}

/// What stage `corpus_df` leaves: its summary, and the model the
/// fingerprints use (none for a weighting without idf).
#[derive(Default)]
pub(super) struct Idf {
    pub summary: Option<IdfSummary>,
    pub model: Option<IdfModel>,
}

/// Stage `corpus_df`: corpus document frequencies, or a saved model.
/// Computed also for weightings without idf when a model is to be saved.
/// With `may_hold` (a one-shot run) and the work in memory, the counted
/// table stays in memory unless it is to be saved: nothing but this run's
/// fingerprints reads it, and written to a work file it was encoded at the
/// end of its statement and decoded at the start of the next, each on one
/// core. A store's night keeps the file, which becomes the store's model.
pub(super) async fn corpus_df_stage(run: &mut Run<'_>, corpus_n: u64, may_hold: bool) -> Result<Idf> {
    let (ctx, fp, settings) = (run.ctx, &run.job.spec.fingerprint, &run.job.settings);
    run.progress.begin("corpus_df", None);
    let hold = may_hold && fp.idf_model.is_none() && fp.save_idf_model.is_none() && crate::session::work_in_memory(ctx);
    let (n_docs, source, location) = match &fp.idf_model {
        Some(model) => (load_idf_model(ctx, model, settings).await?, model.clone(), model.clone()),
        None => {
            let df_path = run.out.staged("_work/corpus_df.parquet");
            match hold {
                true => work_table(ctx, &render(sql::CORPUS_DF, &[("path", Param::Text(&df_path))]), &df_path, table::CORPUS_DF).await?,
                false => {
                    let meta = FileMetadata { settings: settings.for_idf_model(), idf_n_docs: Some(corpus_n), idf_model: None, minhash: None, shingles: None, vectors: None, min_shared: None, boilerplate_set: None };
                    materialize(ctx, sql::CORPUS_DF, &[], &df_path, table::CORPUS_DF, Some(&meta)).await?;
                }
            }
            if let Some(save) = &fp.save_idf_model {
                copy_file(ctx, &df_path, save).await?;
            }
            (corpus_n, "corpus".to_string(), df_path)
        }
    };
    let terms = scalar_u64(ctx, "SELECT count(*) FROM corpus_df").await?;
    run.progress.done("corpus_df", format!("{terms} terms over {n_docs} documents"));
    let model = match (fp.weighting.needs_idf(), hold) {
        (false, _) => None,
        (true, false) => Some(IdfModel { files: model_files(ctx, &location).await?, n_docs, location, _held: None }),
        (true, true) => {
            let held = HeldDf::of(&collect(ctx, "SELECT hash, df FROM corpus_df").await?)?;
            let location = held.location().to_string();
            Some(IdfModel { files: (location.clone(), location.clone()), n_docs, location, _held: Some(held) })
        }
    };
    Ok(Idf { summary: Some(IdfSummary { source, n_docs, terms, saved_to: fp.save_idf_model.clone() }), model })
}

/// Stage `fingerprints`: weights, SimHash fingerprints and, in a store's
/// runs, MinHash keys, into `fingerprints/`; returns the metadata its files carry (with the
/// identity of `boilerplate`, the lines segmentation dropped), and with
/// `hold` and the work in memory, the rows written, for the copies' check
/// to read (copies.rs) instead of the file.
pub(super) async fn fingerprint_stage(run: &mut Run<'_>, idf: &Idf, corpus_n: u64, boilerplate: Option<&LineSet>, hold: bool) -> Result<(FileMetadata, Option<Arc<dyn TableProvider>>)> {
    let fp = &run.job.spec.fingerprint;
    run.progress.begin("fingerprints", Some(corpus_n));
    let model = idf.model.as_ref();
    let fp_path = run.out.staged("fingerprints/part-00000.parquet");
    let meta = FileMetadata {
        settings: run.job.settings.clone(),
        idf_n_docs: idf.summary.as_ref().map(|i| i.n_docs),
        idf_model: None,
        minhash: run.job.minhash(),
        shingles: Some(crate::text::shingles::SKETCH_SCHEME.into()),
        vectors: run.job.vector_scheme(),
        min_shared: run.job.spec.join.min_shared(),
        boilerplate_set: boilerplate.map(|set| set.identity.clone()),
    };
    // Read before the terms' last reader: characters a document, on average.
    let chars = scalar_u64(run.ctx, "SELECT COALESCE(sum(n_chars) / count(*), 0) FROM terms").await?;
    let params = [
        ("row_group_rows", Param::Int(row_group_rows(chars))),
        ("model", Param::TextOrNull(model.map(|m| m.files.0.as_str()))),
        ("model_version", Param::TextOrNull(model.map(|m| m.files.1.as_str()))),
        ("n_docs", Param::IntOrNull(model.map(|m| m.n_docs))),
        ("weighting", Param::Text(&fp.weighting.to_string())),
        ("formula", Param::Text(fp.idf.as_str())),
        ("top_k", Param::IntOrNull(fp.top_k.map(|k| k as u64))),
        ("minhash", Param::Sql(&minhash_expression(run.job.kept_minhash(), "term_set"))),
        ("with_vector", Param::Bool(run.job.vectors)),
        ("keep_key", Param::Sql(run.job.keep_key())),
    ];
    // The fingerprints' footer names the keys they hold; the later outputs',
    // the plan the candidates were found with.
    let fp_meta = FileMetadata { minhash: run.job.kept_minhash(), ..meta.clone() };
    let hold = hold && crate::session::work_in_memory(run.ctx);
    // The terms' last reader: each batch goes once weighed.
    super::query::read_once(run.ctx, table::TERMS)?;
    let held = materialize_held(run.ctx, (sql::FINGERPRINTS, &params), (&fp_path, table::FINGERPRINTS), Some(&fp_meta), hold).await?;
    // Nothing reads the terms after this: held in memory, they go now.
    run.ctx.deregister_table(table::TERMS)?;
    run.progress.done("fingerprints", format!("weighting {}", fp.weighting));
    Ok((meta, held))
}

/// Characters of text a row group of fingerprints is made for: a row group
/// is held whole by the writer until it is written (sql/40_fingerprints.sql).
const ROW_GROUP_CHARS: u64 = 1 << 23;

/// Most rows a row group of fingerprints holds: short posts' fingerprints
/// are small whatever their number.
const MAX_ROW_GROUP_ROWS: u64 = 65_536;

/// Rows a row group of fingerprints holds for documents of `chars`
/// characters on average (integer division of integer sums: the same for
/// any partitioning).
fn row_group_rows(chars: u64) -> u64 {
    (ROW_GROUP_CHARS / chars.max(1)).clamp(1, MAX_ROW_GROUP_ROWS)
}

/// Stage `survivors` (`--survivors`): each input's rows without the
/// duplicates, in `survivors/<input>/`; with `--duplicate-ids keep-first`,
/// one row per id, the one the documents kept.
pub(super) async fn survivors_stage(run: &mut Run<'_>) -> Result<()> {
    let spec = &run.job.spec;
    let tables: Vec<String> = (0..spec.inputs.len()).map(|i| format!("input_{i}")).collect();
    let mut schemas = Vec::with_capacity(tables.len());
    for table in &tables {
        schemas.push(Arc::new(run.ctx.table(table.as_str()).await?.schema().as_arrow().clone()));
    }
    let repeated = repeated_ids_table(table::DOCUMENTS);
    let repeated = run.ctx.table_exist(repeated.as_str())?.then_some(repeated.as_str());
    for (i, input) in spec.inputs.iter().enumerate() {
        for (n, surviving) in surviving_rows(spec, &run.job.keep, &schemas, i, repeated)?.iter().enumerate() {
            let path = run.out.staged(&format!("survivors/{}/part-{n:05}.parquet", input.name));
            let statement = render(
                sql::SURVIVORS,
                &[
                    ("table", Param::Ident(&tables[i])),
                    ("source", Param::Text(&input.name)),
                    ("id", Param::Ident(&spec.columns.id)),
                    ("rows", Param::Sql(&surviving.rows)),
                    ("path", Param::Text(&path)),
                ],
            );
            // One partition: the rows come in the input's order, whatever
            // the cores (with two, the scan's two halves were written as
            // they came, and the file changed from run to run).
            let one = ("datafusion.execution.target_partitions", "1");
            // A few rows are found by the ids' filter inside the scan, which
            // then decodes the other columns of those rows only.
            let late = ("datafusion.execution.parquet.pushdown_filters", if surviving.few { "true" } else { "false" });
            collect_with(run.ctx, &[one, late], &statement).await?;
        }
    }
    run.progress.done("survivors", format!("{} input(s)", spec.inputs.len()));
    Ok(())
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
        // Models saved before boilerplate lines were dropped by default say
        // none: name the option that reproduces them.
        let hint = match super::summary::parse_boilerplate_rule(&stored.boilerplate) {
            Some(n) if stored.boilerplate != settings.boilerplate => format!(", or run with --boilerplate-lines {n} as it was built"),
            _ => String::new(),
        };
        return Err(Error::input(format!(
            "IDF model '{file}' was built with other settings ({}) than this run ({}): rebuild it with these settings{hint}",
            serde_json::to_string(&stored).unwrap_or_default(),
            serde_json::to_string(&settings.for_idf_model()).unwrap_or_default()
        )));
    }
    register_parquet(ctx, table::CORPUS_DF, model).await?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::row_group_rows;

    #[test]
    fn fingerprints_row_groups_hold_about_the_same_text_whatever_the_documents() {
        // Weibo's posts (16 characters on average) keep the row limit; Heybox's
        // articles (1,320) make row groups of about 2^23 characters.
        assert_eq!(row_group_rows(16), 65_536);
        assert_eq!(row_group_rows(1_320), 6_355);
        assert_eq!(row_group_rows(2_000_000), 4);
        // Documents longer than a row group's text, and documents without text.
        assert_eq!(row_group_rows(10_000_000), 1);
        assert_eq!(row_group_rows(0), 65_536);
    }
}
