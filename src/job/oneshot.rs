//! Stage `pairs` of a one-shot run (and the whole of `neardup pairs`):
//! candidates among all fingerprints, the term-set check, clusters and
//! pairs, over the registered `fingerprints`.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::{DataType, UInt32Type, UInt64Type};
use datafusion::catalog::TableProvider;
use datafusion::prelude::SessionContext;

use super::candidates::{eligible_without, minhash_expression, near_pairs};
use super::config::{JoinOptions, KeepRule};
use super::progress::Progress;
use super::query::{collect, collected_joins_in_memory, column_u64, scalar_u64, work_batches, work_table, work_table_with, LATE_MATERIALIZATION};
use super::sql::{self, render, table, Param};
use super::summary::Summary;
use super::tables::{create_view, fingerprint_documents_batch, materialize, pairs_table, FileMetadata};
use crate::error::Result;
use crate::minhash::MinHashPlan;
use crate::parallel::PARTS_A_THREAD;
use crate::sets::Evidence;
use crate::udf::term_set::list_values;
use crate::text::shingles::containment;
use crate::storage::OutputDir;

/// One document of a shared fingerprint, as the check sees it: its lists
/// borrowed from the batches that hold them, and where it is (batch, row).
/// Copying every copy's id and term set out of the batches took longer than
/// the check itself (Weibo: 354,730 copies).
struct Member<'a> {
    simhash: u64,
    at: (usize, usize),
    term_set: &'a [u64],
    shingles: Option<&'a [u32]>,
    vector: Option<Vec<i8>>,
}

impl Member<'_> {
    fn evidence(&self) -> Evidence<'_> {
        Evidence { terms: self.term_set, vector: self.vector.as_deref() }
    }
}

/// The check's name in errors about the lists it reads.
const CHECK: &str = "the check of shared fingerprints' copies";

/// Where a row of the check's batches is: (batch, row).
pub(super) type At = (usize, usize);

/// What the check of the shared fingerprints' copies found, by place in its
/// batches: the copies it left out, and each shared fingerprint's first
/// copy by (source, id) among those it kept (the document that stands for
/// the fingerprint), in the order of the groups.
pub(super) struct CheckedCopies {
    pub rejected: Vec<At>,
    pub firsts: Vec<(u64, At)>,
}

