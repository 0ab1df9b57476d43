//! A store's layout: which committed runs and compacted segments a reader
//! sees, `neardup store compact` and `neardup store info`.
//!
//! ```text
//! STORE/runs/run=ID/part-00000.parquet       one night's documents, sorted by fingerprint
//! STORE/runs/run=ID/_SUCCESS                 written last
//! STORE/segments/seg=ID/part-00000.parquet   several runs merged, sorted by fingerprint
//! STORE/segments/seg=ID/summary.json         the runs it holds
//! STORE/segments/seg=ID/_SUCCESS             written last
//! STORE/_lease.json                          while a night or a compaction writes
//! ```
//!
//! Compaction writes a segment that holds every row of the runs (and older
//! segments) it merges, commits it, and only then deletes what it merged. A
//! reader that lists the store between the two steps sees the new segment
//! and hides whatever it covers, so it reads either the old layout or the
//! new one, never a mix; a compaction killed before its commit leaves the
//! old layout, one killed after it leaves covered leftovers that the next
//! compaction deletes. Running it twice changes nothing the second time.

use std::collections::BTreeSet;

use datafusion::arrow::datatypes::Schema;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};

use super::summary::FingerprintSettings;
use crate::error::{Error, Result};
use crate::minhash::MinHashPlan;
use crate::storage::fetch::file_rows;
use crate::storage::lease::Lease;
use crate::storage::{locate, register_parquet_files, store_failure, OutputDir};

/// The store layout this version writes and reads. Layout 1 (before the
/// store kept MinHash keys, `doc_key` and fingerprint order) is refused
/// with a message: its runs cannot be probed without recomputing them.
pub const STORE_FORMAT: u32 = 2;

/// `store.json`: what every run of a store shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub settings: FingerprintSettings,
    /// `xxh3:<digest>` of the frozen IDF model's bytes (`none` without IDF).
    pub idf_model: String,
    pub idf_n_docs: u64,
    pub keep: String,
    /// The MinHash plan of the runs' `minhash` keys (none: SimHash only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minhash: Option<MinHashPlan>,
    /// The scheme of the runs' shingle sketches (none: a store made before
    /// documents kept them, whose stored rows have NULL sketches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shingles: Option<String>,
    /// The scheme of the runs' SimHash vectors (none: a store made before
    /// documents kept them, which a SimHash-cosine check cannot read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<String>,
    /// The duplication policy every night applies (`--min-shared`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_shared: Option<crate::sets::MinShared>,
    /// `xxh3:<digest>` of the frozen boilerplate line set
    /// (`idf/boilerplate.parquet`; none: the store drops no lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boilerplate_set: Option<String>,
    /// The run that created the store.
    pub created_by_run: String,
    pub neardup_version: String,
}

/// The `minhash` column of a store file with `schema`, as packed keys: a
/// file written before the store packed them (crate::minhash::pack_keys)
/// holds a list, packed as it is read, so such a store needs no rewriting
/// (its next compaction packs it).
pub fn packed_keys(schema: &Schema) -> &'static str {
    match schema.field_with_name("minhash").map(|f| f.data_type()) {
        Ok(t) if crate::udf::packed_keys::is_packed(t) => "minhash",
        _ => "pack_keys(minhash)",
    }
}

/// Refuse a store of another layout, saying what to do.
pub fn check_format(url: &str, m: &Manifest) -> Result<()> {
    if m.format == STORE_FORMAT {
        return Ok(());
    }
    Err(Error::input(format!(
        "store '{url}' has layout {} but this neardup reads layout {STORE_FORMAT} (runs sorted by fingerprint, \
         with MinHash keys and document keys, and compacted segments): start a new store with this version \
         (a first night over the archive fills it), or keep running this store with neardup {}",
        m.format, m.neardup_version
    )))
}

/// What a segment's `summary.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentManifest {
    /// The runs whose rows it holds, in order.
    pub runs: Vec<String>,
    pub documents: u64,
}

/// A committed segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub id: String,
    pub runs: Vec<String>,
}

