//! `report.html` for every `dedup`, `pairs` and store run, and `neardup
//! report OUTPUT`, which draws it again from a committed output.
//!
//! What the page shows is read by SQL from tables of fixed names, whichever
//! way the report is drawn: `pairs` and `clusters` (the run's, or the
//! output's folders), `documents` for texts (the run's documents, or the
//! inputs named in `summary.json`), and the summary. The only thing the
//! output's tables cannot give, the candidates the check rejected, is counted
//! at the end of the run and kept in `summary.json` (`near_misses`). So a
//! report drawn again from the same output has the same bytes.

use std::collections::BTreeMap;

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use super::config::JoinOptions;
use super::query::{collect, collect_with, scalar_u64, with_wide_rows, LATE_MATERIALIZATION};
use super::sql::{self, render, table, Param};
use super::summary::{RunCommand, StoreSummary, Summary};
use crate::error::{Error, Result};
use crate::report::{self, Cluster, Input, Link, Member, Night, Report, Similarity, SourceMatrix, MAX_MEMBERS};
use crate::storage::{ident, literal, read_object, register_parquet, write_file, OutputDir};

/// Width of the similarity histogram's bins.
const BIN_WIDTH: f64 = 0.02;
/// How far below the threshold a rejected candidate counts as a near miss.
const NEAR_MISS_REACH: f64 = 0.2;
/// Candidates scored again for the near-miss histogram, at most (a sample of
/// one in N beyond it).
const NEAR_MISS_SAMPLE: u64 = 100_000;
/// Clusters shown: the largest, and as many chosen at random.
const SHOWN_CLUSTERS: usize = 8;
const NO_TEXTS_IN_FINGERPRINTS: &str = "Texts are not shown: `neardup pairs` reads fingerprint files, which hold no text.";
/// Nights of a store shown (the latest).
const SHOWN_NIGHTS: usize = 60;

/// The documents a run held in memory, kept for the texts of the members
/// shown (stages.rs, `release_documents`); without it the texts are read
/// from the view `documents`, the inputs.
pub(super) const HELD_DOCUMENTS: &str = "held_documents";

/// Candidates the check rejected a little below its threshold, counted at
/// the end of a run (they are in no output table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NearMisses {
    pub measure: String,
    pub threshold: f64,
    pub bin_width: f64,
    /// Rejected candidates by bin of similarity (bin i covers [i·w, (i+1)·w)),
    /// scaled by the sampling stride.
    pub counts: Vec<u64>,
    /// One candidate in `sample_stride` was scored again.
    pub sample_stride: u64,
}

/// How the near misses are counted: one distinct candidate in `stride`
/// (the residue of the low 20 bits of its `simhash_b`, hash bits) is scored
/// again, and each below the threshold, within [`NEAR_MISS_REACH`] of it,
/// counts in its bin. sql/97_near_misses.sql does it in a statement; the
/// check in the client (src/job/in_memory.rs) as it goes.
pub(super) struct NearMissSample {
    pub stride: u64,
    pub threshold: f64,
}

impl NearMissSample {
    /// The sample of a check at `threshold` over `candidates` rows (all of
    /// them, `count(*) FROM candidates`).
    pub fn new(threshold: f64, candidates: u64) -> NearMissSample {
        NearMissSample { stride: candidates.div_ceil(NEAR_MISS_SAMPLE).max(1), threshold }
    }

    fn low(&self) -> f64 {
        self.threshold - NEAR_MISS_REACH
    }

    /// Whether the candidate of fingerprint `simhash_b` is in the sample.
    pub fn takes(&self, simhash_b: u64) -> bool {
        (simhash_b & 1_048_575) % self.stride == 0
    }

    /// The bin of a sampled candidate of `similarity`, if it is a near miss
    /// (as the statement's `floor`, then the bins there are).
    pub fn bin(&self, similarity: f64) -> Option<usize> {
        let missed = similarity < self.threshold && similarity >= self.low();
        missed.then(|| usize::try_from((similarity / BIN_WIDTH).floor() as i64).ok()).flatten().filter(|&b| b < bins())
    }

