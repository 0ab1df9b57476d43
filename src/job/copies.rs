//! A one-shot run's shared fingerprints and its table `term_sets`, made by
//! the client when the run's work stays in memory: what
//! sql/56_unconfirmed_copies.sql, the check of its groups and
//! sql/57_term_sets_one_shot.sql give together, from one read of the
//! fingerprints (sql/56_copies_in_memory.sql). The statements read the
//! fingerprints three times, sorted the copies with their lists and joined
//! the first copies back: about 0.8 s of a Weibo run.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use datafusion::arrow::compute::{cast, filter};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::prelude::SessionContext;

use super::config::{JoinOptions, KeepRule};
use super::oneshot::{unconfirmed_copies, At};
use super::query::{collect, column_u64, each_on_its_thread, register_in_memory};
use super::sql::{self, render, table, Param};
use super::tables::swap_table;
use crate::error::{Error, Result};
use crate::minhash::MinHashPlan;
use crate::parallel::PARTS_A_THREAD;
use crate::udf::minhash_keys::{keys_of_sets, keys_type};

/// The columns of sql/56_copies_in_memory.sql that are read by place.
const SIMHASH: usize = 0;
const TERM_SET: usize = 3;
const SHINGLES: usize = 4;
const VECTOR: usize = 5;

/// Check the copies of each shared fingerprint and register, in memory,
/// `term_sets` (one row a fingerprint, with its MinHash keys under `plan`)
/// and `eligible` (every fingerprinted document but the copies the check
/// left out, with what sql/59_in_clusters.sql reads of it); returns how
/// many copies the check left out, and how many distinct fingerprints
/// there are (`count(DISTINCT simhash)` of `fingerprints`: the rows' groups,
/// counted here so that no statement reads the table again for them).
/// The fingerprints are read from `held`, the rows the fingerprint stage
/// wrote, when it kept them.
pub(super) async fn term_sets_one_shot(
    ctx: &SessionContext,
    (join, keep): (&JoinOptions, &KeepRule),
    plan: Option<MinHashPlan>,
    threads: usize,
    held: Option<Arc<dyn TableProvider>>,
) -> Result<Counted> {
    let statement = render(sql::COPIES_IN_MEMORY, &[("keep_columns", Param::Sql(&keep.column_list()))]);
    let batches = match held {
        // The statement reads them in place of the file, once; later
        // statements read the file.
        Some(rows) => {
            let file = swap_table(ctx, table::FINGERPRINTS, rows)?;
            let read = collect(ctx, &statement).await;
            swap_table(ctx, table::FINGERPRINTS, file)?;
            read?
        }
        None => collect(ctx, &statement).await?,
    };
    let started = std::time::Instant::now();
    // The (source, id) of every row, read where they lie: for the order of
    // copies.
    let names = batches.iter().map(|b| Ok((cast(b.column(1), &DataType::Utf8View)?, cast(b.column(2), &DataType::Utf8View)?))).collect::<Result<Vec<_>>>()?;
    let name = |(n, r): At| {
        let (source, id) = &names[n];
        (source.as_string_view().value(r), id.as_string_view().value(r))
    };
    let rows = by_fingerprint(&batches, threads, name)?;
    let groups: Vec<&[(u64, At)]> = rows.chunk_by(|a, b| a.0 == b.0).collect();
    let distinct = groups.len() as u64;
    let copies: Vec<At> = groups.iter().filter(|g| g.len() > 1).flat_map(|g| g.iter().map(|row| row.1)).collect();
    let checked = unconfirmed_copies(&batches, &copies, join, threads)?;
    // A lone document stands for its fingerprint; a shared one's first
    // copy that the check kept stands for it (the groups come in order).
    let mut firsts = checked.firsts.iter();
    let mut standing = Vec::with_capacity(groups.len());
    for group in &groups {
        standing.push(match group {
            [(_, at)] => *at,
            _ => match firsts.next() {
                Some(&(simhash, at)) if simhash == group[0].0 => at,
                _ => return Err(Error::runtime("the check of copies gave no first copy for a shared fingerprint")),
            },
        });
    }
    drop(names);
    register_eligible(ctx, &batches, &checked.rejected, keep, threads).await?;
    register_term_sets(ctx, batches, &standing, plan, threads).await?;
    give_back_freed_memory();
    log::debug!("{:>6} ms  the copies of {} shared fingerprints checked, term_sets and eligible made", started.elapsed().as_millis(), checked.firsts.len());
    Ok(Counted { rejected: checked.rejected.len() as u64, distinct })
}