/// What a reader of the store sees.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Committed segments no larger segment covers, by id.
    pub segments: Vec<Segment>,
    /// Committed runs no visible segment holds, in order.
    pub runs: Vec<String>,
    /// Folders a reader ignores: runs and segments that a visible segment covers.
    pub hidden: Vec<String>,
}

impl Layout {
    /// The data file of a run or segment folder.
    pub fn run_file(url: &str, run: &str) -> String {
        format!("{url}/runs/run={run}/part-00000.parquet")
    }

    pub fn segment_file(url: &str, segment: &str) -> String {
        format!("{url}/segments/seg={segment}/part-00000.parquet")
    }

    /// Every run held, in a segment or on its own.
    pub fn all_runs(&self) -> BTreeSet<String> {
        self.segments.iter().flat_map(|s| s.runs.iter().cloned()).chain(self.runs.iter().cloned()).collect()
    }

    /// The data files a reader reads.
    pub fn files(&self, url: &str) -> Vec<String> {
        let segments = self.segments.iter().map(|s| Layout::segment_file(url, &s.id));
        segments.chain(self.runs.iter().map(|r| Layout::run_file(url, r))).collect()
    }
}

/// Folders `KIND=ID` under `prefix` that hold a `_SUCCESS`, with its bytes;
/// and those without one.
async fn committed(store: &dyn ObjectStore, prefix: &ObjectPath, kind: &str, url: &str) -> Result<Vec<(String, ObjectPath)>> {
    let objects: Vec<_> = store
        .list(Some(prefix))
        .try_collect()
        .await
        .map_err(|e| store_failure(format!("cannot list the store '{url}'"), &e))?;
    let depth = prefix.parts().count();
    let mut found: Vec<(String, ObjectPath)> = objects
        .iter()
        .filter_map(|m| {
            let parts: Vec<_> = m.location.parts().skip(depth).map(|p| p.as_ref().to_string()).collect();
            match parts.as_slice() {
                [dir, file] if file == "_SUCCESS" => {
                    dir.strip_prefix(&format!("{kind}=")).map(|id| (id.to_string(), m.location.clone()))
                }
                _ => None,
            }
        })
        .collect();
    found.sort();
    Ok(found)
}

/// List the store at `url` (root `root` of `store`) and decide what a reader sees.
pub async fn read_layout(store: &dyn ObjectStore, root: &ObjectPath, url: &str) -> Result<Layout> {
    let runs = committed(store, &root.clone().join("runs"), "run", url).await?;
    let mut segments = Vec::new();
    for (id, _) in committed(store, &root.clone().join("segments"), "seg", url).await? {
        let manifest_path = root.clone().join("segments").join(format!("seg={id}")).join("summary.json");
        let bytes = store
            .get(&manifest_path)
            .await
            .map_err(|e| store_failure(format!("cannot read segment '{id}' of '{url}'"), &e))?
            .bytes()
            .await
            .map_err(|e| store_failure(format!("cannot read segment '{id}' of '{url}'"), &e))?;
        let manifest: SegmentManifest = serde_json::from_slice(&bytes).map_err(|e| {
            Error::input(format!("segment '{id}' of store '{url}' has an unreadable summary.json ({e}): the store is damaged"))
        })?;
        // A compaction names its segment after its last run and deletes the
        // runs it lists: an id that is no run's would misplace the one and
        // lose the others.
        if let Some(bad) = manifest.runs.iter().find(|r| crate::job::config::check_run_id(r).is_err()) {
            return Err(Error::input(format!(
                "segment '{id}' of store '{url}' lists '{bad}', which is not a valid run id: the store is damaged"
            )));
        }
        segments.push(Segment { id, runs: manifest.runs });
    }
    Ok(layout_of(runs.into_iter().map(|(id, _)| id).collect(), segments))
}

