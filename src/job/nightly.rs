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

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, ListArray, ListBuilder, RecordBatch, StringViewArray, UInt64Array, UInt64Builder};
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef, UInt64Type};
use datafusion::common::{HashMap, HashSet};
use datafusion::prelude::SessionContext;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::config::{JobSpec, KeepRule, StoreOptions};
use super::store::{check_format, Manifest, STORE_FORMAT};
use super::candidates::{eligible_without, near_pairs};
use super::progress::Progress;
use super::query::{collect, collect_measured, column_u64, scalar_u64, strings};
use super::tables::{conform, seal, view_without, write_batches, FileMetadata};
use super::sql::{self, render};
use super::summary::{content_identity, FingerprintSettings, StoreReads, StoreSummary, Summary};
use crate::error::{Error, Result};
use crate::join::BandPlan;
use crate::minhash::MinHashPlan;
use crate::probe::NightIndex;
use crate::udf::night_partners::index as night_index;
use crate::sets::Verify;
use crate::storage::fetch::{narrow_minhash, rows_by_key, Take};
use crate::storage::{literal, local_path, locate, read_object, register_parquet, register_parquet_files, OutputDir};

/// A store, opened for run `run_id`.
#[derive(Debug)]
pub struct StoreRun {
    url: String,
    pub run_id: String,
    pub manifest: Option<Manifest>,
    /// Committed runs with smaller ids that no segment holds, in order.
    pub earlier: Vec<String>,
    /// Compacted segments (each holds runs with smaller ids only).
    segments: Vec<super::store::Segment>,
    /// This run's MinHash plan (none: SimHash candidates only).
    minhash: Option<MinHashPlan>,
    store: Arc<dyn ObjectStore>,
    root: ObjectPath,
}