    /// A count for every bin, none yet.
    pub fn empty_counts() -> Vec<u64> {
        vec![0; bins()]
    }

    /// The near misses of a check by `measure`, from the sample's `counts`
    /// by bin, scaled back by the stride.
    pub fn near_misses(&self, measure: &str, counts: Vec<u64>) -> NearMisses {
        let counts = counts.into_iter().map(|n| n * self.stride).collect();
        NearMisses { measure: measure.into(), threshold: self.threshold, bin_width: BIN_WIDTH, counts, sample_stride: self.stride }
    }
}

/// Count the near misses of a run whose `candidates` and `term_sets` are
/// still registered (before its work files are removed).
pub(super) async fn near_misses(ctx: &SessionContext, join: &JoinOptions) -> Result<Option<NearMisses>> {
    let Some((measure, threshold)) = join.verify.measure() else { return Ok(None) };
    if !ctx.table_exist(table::CANDIDATES)? || !ctx.table_exist(table::TERM_SETS)? {
        return Ok(None);
    }
    let sample = NearMissSample::new(threshold, scalar_u64(ctx, "SELECT count(*) FROM candidates").await?);
    let sql = render(
        sql::NEAR_MISSES,
        &[
            ("stride", Param::Int(sample.stride)),
            ("bin_width", Param::Float(BIN_WIDTH)),
            ("measure", Param::Text(measure)),
            ("threshold", Param::Float(threshold)),
            ("low", Param::Float(sample.low())),
        ],
    );
    let mut counts = NearMissSample::empty_counts();
    // A sampled candidate meets both term sets: wide rows.
    for row in rows(&with_wide_rows(ctx, collect(ctx, &sql)).await?) {
        if let (Some(bin), Some(n)) = (row[0].int(), row[1].int()) {
            if let Some(slot) = usize::try_from(bin).ok().and_then(|b| counts.get_mut(b)) {
                *slot += n as u64;
            }
        }
    }
    Ok(Some(sample.near_misses(measure, counts)))
}

fn bins() -> usize {
    (1.0 / BIN_WIDTH).round() as usize + 1
}

/// Draw the report of a finished run into its staged output. The tables
/// `pairs` and `clusters` are the run's; `documents` gives the texts.
pub(super) async fn write(ctx: &SessionContext, out: &OutputDir, summary: &Summary) -> Result<()> {
    let notes = if summary.command == RunCommand::Pairs { vec![NO_TEXTS_IN_FINGERPRINTS.to_string()] } else { Vec::new() };
    let page = draw(ctx, summary, notes).await?;
    out.put("report.html", page.into_bytes()).await
}

/// `neardup report OUTPUT -o FILE`: draw the report of a committed output
/// again. Returns the size of the page written.
pub async fn redraw(ctx: &SessionContext, output: &str, to: &str) -> Result<usize> {
    let output = output.trim_end_matches('/');
    let summary = read_output_file(ctx, output, "summary.json", "is not a neardup output (no summary.json)").await?;
    let summary: Summary = serde_json::from_slice(&summary)
        .map_err(|e| Error::input(format!("'{output}/summary.json' is not a neardup summary: {e}")))?;
    if summary.command == RunCommand::Fingerprint || summary.plan.is_some() {
        return Err(Error::input(format!("'{output}' holds fingerprints only or a plan: a report needs pairs and clusters (dedup or pairs)")));
    }
    read_output_file(ctx, output, "_SUCCESS", "is not a complete output (no _SUCCESS): rerun the job").await?;
    for table in ["pairs", "clusters"] {
        register_parquet(ctx, table, &format!("{output}/{table}/")).await?;
    }
    let notes = register_texts(ctx, &summary).await;
    let page = draw(ctx, &summary, notes).await?;
    let size = page.len();
    write_file(ctx, to, page.into()).await?;
    Ok(size)
}