/// The visible layout of committed `runs` and `segments`: the largest
/// segments first, each kept unless the kept ones already cover all its runs.
pub fn layout_of(runs: Vec<String>, mut segments: Vec<Segment>) -> Layout {
    segments.sort_by(|a, b| b.runs.len().cmp(&a.runs.len()).then(b.id.cmp(&a.id)));
    let mut covered = BTreeSet::new();
    let mut layout = Layout::default();
    for segment in segments {
        if segment.runs.iter().all(|r| covered.contains(r)) {
            layout.hidden.push(format!("segments/seg={}", segment.id));
        } else {
            covered.extend(segment.runs.iter().cloned());
            layout.segments.push(segment);
        }
    }
    layout.segments.sort_by(|a, b| a.id.cmp(&b.id));
    for run in runs {
        if covered.contains(&run) {
            layout.hidden.push(format!("runs/run={run}"));
        } else {
            layout.runs.push(run);
        }
    }
    layout
}

/// Delete a folder of the store: its `_SUCCESS` first, so a reader never
/// sees it half gone.
async fn delete_folder(store: &dyn ObjectStore, root: &ObjectPath, relative: &str, url: &str) -> Result<()> {
    let prefix = relative.split('/').fold(root.clone(), |p, part| p.join(part));
    let objects: Vec<_> = store
        .list(Some(&prefix))
        .try_collect()
        .await
        .map_err(|e| store_failure(format!("cannot list '{url}/{relative}'"), &e))?;
    let (success, rest): (Vec<_>, Vec<_>) = objects.into_iter().partition(|m| m.location.filename() == Some("_SUCCESS"));
    for m in success.into_iter().chain(rest) {
        match store.delete(&m.location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(store_failure(format!("cannot delete '{url}/{relative}'"), &e)),
        }
    }
    if let Some(dir) = crate::storage::local_path(&format!("{url}/{relative}")) {
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
}

async fn manifest(store: &dyn ObjectStore, root: &ObjectPath, url: &str) -> Result<Manifest> {
    let got = match store.get(&root.clone().join("store.json")).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(Error::input(format!("'{url}' is not a neardup store (it has no store.json)")))
        }
        Err(e) => return Err(store_failure(format!("cannot read '{url}/store.json'"), &e)),
    };
    let bytes = got.bytes().await.map_err(|e| store_failure(format!("cannot read '{url}/store.json'"), &e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::input(format!("'{url}/store.json' is not a neardup store manifest ({e})")))
}

/// What `neardup store compact` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Compaction {
    pub store: String,
    /// The new segment, if one was written.
    pub segment: Option<String>,
    /// Runs and segments merged into it.
    pub merged: Vec<String>,
    pub documents: u64,
    /// Leftover folders (covered by a committed segment) deleted.
    pub removed: Vec<String>,
}

impl Compaction {
    /// One line for people.
    pub fn describe(&self) -> String {
        let removed = match self.removed.len() {
            0 => String::new(),
            n => format!("; removed {n} leftover folder(s) of an earlier compaction"),
        };
        match &self.segment {
            Some(id) => format!(
                "store '{}': merged {} run(s) and segment(s) into segment '{id}' ({} documents){removed}",
                self.store,
                self.merged.len(),
                self.documents
            ),
            None => format!("store '{}': nothing to compact{removed}", self.store),
        }
    }
}

/// Merge every visible run and segment of the store into one segment,
/// except the newest run unless `all` (so that tonight's run can still be
/// rerun by an orchestrator's retry).
pub async fn compact(ctx: &SessionContext, url: &str, all: bool) -> Result<Compaction> {
    let url = url.trim_end_matches('/').to_string();
    let lease = Lease::acquire(ctx, &url, "compaction").await?;
    let result = compact_held(ctx, &url, all, &lease).await;
    lease.release().await;
    result
}

