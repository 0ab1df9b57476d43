//! Detection quality against a ground truth (`neardup eval`).
//!
//! Both sides are reduced to a partition of the documents into groups of
//! duplicates: the truth's groups are the connected components of its pairs
//! (or its cluster labels), the prediction's those of its reported pairs and
//! clusters. From the partitions:
//!
//! - **pairs**: precision = reported pairs whose documents the truth groups
//!   together / reported pairs; recall = truth pairs whose documents the
//!   prediction groups together / truth pairs.
//! - **clusters** (after connected components): precision, recall and F1 over
//!   all document pairs that share a group (pair counting), and the adjusted
//!   Rand index over every document of the corpus.
//! - **slices**: when truth pairs carry a label (e.g. the edit that made the
//!   copy), recall per label.
//!
//! Documents are `(source, id)`; documents in no group are singletons.

use std::collections::{BTreeMap, HashMap};

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::prelude::{CsvReadOptions, SessionContext};
use serde::Serialize;

use crate::cluster::UnionFind;
use crate::error::{Error, Result};
use crate::storage::{ident, register_parquet};

/// A document: (source, id).
pub type Doc = (String, String);

/// Interns documents as dense indices.
#[derive(Debug, Default)]
pub struct Docs {
    index: HashMap<Doc, u64>,
}

impl Docs {
    pub fn id(&mut self, doc: Doc) -> u64 {
        let next = self.index.len() as u64;
        *self.index.entry(doc).or_insert(next)
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// Precision, recall and F1 from counts; a ratio with nothing to count is 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scores {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Scores {
    fn of(true_positive_p: u64, predicted: u64, true_positive_r: u64, actual: u64) -> Scores {
        let ratio = |a: u64, b: u64| if b == 0 { 1.0 } else { a as f64 / b as f64 };
        let (precision, recall) = (ratio(true_positive_p, predicted), ratio(true_positive_r, actual));
        let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        Scores { precision, recall, f1 }
    }
}

/// Recall of the truth pairs with one label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceRecall {
    pub slice: String,
    pub pairs: u64,
    pub found: u64,
    pub recall: f64,
}

/// Everything `neardup eval` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub documents: u64,
    pub truth_pairs: u64,
    pub reported_pairs: u64,
    pub pairs: Scores,
    pub truth_groups: u64,
    pub predicted_groups: u64,
    /// Document pairs sharing a group: in the truth, in the prediction, in both.
    pub truth_same_group: u64,
    pub predicted_same_group: u64,
    pub both_same_group: u64,
    pub clusters: Scores,
    pub adjusted_rand_index: f64,
    pub slices: Vec<SliceRecall>,
}

/// The inputs of an evaluation, as document indices of one [`Docs`].
#[derive(Debug, Default)]
pub struct Evaluation {
    /// Truth pairs with their slice label (may be empty).
    pub truth_pairs: Vec<(u64, u64, String)>,
    /// Truth groups given as labels: (document, group).
    pub truth_labels: Vec<(u64, String)>,
    /// Pairs the tool reported.
    pub reported_pairs: Vec<(u64, u64)>,
    /// Groups the tool reported: (document, cluster id).
    pub predicted_labels: Vec<(u64, String)>,
}

/// Group of every document `0..n`: documents outside any edge or label are
/// their own group.
fn partition(n: usize, edges: impl Iterator<Item = (u64, u64)>, labels: &[(u64, String)]) -> Vec<u64> {
    let mut uf = UnionFind::default();
    for d in 0..n as u64 {
        uf.union(d, d);
    }
    for (a, b) in edges {
        uf.union(a, b);
    }
    let mut first: HashMap<&str, u64> = HashMap::new();
    for (d, label) in labels {
        let anchor = *first.entry(label.as_str()).or_insert(*d);
        uf.union(anchor, *d);
    }
    let mut group = vec![0; n];
    for (d, label) in uf.labels() {
        group[d as usize] = label;
    }
    group
}

fn choose2(k: u64) -> u64 {
    k * k.saturating_sub(1) / 2
}