/// One file of an output; a missing one is bad input (exit 2), named with `missing`.
async fn read_output_file(ctx: &SessionContext, output: &str, file: &str, missing: &str) -> Result<bytes::Bytes> {
    let (store, path) = crate::storage::locate(ctx, &format!("{output}/{file}"))?;
    let read = async { store.get(&path).await?.bytes().await };
    match read.await {
        Ok(bytes) => Ok(bytes),
        Err(object_store::Error::NotFound { .. }) => Err(Error::input(format!("'{output}' {missing}"))),
        Err(e) => Err(crate::storage::store_failure(format!("cannot read '{output}/{file}'"), &e)),
    }
}

/// The view `documents` (source, id, text) over the inputs a summary names,
/// with the columns it records. An input that cannot be read leaves its
/// documents without text, and a note says so.
async fn register_texts(ctx: &SessionContext, summary: &Summary) -> Vec<String> {
    if summary.command == RunCommand::Pairs {
        return vec![NO_TEXTS_IN_FINGERPRINTS.to_string()];
    }
    let columns = summary.columns.clone().unwrap_or_default();
    let (mut selects, mut notes) = (Vec::new(), Vec::new());
    for (i, input) in summary.inputs.iter().enumerate() {
        let table = format!("report_input_{i}");
        match register_parquet(ctx, &table, &input.url).await {
            Ok(_) => selects.push(format!(
                "SELECT {} AS source, CAST({} AS VARCHAR) AS id, CAST({} AS VARCHAR) AS text FROM {}",
                literal(&input.name),
                ident(&columns.id),
                ident(&columns.text),
                ident(&table)
            )),
            Err(e) => notes.push(format!("Texts of input '{}' are not shown: {e}", input.name)),
        }
    }
    if selects.is_empty() {
        selects.push("SELECT CAST(NULL AS VARCHAR) AS source, CAST(NULL AS VARCHAR) AS id, CAST(NULL AS VARCHAR) AS text WHERE false".into());
    }
    if let Err(e) = collect(ctx, &format!("CREATE VIEW documents AS {}", selects.join(" UNION ALL "))).await {
        notes.push(format!("Texts are not shown: {e}"));
    }
    notes
}

async fn draw(ctx: &SessionContext, summary: &Summary, mut notes: Vec<String>) -> Result<String> {
    let store = summary.store.is_some();
    collect(ctx, &format!("CREATE OR REPLACE VIEW report_clusters AS {}", if store { STORE_CLUSTERS } else { CLUSTERS })).await?;
    let mut report = brief(summary);
    // The report's queries read the finished tables and none reads what
    // another makes, so they run at once: over an object store each waits
    // on its round trips. On local files they were not faster for it
    // (Weibo's report: 179–219 ms one after another, 172–234 at once).
    let matrix = async {
        match summary.inputs.len() > 1 {
            true => matrix(ctx, summary).await.map(Some),
            false => Ok(None),
        }
    };
    let shown = async {
        let (largest, sampled) = chosen_clusters(ctx).await?;
        let members = members(ctx, largest.iter().chain(&sampled)).await?;
        Ok((largest, sampled, members))
    };
    let (hamming, similarity, cluster_sizes, matrix, (largest, sampled, members)) =
        futures::try_join!(hamming(ctx), similarity(ctx, summary), cluster_sizes(ctx), matrix, shown)?;
    (report.hamming, report.similarity, report.cluster_sizes, report.matrix) = (hamming, similarity, cluster_sizes, matrix);
    report.largest = largest.iter().map(|c| members.cluster(c)).collect();
    report.sampled = sampled.iter().map(|c| members.cluster(c)).collect();
    if let Some(s) = &summary.store {
        report.nights = nights(ctx, s).await.unwrap_or_else(|e| {
            notes.push(format!("The store's nights are not shown: {e}"));
            Vec::new()
        });
    }
    report.notes = notes;
    report::render(&report, Some(&jieba_words)).map_err(Error::runtime)
}

/// Words for marking differences: jieba's (built-in dictionary) for Chinese.
fn jieba_words(text: &str) -> Vec<&str> {
    match crate::text::Analyzer::get("") {
        Ok(analyzer) => analyzer.display_words(text),
        Err(_) => report::unicode_words(text),
    }
}