/// The check of each group of copies, over rows `(simhash, source, id,
/// term_set, shingles, vector)` of `batches` taken in `order`, which lists
/// the copies of each shared fingerprint together, by (source, id): the
/// documents left out of their group (the term sets or SimHash vectors, and
/// the shared text under a policy), and each group's first kept document.
pub(super) fn unconfirmed_copies(batches: &[RecordBatch], order: &[At], join: &JoinOptions, threads: usize) -> Result<CheckedCopies> {
    // Sketches are read only when a policy compares them.
    let policy = join.min_shared();
    let reads_vectors = join.verify.reads_vectors();
    let set_type = crate::udf::term_set::set_type();
    let lists = batches.iter().map(|b| Ok((column_u64(b, 0)?, cast(b.column(3), &set_type)?, cast(b.column(4), &crate::udf::sketch_type())?))).collect::<Result<Vec<_>>>()?;
    let member = |(n, r): At| -> Result<Member<'_>> {
        let (b, (simhash, sets, sketches)) = (&batches[n], &lists[n]);
        let (sets, sketches) = (sets.as_list::<i32>(), sketches.as_list::<i32>());
        let (set_items, sketch_items) = (sets.values().as_primitive::<UInt64Type>(), sketches.values().as_primitive::<UInt32Type>());
        let shingles = match policy {
            Some(_) => list_values(sketches, sketch_items, r, CHECK, "a shingle sketch")?,
            None => None,
        };
        let vectors = b.column(5).as_fixed_size_binary();
        let vector = (reads_vectors && vectors.is_valid(r)).then(|| vectors.value(r).iter().map(|&b| b as i8).collect());
        Ok(Member { simhash: simhash.value(r), at: (n, r), term_set: list_values(sets, set_items, r, CHECK, "a term set")?.unwrap_or(&[]), shingles, vector })
    };
    let similar = |a: &&Member, b: &&Member| {
        join.verify.passes(a.evidence(), b.evidence())
            && policy.is_none_or(|policy| {
                let share = |x: &Member, y: &Member| containment(x.shingles?, y.shingles?);
                policy.passes(share(a, b), share(b, a))
            })
    };
    // The groups are checked in as many runs of about equal rows as the
    // engine has cores, each on a thread, which also reads its copies'
    // lists (Weibo: 25,000 groups of 354,730 copies kept one core busy for
    // 0.1 s while the other waited; reading the lists of all of them
    // first, another 0.1 s).
    let check = |groups: &[&[At]]| -> Result<(Vec<At>, Vec<(u64, At)>)> {
        let (mut rejected, mut firsts) = (Vec::new(), Vec::new());
        for &group in groups {
            let members = group.iter().map(|&at| member(at)).collect::<Result<Vec<_>>>()?;
            let copies: Vec<&Member> = members.iter().collect();
            let left_out = crate::sets::split_group(&copies, similar);
            let first = first_kept(&left_out);
            firsts.push((members[first].simhash, members[first].at));
            rejected.extend(left_out.into_iter().map(|i| members[i].at));
        }
        Ok((rejected, firsts))
    };
    let simhash = |(n, r): At| lists[n].0.value(r);
    let groups: Vec<&[At]> = order.chunk_by(|&a, &b| simhash(a) == simhash(b)).collect();
    // In runs of a few groups each, taken by whichever thread is free.
    let runs = runs_of_rows(&groups, threads * PARTS_A_THREAD);
    let checked = crate::parallel::claimed(runs, threads, check).into_iter().collect::<Result<Vec<_>>>()?;
    let (mut rejected, mut firsts) = (Vec::new(), Vec::new());
    for (r, f) in checked {
        rejected.extend(r);
        firsts.extend(f);
    }
    Ok(CheckedCopies { rejected, firsts })
}

/// `groups` cut into at most `parts` runs of consecutive groups, each of
/// about an equal share of the rows (a group is never cut).
fn runs_of_rows<'g, T>(groups: &'g [&'g [T]], parts: usize) -> Vec<&'g [&'g [T]]> {
    let runs = crate::parallel::cut(groups.len(), parts, |i| groups[i].len() as u64);
    runs.into_iter().filter(|r| !r.is_empty()).map(|r| &groups[r]).collect()
}

/// The first index of a group that `left_out` (ascending, distinct) does not
/// hold: the first gap. The largest subgroup keeps the fingerprint, so a
/// group always has one.
fn first_kept(left_out: &[usize]) -> usize {
    left_out.iter().enumerate().find(|&(k, &i)| k != i).map_or(left_out.len(), |(k, _)| k)
}

/// The (source, id) of rows of the check's batches. Only the batches that
/// hold a row asked for are cast.
pub(super) struct Names<'a> {
    batches: &'a [RecordBatch],
    ids: Vec<Option<(ArrayRef, ArrayRef)>>,
}

impl<'a> Names<'a> {
    pub(super) fn new(batches: &'a [RecordBatch]) -> Self {
        Names { batches, ids: vec![None; batches.len()] }
    }

    pub(super) fn of(&mut self, (n, r): At) -> Result<(String, String)> {
        let (source, id) = match &self.ids[n] {
            Some(columns) => columns,
            None => self.ids[n].insert((cast(self.batches[n].column(1), &DataType::Utf8)?, cast(self.batches[n].column(2), &DataType::Utf8)?)),
        };
        Ok((source.as_string::<i32>().value(r).to_string(), id.as_string::<i32>().value(r).to_string()))
    }
}

