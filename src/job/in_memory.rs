//! The join's steps that the client does itself when the run's work stays
//! in memory: the MinHash candidates (src/buckets.rs) and the check of
//! every candidate, over the term sets where they lie. Each gives what its
//! statements give (sql/51, 52; sql/55): the candidates a partition of the
//! table `candidates` in memory, the checked pairs an in-memory table (with
//! the report's near misses, sql/97, counted on the way). Each answers
//! `None` when a table is not as it expects, and the statements run
//! instead.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, RecordBatch, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type, UInt32Type, UInt64Type};
use datafusion::prelude::SessionContext;

use super::query::{collect, column_u64, register_in_memory};
use super::report::{NearMissSample, NearMisses};
use super::sql::table;
use super::tables::{candidates_batch, checked_pairs_batch, Checked};
use crate::buckets::{bucket_pairs, Listing, TermSets};
use crate::error::{Error, Result};
use crate::parallel::{merge_distinct, PARTS_A_THREAD};
use crate::sets::{Evidence, Verify};
use crate::storage::register_parquet;
use crate::text::HashKeyed;
use crate::udf::term_set::list_values;

const CANDIDATES: &str = "the MinHash candidates (src/buckets.rs)";
const CHECK: &str = "the check of candidates (src/job/in_memory.rs)";

/// The MinHash candidates of the term sets held in memory, found in one
/// pass over them (src/buckets.rs): the pairs sql/52_minhash_candidates.sql
/// writes, sorted and distinct; None when a fingerprint is on two rows or a
/// bucket mixes bands.
pub(super) async fn bucket_candidates(ctx: &SessionContext, listing: Listing) -> Result<Option<Vec<(u64, u64)>>> {
    let batches = collect(ctx, "SELECT simhash, tonight, minhash, term_set FROM term_sets").await?;
    let set_type = crate::udf::term_set::set_type();
    let mut columns = Vec::with_capacity(batches.len());
    for b in &batches {
        let (keys, sets) = (cast(b.column(2), &set_type)?, cast(b.column(3), &set_type)?);
        columns.push((column_u64(b, 0)?, b.column(1).as_boolean().clone(), keys.as_list::<i32>().clone(), sets.as_list::<i32>().clone()));
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let (mut fingerprints, mut tonight, mut keys, mut sets) = (Vec::with_capacity(rows), Vec::with_capacity(rows), Vec::with_capacity(rows), Vec::with_capacity(rows));
    for (simhash, flags, key_lists, set_lists) in &columns {
        if simhash.null_count() > 0 || flags.null_count() > 0 {
            return Ok(None);
        }
        let (key_values, set_values) = (key_lists.values().as_primitive::<UInt64Type>(), set_lists.values().as_primitive::<UInt64Type>());
        fingerprints.extend_from_slice(simhash.values());
        tonight.extend(flags.iter().map(|f| f == Some(true)));
        for r in 0..simhash.len() {
            keys.push(list_values(key_lists, key_values, r, CANDIDATES, "a MinHash key list")?.unwrap_or(&[]));
            sets.push(list_values(set_lists, set_values, r, CANDIDATES, "a term set")?.unwrap_or(&[]));
        }
    }
    let table = TermSets { fingerprints: &fingerprints, tonight: &tonight, keys: &keys, sets: &sets };
    Ok(bucket_pairs(&table, listing, ctx.state().config().target_partitions()))
}

/// The candidates as the client holds them: every one once, `(simhash_a,
/// simhash_b, hamming)` in order, as the check reads them (`SELECT DISTINCT
/// … FROM candidates`), and the table's rows (a pair that SimHash and
/// MinHash both found is on two).
pub(super) struct HeldCandidates {
    pub pairs: Vec<(u64, u64, i32)>,
    pub rows: u64,
}

/// The table `candidates`, registered, and read into the client: the files
/// in `folder`, and the MinHash pairs the client found (`minhash`), if it
/// found them; then `files` says whether the folder holds any. Those pairs
/// are a partition of the table in memory: written to a work file and read
/// back, with both runs sorted again, they kept one core busy while the
/// other waited (Weibo, 575,170 pairs: 80 ms).
pub(super) async fn held_candidates(ctx: &SessionContext, (folder, files): (&str, bool), minhash: Option<Vec<(u64, u64)>>) -> Result<HeldCandidates> {
    let parts = ctx.state().config().target_partitions();
    let Some(minhash) = minhash else {
        register_parquet(ctx, table::CANDIDATES, folder).await?;
        let batches = collect(ctx, "SELECT simhash_a, simhash_b, hamming FROM candidates").await?;
        return held_of(&[batches], parts);
    };
    let found = candidates_batch(&minhash)?;
    let mut partitions = Vec::new();
    if files {
        register_parquet(ctx, table::CANDIDATES, folder).await?;
        partitions.push(collect(ctx, "SELECT simhash_a, simhash_b, hamming, similarity FROM candidates").await?);
        ctx.deregister_table(table::CANDIDATES)?;
    }
    let schema = found.schema();
    partitions.push(vec![found]);
    let held = held_of(&partitions, parts)?;
    register_in_memory(ctx, table::CANDIDATES, &schema, partitions, &["simhash_a", "simhash_b"])?;
    Ok(held)
}

/// The candidates of `partitions` (`simhash_a, simhash_b, hamming`, …),
/// every one once, in order: each partition's rows a run (sorted here if
/// they are not), the runs merged by `parts` threads.
fn held_of(partitions: &[Vec<RecordBatch>], parts: usize) -> Result<HeldCandidates> {
    let mut runs = Vec::with_capacity(partitions.len());
    for batches in partitions {
        let mut run = Vec::new();
        for b in batches {
            if b.columns()[..3].iter().any(|c| c.null_count() > 0) {
                return Err(Error::runtime("a candidate pair without a fingerprint or a distance"));
            }
            let hamming = cast(b.column(2), &DataType::Int32)?;
            let (a, c, h) = (column_u64(b, 0)?, column_u64(b, 1)?, hamming.as_primitive::<Int32Type>().clone());
            run.extend(a.values().iter().zip(c.values()).zip(h.values()).map(|((&a, &c), &h)| (a, c, h)));
        }
        // Each file of candidates is in order: the stable sort merges their runs.
        if !run.is_sorted() {
            run.sort();
        }
        runs.push(run);
    }
    let rows = runs.iter().map(Vec::len).sum::<usize>() as u64;
    Ok(HeldCandidates { pairs: merge_distinct(&runs, parts), rows })
}

/// What the check reads of one term set: its term set, shingle sketch and
/// SimHash vector (each may be missing).
struct Row<'a> {
    terms: Option<&'a [u64]>,
    shingles: Option<&'a [u32]>,
    vector: Option<Vec<i8>>,
}