impl Evaluation {
    /// Score the prediction over `n` documents (indices `0..n`).
    pub fn report(&self, n: usize) -> Report {
        let truth = partition(n, self.truth_pairs.iter().map(|(a, b, _)| (*a, *b)), &self.truth_labels);
        let predicted = partition(n, self.reported_pairs.iter().copied(), &self.predicted_labels);

        // Truth pairs: listed ones, or every pair inside a labelled group.
        let mut truth_pairs: Vec<(u64, u64, &str)> = self.truth_pairs.iter().map(|(a, b, s)| (*a, *b, s.as_str())).collect();
        if truth_pairs.is_empty() {
            let mut members: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for d in 0..n as u64 {
                members.entry(truth[d as usize]).or_default().push(d);
            }
            for m in members.values() {
                for (i, &a) in m.iter().enumerate() {
                    truth_pairs.extend(m[i + 1..].iter().map(|&b| (a, b, "")));
                }
            }
        }
        let mut reported: Vec<(u64, u64)> = self.reported_pairs.iter().map(|&(a, b)| (a.min(b), a.max(b))).filter(|(a, b)| a != b).collect();
        reported.sort_unstable();
        reported.dedup();
        let correct = reported.iter().filter(|(a, b)| truth[*a as usize] == truth[*b as usize]).count() as u64;
        let found = |a: u64, b: u64| predicted[a as usize] == predicted[b as usize];
        let truth_found = truth_pairs.iter().filter(|(a, b, _)| found(*a, *b)).count() as u64;

        let mut slices: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (a, b, s) in &truth_pairs {
            if !s.is_empty() {
                let e = slices.entry(s).or_default();
                e.0 += 1;
                e.1 += found(*a, *b) as u64;
            }
        }

        let counts = PairCounts::of(&truth, &predicted);

        Report {
            documents: n as u64,
            truth_pairs: truth_pairs.len() as u64,
            reported_pairs: reported.len() as u64,
            pairs: Scores::of(correct, reported.len() as u64, truth_found, truth_pairs.len() as u64),
            truth_groups: counts.truth_groups,
            predicted_groups: counts.predicted_groups,
            truth_same_group: counts.same_truth,
            predicted_same_group: counts.same_predicted,
            both_same_group: counts.both,
            clusters: Scores::of(counts.both, counts.same_predicted, counts.both, counts.same_truth),
            adjusted_rand_index: counts.adjusted_rand_index,
            slices: slices
                .into_iter()
                .map(|(s, (pairs, found))| SliceRecall { slice: s.to_string(), pairs, found, recall: found as f64 / pairs as f64 })
                .collect(),
        }
    }
}

/// Pair counting over the contingency table of two partitions of the same
/// documents (a group label per document).
struct PairCounts {
    /// Pairs in one group in both, in the truth, in the prediction.
    both: u64,
    same_truth: u64,
    same_predicted: u64,
    /// Groups of two or more documents.
    truth_groups: u64,
    predicted_groups: u64,
    adjusted_rand_index: f64,
}

impl PairCounts {
    fn of(truth: &[u64], predicted: &[u64]) -> PairCounts {
        let mut cells: HashMap<(u64, u64), u64> = HashMap::new();
        let (mut truth_sizes, mut predicted_sizes): (HashMap<u64, u64>, HashMap<u64, u64>) = Default::default();
        for (&t, &p) in truth.iter().zip(predicted) {
            *cells.entry((t, p)).or_default() += 1;
            *truth_sizes.entry(t).or_default() += 1;
            *predicted_sizes.entry(p).or_default() += 1;
        }
        let both: u64 = cells.values().map(|&c| choose2(c)).sum();
        let same_truth: u64 = truth_sizes.values().map(|&c| choose2(c)).sum();
        let same_predicted: u64 = predicted_sizes.values().map(|&c| choose2(c)).sum();
        let all = choose2(truth.len() as u64) as f64;
        let expected = if all == 0.0 { 0.0 } else { same_truth as f64 * same_predicted as f64 / all };
        let max = (same_truth + same_predicted) as f64 / 2.0;
        PairCounts {
            both,
            same_truth,
            same_predicted,
            truth_groups: truth_sizes.values().filter(|&&c| c > 1).count() as u64,
            predicted_groups: predicted_sizes.values().filter(|&&c| c > 1).count() as u64,
            adjusted_rand_index: if max == expected { 1.0 } else { (both as f64 - expected) / (max - expected) },
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "documents {}; truth: {} pairs in {} groups; reported: {} pairs in {} groups", self.documents, self.truth_pairs, self.truth_groups, self.reported_pairs, self.predicted_groups)?;
        writeln!(f)?;
        writeln!(f, "| level | precision | recall | F1 |")?;
        writeln!(f, "|---|---|---|---|")?;
        for (level, s) in [("pairs", &self.pairs), ("clusters", &self.clusters)] {
            writeln!(f, "| {level} | {:.4} | {:.4} | {:.4} |", s.precision, s.recall, s.f1)?;
        }
        writeln!(f)?;
        writeln!(f, "adjusted Rand index {:.4}", self.adjusted_rand_index)?;
        if !self.slices.is_empty() {
            writeln!(f)?;
            writeln!(f, "| slice | truth pairs | found | recall |")?;
            writeln!(f, "|---|---|---|---|")?;
            for s in &self.slices {
                writeln!(f, "| {} | {} | {} | {:.4} |", s.slice, s.pairs, s.found, s.recall)?;
            }
        }
        Ok(())
    }
}