/// The order stages run in; others follow by name.
const STAGE_ORDER: &[&str] =
    &["inputs", "boilerplate", "segment", "corpus_df", "fingerprints", "join", "verify", "clusters", "representatives", "store", "pairs", "survivors"];

fn brief(s: &Summary) -> Report {
    let mut timings: Vec<(String, u64)> = s.timings_ms.iter().filter(|(k, _)| *k != "report").map(|(k, v)| (k.clone(), *v)).collect();
    timings.sort_by_key(|(k, _)| (STAGE_ORDER.iter().position(|s| s == k).unwrap_or(usize::MAX), k.clone()));
    let mut counts = vec![
        ("documents".to_string(), s.documents),
        ("without terms".into(), s.documents_without_terms),
        ("clusters".into(), s.clusters),
        ("documents in clusters".into(), s.documents_in_clusters),
        ("duplicates".into(), s.duplicates),
        ("pairs".into(), s.pairs),
        ("candidates".into(), s.candidate_pairs),
        ("passing the check".into(), s.checked_pairs),
        ("near fingerprint pairs".into(), s.near_fingerprint_pairs),
    ];
    if let Some(st) = &s.store {
        counts.extend([("stored before".to_string(), st.stored_documents), ("added".into(), st.added), ("duplicates of stored".into(), st.duplicates_of_stored)]);
    }
    let mut settings = vec![
        ("candidates".to_string(), s.candidates.clone()),
        ("max Hamming distance (k)".into(), s.max_hamming.to_string()),
        ("check".into(), s.verify.clone()),
        ("duplication policy".into(), s.min_shared.map_or("none".to_string(), |m| format!("at least {m} of the shorter text shared"))),
        ("keep".into(), s.keep.clone()),
    ];
    if let Some(f) = &s.settings {
        settings.extend([
            ("tokenizer".to_string(), f.tokenizer.clone()),
            ("weighting".into(), f.weighting.clone()),
            ("IDF".into(), f.idf.clone()),
            ("top-K".into(), f.top_k.clone()),
            ("boilerplate".into(), f.boilerplate.clone()),
        ]);
    }
    if let Some(st) = &s.store {
        settings.extend([("store".to_string(), st.url.clone()), ("run".into(), st.run_id.clone()), ("IDF model".into(), st.idf_model.clone())]);
    }
    Report {
        command: if s.store.is_some() { "dedup (store night)".into() } else { s.command.to_string() },
        output: s.output.clone(),
        version: s.neardup_version.clone(),
        settings,
        inputs: s.inputs.iter().map(|i| Input { name: i.name.clone(), url: i.url.clone(), documents: i.documents, without_terms: i.documents_without_terms }).collect(),
        counts,
        timings,
        total_ms: s.total_ms - s.timings_ms.get("report").copied().unwrap_or(0),
        max_hamming: s.max_hamming,
        shared: s.shared_text.as_ref().map(|t| report::Shared {
            pairs_by_share: t.pairs_by_share.clone(),
            unmeasured: t.unmeasured,
            min_shared: s.min_shared.map(|m| m.value()),
        }),
        ..Default::default()
    }
}

/// One-shot clusters as the report reads them, labelled by their id (a
/// fingerprint) in hex: not a cast to text, which DataFusion 55 would undo in
/// filters and joins, comparing text order as number order.
const CLUSTERS: &str = "SELECT to_hex(cluster_id) AS cluster, CAST(source AS VARCHAR) AS source, id, is_representative,
       CAST(cluster_size AS BIGINT) AS cluster_size, CAST(NULL AS VARCHAR) AS stored_run
FROM clusters";

/// A night's clusters: tonight's documents by representative, and the
/// representative itself where an earlier run stored it.
const STORE_CLUSTERS: &str = "WITH c AS (
  SELECT CAST(representative_source AS VARCHAR) AS rs, representative_id AS ri, CAST(source AS VARCHAR) AS source, id,
         is_representative, representative_run
  FROM clusters
),
sized AS (
  SELECT rs, ri, count(*) + CASE WHEN bool_or(is_representative) THEN 0 ELSE 1 END AS size,
         bool_or(is_representative) AS tonight, max(representative_run) AS run
  FROM c GROUP BY rs, ri
)
SELECT s.rs || '/' || s.ri AS cluster, c.source, c.id, c.is_representative, CAST(s.size AS BIGINT) AS cluster_size,
       CAST(NULL AS VARCHAR) AS stored_run