async fn compact_held(ctx: &SessionContext, url: &str, all: bool, lease: &Lease) -> Result<Compaction> {
    let (store, root) = locate(ctx, url)?;
    let manifest = manifest(store.as_ref(), &root, url).await?;
    check_format(url, &manifest)?;
    let layout = read_layout(store.as_ref(), &root, url).await?;
    let mut report = Compaction { store: url.to_string(), ..Compaction::default() };
    // Leftovers of an earlier compaction that was stopped after its commit.
    for folder in &layout.hidden {
        delete_folder(store.as_ref(), &root, folder, url).await?;
        report.removed.push(folder.clone());
    }
    let mut runs = layout.runs.clone();
    if !all {
        runs.pop();
    }
    if layout.segments.len() + runs.len() < 2 {
        return Ok(report);
    }
    let merged_runs: Vec<String> = layout.segments.iter().flat_map(|s| s.runs.clone()).chain(runs.iter().cloned()).collect::<BTreeSet<_>>().into_iter().collect();
    let id = merged_runs.last().cloned().expect("at least two inputs");
    let mut files: Vec<String> = layout.segments.iter().map(|s| Layout::segment_file(url, &s.id)).collect();
    files.extend(runs.iter().map(|r| Layout::run_file(url, r)));
    let (out, documents) = write_segment(ctx, url, manifest.minhash, &files, &id).await?;
    lease.check_held().await?;
    let segment = SegmentManifest { runs: merged_runs, documents };
    out.commit(&serde_json::to_string_pretty(&segment).expect("segment manifest serialises")).await?;
    // Committed: what it merged is now hidden, and can go.
    for s in &layout.segments {
        if s.id != id {
            delete_folder(store.as_ref(), &root, &format!("segments/seg={}", s.id), url).await?;
        }
        report.merged.push(format!("segments/seg={}", s.id));
    }
    for r in &runs {
        delete_folder(store.as_ref(), &root, &format!("runs/run={r}"), url).await?;
        report.merged.push(format!("runs/run={r}"));
    }
    report.segment = Some(id);
    report.documents = documents;
    Ok(report)
}

/// The `files` merged and sorted into segment `id`, staged (not committed);
/// with its documents.
async fn write_segment(ctx: &SessionContext, url: &str, minhash: Option<MinHashPlan>, files: &[String], id: &str) -> Result<(OutputDir, u64)> {
    // One table a file, joined by name: a store may mix files from before
    // and after a column was added or its keys were packed, and one table
    // over them all would have to give `minhash` one type.
    let mut parts = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let schema = register_parquet_files(ctx, &format!("compaction_input_{i}"), std::slice::from_ref(file)).await?;
        // The same keys as a run writes (sql/94_store_run.sql), derived
        // again from the term sets: 48 bits wide where a store written
        // before they were cut holds 64 (see crate::minhash::narrow), and
        // packed where it holds a list, so compaction also brings an older
        // store to today's layout.
        let keys = match minhash {
            Some(plan) => format!("pack_keys(minhash_keys(term_set, {}, {}))", plan.bands, plan.rows),
            None => packed_keys(&schema).to_string(),
        };
        parts.push(format!("SELECT * REPLACE ({keys} AS minhash) FROM compaction_input_{i}"));
    }
    let out = OutputDir::prepare(ctx, &format!("{url}/segments/seg={id}"), true).await?;
    let path = out.staged("part-00000.parquet");
    let written = async {
        // The same order and pages as a run.
        let statement = format!("SELECT * FROM ({}) ORDER BY simhash NULLS LAST, source, id", parts.join(" UNION ALL BY NAME "));
        crate::storage::sorted::write_query(ctx, &statement, &path).await
    }
    .await;
    match written {
        Ok(documents) => Ok((out, documents)),
        Err(e) => {
            out.abort().await;
            Err(e)
        }
    }
}

/// One run or segment, as `neardup store info` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Part {
    /// `runs/run=ID` or `segments/seg=ID`.
    pub folder: String,
    pub runs: Vec<String>,
    pub documents: u64,
    pub bytes: u64,
}

/// What `neardup store info` prints.
#[derive(Debug, Clone, Serialize)]
pub struct StoreInfo {
    pub store: String,
    pub manifest: Manifest,
    pub segments: Vec<Part>,
    pub runs: Vec<Part>,
    pub documents: u64,
    pub bytes: u64,
    /// Who holds the lease now, if anyone.
    pub lease: Option<crate::storage::lease::LeaseInfo>,
}