/// The fields in which two settings differ, as `name: a ≠ b`.
fn differences(a: &FingerprintSettings, b: &FingerprintSettings) -> String {
    let (a, b) = (serde_json::to_value(a).expect("settings serialise"), serde_json::to_value(b).expect("settings serialise"));
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return String::new() };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: store {v} ≠ run {}", b.get(k).cloned().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl StoreRun {
    /// Open the store at `options.url` for a run with `settings` and `keep`;
    /// refuses a store made with other settings. `idf_model` is the model the
    /// run was given, if any: a new store freezes it, an existing one must
    /// hold the same.
    pub async fn open(
        ctx: &SessionContext,
        options: &StoreOptions,
        settings: &FingerprintSettings,
        keep: &KeepRule,
        minhash: Option<MinHashPlan>,
        idf_model: Option<&str>,
    ) -> Result<StoreRun> {
        let url = options.url.trim_end_matches('/').to_string();
        let run_id = options.run_id.clone().unwrap_or_default();
        super::config::check_run_id(&run_id)?;
        let (store, root) = locate(ctx, &url)?;
        let manifest = match store.get(&root.clone().join("store.json")).await {
            Ok(got) => {
                let bytes = got.bytes().await.map_err(|e| Error::runtime(format!("cannot read '{url}/store.json': {e}")))?;
                Some(serde_json::from_slice::<Manifest>(&bytes).map_err(|e| {
                    Error::input(format!("'{url}/store.json' is not a neardup store manifest ({e}): is '{url}' a store?"))
                })?)
            }
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(crate::storage::store_failure(format!("cannot read '{url}/store.json'"), &e)),
        };
        let mut run = StoreRun { url, run_id, manifest, earlier: Vec::new(), segments: Vec::new(), minhash, store, root };
        if let Some(m) = &run.manifest {
            check_format(&run.url, m)?;
            if m.minhash != minhash {
                let name = |p: Option<MinHashPlan>| p.map_or("none (SimHash candidates only)".to_string(), |p| p.to_string());
                return Err(Error::input(format!(
                    "store '{}' keeps MinHash keys of plan {}, this run asks for {}: use the store's --candidates \
                     and --minhash, or start a new store",
                    run.url,
                    name(m.minhash),
                    name(minhash)
                )));
            }
            if m.settings != *settings {
                return Err(Error::input(format!(
                    "store '{}' holds fingerprints made with other settings ({}): they cannot be compared. \
                     Run with the store's settings, or start a new store",
                    run.url,
                    differences(&m.settings, settings)
                )));
            }
            if m.keep != keep.to_string() {
                return Err(Error::input(format!(
                    "store '{}' keeps representatives by '{}', this run by '{keep}': use --keep {}",
                    run.url, m.keep, m.keep
                )));
            }
            if let Some(model) = idf_model {
                let given = content_identity(&read_object(ctx, model).await?);
                if given != m.idf_model {
                    return Err(Error::input(format!(
                        "IDF model '{model}' ({given}) is not the store's frozen model ({}): fingerprints made with \
                         it would not be comparable. Drop the model option to use the store's, or start a new store \
                         to refresh the model",
                        m.idf_model
                    )));
                }
            }
        }
        let missing = local_path(&run.url).is_some_and(|p| !p.exists());
        if !missing {
            let layout = super::store::read_layout(run.store.as_ref(), &run.root, &run.url).await?;
            if let Some(s) = layout.segments.iter().find(|s| s.runs.iter().any(|r| *r >= run.run_id)) {
                return Err(Error::input(format!(
                    "store '{}': segment '{}' holds runs up to '{}', so run '{}' cannot be run (again) now: \
                     a compacted run cannot be replaced, and a run must come after every compacted one. \
                     Use a later run id",
                    run.url,
                    s.id,
                    s.runs.last().cloned().unwrap_or_default(),
                    run.run_id
                )));
            }
            run.earlier = layout.runs.into_iter().filter(|id| *id < run.run_id).collect();
            run.segments = layout.segments;
        }
        if run.manifest.is_none() && !(run.earlier.is_empty() && run.segments.is_empty()) {
            return Err(Error::input(format!(
                "'{}' has runs but no store.json: it is damaged or not a neardup store",
                run.url
            )));
        }
        Ok(run)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The store's frozen IDF model.
    pub fn model_url(&self) -> String {
        format!("{}/idf/model.parquet", self.url)
    }

    fn run_url(&self, id: &str) -> String {
        format!("{}/runs/run={id}", self.url)
    }

    /// The data files of the earlier runs: segments, then runs.
    fn earlier_files(&self) -> Vec<String> {
        let layout = super::store::Layout { segments: self.segments.clone(), runs: self.earlier.clone(), hidden: Vec::new() };
        layout.files(&self.url)
    }

    /// Whether there is nothing stored before this run.
    pub fn is_first(&self) -> bool {
        self.earlier.is_empty() && self.segments.is_empty()
    }

    /// Earlier runs, compacted or not.
    pub fn earlier_runs(&self) -> u64 {
        (self.earlier.len() + self.segments.iter().map(|s| s.runs.len()).sum::<usize>()) as u64
    }

    /// Register the earlier runs as view `stored_runs` (nothing when there
    /// are none), read by their compact columns only. Its column `file`
    /// numbers the data file of each row (in [`StoreRun::earlier_files`]'
    /// order), so that a fingerprint's rows are fetched from the files that
    /// hold it, and no other.
    pub async fn register_earlier(&self, ctx: &SessionContext) -> Result<()> {
        if self.is_first() {
            return Ok(());
        }
        let mut parts = Vec::new();
        for (i, file) in self.earlier_files().iter().enumerate() {
            register_parquet_files(ctx, &format!("stored_file_{i}"), std::slice::from_ref(file)).await?;
            parts.push(format!("SELECT {i} AS file, doc_key, simhash, minhash FROM stored_file_{i}"));
        }
        collect(ctx, &format!("CREATE VIEW stored_runs AS {}", parts.join(" UNION ALL "))).await?;
        Ok(())
    }

    /// Rows `(file, simhash)` as each earlier file's sorted, distinct
    /// fingerprints, and whether it has a NULL one among them.
    fn wanted_by_file(&self, batches: &[datafusion::arrow::array::RecordBatch]) -> Result<Vec<(Vec<u64>, bool)>> {
        let mut wanted = vec![(Vec::new(), false); self.earlier_files().len()];
        for b in batches {
            let (files, hashes) = (column_u64(b, 0)?, column_u64(b, 1)?);
            for i in 0..b.num_rows() {
                let w = &mut wanted[files.value(i) as usize];
                match hashes.is_null(i) {
                    true => w.1 = true,
                    false => w.0.push(hashes.value(i)),
                }
            }
        }
        for w in &mut wanted {
            w.0.sort_unstable();
            w.0.dedup();
        }
        Ok(wanted)
    }

    /// Bytes of the earlier runs' data files.
    async fn earlier_bytes(&self, ctx: &SessionContext) -> Result<u64> {
        let mut total = 0;
        for file in self.earlier_files() {
            let (store, path) = locate(ctx, &file)?;
            total += store
                .head(&path)
                .await
                .map_err(|e| crate::storage::store_failure(format!("cannot read '{file}'"), &e))?
                .size;
        }
        Ok(total)
    }

    /// The input documents (view `documents_input`) that an earlier run
    /// already holds, as `(source, id)`: found by the 8-byte `doc_key` of
    /// every stored row, then confirmed on the rows fetched for them.
    pub async fn already_stored(&self, ctx: &SessionContext) -> Result<(Vec<(String, String)>, StoreReads)> {
        let mut reads = StoreReads::default();
        if self.is_first() {
            return Ok((Vec::new(), reads));
        }
        let started = std::time::Instant::now();
        // Tonight's keys (10^5 of 8 bytes) are the build side of a hash
        // join that streams the store's doc_key past them; a sort-merge join
        // would sort every stored key.
        let (batches, scanned) = collect_measured(
            &crate::session::with_hash_joins(ctx),
            "SELECT DISTINCT s.file, s.simhash FROM stored_runs s \
             WHERE s.doc_key IN (SELECT hash64(source || chr(0) || id) FROM documents_input)",
        )
        .await?;
        reads.probe_bytes += scanned;
        let wanted = self.wanted_by_file(&batches)?;
        let mut found = Vec::new();
        if wanted.iter().any(|w| !w.0.is_empty() || w.1) {
            let (rows, _, fetched) = rows_by_key(ctx, &self.earlier_files(), "simhash", &wanted, Take::All).await?;
            reads.fetch_bytes += fetched.bytes;
            reads.fetch_objects += fetched.objects;
            let mut stored = std::collections::HashSet::new();
            for b in &rows {
                let (sources, ids) = (strings(b, b.schema().index_of("source")?)?, strings(b, b.schema().index_of("id")?)?);
                stored.extend(sources.into_iter().zip(ids));
            }
            for b in &collect(ctx, "SELECT source, id FROM documents_input").await? {
                for pair in strings(b, 0)?.into_iter().zip(strings(b, 1)?) {
                    if stored.contains(&pair) {
                        found.push(pair);
                    }
                }
            }
        }
        reads.already_stored_ms = started.elapsed().as_millis() as u64;
        Ok((found, reads))
    }

    /// Freeze the IDF model at `model` (a work file, or the model the run
    /// was given) into the store and write `store.json`: before the first
    /// run is committed, so that no run exists without them.
    async fn create(&mut self, ctx: &SessionContext, model: Option<&str>, n_docs: u64, settings: &FingerprintSettings, keep: &KeepRule) -> Result<()> {
        let idf_model = match model {
            Some(model) => {
                let bytes = read_object(ctx, model).await?;
                let id = content_identity(&bytes);
                self.put("idf/model.parquet", bytes.to_vec()).await?;
                id
            }
            None => "none".into(),
        };
        let manifest = Manifest {
            format: STORE_FORMAT,
            settings: settings.clone(),
            idf_model,
            idf_n_docs: n_docs,
            keep: keep.to_string(),
            minhash: self.minhash,
            created_by_run: self.run_id.clone(),
            neardup_version: env!("CARGO_PKG_VERSION").into(),
        };
        self.put("store.json", serde_json::to_vec_pretty(&manifest).expect("manifest serialises")).await?;
        self.manifest = Some(manifest);
        Ok(())
    }

    async fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<()> {
        let path = relative.split('/').fold(self.root.clone(), |p, part| p.join(part));
        if let Some(dir) = local_path(&self.url) {
            let file = dir.join(relative);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
        }
        self.store
            .put(&path, PutPayload::from(bytes))
            .await
            .map_err(|e| Error::runtime(format!("cannot write '{}/{relative}': {e}", self.url)))?;
        Ok(())
    }
}

