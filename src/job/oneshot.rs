//! Stage `pairs` of a one-shot run (and the whole of `neardup pairs`):
//! candidates among all fingerprints, the term-set check, clusters and
//! pairs, over the registered `fingerprints`.

use std::sync::Arc;

use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, UInt64Type};
use datafusion::prelude::SessionContext;

use super::candidates::{eligible_without, near_pairs, term_sets};
use super::config::{JoinOptions, KeepRule};
use super::progress::Progress;
use super::query::{collect, column_u64, scalar_u64};
use super::sql::{self, render, table, Param};
use super::summary::Summary;
use super::tables::{create_view, materialize, pairs_table, FileMetadata};
use crate::error::Result;
use crate::sets::Verify;
use crate::storage::OutputDir;

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

/// Stage `pairs` of a one-shot run (and of `neardup pairs`): candidates,
/// the check, clusters and pairs (steps `join`, `verify`, `clusters` and
/// `pairs`).
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
    pairs_table(ctx, out, meta).await?;
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