/// Stage `pairs` of a one-shot run (and of `neardup pairs`): candidates,
/// the check, clusters and pairs (steps `join`, `verify`, `clusters` and
/// `pairs`). `held`: the fingerprints' rows, when the fingerprint stage
/// kept them for the check of copies.
pub(super) async fn join_stages(
    ctx: &SessionContext,
    join: &JoinOptions,
    keep: &KeepRule,
    out: &OutputDir,
    (meta, held): (Option<&FileMetadata>, Option<Arc<dyn TableProvider>>),
    progress: &mut Progress,
) -> Result<Summary> {
    progress.begin("join", None);
    // A one-shot run is a store's first night: nothing is stored (the
    // shared statements 50 and 69 read `stored`, and 69 `stored_term_sets`).
    create_view(ctx, table::STORED, "SELECT * FROM fingerprints WHERE false").await?;
    super::touched::no_stored_term_sets(ctx).await?;
    let verify = join.verify;

    let (unconfirmed, counted) = eligible(ctx, out, (join, keep), held).await?;
    let distinct = match counted {
        Some(distinct) => distinct,
        None => scalar_u64(ctx, "SELECT count(DISTINCT simhash) FROM fingerprints").await?,
    };

    // Candidate pairs of distinct fingerprints: the banded join, MinHash
    // bands, or both; then the term-set check.
    let found = near_pairs(ctx, join, out, distinct, progress, |n, sources| {
        format!("{n} candidate pairs among {distinct} distinct fingerprints ({sources})")
    })
    .await?;
    if verify.measure().is_some() {
        progress.done("verify", format!("{}; {unconfirmed} identical-fingerprint copies rejected", found.describe_check(join)));
    }

    progress.begin("clusters", None);
    let joined = found.into_components(ctx, out, join, keep, unconfirmed).await?;
    let (clusters, in_clusters) = clusters_stage(ctx, out, keep, meta, progress).await?;
    progress.begin("pairs", None);
    let shared_text = pairs_table(ctx, out, meta).await?;
    let pairs = scalar_u64(ctx, "SELECT count(*) FROM pairs").await?;
    progress.done("pairs", format!("{pairs} pairs"));

    Ok(Summary {
        distinct_fingerprints: distinct,
        pairs,
        clusters,
        documents_in_clusters: in_clusters,
        duplicates: in_clusters - clusters,
        shared_text: Some(shared_text),
        ..joined
    })
}

/// The documents that take part (`eligible`, a view, or with the work in
/// memory a table the client makes): all, or with a check all but the
/// copies a shared fingerprint's largest consistent subgroup leaves out; with the check also the table `term_sets` of the term sets that
/// stand for the fingerprints. Returns how many copies were left out, and
/// the distinct fingerprints when the client counted them on the way.
async fn eligible(ctx: &SessionContext, out: &OutputDir, (join, keep): (&JoinOptions, &KeepRule), held: Option<Arc<dyn TableProvider>>) -> Result<(u64, Option<u64>)> {
    if join.verify.measure().is_none() {
        create_view(ctx, table::ELIGIBLE, "SELECT * FROM fingerprints").await?;
        return Ok((0, None));
    }
    let (threads, plan) = (ctx.state().config().target_partitions(), join.minhash_plan());
    // In memory the client does the two statements' work, and makes
    // `eligible`, from one read.
    if crate::session::work_in_memory(ctx) {
        let counted = super::copies::term_sets_one_shot(ctx, (join, keep), plan, threads, held).await?;
        return Ok((counted.rejected, Some(counted.distinct)));
    }
    let rejected = term_sets_by_statements(ctx, out, join, plan, threads).await?;
    eligible_without(ctx, out, &rejected).await?;
    Ok((rejected.len() as u64, None))
}