FROM c JOIN sized s ON c.rs = s.rs AND c.ri = s.ri
UNION ALL
SELECT rs || '/' || ri, rs, ri, true, CAST(size AS BIGINT), run FROM sized WHERE NOT tonight";

async fn hamming(ctx: &SessionContext) -> Result<Vec<u64>> {
    let mut counts = Vec::new();
    for row in rows(&collect(ctx, "SELECT CAST(hamming AS BIGINT), count(*) FROM pairs GROUP BY 1 ORDER BY 1").await?) {
        if let (Some(d), Some(n)) = (row[0].int(), row[1].int()) {
            let d = d.clamp(0, 64) as usize;
            if counts.len() <= d {
                counts.resize(d + 1, 0);
            }
            counts[d] += n as u64;
        }
    }
    Ok(counts)
}

async fn similarity(ctx: &SessionContext, summary: &Summary) -> Result<Option<Similarity>> {
    let Some(near) = &summary.near_misses else { return Ok(None) };
    let sql = format!("SELECT CAST(floor(similarity / {BIN_WIDTH}) AS BIGINT), count(*) FROM pairs GROUP BY 1");
    let (mut kept, mut unchecked) = (vec![0u64; bins()], 0);
    for row in rows(&collect(ctx, &sql).await?) {
        match (row[0].int(), row[1].int()) {
            (Some(bin), Some(n)) => kept[(bin.max(0) as usize).min(bins() - 1)] += n as u64,
            (None, Some(n)) => unchecked += n as u64,
            _ => {}
        }
    }
    Ok(Some(Similarity {
        measure: near.measure.clone(),
        threshold: near.threshold,
        bin_width: near.bin_width,
        kept,
        near_misses: near.counts.clone(),
        sample_stride: near.sample_stride,
        unchecked,
    }))
}

async fn cluster_sizes(ctx: &SessionContext) -> Result<Vec<(u64, u64)>> {
    let sql = "SELECT size, count(*) FROM (SELECT cluster, max(cluster_size) AS size FROM report_clusters GROUP BY cluster) GROUP BY size ORDER BY size";
    Ok(rows(&collect(ctx, sql).await?).iter().filter_map(|r| Some((r[0].int()? as u64, r[1].int()? as u64))).collect())
}

async fn matrix(ctx: &SessionContext, summary: &Summary) -> Result<SourceMatrix> {
    let sources: Vec<String> = summary.inputs.iter().map(|i| i.name.clone()).collect();
    let mut counts = vec![vec![0u64; sources.len()]; sources.len()];
    let sql = "SELECT CAST(source_a AS VARCHAR), CAST(source_b AS VARCHAR), count(*) FROM pairs GROUP BY 1, 2";
    for row in rows(&collect(ctx, sql).await?) {
        let at = |v: &Value| v.text().and_then(|s| sources.iter().position(|x| x == s));
        if let (Some(a), Some(b), Some(n)) = (at(&row[0]), at(&row[1]), row[2].int()) {
            counts[a][b] += n as u64;
            if a != b {
                counts[b][a] += n as u64;
            }
        }
    }
    Ok(SourceMatrix { sources, counts })
}

/// The largest clusters, then as many others chosen by a hash of their
/// label (the same every time, whatever the partitioning).
async fn chosen_clusters(ctx: &SessionContext) -> Result<(Vec<(String, u64)>, Vec<(String, u64)>)> {
    let sized = "SELECT cluster, max(cluster_size) AS size FROM report_clusters GROUP BY cluster";
    let largest = format!("SELECT cluster, size FROM ({sized}) ORDER BY size DESC, cluster LIMIT {SHOWN_CLUSTERS}");
    let largest: Vec<(String, u64)> = rows(&collect(ctx, &largest).await?).iter().filter_map(|r| Some((r[0].text()?.to_string(), r[1].int()? as u64))).collect();
    let shown = largest.iter().map(|(c, _)| literal(c)).collect::<Vec<_>>();
    let except = if shown.is_empty() { String::new() } else { format!("WHERE cluster NOT IN ({})", shown.join(", ")) };
    let sample = format!("SELECT cluster, size FROM ({sized}) {except} ORDER BY md5(cluster), cluster LIMIT {SHOWN_CLUSTERS}");
    let sampled = rows(&collect(ctx, &sample).await?).iter().filter_map(|r| Some((r[0].text()?.to_string(), r[1].int()? as u64))).collect();
    Ok((largest, sampled))
}