/// What `neardup eval` reads.
#[derive(Debug, Clone)]
pub struct EvalSpec {
    /// Truth: pairs (source_a, id_a, source_b, id_b) or groups (source, id,
    /// cluster); Parquet or CSV.
    pub truth: String,
    /// A neardup output folder (pairs/, clusters/, fingerprints/) or a pairs table.
    pub predicted: String,
    /// The corpus's documents (source, id) [default: the output's fingerprints/].
    pub documents: Option<String>,
    /// Column of the truth pairs naming their slice [default: `edit` or `slice` if present].
    pub slice_column: Option<String>,
}

/// Register `url` (CSV when it ends in .csv, else Parquet) as `name`.
async fn register(ctx: &SessionContext, name: &str, url: &str) -> Result<SchemaRef> {
    if url.to_ascii_lowercase().ends_with(".csv") {
        let options = CsvReadOptions::new().has_header(true).file_extension(".csv");
        ctx.register_csv(name, url, options).await.map_err(|e| Error::input(format!("cannot read CSV '{url}': {e}")))?;
        Ok(ctx.table(name).await?.schema().inner().clone())
    } else {
        register_parquet(ctx, name, url).await
    }
}

fn has(schema: &SchemaRef, columns: &[&str]) -> bool {
    columns.iter().all(|c| schema.field_with_name(c).is_ok())
}

/// Every row of `statement` as text columns (NULL as "").
async fn rows(ctx: &SessionContext, statement: &str) -> Result<Vec<Vec<String>>> {
    let batches: Vec<RecordBatch> = crate::statement::sql(ctx, statement).await?.collect().await?;
    let mut out = Vec::new();
    for b in &batches {
        let columns: Vec<_> = b.columns().iter().map(|c| cast(c, &DataType::Utf8)).collect::<std::result::Result<_, _>>()?;
        for r in 0..b.num_rows() {
            out.push(
                columns
                    .iter()
                    .map(|c| {
                        let c = c.as_string::<i32>();
                        if c.is_null(r) { String::new() } else { c.value(r).to_string() }
                    })
                    .collect(),
            );
        }
    }
    Ok(out)
}

/// Does `dir/name` exist (as a local folder or as objects)?
async fn table_exists(ctx: &SessionContext, dir: &str, name: &str) -> bool {
    crate::storage::list_parquet_files(ctx, &format!("{}/{name}", dir.trim_end_matches('/'))).await.is_ok_and(|(_, f)| !f.is_empty())
}

/// Read the truth and the prediction and score them.
pub async fn evaluate(ctx: &SessionContext, spec: &EvalSpec) -> Result<Report> {
    let mut docs = Docs::default();
    let mut e = Evaluation::default();
    read_truth(ctx, spec, &mut docs, &mut e).await?;
    let predicted = spec.predicted.trim_end_matches('/');
    let is_output = table_exists(ctx, predicted, "pairs").await;
    read_prediction(ctx, predicted, is_output, &mut docs, &mut e).await?;
    let documents = match &spec.documents {
        Some(d) => Some(d.clone()),
        None if is_output && table_exists(ctx, predicted, "fingerprints").await => Some(format!("{predicted}/fingerprints")),
        None => None,
    };
    if let Some(url) = documents {
        check_corpus(ctx, &url, &mut docs).await?;
    }
    Ok(e.report(docs.len()))
}