/// What the check in the client found: how many candidates passed, and the
/// near misses of the report (what sql/97_near_misses.sql counts).
pub(super) struct Check {
    pub passed: u64,
    pub near_misses: NearMisses,
}

/// The candidates checked (sql/55_verified_pairs.sql): those whose
/// similarity by `verify` reaches its threshold, with the share of each
/// side's shingles found in the other, registered in memory as the table
/// `checked_pairs`. `None`, with nothing registered, when a fingerprint is
/// on two rows of `term_sets` or its vectors are not kept as the
/// fingerprints keep them.
pub(super) async fn check(ctx: &SessionContext, held: &HeldCandidates, verify: Verify) -> Result<Option<Check>> {
    let Some((measure, threshold)) = verify.measure() else {
        return Err(Error::runtime("the check needs a measure"));
    };
    let batches = collect(ctx, "SELECT simhash, term_set, shingles, vector FROM term_sets").await?;
    let (set_type, sketch_type) = (crate::udf::term_set::set_type(), crate::udf::sketch_type());
    let mut columns = Vec::with_capacity(batches.len());
    for b in &batches {
        let (sets, sketches) = (cast(b.column(1), &set_type)?, cast(b.column(2), &sketch_type)?);
        columns.push((column_u64(b, 0)?, sets.as_list::<i32>().clone(), sketches.as_list::<i32>().clone(), b.column(3).clone()));
    }
    let parts = ctx.state().config().target_partitions().max(1);
    let Some((rows, index)) = rows_of(&columns, verify, parts)? else {
        return Ok(None);
    };
    let sample = NearMissSample::new(threshold, held.rows);
    let check = |pairs: &[(u64, u64, i32)]| -> (Vec<Checked>, Vec<u64>) {
        let (mut kept, mut missed) = (Vec::new(), NearMissSample::empty_counts());
        for &(a, b, hamming) in pairs {
            let (Some(&x), Some(&y)) = (index.get(&a), index.get(&b)) else { continue };
            let (x, y) = (&rows[x as usize], &rows[y as usize]);
            let Some(similarity) = similarity(verify, x, y) else { continue };
            if similarity >= threshold {
                let share = |p: &Row, q: &Row| crate::text::shingles::containment(p.shingles?, q.shingles?);
                kept.push(Checked { a, b, hamming, similarity, shared: (share(x, y), share(y, x)) });
            } else if let Some(bin) = sample.takes(b).then(|| sample.bin(similarity)).flatten() {
                missed[bin] += 1;
            }
        }
        (kept, missed)
    };
    // A partition of the table a range of the pairs, each checked in
    // pieces by whichever thread is free.
    let ranges = crate::parallel::cut(held.pairs.len(), parts, |_| 1);
    let pieces: Vec<(usize, std::ops::Range<usize>)> = ranges
        .iter()
        .enumerate()
        .flat_map(|(p, range)| crate::parallel::cut(range.len(), PARTS_A_THREAD, |_| 1).into_iter().map(move |r| (p, range.start + r.start..range.start + r.end)))
        .collect();
    let mut checked: Vec<(Vec<Checked>, Vec<u64>)> = ranges.iter().map(|_| (Vec::new(), NearMissSample::empty_counts())).collect();
    for (p, (kept, missed)) in crate::parallel::claimed(pieces, parts, |(p, range)| (p, check(&held.pairs[range]))) {
        checked[p].0.extend(kept);
        checked[p].1.iter_mut().zip(missed).for_each(|(total, n)| *total += n);
    }
    let passed = checked.iter().map(|(kept, _)| kept.len() as u64).sum();
    let mut missed = NearMissSample::empty_counts();
    for (_, counts) in &checked {
        missed.iter_mut().zip(counts).for_each(|(total, n)| *total += n);
    }
    // Each thread's pairs are a run in order: a partition each.
    let partitions = checked.iter().map(|(kept, _)| checked_pairs_batch(kept).map(|b| vec![b])).collect::<Result<Vec<_>>>()?;
    register_in_memory(ctx, table::CHECKED_PAIRS, &checked_pairs_batch(&[])?.schema(), partitions, &["simhash_a", "simhash_b"])?;
    Ok(Some(Check { passed, near_misses: sample.near_misses(measure, missed) }))
}