/// The shown members of chosen clusters, with their texts and links.
struct Members {
    by_cluster: BTreeMap<String, Vec<Member>>,
}

impl Members {
    fn cluster(&self, (label, size): &(String, u64)) -> Cluster {
        Cluster { label: label.clone(), size: *size, members: self.by_cluster.get(label).cloned().unwrap_or_default() }
    }
}

async fn members(ctx: &SessionContext, clusters: impl Iterator<Item = &(String, u64)>) -> Result<Members> {
    let labels: Vec<&str> = clusters.map(|(c, _)| c.as_str()).collect();
    let mut by_cluster: BTreeMap<String, Vec<Member>> = BTreeMap::new();
    if labels.is_empty() {
        return Ok(Members { by_cluster });
    }
    register_strings(ctx, "report_chosen", &[("cluster", &labels)]).await?;
    // The representative first, then members by (source, id), at most MAX_MEMBERS.
    let sql = format!(
        "SELECT cluster, source, id, is_representative, stored_run FROM (
           SELECT c.*, row_number() OVER (PARTITION BY c.cluster ORDER BY c.is_representative DESC, c.source, c.id) AS r
           FROM report_clusters c JOIN report_chosen k ON c.cluster = k.cluster)
         WHERE r <= {MAX_MEMBERS} ORDER BY cluster, r"
    );
    for row in rows(&collect(ctx, &sql).await?) {
        let member = Member {
            source: row[1].text().unwrap_or_default().to_string(),
            id: row[2].text().unwrap_or_default().to_string(),
            representative: row[3].flag(),
            stored_run: row[4].text().map(str::to_string),
            ..Default::default()
        };
        by_cluster.entry(row[0].text().unwrap_or_default().to_string()).or_default().push(member);
    }
    register_shown(ctx, &by_cluster).await?;
    let (texts, links) = futures::try_join!(texts(ctx, &by_cluster), links(ctx))?;
    for m in by_cluster.values_mut().flatten() {
        let key = (m.source.clone(), m.id.clone());
        m.text = texts.get(&key).cloned();
        m.link = links.get(&key).cloned();
    }
    Ok(Members { by_cluster })
}

/// The shown members as the table `report_members` (source, id).
async fn register_shown(ctx: &SessionContext, by_cluster: &BTreeMap<String, Vec<Member>>) -> Result<()> {
    let all: Vec<&Member> = by_cluster.values().flatten().collect();
    let sources: Vec<&str> = all.iter().map(|m| m.source.as_str()).collect();
    let ids: Vec<&str> = all.iter().map(|m| m.id.as_str()).collect();
    register_strings(ctx, "report_members", &[("source", &sources), ("id", &ids)]).await
}

/// A small table of text columns as the view `name`, over a VALUES list:
/// a plan that also runs on a cluster (an in-memory table would not travel).
async fn register_strings(ctx: &SessionContext, name: &str, columns: &[(&str, &[&str])]) -> Result<()> {
    let rows = columns.first().map_or(0, |(_, v)| v.len());
    let values: Vec<String> = (0..rows)
        .map(|r| format!("({})", columns.iter().map(|(_, v)| format!("CAST({} AS VARCHAR)", literal(v[r]))).collect::<Vec<_>>().join(", ")))
        .collect();
    let names: Vec<String> = columns.iter().enumerate().map(|(i, (c, _))| format!("column{} AS {}", i + 1, ident(c))).collect();
    collect(ctx, &format!("CREATE OR REPLACE VIEW {} AS SELECT {} FROM (VALUES {})", ident(name), names.join(", "), values.join(", "))).await?;
    Ok(())
}

