//! A store opened for one run: its settings checked against the run's, its
//! earlier runs and segments listed, what they hold read by their compact
//! columns (`stored_runs`), and the store's manifest and IDF model written
//! by the first run.

use std::sync::Arc;

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::prelude::SessionContext;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::config::{KeepRule, StoreOptions};
use super::context::Job;
use super::query::{collect, collect_measured, column_u64, strings};
use super::store::{check_format, Manifest, STORE_FORMAT};
use super::summary::{content_identity, FingerprintSettings, StoreReads};
use super::sql::table;
use super::tables::create_view;
use crate::error::{Error, Result};
use crate::minhash::MinHashPlan;
use crate::sets::{MinShared, SharePolicy};
use crate::fingerprint::VECTOR_SCHEME;
use crate::text::shingles::SKETCH_SCHEME;
use crate::storage::fetch::{rows_by_key, Take};
use crate::storage::{local_path, locate, read_object, register_parquet_files};

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
    pub(super) minhash: Option<MinHashPlan>,
    /// This run's duplication policy (`--min-shared`).
    min_shared: Option<MinShared>,
    /// Whether the store's documents keep SimHash vectors: a store made
    /// by a night that checked by cosine does, and so does every later
    /// night of it, whatever its check.
    vectors: bool,
    /// The documents a line is found in to be boilerplate (0: off).
    boilerplate_lines: u32,
    store: Arc<dyn ObjectStore>,
    root: ObjectPath,
}