/// Make `documents` the input documents (view `documents_input`) less
/// those an earlier run holds (`already`, from [`StoreRun::already_stored`],
/// kept in the work folder for the anti-join).
pub async fn documents_not_stored(ctx: &SessionContext, out: &OutputDir, already: &[(String, String)]) -> Result<()> {
    if already.is_empty() {
        collect(ctx, "CREATE VIEW documents AS SELECT * FROM documents_input").await?;
        return Ok(());
    }
    view_without(ctx, out, "documents", "documents_input", "already_stored", already).await
}

/// What the fingerprint stages leave for the store stages.
pub struct Night<'a> {
    pub spec: &'a JobSpec,
    pub keep: &'a KeepRule,
    pub settings: &'a FingerprintSettings,
    /// The df table the fingerprints were made with (a work file or the store's model).
    pub model: Option<&'a str>,
    pub idf_n_docs: u64,
    pub already_stored: u64,
    /// What finding the already stored documents read.
    pub reads: StoreReads,
    /// The store's lease, checked before the run is committed (none in tests of the stages alone).
    pub lease: Option<&'a crate::storage::lease::Lease>,
}

/// Register `stored`: the earlier runs' rows of every stored fingerprint
/// that tonight touches (sql/89_store_probe.sql), fetched by page into the
/// work folder. Everything after reads the store through this table only.
async fn fetch_touched(
    ctx: &SessionContext,
    store: &StoreRun,
    join: &super::config::JoinOptions,
    out: &OutputDir,
    keep_key: &str,
    stored: u64,
    reads: &mut StoreReads,
) -> Result<()> {
    if store.is_first() {
        return register_nothing_stored(ctx, keep_key).await;
    }
    reads.store_bytes = store.earlier_bytes(ctx).await?;
    let index_path = out.staged("_work/night_index.parquet");
    let index = format!(
        "COPY (SELECT simhash, minhash FROM fingerprints WHERE simhash IS NOT NULL) TO {} STORED AS PARQUET",
        literal(&index_path)
    );
    collect(ctx, &index).await?;
    let k = join.max_hamming;
    let m = match join.candidates.simhash() {
        true => Some(match join.blocks {
            Some(m) => BandPlan::new(k, m),
            None => BandPlan::auto(k, stored),
        }
        .map_err(Error::input)?
        .m),
        false => None,
    };
    // The index's cache key in night_touched: unique to this write of it.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let version = format!("{}-{nanos}", std::process::id());
    let started = std::time::Instant::now();
    let statement = render(
        sql::STORE_PROBE,
        &[
            ("index", &literal(&index_path)),
            ("version", &literal(&version)),
            ("k", &k.to_string()),
            ("m", &m.map_or("NULL".into(), |m| m.to_string())),
        ],
    );
    let (batches, scanned) = collect_measured(ctx, &statement).await?;
    reads.probe_bytes += scanned;
    reads.probe_ms = started.elapsed().as_millis() as u64;
    let wanted = store.wanted_by_file(&batches)?;
    let mut touched: Vec<u64> = wanted.iter().flat_map(|w| w.0.iter().copied()).collect();
    touched.sort_unstable();
    touched.dedup();

    let started = std::time::Instant::now();
    let (rows, schema, fetched) = rows_by_key(ctx, &store.earlier_files(), "simhash", &wanted, Take::FirstPer("run")).await?;
    let rows = rows.into_iter().map(narrow_minhash).collect::<Result<Vec<_>>>()?;
    log::debug!("{:>6} ms  fetch: {} rows from {} files", started.elapsed().as_millis(), fetched.rows, fetched.objects);
    reads.fetch_bytes += fetched.bytes;
    reads.fetch_objects += fetched.objects;
    reads.fetched_rows = fetched.rows;
    let schema = schema.ok_or_else(|| Error::runtime(format!("store '{}' has no readable runs", store.url)))?;
    let firsts = FirstRows::of(&schema, rows)?;
    log::debug!("{:>6} ms  fetch: {} rows chosen", started.elapsed().as_millis(), firsts.chosen.len());
    let tonight = night_index(&index_path, &version, k, m).map_err(Error::from)?;
    let (term_sets, rest) = (columns(&schema, &TERM_SET_COLUMNS)?, columns_but(&schema, &["term_set", "minhash"])?);
    // The two work files are made at once, on two cores: the term sets
    // (their keys trimmed) and the rest of the rows.
    let (term_sets, rest) = std::thread::scope(|scope| {
        let term_sets = scope.spawn(|| -> Result<Vec<u8>> {
            let rows = firsts.gather(&firsts.by_doc, &term_sets)?;
            let all_keys = minhash_key_count(&rows);
            let rows = keys_meeting_tonight(&rows, &tonight)?;
            log::debug!("{:>6} ms  fetch: {} of their {all_keys} MinHash keys kept", started.elapsed().as_millis(), minhash_key_count(&rows));
            write_batches(Arc::new(schema.project(&term_sets)?), &rows)
        });
        let rest = firsts.gather(&firsts.chosen, &rest).and_then(|rows| write_batches(Arc::new(schema.project(&rest)?), &rows));
        (term_sets.join().expect("the term sets' thread does not panic"), rest)
    });
    out.put("_work/stored_term_sets.parquet", term_sets?).await?;
    out.put("_work/stored.parquet", rest?).await?;
    log::debug!("{:>6} ms  fetch: stored.parquet and stored_term_sets.parquet written", started.elapsed().as_millis());
    register_parquet(ctx, "stored", &out.staged("_work/stored.parquet")).await?;
    register_parquet(ctx, "stored_term_sets", &out.staged("_work/stored_term_sets.parquet")).await?;
    reads.fetch_ms = started.elapsed().as_millis() as u64;
    reads.touched_fingerprints = touched.len() as u64;
    Ok(())
}