/// The truth: pairs (with their slice) or groups.
async fn read_truth(ctx: &SessionContext, spec: &EvalSpec, docs: &mut Docs, e: &mut Evaluation) -> Result<()> {
    let truth = register(ctx, "truth", &spec.truth).await?;
    let slice = match &spec.slice_column {
        Some(c) if truth.field_with_name(c).is_err() => {
            return Err(Error::input(format!("truth '{}' has no column '{c}' (for --slice-col)", spec.truth)))
        }
        Some(c) => Some(c.clone()),
        None => ["edit", "slice"].into_iter().find(|c| truth.field_with_name(c).is_ok()).map(str::to_string),
    };
    if has(&truth, &["source_a", "id_a", "source_b", "id_b"]) {
        let slice = slice.as_deref().map_or("''".to_string(), ident);
        for r in rows(ctx, &format!("SELECT source_a, id_a, source_b, id_b, {slice} FROM truth")).await? {
            let [sa, ia, sb, ib, s] = <[String; 5]>::try_from(r).expect("five columns");
            e.truth_pairs.push((docs.id((sa, ia)), docs.id((sb, ib)), s));
        }
    } else if has(&truth, &["source", "id", "cluster"]) {
        for r in rows(ctx, "SELECT source, id, cluster FROM truth WHERE cluster IS NOT NULL").await? {
            let [s, i, c] = <[String; 3]>::try_from(r).expect("three columns");
            e.truth_labels.push((docs.id((s, i)), c));
        }
    } else {
        return Err(Error::input(format!(
            "truth '{}' needs columns source_a, id_a, source_b, id_b (pairs) or source, id, cluster (groups)",
            spec.truth
        )));
    }
    Ok(())
}

/// What is scored: the pairs of an output folder (and its clusters), or a
/// table of pairs.
async fn read_prediction(ctx: &SessionContext, predicted: &str, is_output: bool, docs: &mut Docs, e: &mut Evaluation) -> Result<()> {
    let pairs_url = if is_output { format!("{predicted}/pairs") } else { predicted.to_string() };
    let pairs = register(ctx, "reported_pairs", &pairs_url).await?;
    if !has(&pairs, &["source_a", "id_a", "source_b", "id_b"]) {
        return Err(Error::input(format!("'{pairs_url}' is not a pairs table (columns source_a, id_a, source_b, id_b)")));
    }
    for r in rows(ctx, "SELECT source_a, id_a, source_b, id_b FROM reported_pairs").await? {
        let [sa, ia, sb, ib] = <[String; 4]>::try_from(r).expect("four columns");
        e.reported_pairs.push((docs.id((sa, ia)), docs.id((sb, ib))));
    }
    if is_output && table_exists(ctx, predicted, "clusters").await {
        register(ctx, "reported_clusters", &format!("{predicted}/clusters")).await?;
        for r in rows(ctx, "SELECT source, id, cluster_id FROM reported_clusters").await? {
            let [s, i, c] = <[String; 3]>::try_from(r).expect("three columns");
            e.predicted_labels.push((docs.id((s, i)), c));
        }
    }
    Ok(())
}