pub async fn info(ctx: &SessionContext, url: &str) -> Result<StoreInfo> {
    let url = url.trim_end_matches('/').to_string();
    let (store, root) = locate(ctx, &url)?;
    let manifest = manifest(store.as_ref(), &root, &url).await?;
    let layout = read_layout(store.as_ref(), &root, &url).await?;
    let part = |folder: String, runs: Vec<String>, file: String| async move {
        let (documents, bytes) = file_rows(ctx, &file).await?;
        Ok::<_, Error>(Part { folder, runs, documents, bytes })
    };
    let mut segments = Vec::new();
    for s in &layout.segments {
        segments.push(part(format!("segments/seg={}", s.id), s.runs.clone(), Layout::segment_file(&url, &s.id)).await?);
    }
    let mut runs = Vec::new();
    for r in &layout.runs {
        runs.push(part(format!("runs/run={r}"), vec![r.clone()], Layout::run_file(&url, r)).await?);
    }
    let all = segments.iter().chain(&runs);
    let (documents, bytes) = all.fold((0, 0), |(d, b), p| (d + p.documents, b + p.bytes));
    let lease = crate::storage::lease::current(ctx, &url).await?;
    Ok(StoreInfo { store: url, manifest, segments, runs, documents, bytes, lease })
}

impl std::fmt::Display for StoreInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = &self.manifest;
        writeln!(f, "store      {}", self.store)?;
        writeln!(f, "layout     {} (created by run '{}', neardup {})", m.format, m.created_by_run, m.neardup_version)?;
        let settings = serde_json::to_string(&m.settings).unwrap_or_default();
        writeln!(f, "settings   {settings}")?;
        writeln!(f, "idf model  {} (N = {})", m.idf_model, m.idf_n_docs)?;
        if let Some(set) = &m.boilerplate_set {
            writeln!(f, "boilerplate lines frozen in idf/boilerplate.parquet ({set})")?;
        }
        let minhash = m.minhash.map_or("none".to_string(), |p| p.to_string());
        writeln!(f, "keep       {}; MinHash keys {minhash}", m.keep)?;
        let (shingles, vectors) = (m.shingles.as_deref().unwrap_or("none"), m.vectors.as_deref().unwrap_or("none"));
        let policy = m.min_shared.map_or("none".to_string(), |p| p.to_string());
        writeln!(f, "kept       shingle sketches {shingles}; SimHash vectors {vectors}; --min-shared {policy}")?;
        match &self.lease {
            Some(l) => writeln!(f, "lease      held by {} (pid {} on {}), until unix time {}", l.holder, l.pid, l.host, l.expires)?,
            None => writeln!(f, "lease      free")?,
        }
        writeln!(f, "{:<40} {:>6} {:>12} {:>14}", "part", "runs", "documents", "bytes")?;
        for p in self.segments.iter().chain(&self.runs) {
            writeln!(f, "{:<40} {:>6} {:>12} {:>14}", p.folder, p.runs.len(), p.documents, p.bytes)?;
        }
        let runs: usize = self.segments.iter().chain(&self.runs).map(|p| p.runs.len()).sum();
        write!(f, "{:<40} {:>6} {:>12} {:>14}", "total", runs, self.documents, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(id: &str, runs: &[&str]) -> Segment {
        Segment { id: id.into(), runs: runs.iter().map(|r| r.to_string()).collect() }
    }

    #[test]
    fn a_committed_segment_hides_what_it_covers() {
        let runs = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Before compaction: runs only.
        let l = layout_of(runs(&["a", "b", "c"]), vec![]);
        assert_eq!((l.runs.len(), l.segments.len(), l.hidden.len()), (3, 0, 0));
        // Committed, not yet cleaned up: the segment hides a and b.
        let l = layout_of(runs(&["a", "b", "c"]), vec![seg("b", &["a", "b"])]);
        assert_eq!(l.runs, ["c"]);
        assert_eq!(l.hidden, ["runs/run=a", "runs/run=b"]);
        assert_eq!(l.files("S"), ["S/segments/seg=b/part-00000.parquet", "S/runs/run=c/part-00000.parquet"]);
        // A second compaction merged the first segment and c: the old segment is hidden too.
        let l = layout_of(runs(&["c", "d"]), vec![seg("b", &["a", "b"]), seg("c", &["a", "b", "c"])]);
        assert_eq!(l.segments, [seg("c", &["a", "b", "c"])]);
        assert_eq!(l.runs, ["d"]);
        assert_eq!(l.hidden, ["segments/seg=b", "runs/run=c"]);
        assert_eq!(l.all_runs().into_iter().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    }
}