/// The columns of `stored_term_sets`: what 57_term_sets.sql reads of a
/// stored fingerprint's first document. `stored` holds the rest.
const TERM_SET_COLUMNS: [&str; 5] = ["simhash", "source", "id", "term_set", "minhash"];

/// The indices of `names` in `schema`.
fn columns(schema: &SchemaRef, names: &[&str]) -> Result<Vec<usize>> {
    names.iter().map(|n| schema.index_of(n).map_err(Error::from)).collect()
}

/// The indices of the columns of `schema` but `names` (which it must have).
fn columns_but(schema: &SchemaRef, names: &[&str]) -> Result<Vec<usize>> {
    let left_out = columns(schema, names)?;
    Ok((0..schema.fields().len()).filter(|c| !left_out.contains(c)).collect())
}

/// Of each fingerprint's fetched rows (its first in each run, fetched with
/// [`Take::FirstPer`]: up to one per night for a popular repost), the two
/// that the night's statements read: the first by source and id (its term
/// set and anchor) and the first by run, source and id (its cluster's
/// representative); one row when they are the same. Chosen here, in one
/// pass over the fetched batches, rather than by writing every fetched row
/// and ranking them in SQL.
struct FirstRows {
    batches: Vec<RecordBatch>,
    /// Each fingerprint's first row by document, as (batch, row), in order.
    by_doc: Vec<(usize, usize)>,
    /// Those and each fingerprint's first row by run, in order.
    chosen: Vec<(usize, usize)>,
}