/// What [`term_sets_one_shot`] counted on the way.
pub(super) struct Counted {
    /// Copies the check left out.
    pub rejected: u64,
    /// Distinct fingerprints.
    pub distinct: u64,
}

/// The table `eligible` in memory: the rows of `batches` but those
/// `rejected`, with the columns sql/59_in_clusters.sql reads, the only
/// statement of a one-shot run that reads it. Its view (under a memory
/// limit) reads the fingerprint file back and joins it against the copies
/// left out on (source, id): about 0.2 s of a Weibo run, spared here.
async fn register_eligible(ctx: &SessionContext, batches: &[RecordBatch], rejected: &[At], keep: &KeepRule, threads: usize) -> Result<()> {
    let mut names = vec!["source", "id", "simhash", "shingles"];
    names.extend(keep.columns());
    let fingerprints = ctx.table(table::FINGERPRINTS).await?.schema().as_arrow().clone();
    let schema = Arc::new(fingerprints.project(&names.iter().map(|n| fingerprints.index_of(n)).collect::<std::result::Result<Vec<_>, _>>()?)?);
    let parts = dealt_with_masks(batches.iter().collect(), rejected, false, threads);
    let partitions = each_on_its_thread(parts, |part| {
        part.into_iter()
            .map(|(batch, kept)| {
                let column = |name: &str| Ok::<_, Error>(filter(batch.column(batch.schema().index_of(name)?), &kept)?);
                Ok(RecordBatch::try_new(schema.clone(), names.iter().map(|n| column(n)).collect::<Result<_>>()?)?)
            })
            .collect::<Result<Vec<_>>>()
    })?;
    register_in_memory(ctx, table::ELIGIBLE, &schema, partitions, &[])
}

/// Return the memory of the fingerprints just read, now freed, to the
/// system. Freed amid glibc's heaps it stayed resident, and the MinHash
/// pass that follows allocated on top of it: Weibo's peak rose from
/// 0.77–0.82 to 0.83–0.93 GB, and is 0.80–0.81 GB with the trim.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only hands the allocator's free pages back to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Every row of `batches` with its fingerprint, in the order of
/// sql/56_unconfirmed_copies.sql: by fingerprint, then (source, id) as
/// `name` gives them.
fn by_fingerprint<'a>(batches: &[RecordBatch], threads: usize, name: impl Fn(At) -> (&'a str, &'a str) + Sync) -> Result<Vec<(u64, At)>> {
    // A row's key: its fingerprint, then where it is (a batch holds fewer
    // than 2^32 rows), sorted on every core; the stable sort then merges the
    // sorted runs.
    let mut keys: Vec<u128> = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for (n, b) in batches.iter().enumerate() {
        let simhash = column_u64(b, SIMHASH)?;
        if simhash.null_count() > 0 {
            return Err(Error::runtime("a fingerprint read for the check of copies is NULL"));
        }
        keys.extend(simhash.values().iter().enumerate().map(|(r, &h)| u128::from(h) << 64 | (n as u128) << 32 | r as u128));
    }
    let share = keys.len().div_ceil(threads.max(1)).max(1);
    crate::parallel::on_threads(keys.chunks_mut(share).collect(), |run| run.sort_unstable());
    keys.sort();
    let mut rows: Vec<(u64, At)> = keys.into_iter().map(|k| ((k >> 64) as u64, ((k >> 32) as u32 as usize, k as u32 as usize))).collect();
    // The names are compared only within groups of copies, on every core
    // (Weibo: 25,000 groups of 354,730 copies, 0.1 s on one).
    let mut groups: Vec<&mut [(u64, At)]> = rows.chunk_by_mut(|a, b| a.0 == b.0).filter(|g| g.len() > 1).collect();
    let mut runs = Vec::with_capacity(threads * PARTS_A_THREAD);
    let mut rest = groups.as_mut_slice();
    for run in crate::parallel::cut(rest.len(), threads * PARTS_A_THREAD, |i| rest[i].len() as u64) {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(run.len());
        runs.push(head);
        rest = tail;
    }
    crate::parallel::claimed(runs, threads, |run| run.iter_mut().for_each(|group| group.sort_by(|a, b| name(a.1).cmp(&name(b.1)))));
    Ok(rows)
}