async fn texts(ctx: &SessionContext, by_cluster: &BTreeMap<String, Vec<Member>>) -> Result<BTreeMap<(String, String), String>> {
    // The rows an in-memory run held, else the inputs (`documents` is put
    // back whenever the held rows are kept).
    let documents = if ctx.table_exist(HELD_DOCUMENTS)? { HELD_DOCUMENTS } else { table::DOCUMENTS };
    if !ctx.table_exist(documents)? || by_cluster.is_empty() {
        return Ok(BTreeMap::new());
    }
    // The shown ids are a filter too, which the engine pushes into the
    // Parquet reader of every input: it decodes the texts of the rows that
    // match only, where the join alone decoded every text of every input
    // (Heybox: 65 MB of text, 168 ms, for 60 members).
    let ids: std::collections::BTreeSet<&str> = by_cluster.values().flatten().map(|m| m.id.as_str()).collect();
    let listed = ids.iter().map(|id| literal(id)).collect::<Vec<_>>().join(", ");
    // With --duplicate-ids keep-first the kept row is the one of the smallest text.
    let sql = format!(
        "SELECT m.source, m.id, min(CAST(d.text AS VARCHAR)) FROM {documents} d
         JOIN report_members m ON CAST(d.source AS VARCHAR) = m.source AND d.id = m.id
         WHERE d.id IN ({listed}) GROUP BY m.source, m.id"
    );
    let rows = rows(&collect_with(ctx, &[LATE_MATERIALIZATION], &sql).await?);
    Ok(rows.iter().filter_map(|r| Some(((r[0].text()?.to_string(), r[1].text()?.to_string()), r[2].text()?.to_string()))).collect())
}

/// For each shown member, the pair that links it: the closest, then by partner.
async fn links(ctx: &SessionContext) -> Result<BTreeMap<(String, String), Link>> {
    // Outputs written before pairs carried shares of shared text have none.
    let shares = ctx.table("pairs").await?.schema().has_column_with_unqualified_name("shared_a");
    let (a, b) = match shares {
        true => ("p.shared_a", "p.shared_b"),
        false => ("CAST(NULL AS DOUBLE)", "CAST(NULL AS DOUBLE)"),
    };
    // Each member's nearest partner is chosen here, not in the client: the
    // anchor of a cluster of copies is in a pair with every other copy
    // (Weibo: 64,493 rows for the members shown, turned into values one by
    // one), and only one of them is shown.
    let sql = format!(
        "SELECT s, i, ps, pi, h, similarity, shared, partner_shared FROM (
           SELECT *, row_number() OVER (PARTITION BY s, i ORDER BY h, ps || ' / ' || pi) AS nearest FROM (
             SELECT m.source AS s, m.id AS i, CAST(p.source_b AS VARCHAR) AS ps, p.id_b AS pi, CAST(p.hamming AS BIGINT) AS h,
                    p.similarity, {a} AS shared, {b} AS partner_shared
             FROM pairs p JOIN report_members m ON CAST(p.source_a AS VARCHAR) = m.source AND p.id_a = m.id
             UNION ALL
             SELECT m.source, m.id, CAST(p.source_a AS VARCHAR), p.id_a, CAST(p.hamming AS BIGINT), p.similarity, {b}, {a}
             FROM pairs p JOIN report_members m ON CAST(p.source_b AS VARCHAR) = m.source AND p.id_b = m.id)
           WHERE ps IS NOT NULL AND pi IS NOT NULL AND h IS NOT NULL)
         WHERE nearest = 1"
    );
    let mut links: BTreeMap<(String, String), (i64, String, Link)> = BTreeMap::new();
    for r in rows(&collect(ctx, &sql).await?) {
        let (Some(s), Some(i), Some(ps), Some(pi), Some(h)) = (r[0].text(), r[1].text(), r[2].text(), r[3].text(), r[4].int()) else { continue };
        let partner = format!("{ps} / {pi}");
        let link = Link { partner: partner.clone(), hamming: h, similarity: r[5].float(), shared: r[6].float(), partner_shared: r[7].float() };
        let entry = links.entry((s.to_string(), i.to_string())).or_insert((h, partner.clone(), link.clone()));
        if (h, &partner) < (entry.0, &entry.1) {
            *entry = (h, partner, link);
        }
    }
    Ok(links.into_iter().map(|(k, (_, _, l))| (k, l)).collect())
}