impl FirstRows {
    fn of(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<FirstRows> {
        let batches = batches.iter().map(|b| conform(b, schema)).collect::<Result<Vec<_>>>()?;
        let [simhash, run, source, id] = columns(schema, &["simhash", "run", "source", "id"])?[..] else {
            unreachable!("four names, four indices")
        };
        // Ids are never NULL (the inputs check refuses them), so the orders
        // are those of the strings.
        let texts = |b: &RecordBatch, c: usize| -> Result<StringViewArray> { Ok(cast(b.column(c), &DataType::Utf8View)?.as_string_view().clone()) };
        let text = batches.iter().map(|b| Ok([texts(b, run)?, texts(b, source)?, texts(b, id)?])).collect::<Result<Vec<_>>>()?;
        let by_doc = |(b, r): (usize, usize)| (text[b][1].value(r), text[b][2].value(r));
        let by_run = |(b, r): (usize, usize)| (text[b][0].value(r), by_doc((b, r)));
        // Per fingerprint (NULL is one group, as in SQL's PARTITION BY): the
        // (batch, row) of its first row by document and by run.
        let mut best: HashMap<Option<u64>, [(usize, usize); 2]> = HashMap::new();
        for (b, batch) in batches.iter().enumerate() {
            let fingerprints = batch.column(simhash).as_primitive::<UInt64Type>();
            for row in 0..batch.num_rows() {
                let fingerprint = fingerprints.is_valid(row).then(|| fingerprints.value(row));
                let firsts = best.entry(fingerprint).or_insert([(b, row); 2]);
                if by_doc((b, row)) < by_doc(firsts[0]) {
                    firsts[0] = (b, row);
                }
                if by_run((b, row)) < by_run(firsts[1]) {
                    firsts[1] = (b, row);
                }
            }
        }
        let mut by_doc: Vec<(usize, usize)> = best.values().map(|f| f[0]).collect();
        let mut chosen: Vec<(usize, usize)> = best.into_values().flatten().collect();
        by_doc.sort_unstable();
        chosen.sort_unstable();
        chosen.dedup();
        Ok(FirstRows { batches, by_doc, chosen })
    }

    /// Columns `columns` of rows `rows` (in order), batch by batch: a
    /// filter copies runs of rows where a gather copies row by row.
    fn gather(&self, rows: &[(usize, usize)], columns: &[usize]) -> Result<Vec<RecordBatch>> {
        let mut masks: Vec<Vec<bool>> = self.batches.iter().map(|b| vec![false; b.num_rows()]).collect();
        for &(b, r) in rows {
            masks[b][r] = true;
        }
        let mut gathered = Vec::new();
        for (batch, mask) in self.batches.iter().zip(masks) {
            let rows = filter_record_batch(&batch.project(columns)?, &BooleanArray::from(mask))?;
            if rows.num_rows() > 0 {
                gathered.push(rows);
            }
        }
        Ok(gathered)
    }
}

/// `batch` (the first stored row of each fingerprint) with only the MinHash
/// keys that can put a stored fingerprint in a bucket with one of tonight's
/// (the only buckets that 51_minhash_buckets.sql keeps): tonight's
/// documents' keys, and every key of the stored row of one of tonight's
/// fingerprints, whose term set may stand for that fingerprint
/// (57_term_sets.sql). Those buckets keep every member,
/// so the candidates are the same; the night's statements are spared the
/// other keys, most of what a stored row weighs (on the tenth of ten Weibo
/// nights, 4.05 of the 4.57 million keys of 142,754 touched fingerprints).
fn keys_meeting_tonight(batches: &[RecordBatch], index: &NightIndex) -> Result<Vec<RecordBatch>> {
    let mut theirs = HashSet::new();
    for (fingerprints, lists) in batches.iter().filter_map(keyed) {
        for row in (0..lists.len()).filter(|&r| fingerprints.is_valid(r) && index.has_fingerprint(fingerprints.value(r))) {
            theirs.extend(row_keys(lists, row).iter().copied());
        }
    }
    batches.iter().map(|b| trim_keys(b, index, &theirs)).collect()
}

/// A batch's fingerprints and MinHash key lists, if it has both.
fn keyed(batch: &RecordBatch) -> Option<(&UInt64Array, &ListArray)> {
    let fingerprints = batch.column_by_name("simhash")?.as_primitive_opt::<UInt64Type>()?;
    let lists = batch.column_by_name("minhash")?.as_list_opt::<i32>()?;
    lists.values().as_primitive_opt::<UInt64Type>()?;
    Some((fingerprints, lists))
}

/// The MinHash keys of row `row` of `lists`.
fn row_keys(lists: &ListArray, row: usize) -> &[u64] {
    let offsets = lists.value_offsets();
    &lists.values().as_primitive::<UInt64Type>().values()[offsets[row] as usize..offsets[row + 1] as usize]
}

/// `batch` with the keys of [`keys_meeting_tonight`]: all of a row of one of
/// tonight's fingerprints, else those of tonight or of `theirs`.
fn trim_keys(batch: &RecordBatch, index: &NightIndex, theirs: &HashSet<u64>) -> Result<RecordBatch> {
    let Some((fingerprints, lists)) = keyed(batch) else { return Ok(batch.clone()) };
    let DataType::List(field) = lists.data_type() else { return Ok(batch.clone()) };
    let mut kept = ListBuilder::with_capacity(UInt64Builder::new(), batch.num_rows()).with_field(field.clone());
    let held = index.have_minhash_keys(lists.values().as_primitive::<UInt64Type>().values());
    let offsets = lists.value_offsets();
    for row in 0..batch.num_rows() {
        if lists.is_null(row) {
            kept.append_null();
            continue;
        }
        let all = fingerprints.is_valid(row) && index.has_fingerprint(fingerprints.value(row));
        let start = offsets[row] as usize;
        for (j, &key) in row_keys(lists, row).iter().enumerate() {
            if all || held[start + j] || theirs.contains(&key) {
                kept.values().append_value(key);
            }
        }
        kept.append(true);
    }
    let mut columns = batch.columns().to_vec();
    columns[batch.schema().index_of("minhash")?] = Arc::new(kept.finish());
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// The MinHash keys of batches' rows (for the debug log).
fn minhash_key_count(batches: &[RecordBatch]) -> usize {
    let lists = batches.iter().filter_map(|b| b.column_by_name("minhash").and_then(|c| c.as_list_opt::<i32>()));
    lists.map(|l| (l.value_offsets()[l.len()] - l.value_offsets()[0]) as usize).sum()
}

/// Register `stored` and `stored_term_sets` with no rows, for a store's first night.
async fn register_nothing_stored(ctx: &SessionContext, keep_key: &str) -> Result<()> {
    let statement = format!(
        "CREATE VIEW stored AS SELECT source, id, simhash, n_terms, n_chars{keep_key}, \
         source AS representative_source, id AS representative_id, CAST(NULL AS VARCHAR) AS representative_run, \
         CAST(NULL AS VARCHAR) AS run FROM fingerprints WHERE false"
    );
    collect(ctx, &statement).await?;
    no_stored_term_sets(ctx).await
}

/// Register `stored_term_sets` with no rows: nothing is stored.
pub async fn no_stored_term_sets(ctx: &SessionContext) -> Result<()> {
    collect(ctx, "CREATE VIEW stored_term_sets AS SELECT simhash, source, id, term_set, minhash FROM fingerprints WHERE false").await?;
    Ok(())
}

/// The store stages: pairs with tonight's fingerprints, representatives,
/// the run's partition (committed here) and the night's report (staged in
/// `out`, committed by the caller). The candidates, the check and the
/// components are those of a one-shot run ([`near_pairs`]); a night differs
/// in what it reads (`stored`, [`fetch_touched`]) and what it writes (a run).
pub async fn store_stages(ctx: &SessionContext, store: &mut StoreRun, night: Night<'_>, out: &OutputDir, progress: &mut Progress) -> Result<Summary> {
    let join = &night.spec.join;
    let keep_key = if night.keep.column().is_some() { ", keep_key" } else { "" };
    progress.begin("join", None);
    let stored_documents =
        if store.is_first() { 0 } else { scalar_u64(ctx, "SELECT count(*) FROM stored_runs").await? };
    let mut reads = night.reads.clone();
    fetch_touched(ctx, store, join, out, keep_key, stored_documents, &mut reads).await?;
    let unconfirmed = tonight_eligible(ctx, join.verify, out).await?;

    // Candidates: tonight's fingerprints against every known one.
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
        let (near_count, candidate_count) = (found.edges.len(), found.candidates);
        progress.done("verify", format!("{near_count} of {candidate_count} candidates kept, {unconfirmed} copies rejected"));
    }
    let joined = found.into_components(ctx, out, join, night.keep, unconfirmed).await?;

    let created = store.manifest.is_none();
    let (run_out, meta) = stage_run(ctx, store, &night, keep_key).await?;
    progress.done("representatives", format!("run '{}' staged", store.run_id));
    progress.begin("store", None);
    let report = night_report(ctx, out, &meta, &store.run_id).await?;

    // Commit: the store's model and manifest first (for its first run), then
    // the run, then (the caller) the report.
    if created {
        store.create(ctx, night.model, night.idf_n_docs, night.settings, night.keep).await?;
    }
    let store_summary = StoreSummary {
        url: store.url.clone(),
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
        store: Some(store_summary),
        ..joined
    })
}