/// Add the corpus at `url` to `docs` (every document counts in the
/// scores), refusing documents of the truth or the prediction it does not hold.
async fn check_corpus(ctx: &SessionContext, url: &str, docs: &mut Docs) -> Result<()> {
    let schema = register(ctx, "documents", url).await?;
    if !has(&schema, &["source", "id"]) {
        return Err(Error::input(format!("documents '{url}' need columns source and id")));
    }
    let mut corpus = std::collections::HashSet::new();
    for r in rows(ctx, "SELECT source, id FROM documents").await? {
        let [s, i] = <[String; 2]>::try_from(r).expect("two columns");
        corpus.insert(docs.id((s, i)));
    }
    if docs.len() > corpus.len() {
        return Err(Error::input(format!(
            "{} document(s) of the truth or the prediction are not among the {} documents of '{url}': \
             evaluate against the corpus they come from",
            docs.len() - corpus.len(),
            corpus.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn perfect_prediction_scores_one() {
        let e = Evaluation {
            truth_pairs: vec![(0, 1, "copy".into()), (2, 3, "edit".into()), (3, 4, "edit".into())],
            reported_pairs: vec![(1, 0), (2, 4), (3, 4)],
            ..Default::default()
        };
        let r = e.report(8);
        assert_eq!(r.pairs, Scores { precision: 1.0, recall: 1.0, f1: 1.0 });
        assert_eq!(r.clusters, Scores { precision: 1.0, recall: 1.0, f1: 1.0 });
        assert!(close(r.adjusted_rand_index, 1.0));
        assert_eq!((r.truth_groups, r.predicted_groups, r.truth_same_group), (2, 2, 4));
    }

    #[test]
    fn hand_made_truth_and_prediction() {
        // Truth groups {0,1,2} and {3,4}; documents 5..9 are singletons.
        // Reported: 0-1 (right), 3-5 (wrong), 6-7 (wrong); 2 and 4 missed.
        let e = Evaluation {
            truth_labels: vec![(0, "a".into()), (1, "a".into()), (2, "a".into()), (3, "b".into()), (4, "b".into())],
            reported_pairs: vec![(0, 1), (3, 5), (7, 6), (6, 7)],
            ..Default::default()
        };
        let r = e.report(10);
        // Truth pairs: 0-1, 0-2, 1-2, 3-4 (4); found only 0-1. Reported distinct pairs 3, correct 1.
        assert_eq!((r.truth_pairs, r.reported_pairs), (4, 3));
        assert!(close(r.pairs.precision, 1.0 / 3.0) && close(r.pairs.recall, 0.25));
        assert!(close(r.pairs.f1, 2.0 * (1.0 / 3.0) * 0.25 / (1.0 / 3.0 + 0.25)));
        // Predicted groups {0,1}, {3,5}, {6,7}: 3 same-group pairs, 1 shared with the truth's 4.
        assert_eq!((r.predicted_same_group, r.truth_same_group, r.both_same_group), (3, 4, 1));
        assert!(close(r.clusters.precision, 1.0 / 3.0) && close(r.clusters.recall, 0.25));
        // ARI by the formula: index 1, expected 4*3/45, max 3.5.
        let expected = 4.0 * 3.0 / 45.0;
        assert!(close(r.adjusted_rand_index, (1.0 - expected) / (3.5 - expected)));
    }

    #[test]
    fn transitive_links_count_at_cluster_level_and_slices_report_recall() {
        // Truth pairs 0-1 (copy), 0-2 (copy), 3-4 (truncate). Reported 1-2 and 2-0: the group {0,1,2}.
        let e = Evaluation {
            truth_pairs: vec![(0, 1, "copy".into()), (0, 2, "copy".into()), (3, 4, "truncate".into())],
            reported_pairs: vec![(1, 2), (2, 0)],
            ..Default::default()
        };
        let r = e.report(5);
        // 1-2 is not a listed truth pair but the truth groups 1 and 2 together: correct.
        assert!(close(r.pairs.precision, 1.0));
        assert!(close(r.pairs.recall, 2.0 / 3.0));
        assert_eq!(r.slices, vec![
            SliceRecall { slice: "copy".into(), pairs: 2, found: 2, recall: 1.0 },
            SliceRecall { slice: "truncate".into(), pairs: 1, found: 0, recall: 0.0 },
        ]);
        // Same-group pairs: truth {0,1,2},{3,4} = 4; predicted {0,1,2} = 3; shared 3.
        assert!(close(r.clusters.precision, 1.0) && close(r.clusters.recall, 0.75));
    }

    #[test]
    fn nothing_reported_gives_zero_recall_and_no_agreement_beyond_chance() {
        let e = Evaluation { truth_pairs: vec![(0, 1, String::new())], ..Default::default() };
        let r = e.report(4);
        assert_eq!(r.pairs, Scores { precision: 1.0, recall: 0.0, f1: 0.0 });
        assert!(close(r.adjusted_rand_index, 0.0));
    }
}