/// The store's runs and segments up to this night, from their footers and
/// each run's own summary.
async fn nights(ctx: &SessionContext, store: &StoreSummary) -> Result<Vec<Night>> {
    let info = super::store::info(ctx, &store.url).await?;
    let mut nights = Vec::new();
    let mut total = 0;
    for s in &info.segments {
        total += s.documents;
        nights.push(Night { label: s.folder.replace("segments/", ""), documents: s.documents, duplicates_of_stored: None, store_documents: total });
    }
    for r in info.runs.iter().filter(|r| r.runs.iter().all(|id| *id <= store.run_id)) {
        total += r.documents;
        let url = format!("{}/{}/summary.json", info.store, r.folder);
        let dups = match read_object(ctx, &url).await {
            Ok(bytes) => serde_json::from_slice::<StoreSummary>(&bytes).ok().map(|s| s.duplicates_of_stored),
            Err(_) => None,
        };
        nights.push(Night { label: r.folder.replace("runs/", ""), documents: r.documents, duplicates_of_stored: dups, store_documents: total });
    }
    let skip = nights.len().saturating_sub(SHOWN_NIGHTS);
    Ok(nights.split_off(skip))
}

/// One cell of a small answer.
enum Value {
    Text(String),
    Int(i64),
    Float(f64),
    Flag(bool),
    Null,
}

impl Value {
    fn text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
    fn int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }
    fn float(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(n) => Some(*n as f64),
            _ => None,
        }
    }
    fn flag(&self) -> bool {
        matches!(self, Value::Flag(true))
    }
}

/// The rows of a small answer, cell by cell.
fn rows(batches: &[RecordBatch]) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            out.push(b.columns().iter().map(|c| value(c.as_ref(), r)).collect());
        }
    }
    out
}

fn value(column: &dyn Array, row: usize) -> Value {
    match ScalarValue::try_from_array(column, row) {
        Ok(v) if v.is_null() => Value::Null,
        Ok(ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s))) => Value::Text(s),
        Ok(ScalarValue::Boolean(Some(b))) => Value::Flag(b),
        Ok(ScalarValue::Float64(Some(f))) => Value::Float(f),
        Ok(ScalarValue::Float32(Some(f))) => Value::Float(f as f64),
        Ok(v) => match v.cast_to(&DataType::Int64) {
            Ok(ScalarValue::Int64(Some(n))) => Value::Int(n),
            _ => match v.cast_to(&DataType::Utf8) {
                Ok(ScalarValue::Utf8(Some(s))) => Value::Text(s),
                _ => Value::Null,
            },
        },
        Err(_) => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::NearMissSample;

    #[test]
    fn near_misses_are_sampled_and_binned_as_the_statement_does() {
        // 250,000 candidate rows: one in three scored.
        let sample = NearMissSample::new(0.5, 250_000);
        assert_eq!(sample.stride, 3);
        assert!(sample.takes(3 << 20 | 6) && !sample.takes(7));
        // Bins of 0.02 within 0.2 below the threshold; passing pairs and
        // those further below are no near misses.
        assert_eq!(sample.bin(0.49), Some(24));
        assert_eq!(sample.bin(0.3), Some(15));
        assert_eq!((sample.bin(0.5), sample.bin(0.29), sample.bin(f64::NAN)), (None, None, None));
        // A cosine below zero has no bin (the statement's bin is negative).
        assert_eq!(NearMissSample::new(0.1, 1).bin(-0.05), None);
        let missed = sample.near_misses("jaccard", vec![1; 51]);
        assert_eq!((missed.counts[0], missed.sample_stride, missed.bin_width), (3, 3, 0.02));
    }
}