/// The store's manifest (`store.json`), if it has one.
async fn read_manifest(store: &dyn ObjectStore, root: &ObjectPath, url: &str) -> Result<Option<Manifest>> {
    match store.get(&root.clone().join("store.json")).await {
        Ok(got) => {
            let bytes = got.bytes().await.map_err(|e| Error::runtime(format!("cannot read '{url}/store.json': {e}")))?;
            Ok(Some(serde_json::from_slice::<Manifest>(&bytes).map_err(|e| {
                Error::input(format!("'{url}/store.json' is not a neardup store manifest ({e}): is '{url}' a store?"))
            })?))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(crate::storage::store_failure(format!("cannot read '{url}/store.json'"), &e)),
    }
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

/// Where a store keeps the boilerplate line set of its first night.
const BOILERPLATE_SET: &str = "idf/boilerplate.parquet";

impl StoreRun {
    /// Open the store at `options.url` for a run of `job`; refuses a store
    /// made with other settings. `idf_model` is the model the run was given,
    /// if any: a new store freezes it, an existing one must hold the same.
    pub async fn open(ctx: &SessionContext, options: &StoreOptions, job: &Job, idf_model: Option<&str>) -> Result<StoreRun> {
        let url = options.url.trim_end_matches('/').to_string();
        let run_id = options.run_id.clone().unwrap_or_default();
        super::config::check_run_id(&run_id)?;
        let (store, root) = locate(ctx, &url)?;
        let manifest = read_manifest(store.as_ref(), &root, &url).await?;
        // A night that names no boilerplate rule applies the store's (that
        // of a store made before lines were dropped by default is none).
        let adopted;
        let job = match (&manifest, job.spec.fingerprint.boilerplate_lines) {
            (Some(m), None) => {
                let n = super::summary::parse_boilerplate_rule(&m.settings.boilerplate).ok_or_else(|| {
                    Error::input(format!("store '{url}' drops boilerplate by an unknown rule '{}': run it with the neardup that made it", m.settings.boilerplate))
                })?;
                adopted = job.with_boilerplate_lines(n);
                &adopted
            }
            _ => job,
        };
        let boilerplate_lines = job.spec.fingerprint.boilerplate_min_docs().unwrap_or(0);
        let (settings, keep, minhash) = (&job.settings, &job.keep, job.minhash());
        // A night that names no policy applies the store's (that of a store
        // made before policies existed is none); one that names another is
        // refused below.
        let join = &job.spec.join;
        let min_shared = match (&manifest, join.min_shared) {
            (Some(m), SharePolicy::Default) if join.verify.measure().is_some() => m.min_shared,
            _ => join.min_shared(),
        };
        let vectors = match &manifest {
            Some(m) => m.vectors.is_some(),
            None => job.vectors,
        };
        let mut run =
            StoreRun { url, run_id, manifest, earlier: Vec::new(), segments: Vec::new(), minhash, min_shared, vectors, boilerplate_lines, store, root };
        if let Some(m) = &run.manifest {
            run.check_manifest(ctx, m, settings, keep, idf_model).await?;
            // Without a check there is no policy to apply, nor to compare.
            if join.verify.measure().is_some() {
                run.check_policy(m)?;
            }
            run.check_vectors(m, join.verify)?;
        }
        run.read_runs().await?;
        if run.manifest.is_none() && !(run.earlier.is_empty() && run.segments.is_empty()) {
            return Err(Error::input(format!(
                "'{}' has runs but no store.json: it is damaged or not a neardup store",
                run.url
            )));
        }
        Ok(run)
    }

    /// Refuse a store whose duplication policy is not the run's: every
    /// night must decide alike.
    fn check_policy(&self, m: &Manifest) -> Result<()> {
        if m.min_shared == self.min_shared {
            return Ok(());
        }
        let name = |p: Option<MinShared>| p.map_or("none".to_string(), |p| p.to_string());
        Err(Error::input(format!(
            "store '{}' keeps pairs under the duplication policy --min-shared {}, this run asks for {}: \
             drop --min-shared to use the store's policy (every night must decide alike), or start a new store",
            self.url,
            name(m.min_shared),
            name(self.min_shared)
        )))
    }

    /// Refuse a store whose SimHash vectors are of another scheme (tonight's
    /// could not be compared with them), and a SimHash-cosine check on a
    /// store whose runs keep none: its stored documents could not be
    /// checked, and their pairs would be lost without a word.
    fn check_vectors(&self, m: &Manifest, verify: crate::sets::Verify) -> Result<()> {
        match m.vectors.as_deref() {
            Some(VECTOR_SCHEME) => Ok(()),
            Some(other) => Err(Error::input(format!(
                "store '{}' keeps SimHash vectors of scheme '{other}', this neardup makes '{VECTOR_SCHEME}': keep \
                 running this store with the neardup that made it ({}), or start a new store",
                self.url, m.neardup_version
            ))),
            None if verify.reads_vectors() => Err(Error::input(format!(
                "store '{}' keeps no SimHash vectors, which --verify {verify} compares (its first night checked \
                 term sets): check this store on term sets (--verify jaccard:T or overlap:T), or start a new \
                 store whose first night runs with --verify {verify}",
                self.url
            ))),
            None => Ok(()),
        }
    }

    /// Whether tonight's documents keep their SimHash vectors, as the
    /// store's do.
    pub fn vectors(&self) -> bool {
        self.vectors
    }

    /// The documents a line is found in to be boilerplate tonight (0: off):
    /// the store's rule, or the one a new store records.
    pub fn boilerplate_lines(&self) -> u32 {
        self.boilerplate_lines
    }

    /// This night's duplication policy: the store's, or the one a new store
    /// records.
    pub fn min_shared(&self) -> Option<MinShared> {
        self.min_shared
    }

    /// Refuse a store whose manifest `m` does not match the run: another
    /// format, MinHash plan, fingerprint settings, keep rule or IDF model.
    async fn check_manifest(&self, ctx: &SessionContext, m: &Manifest, settings: &FingerprintSettings, keep: &KeepRule, idf_model: Option<&str>) -> Result<()> {
        check_format(&self.url, m)?;
        if m.minhash != self.minhash {
            let name = |p: Option<MinHashPlan>| p.map_or("none (SimHash candidates only)".to_string(), |p| p.to_string());
            return Err(Error::input(format!(
                "store '{}' keeps MinHash keys of plan {}, this run asks for {}: use the store's --candidates \
                 and --minhash, or start a new store",
                self.url,
                name(m.minhash),
                name(self.minhash)
            )));
        }
        if let Some(scheme) = m.shingles.as_deref().filter(|s| *s != SKETCH_SCHEME) {
            return Err(Error::input(format!(
                "store '{}' keeps shingle sketches of scheme '{scheme}', this neardup makes '{SKETCH_SCHEME}': \
                 their shares of shared text cannot be compared. Keep running this store with the neardup \
                 that made it ({}), or start a new store",
                self.url, m.neardup_version
            )));
        }
        if m.settings != *settings {
            return Err(Error::input(format!(
                "store '{}' holds fingerprints made with other settings ({}): they cannot be compared. \
                 Run with the store's settings, or start a new store",
                self.url,
                differences(&m.settings, settings)
            )));
        }
        if m.keep != keep.to_string() {
            return Err(Error::input(format!(
                "store '{}' keeps representatives by '{}', this run by '{keep}': use --keep {}",
                self.url, m.keep, m.keep
            )));
        }
        if let Some(id) = &m.boilerplate_set {
            let url = format!("{}/{BOILERPLATE_SET}", self.url);
            let found = content_identity(&read_object(ctx, &url).await?);
            if found != *id {
                return Err(Error::input(format!(
                    "store '{}': its boilerplate line set '{url}' ({found}) is not the one store.json records ({id}): \
                     the store is damaged; restore the file from a backup, or start a new store",
                    self.url
                )));
            }
        }
        let Some(model) = idf_model else { return Ok(()) };
        let given = content_identity(&read_object(ctx, model).await?);
        if given != m.idf_model {
            return Err(Error::input(format!(
                "IDF model '{model}' ({given}) is not the store's frozen model ({}): fingerprints made with \
                 it would not be comparable. Drop the model option to use the store's, or start a new store \
                 to refresh the model",
                m.idf_model
            )));
        }
        Ok(())
    }

    /// The committed runs before this one and the segments; refuses a run
    /// id that a segment already covers or precedes.
    async fn read_runs(&mut self) -> Result<()> {
        if local_path(&self.url).is_some_and(|p| !p.exists()) {
            return Ok(());
        }
        let layout = super::store::read_layout(self.store.as_ref(), &self.root, &self.url).await?;
        if let Some(s) = layout.segments.iter().find(|s| s.runs.iter().any(|r| *r >= self.run_id)) {
            return Err(Error::input(format!(
                "store '{}': segment '{}' holds runs up to '{}', so run '{}' cannot be run (again) now: \
                 a compacted run cannot be replaced, and a run must come after every compacted one. \
                 Use a later run id",
                self.url,
                s.id,
                s.runs.last().cloned().unwrap_or_default(),
                self.run_id
            )));
        }
        self.earlier = layout.runs.into_iter().filter(|id| *id < self.run_id).collect();
        self.segments = layout.segments;
        Ok(())
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The store's frozen boilerplate line set, if it keeps one.
    pub fn boilerplate_url(&self) -> Option<String> {
        self.manifest.as_ref()?.boilerplate_set.as_ref()?;
        Some(format!("{}/{BOILERPLATE_SET}", self.url))
    }

    /// The store's frozen IDF model.
    pub fn model_url(&self) -> String {
        format!("{}/idf/model.parquet", self.url)
    }

    pub(super) fn run_url(&self, id: &str) -> String {
        format!("{}/runs/run={id}", self.url)
    }

    /// The data files of the earlier runs: segments, then runs.
    pub(super) fn earlier_files(&self) -> Vec<String> {
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
            let schema = register_parquet_files(ctx, &format!("stored_file_{i}"), std::slice::from_ref(file)).await?;
            let keys = super::store::packed_keys(&schema);
            parts.push(format!("SELECT {i} AS file, doc_key, simhash, {keys} AS minhash FROM stored_file_{i}"));
        }
        create_view(ctx, table::STORED_RUNS, &parts.join(" UNION ALL ")).await
    }

    /// Rows `(file, simhash)` as each earlier file's sorted, distinct
    /// fingerprints, and whether it has a NULL one among them.
    pub(super) fn wanted_by_file(&self, batches: &[RecordBatch]) -> Result<Vec<(Vec<u64>, bool)>> {
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
    pub(super) async fn earlier_bytes(&self, ctx: &SessionContext) -> Result<u64> {
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
             WHERE s.doc_key IN (SELECT hash64(source || chr(0) || id) FROM documents_input_rows)",
        )
        .await?;
        reads.probe_bytes += scanned;
        let wanted = self.wanted_by_file(&batches)?;
        let mut found = Vec::new();
        if wanted.iter().any(|w| !w.0.is_empty() || w.1) {
            let (rows, _, fetched) = rows_by_key(ctx, &self.earlier_files(), "simhash", &wanted, Take::All, &["term_set", "minhash"]).await?;
            reads.fetch_bytes += fetched.bytes;
            reads.fetch_objects += fetched.objects;
            let mut stored = std::collections::HashSet::new();
            for b in &rows {
                let (sources, ids) = (strings(b, b.schema().index_of("source")?)?, strings(b, b.schema().index_of("id")?)?);
                stored.extend(sources.into_iter().zip(ids));
            }
            // The input's rows, before one row per id is kept (`documents_input`
            // is made after this): the same ids, some of them repeated.
            for b in &collect(ctx, "SELECT DISTINCT source, id FROM documents_input_rows").await? {
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
    pub(super) async fn create(
        &mut self,
        ctx: &SessionContext,
        (model, n_docs): (Option<&str>, u64),
        boilerplate: Option<&super::line_set::LineSet>,
        settings: &FingerprintSettings,
        keep: &KeepRule,
    ) -> Result<()> {
        let idf_model = match model {
            Some(model) => {
                let bytes = read_object(ctx, model).await?;
                let id = content_identity(&bytes);
                self.put("idf/model.parquet", bytes.to_vec()).await?;
                id
            }
            None => "none".into(),
        };
        let boilerplate_set = match boilerplate {
            Some(set) => {
                self.put(BOILERPLATE_SET, set.bytes.to_vec()).await?;
                Some(set.identity.clone())
            }
            None => None,
        };
        let manifest = Manifest {
            format: STORE_FORMAT,
            settings: settings.clone(),
            idf_model,
            idf_n_docs: n_docs,
            keep: keep.to_string(),
            minhash: self.minhash,
            shingles: Some(SKETCH_SCHEME.into()),
            vectors: self.vectors.then(|| VECTOR_SCHEME.into()),
            min_shared: self.min_shared,
            boilerplate_set,
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