/// A batch of `term_sets` as the check reads it: fingerprints, term sets,
/// shingle sketches, vectors.
type Columns = (UInt64Array, ListArray, ListArray, ArrayRef);

/// The rows of `term_sets`, with each fingerprint's row; `None` when a
/// fingerprint is on two rows or the vectors are not kept as the
/// fingerprints keep them.
fn rows_of(columns: &[Columns], verify: Verify, threads: usize) -> Result<Option<(Vec<Row<'_>>, HashKeyed<u32>)>> {
    // The rows' lists are read on every core, a run of batches each, while
    // another thread builds the index (Weibo: 424,296 rows, 0.1 s on one core).
    let runs = crate::parallel::cut(columns.len(), threads, |i| columns[i].0.len() as u64);
    let read_run = |run: std::ops::Range<usize>| columns[run].iter().map(|batch| batch_rows(batch, verify)).collect::<Result<Option<Vec<_>>>>();
    let (index, read) = std::thread::scope(|scope| {
        let index = scope.spawn(|| index_of(columns));
        let read = crate::parallel::on_threads(runs, read_run);
        (index.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), read)
    });
    let Some(index) = index else {
        return Ok(None);
    };
    // Each run's batches' rows, in order; None if a batch had none to give.
    let Some(read) = read.into_iter().collect::<Result<Option<Vec<_>>>>()? else {
        return Ok(None);
    };
    let rows: Vec<Row> = read.into_iter().flatten().flatten().collect();
    Ok(Some((rows, index)))
}

/// Each fingerprint's row in `columns`; `None` when one is NULL or on two rows.
fn index_of(columns: &[Columns]) -> Option<HashKeyed<u32>> {
    let mut index: HashKeyed<u32> = HashKeyed::default();
    index.reserve(columns.iter().map(|c| c.0.len()).sum());
    for (simhash, ..) in columns {
        for r in 0..simhash.len() {
            if simhash.is_null(r) || index.insert(simhash.value(r), index.len() as u32).is_some() {
                return None;
            }
        }
    }
    Some(index)
}

/// The rows of one batch of `term_sets` ([`rows_of`]); `None` when its
/// vectors are not kept as the fingerprints keep them.
fn batch_rows<'a>((_, sets, sketches, vectors): &'a Columns, verify: Verify) -> Result<Option<Vec<Row<'a>>>> {
    let (set_values, sketch_values) = (sets.values().as_primitive::<UInt64Type>(), sketches.values().as_primitive::<UInt32Type>());
    // The vectors of a check by cosine, as the fingerprints keep them.
    let vectors = match (verify.reads_vectors(), vectors.as_fixed_size_binary_opt()) {
        (false, _) => None,
        (true, Some(kept)) => Some(kept),
        (true, None) if vectors.null_count() == vectors.len() => None,
        (true, None) => return Ok(None),
    };
    let mut rows = Vec::with_capacity(sets.len());
    for r in 0..sets.len() {
        let terms = list_values(sets, set_values, r, CHECK, "a term set")?;
        if !verify.reads_vectors() && terms.is_some_and(|t| !t.is_sorted()) {
            return Err(Error::runtime("set_similarity: term sets must be sorted: build them with term_set"));
        }
        let vector = vectors.filter(|v| v.is_valid(r)).map(|v| v.value(r).iter().map(|&b| b as i8).collect());
        rows.push(Row { terms, shingles: list_values(sketches, sketch_values, r, CHECK, "a shingle sketch")?, vector });
    }
    Ok(Some(rows))
}

/// The similarity the check's statement measures: NULL (none) when a side
/// lacks its term set or its vector.
fn similarity(verify: Verify, x: &Row, y: &Row) -> Option<f64> {
    verify.similarity(evidence(verify, x)?, evidence(verify, y)?)
}

/// What the check compares of a row; none for a measure of term sets when
/// the row has no term set (the statement's NULL).
fn evidence<'a>(verify: Verify, row: &'a Row) -> Option<Evidence<'a>> {
    let terms = match verify.reads_vectors() {
        true => row.terms.unwrap_or(&[]),
        false => row.terms?,
    };
    Some(Evidence { terms, vector: row.vector.as_deref() })
}