/// The table `term_sets` of the rows `standing` of `batches`, in memory,
/// as sql/57_term_sets_one_shot.sql makes it: each batch filtered to its
/// standing rows (most of them: copying runs of rows costs less than
/// gathering rows one by one), the batches dealt to `threads` partitions,
/// each made on a thread of its own.
async fn register_term_sets(ctx: &SessionContext, batches: Vec<RecordBatch>, standing: &[At], plan: Option<MinHashPlan>, threads: usize) -> Result<()> {
    let schema = term_sets_schema(ctx.table(table::FINGERPRINTS).await?.schema().as_arrow())?;
    // Each batch is let go once filtered: the fingerprints read and the
    // table made are not held whole at once.
    let parts = dealt_with_masks(batches, standing, true, threads);
    let mut partitions = vec![Vec::new(); parts.len()];
    // The partitions' batches, in pieces that threads take as they are free:
    // a thread a partition ended with one of them computing MinHash keys
    // alone (Weibo: about 40 ms of the other core idle). The partitions keep
    // their rows, in their order.
    let pieces: Vec<(usize, RecordBatch, BooleanArray)> = parts
        .into_iter()
        .enumerate()
        .flat_map(|(p, part)| part.into_iter().flat_map(move |(batch, stands)| pieces_of(p, batch, stands)))
        .collect();
    let made = crate::parallel::claimed(pieces, threads, |(p, batch, stands)| {
        let kept = |i: usize| filter(batch.column(i), &stands);
        let sets = kept(TERM_SET)?;
        let keys = match plan {
            Some(plan) => Arc::new(keys_of_sets(plan, &sets, "minhash_keys")?) as ArrayRef,
            None => new_null_array(&keys_type(), sets.len()),
        };
        let tonight: ArrayRef = Arc::new(BooleanArray::from(vec![true; sets.len()]));
        let columns = vec![kept(SIMHASH)?, sets, keys, kept(SHINGLES)?, kept(VECTOR)?, tonight];
        Ok::<_, Error>((p, RecordBatch::try_new(schema.clone(), columns)?))
    });
    for piece in made {
        let (p, batch) = piece?;
        partitions[p].push(batch);
    }
    register_in_memory(ctx, table::TERM_SETS, &schema, partitions, &[])
}

/// Rows a piece of [`register_term_sets`]' work holds at most.
const PIECE_ROWS: usize = 8192;

/// `batch` of partition `p` and its mask, in runs of at most [`PIECE_ROWS`]
/// rows (slices, not copies).
fn pieces_of(p: usize, batch: RecordBatch, mask: BooleanArray) -> impl Iterator<Item = (usize, RecordBatch, BooleanArray)> {
    (0..batch.num_rows()).step_by(PIECE_ROWS).map(move |start| {
        let rows = PIECE_ROWS.min(batch.num_rows() - start);
        (p, batch.slice(start, rows), mask.slice(start, rows))
    })
}

/// Each of `batches` with a mask of its rows, those at `rows` `marked` and
/// the others not, dealt round robin to at most `threads` parts, one a
/// thread: the filters that make `eligible` and `term_sets`.
fn dealt_with_masks<B: std::borrow::Borrow<RecordBatch>>(batches: Vec<B>, rows: &[At], marked: bool, threads: usize) -> Vec<Vec<(B, BooleanArray)>> {
    let mut masks: Vec<Vec<bool>> = batches.iter().map(|b| vec![!marked; b.borrow().num_rows()]).collect();
    for &(n, r) in rows {
        masks[n][r] = marked;
    }
    let threads = threads.clamp(1, batches.len().max(1));
    let mut parts: Vec<Vec<(B, BooleanArray)>> = (0..threads).map(|_| Vec::new()).collect();
    for (n, (batch, mask)) in batches.into_iter().zip(masks).enumerate() {
        parts[n % threads].push((batch, BooleanArray::from(mask)));
    }
    parts
}

/// The columns of `term_sets`: those of the fingerprints it keeps, and its own.
fn term_sets_schema(fingerprints: &Schema) -> Result<SchemaRef> {
    let field = |name: &str| Ok::<_, Error>(fingerprints.field_with_name(name)?.clone());
    Ok(Arc::new(Schema::new(vec![
        field("simhash")?,
        field("term_set")?,
        Field::new("minhash", keys_type(), true),
        field("shingles")?,
        field("vector")?,
        Field::new("tonight", DataType::Boolean, false),
    ])))
}