/// The copies of each shared fingerprint (sql/56_unconfirmed_copies.sql)
/// checked, and the table `term_sets` (sql/57_term_sets_one_shot.sql) of
/// their first kept copies and the lone documents; returns the (source, id)
/// of the copies left out.
async fn term_sets_by_statements(ctx: &SessionContext, out: &OutputDir, join: &JoinOptions, plan: Option<MinHashPlan>, threads: usize) -> Result<Vec<(String, String)>> {
    let batches = collect(ctx, &render(sql::UNCONFIRMED_COPIES, &[])).await?;
    // The statement gives the copies in order.
    let order: Vec<At> = batches.iter().enumerate().flat_map(|(n, b)| (0..b.num_rows()).map(move |r| (n, r))).collect();
    let copies = unconfirmed_copies(&batches, &order, join, threads)?;
    let mut names = Names::new(&batches);
    let rejected = copies.rejected.into_iter().map(|at| names.of(at)).collect::<Result<_>>()?;
    let firsts = copies.firsts.into_iter().map(|(simhash, at)| names.of(at).map(|(source, id)| (simhash, source, id))).collect::<Result<Vec<_>>>()?;
    drop(batches);
    let firsts = fingerprint_documents_batch(&firsts)?;
    work_batches(ctx, out, (table::FIRST_COPIES, "_work/first_copies.parquet"), (firsts.schema(), vec![firsts])).await?;
    let path = out.staged("_work/term_sets.parquet");
    let params = [("minhash", Param::Sql(&minhash_expression(plan, "t.term_set"))), ("path", Param::Text(&path))];
    work_table(ctx, &render(sql::TERM_SETS_ONE_SHOT, &params), &path, table::TERM_SETS).await?;
    Ok(rejected)
}

/// Stage `clusters` (sql/59_in_clusters.sql, then sql/60_clusters.sql):
/// returns the clusters and the documents they hold.
async fn clusters_stage(ctx: &SessionContext, out: &OutputDir, keep: &KeepRule, meta: Option<&FileMetadata>, progress: &mut Progress) -> Result<(u64, u64)> {
    // The documents in clusters are found by a join whose filter is
    // evaluated in the scan of the fingerprint file, where `eligible` is a
    // view of it (sql/59_in_clusters.sql).
    let members = out.staged("_work/in_clusters.parquet");
    let params = [("keep_columns", Param::Sql(&keep.column_list())), ("path", Param::Text(&members))];
    let statement = render(sql::IN_CLUSTERS, &params);
    // In memory, the few clustered fingerprints are collected on each
    // core and the eligible rows, with their sketches, stay in their
    // partitions: a partitioned join moved all of them between cores
    // (Weibo: 600,067 rows, 122 MB, for 27,894 fingerprints).
    let settings: Vec<_> = [Some(LATE_MATERIALIZATION), collected_joins_in_memory(ctx)].into_iter().flatten().collect();
    work_table_with(ctx, &settings, (&statement, &members, table::IN_CLUSTERS), &[]).await?;
    let path = out.staged("clusters/part-00000.parquet");
    materialize(ctx, sql::CLUSTERS, &[("keep_order", Param::Sql(keep.order_by()))], &path, table::CLUSTERS, meta).await?;
    let batches = collect(ctx, "SELECT count(DISTINCT cluster_id), count(*) FROM clusters").await?;
    let (clusters, in_clusters) = (column_u64(&batches[0], 0)?.value(0), column_u64(&batches[0], 1)?.value(0));
    progress.done("clusters", format!("{clusters} clusters holding {in_clusters} documents"));
    Ok((clusters, in_clusters))
}

#[cfg(test)]
mod tests {
    #[test]
    fn groups_are_cut_into_runs_of_about_equal_rows() {
        let rows = [1u8; 10];
        let groups: Vec<&[u8]> = vec![&rows[..4], &rows[..1], &rows[..1], &rows[..3], &rows[..1]];
        let sizes = |parts| super::runs_of_rows(&groups, parts).iter().map(|run| run.iter().map(|g| g.len()).collect::<Vec<_>>()).collect::<Vec<_>>();
        assert_eq!(sizes(2), [vec![4, 1], vec![1, 3, 1]]);
        assert_eq!(sizes(3), [vec![4], vec![1, 1, 3], vec![1]]);
        assert_eq!(sizes(1), [vec![4, 1, 1, 3, 1]]);
        assert_eq!(sizes(20), [vec![4], vec![1], vec![1], vec![3], vec![1]]);
        assert!(super::runs_of_rows::<u8>(&[], 2).is_empty());
    }

    #[test]
    fn the_first_kept_copy_is_the_first_index_not_left_out() {
        assert_eq!(super::first_kept(&[]), 0);
        assert_eq!(super::first_kept(&[1, 2]), 0);
        assert_eq!(super::first_kept(&[0, 1, 3]), 2);
        assert_eq!(super::first_kept(&[0, 1]), 2);
    }
}