/// Tonight's term sets (`term_sets`, beside the fetched stored ones) and the
/// documents that take part (`eligible`): all, or with a check all but the
/// copies whose term set fails against their fingerprint's first document,
/// stored or new (sql/93_store_unconfirmed.sql). Returns how many failed.
async fn tonight_eligible(ctx: &SessionContext, verify: Verify, out: &OutputDir) -> Result<u64> {
    let sets_path = out.staged("_work/term_sets.parquet");
    collect(ctx, &render(sql::TERM_SETS, &[("tonight", "fingerprints"), ("path", &literal(&sets_path))])).await?;
    register_parquet(ctx, "term_sets", &sets_path).await?;
    let Some((measure, threshold)) = verify.measure() else {
        collect(ctx, "CREATE VIEW eligible AS SELECT * FROM fingerprints").await?;
        return Ok(0);
    };
    let statement = render(sql::STORE_UNCONFIRMED, &[("measure", &literal(measure)), ("threshold", &format!("{threshold:?}"))]);
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
async fn stage_run(ctx: &SessionContext, store: &StoreRun, night: &Night<'_>, keep_key: &str) -> Result<(OutputDir, FileMetadata)> {
    let idf_model = match (&store.manifest, night.model) {
        (Some(m), _) => m.idf_model.clone(),
        (None, Some(model)) => content_identity(&read_object(ctx, model).await?),
        (None, None) => "none".into(),
    };
    let run_out = OutputDir::prepare(ctx, &store.run_url(&store.run_id), true).await?;
    let run_path = run_out.staged("part-00000.parquet");
    let written = async {
        let statement = render(
            sql::STORE_RUN,
            &[
                ("keep_key", keep_key),
                ("keep_key_f", if keep_key.is_empty() { "" } else { ", f.keep_key" }),
                ("keep_order", night.keep.order_by()),
                ("run", &literal(&store.run_id)),
            ],
        );
        crate::storage::sorted::write_query(ctx, &statement, &run_path).await?;
        let meta = FileMetadata { settings: night.settings.clone(), idf_n_docs: Some(night.idf_n_docs), idf_model: Some(idf_model), minhash: store.minhash };
        seal(ctx, &run_path, Some(&meta)).await?;
        register_parquet(ctx, "night", &run_path).await?;
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
}

/// The night's report, staged in `out`: tonight's clusters
/// (sql/95_store_clusters.sql) and pairs (sql/70_pairs.sql, as `dedup`).
async fn night_report(ctx: &SessionContext, out: &OutputDir, meta: &FileMetadata, run_id: &str) -> Result<NightReport> {
    let clusters_path = out.staged("clusters/part-00000.parquet");
    collect(ctx, &render(sql::STORE_CLUSTERS, &[("path", &literal(&clusters_path))])).await?;
    seal(ctx, &clusters_path, Some(meta)).await?;
    register_parquet(ctx, "clusters", &clusters_path).await?;
    let pairs_path = out.staged("pairs/part-00000.parquet");
    collect(ctx, &render(sql::PAIRS, &[("path", &literal(&pairs_path))])).await?;
    seal(ctx, &pairs_path, Some(meta)).await?;
    register_parquet(ctx, "pairs", &pairs_path).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::UInt64Array;
    use datafusion::arrow::datatypes::{Field, Schema};

    fn stored(rows: &[(Option<u64>, Option<&[u64]>)]) -> RecordBatch {
        let mut keys = ListBuilder::new(UInt64Builder::new());
        for (_, k) in rows {
            match k {
                Some(k) => {
                    keys.values().append_slice(k);
                    keys.append(true);
                }
                None => keys.append_null(),
            }
        }
        let keys = keys.finish();
        let schema = Schema::new(vec![Field::new("simhash", DataType::UInt64, true), Field::new("minhash", keys.data_type().clone(), true)]);
        let fingerprints = UInt64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>());
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(fingerprints), Arc::new(keys)]).unwrap()
    }

    #[test]
    fn stored_rows_keep_the_keys_that_can_meet_tonight() {
        // Tonight: fingerprint 7 with keys 1 and 2.
        let index = NightIndex::new(None, [(7u64, &[1u64, 2][..])]);
        let batch = stored(&[
            // A stored row of tonight's fingerprint keeps every key: its term
            // set may stand for fingerprint 7, and so its keys too.
            (Some(7), Some(&[5, 6])),
            // Others keep tonight's keys and those of fingerprint 7's stored row.
            (Some(8), Some(&[1, 5, 9])),
            (Some(9), Some(&[9, 10])),
            (None, Some(&[2, 3])),
            (Some(10), None),
        ]);
        // Fingerprint 7's row in one batch, the others in another.
        let kept = keys_meeting_tonight(&[batch.slice(0, 1), batch.slice(1, 4)], &index).unwrap();
        let kept = datafusion::arrow::compute::concat_batches(&batch.schema(), &kept).unwrap();
        let lists = kept.column(1).as_list::<i32>();
        let row = |i: usize| lists.value(i).as_primitive::<UInt64Type>().values().to_vec();
        assert_eq!((row(0), row(1), row(2), row(3)), (vec![5, 6], vec![1, 5], vec![], vec![2]));
        assert!(lists.is_null(4));
        assert_eq!(kept.column(0), batch.column(0));
    }
}
