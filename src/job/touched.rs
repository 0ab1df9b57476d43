//! What a night reads of the store beyond the probe: the stored rows of
//! the fingerprints tonight touches (sql/89_store_probe.sql), fetched by
//! page ([`crate::storage::fetch`]) without their MinHash keys, reduced to
//! the rows the night's statements read, given the keys that can meet
//! tonight's (derived again from their term sets), and registered as the
//! work tables `stored` and `stored_term_sets`.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, AsArray, BooleanArray, ListArray, RecordBatch, StringViewArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use datafusion::prelude::SessionContext;

use super::config::JoinOptions;
use super::store_run::StoreRun;
use super::query::{collect, collect_measured, work_batches};
use super::sql::{self, render, table, Param};
use super::summary::StoreReads;
use super::tables::create_view;
use crate::error::{Error, Result};
use crate::join::BandPlan;
use crate::probe::{KeySet, NightIndex};
use crate::minhash::MinHashPlan;
use crate::storage::fetch::{rows_by_key, Take};
use crate::storage::{literal, OutputDir};
use crate::udf::minhash_keys::{keys_of_lists, keys_type};
use crate::udf::term_set::{as_sets, set_values};
use crate::udf::night_partners::index as night_index;

/// Register `stored` and `stored_term_sets`: the earlier runs' rows of
/// every stored fingerprint that tonight touches (sql/89_store_probe.sql),
/// fetched by page into the work folder. Everything after reads the store
/// through these tables only.
pub(super) async fn fetch_touched(
    ctx: &SessionContext,
    store: &StoreRun,
    join: &JoinOptions,
    out: &OutputDir,
    keep_key: &str,
    stored: u64,
    reads: &mut StoreReads,
) -> Result<()> {
    if store.is_first() {
        return register_nothing_stored(ctx, keep_key).await;
    }
    reads.store_bytes = store.earlier_bytes(ctx).await?;
    let probed = probe(ctx, store, join, out, stored, reads).await?;
    let started = std::time::Instant::now();
    // The keys are most of a stored row's bytes (3/4 on Weibo posts), and
    // only the probe needs them for every row: for the few rows fetched,
    // hashing their term sets again costs less than reading them. `doc_key`
    // serves the check for documents already stored, before the probe, and
    // nothing after it. SimHash vectors are read only for a check that
    // compares them.
    let leave_out: &'static [&'static str] = match join.verify.reads_vectors() {
        true => &["minhash", "doc_key"],
        false => &["minhash", "doc_key", "vector"],
    };
    let (rows, schema, fetched) = rows_by_key(ctx, &store.earlier_files(), "simhash", &probed.wanted, Take::FirstPer("run"), leave_out).await?;
    log::debug!("{:>6} ms  fetch: {} rows from {} files", started.elapsed().as_millis(), fetched.rows, fetched.objects);
    reads.fetch_bytes += fetched.bytes;
    reads.fetch_objects += fetched.objects;
    reads.fetched_rows = fetched.rows;
    let schema = schema.ok_or_else(|| Error::runtime(format!("store '{}' has no readable runs", store.url())))?;
    let schema = with_lists(schema);
    let firsts = FirstRows::of(&schema, rows)?;
    log::debug!("{:>6} ms  fetch: {} rows chosen", started.elapsed().as_millis(), firsts.chosen.len());
    let tonight = night_index(&probed.index, &probed.version, probed.k, probed.m).map_err(Error::from)?;
    let (term_sets, rest) = work_tables(&schema, &firsts, (store.minhash, &tonight), started)?;
    work_batches(ctx, out, (table::STORED_TERM_SETS, "_work/stored_term_sets.parquet"), term_sets).await?;
    work_batches(ctx, out, (table::STORED, "_work/stored.parquet"), rest).await?;
    log::debug!("{:>6} ms  fetch: stored and stored_term_sets made", started.elapsed().as_millis());
    reads.fetch_ms = started.elapsed().as_millis() as u64;
    Ok(())
}

/// What the probe found: the stored fingerprints to fetch, by file, and
/// tonight's index (as `night_touched` read it) to trim their keys with.
struct Probed {
    wanted: Vec<(Vec<u64>, bool)>,
    index: String,
    version: String,
    k: u32,
    m: Option<u32>,
}

/// Tonight's index written to the work folder, and the probe of every
/// stored row against it (sql/89_store_probe.sql).
async fn probe(ctx: &SessionContext, store: &StoreRun, join: &JoinOptions, out: &OutputDir, stored: u64, reads: &mut StoreReads) -> Result<Probed> {
    let index = out.staged("_work/night_index.parquet");
    let write = format!("COPY (SELECT simhash, minhash FROM fingerprints WHERE simhash IS NOT NULL) TO {} STORED AS PARQUET {}", literal(&index), sql::WORK_FILE);
    collect(ctx, &write).await?;
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
            ("index", Param::Text(&index)),
            ("version", Param::Text(&version)),
            ("k", Param::Int(u64::from(k))),
            ("m", Param::IntOrNull(m.map(u64::from))),
        ],
    );
    let (batches, scanned) = collect_measured(ctx, &statement).await?;
    reads.probe_bytes += scanned;
    reads.probe_ms = started.elapsed().as_millis() as u64;
    let wanted = store.wanted_by_file(&batches)?;
    let mut touched: Vec<u64> = wanted.iter().flat_map(|w| w.0.iter().copied()).collect();
    touched.sort_unstable();
    touched.dedup();
    reads.touched_fingerprints = touched.len() as u64;
    Ok(Probed { wanted, index, version, k, m })
}

/// The rows of the two work tables, made at once:
/// `stored_term_sets` (the first rows by document, with the MinHash keys of
/// `plan` that can meet `tonight`'s) and `stored` (the chosen rows without
/// term sets).
fn work_tables(schema: &SchemaRef, firsts: &FirstRows, (plan, tonight): (Option<MinHashPlan>, &NightIndex), started: std::time::Instant) -> Result<(Rows, Rows)> {
    let (term_sets, rest) = (columns(schema, &TERM_SET_COLUMNS)?, columns_but(schema, &["term_set", "shingles", "vector"])?);
    let (term_sets, rest) = std::thread::scope(|scope| {
        let term_sets = scope.spawn(|| -> Result<Rows> {
            let rows = firsts.gather(&firsts.by_doc, &term_sets)?;
            let keys = match plan {
                Some(plan) => keys_meeting_tonight(&rows, plan, tonight, started)?,
                None => rows.iter().map(|b| new_null_array(&keys_type(), b.num_rows())).collect(),
            };
            let schema = Arc::new(schema.project(&term_sets)?);
            let mut fields = schema.fields().to_vec();
            fields.push(Arc::new(Field::new("minhash", keys_type(), true)));
            let schema = Arc::new(Schema::new(fields));
            let rows = rows.into_iter().zip(keys).map(|(b, k)| RecordBatch::try_new(schema.clone(), [b.columns(), &[k]].concat()));
            Ok((schema.clone(), rows.collect::<std::result::Result<Vec<_>, _>>()?))
        });
        let rest = firsts.gather(&firsts.chosen, &rest).and_then(|rows| Ok((Arc::new(schema.project(&rest)?), rows)));
        (term_sets.join().expect("the term sets' thread does not panic"), rest)
    });
    Ok((term_sets?, rest?))
}

/// A table's schema and rows.
type Rows = (SchemaRef, Vec<RecordBatch>);

/// The fetched columns of `stored_term_sets`: what 57_term_sets.sql reads
/// of a stored fingerprint's first document, but for its MinHash keys
/// ([`with_minhash`]). `stored` holds the rest.
const TERM_SET_COLUMNS: [&str; 6] = ["simhash", "source", "id", "term_set", "shingles", "vector"];

/// `schema` with `shingles` and `vector` columns: runs written before
/// documents kept shingle sketches or SimHash vectors have none, and a
/// night whose check does not compare vectors leaves them out of the fetch.
/// Their rows get NULL lists.
fn with_lists(schema: SchemaRef) -> SchemaRef {
    let missing: Vec<Field> = [("shingles", crate::udf::sketch_type()), ("vector", crate::udf::vector_type())]
        .into_iter()
        .filter(|(name, _)| schema.index_of(name).is_err())
        .map(|(name, t)| Field::new(name, t, true))
        .collect();
    if missing.is_empty() {
        return schema;
    }
    let mut fields = schema.fields().to_vec();
    fields.extend(missing.into_iter().map(Arc::new));
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `batch` with the columns of `schema`, matched by name: the runs and
/// segments of one store may differ in the columns they hold (a run written
/// before sketches were kept has no `shingles`), and a missing column is
/// NULL.
fn conform_by_name(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) => Ok(cast(c, f.data_type())?),
            None => Ok(new_null_array(f.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

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
        let batches = batches.iter().map(|b| conform_by_name(b, schema)).collect::<Result<Vec<_>>>()?;
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
        // (batch, row) of its first row by document and by run. The rows are
        // sorted by fingerprint, then by position, so that each group is a
        // run of rows met in fetch order (ties keep the first met, as before
        // sorting), and most groups are one row that needs no comparison.
        let mut rows: Vec<(Option<u64>, usize, usize)> = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
        for (b, batch) in batches.iter().enumerate() {
            let fingerprints = batch.column(simhash).as_primitive::<UInt64Type>();
            rows.extend((0..batch.num_rows()).map(|row| (fingerprints.is_valid(row).then(|| fingerprints.value(row)), b, row)));
        }
        rows.sort_unstable();
        let mut best: Vec<[(usize, usize); 2]> = Vec::new();
        for group in rows.chunk_by(|x, y| x.0 == y.0) {
            let mut firsts = [(group[0].1, group[0].2); 2];
            for &(_, b, row) in &group[1..] {
                if by_doc((b, row)) < by_doc(firsts[0]) {
                    firsts[0] = (b, row);
                }
                if by_run((b, row)) < by_run(firsts[1]) {
                    firsts[1] = (b, row);
                }
            }
            best.push(firsts);
        }
        let mut by_doc: Vec<(usize, usize)> = best.iter().map(|f| f[0]).collect();
        let mut chosen: Vec<(usize, usize)> = best.into_iter().flatten().collect();
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

/// The MinHash keys under `plan` of `rows` (the first stored row of each
/// fingerprint, with its term set) that can put a stored fingerprint in a
/// bucket with one of tonight's (the only buckets 51_minhash_buckets.sql
/// keeps): tonight's documents' keys, and every key of the stored row of one
/// of tonight's fingerprints, whose term set may stand for that fingerprint
/// (57_term_sets.sql). Those buckets keep every member, so the candidates
/// are the same; the night's statements are spared the other keys (on the
/// tenth of ten Weibo nights, 4.05 of the 4.57 million keys of 142,754
/// touched fingerprints).
///
/// The keys are derived again from the term sets, as 40_fingerprints.sql
/// made them: for these few rows that costs less than reading them, most of
/// a stored row's bytes. Each batch is hashed and trimmed at once, while its
/// keys are in cache, on every core.
fn keys_meeting_tonight(rows: &[RecordBatch], plan: MinHashPlan, index: &NightIndex, started: std::time::Instant) -> Result<Vec<ArrayRef>> {
    let column = |b: &RecordBatch, name: &str| b.column_by_name(name).cloned().ok_or_else(|| Error::runtime(format!("fetched stored rows have no {name}")));
    let batches = rows
        .iter()
        .map(|b| {
            let fingerprints = column(b, "simhash")?.as_primitive_opt::<UInt64Type>().cloned();
            let fingerprints = fingerprints.ok_or_else(|| Error::runtime("fetched stored rows have no UInt64 simhash"))?;
            Ok((fingerprints, as_sets(&column(b, "term_set")?)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let theirs = their_keys(&batches, plan, index)?;
    let trimmed = in_parallel(&batches, |(fingerprints, sets)| -> Result<(ListArray, usize)> {
        let keys = keys_of_lists(plan, sets, "minhash_keys")?;
        Ok((trim_batch(fingerprints, &keys, index, &theirs), keys.values().len()))
    });
    let trimmed = trimmed.into_iter().collect::<Result<Vec<_>>>()?;
    let (all, kept): (usize, usize) = trimmed.iter().fold((0, 0), |(a, k), (l, n)| (a + n, k + l.values().len()));
    log::debug!("{:>6} ms  fetch: {kept} of their {all} MinHash keys kept", started.elapsed().as_millis());
    Ok(trimmed.into_iter().map(|(l, _)| Arc::new(l) as ArrayRef).collect())
}

/// Whether row `row` of a stored batch has one of tonight's fingerprints.
fn tonights(index: &NightIndex, fingerprints: &UInt64Array, row: usize) -> bool {
    fingerprints.is_valid(row) && index.has_fingerprint(fingerprints.value(row))
}

/// The keys of the stored rows of tonight's fingerprints (`batches`:
/// fingerprints and term sets) that tonight's documents do not hold: other
/// stored rows keep them too (see [`keys_meeting_tonight`]). Few rows, so
/// their keys are derived here, before the batches are trimmed.
fn their_keys(batches: &[(UInt64Array, ListArray)], plan: MinHashPlan, index: &NightIndex) -> Result<KeySet> {
    let mut hasher = plan.hasher();
    let mut keys = Vec::new();
    for (fingerprints, sets) in batches {
        let values = sets.values().as_primitive::<UInt64Type>();
        for row in (0..sets.len()).filter(|&r| tonights(index, fingerprints, r)) {
            if let Some(set) = set_values(sets, values, row, "minhash_keys")? {
                hasher.keys_into(set, &mut keys);
            }
        }
    }
    Ok(unheld(keys, index))
}

/// Of `keys`, those that tonight's documents do not hold, as a set.
fn unheld(mut keys: Vec<u64>, index: &NightIndex) -> KeySet {
    keys.sort_unstable();
    keys.dedup();
    let held = index.have_minhash_keys(&keys);
    KeySet::new(keys.into_iter().zip(held).filter(|&(_, held)| !held).map(|(k, _)| k))
}

/// Of each row's keys (`fingerprints` and their `lists`), those of
/// [`keys_meeting_tonight`]: all of a row of one of tonight's fingerprints,
/// else those of tonight's documents or in `theirs` ([`their_keys`]).
fn trim_batch(fingerprints: &UInt64Array, lists: &ListArray, index: &NightIndex, theirs: &KeySet) -> ListArray {
    let values = lists.values().as_primitive::<UInt64Type>().values();
    let held = index.have_minhash_keys(values);
    let theirs = theirs.have(values);
    let offsets = lists.value_offsets();
    let (mut kept, mut ends) = (Vec::new(), Vec::with_capacity(lists.len() + 1));
    ends.push(0i32);
    for row in 0..lists.len() {
        let all = tonights(index, fingerprints, row);
        let keys = offsets[row] as usize..offsets[row + 1] as usize;
        kept.extend(keys.filter(|&j| all || held[j] || theirs[j]).map(|j| values[j]));
        ends.push(kept.len() as i32);
    }
    let DataType::List(field) = keys_type() else { unreachable!("keys are a list") };
    ListArray::new(field, OffsetBuffer::new(ends.into()), Arc::new(UInt64Array::from(kept)), lists.nulls().cloned())
}

/// `f` of each item, in order, on every core: the batches of a fetch differ
/// in size, so each thread takes the next item when it is done.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(items.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                done.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Register `stored` and `stored_term_sets` with no rows, for a store's first night.
pub(super) async fn register_nothing_stored(ctx: &SessionContext, keep_key: &str) -> Result<()> {
    let query = format!(
        "SELECT source, id, simhash, n_terms, n_chars{keep_key}, \
         source AS representative_source, id AS representative_id, CAST(NULL AS VARCHAR) AS representative_run, \
         CAST(NULL AS VARCHAR) AS run FROM fingerprints WHERE false"
    );
    create_view(ctx, table::STORED, &query).await?;
    no_stored_term_sets(ctx).await
}

/// Register `stored_term_sets` with no rows: nothing is stored. Its columns
/// are those of `fingerprints` (which `neardup pairs` may read without term
/// sets or sketches: NULL then).
pub async fn no_stored_term_sets(ctx: &SessionContext) -> Result<()> {
    let schema = ctx.table(table::FINGERPRINTS).await?.schema().clone();
    let column = |name: &str, null: &str| match schema.has_column_with_unqualified_name(name) {
        true => name.to_string(),
        false => format!("{null} AS {name}"),
    };
    let query = format!(
        "SELECT simhash, source, id, {}, {}, {}, {} FROM fingerprints WHERE false",
        column("term_set", "CAST(NULL AS BIGINT UNSIGNED[])"),
        column("minhash", "CAST(NULL AS BIGINT UNSIGNED[])"),
        column("shingles", "CAST(NULL AS INT UNSIGNED[])"),
        column("vector", "arrow_cast(NULL, 'FixedSizeBinary(64)')")
    );
    create_view(ctx, table::STORED_TERM_SETS, &query).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ListBuilder, UInt64Builder};

    fn lists(rows: &[Option<&[u64]>]) -> ListArray {
        let mut keys = ListBuilder::new(UInt64Builder::new());
        for k in rows {
            match k {
                Some(k) => {
                    keys.values().append_slice(k);
                    keys.append(true);
                }
                None => keys.append_null(),
            }
        }
        keys.finish()
    }

    /// The trim of [`keys_meeting_tonight`], given each row's keys.
    fn trim_keys(rows: &[(&UInt64Array, &ListArray)], index: &NightIndex) -> Vec<ListArray> {
        let mut theirs = Vec::new();
        for (fingerprints, lists) in rows {
            theirs.extend((0..lists.len()).filter(|&r| tonights(index, fingerprints, r)).flat_map(|r| values(lists, r)));
        }
        let theirs = unheld(theirs, index);
        rows.iter().map(|(f, l)| trim_batch(f, l, index, &theirs)).collect()
    }

    fn values(lists: &ListArray, row: usize) -> Vec<u64> {
        lists.value(row).as_primitive::<UInt64Type>().values().to_vec()
    }

    #[test]
    fn stored_rows_keep_the_keys_that_can_meet_tonight() {
        // Tonight: fingerprint 7 with keys 1 and 2.
        let index = NightIndex::new(None, [(7u64, &[1u64, 2][..])]);
        // A stored row of tonight's fingerprint keeps every key: its term set
        // may stand for fingerprint 7, and so its keys too. Others keep
        // tonight's keys and those of fingerprint 7's stored row. Fingerprint
        // 7's row is in one batch, the others in another.
        let (first, firsts) = (UInt64Array::from(vec![Some(7)]), lists(&[Some(&[5, 6])]));
        let others = UInt64Array::from(vec![Some(8), Some(9), None, Some(10)]);
        let other_keys = lists(&[Some(&[1, 5, 9]), Some(&[9, 10]), Some(&[2, 3]), None]);
        let kept = trim_keys(&[(&first, &firsts), (&others, &other_keys)], &index);
        assert_eq!(values(&kept[0], 0), [5, 6]);
        assert_eq!((values(&kept[1], 0), values(&kept[1], 1), values(&kept[1], 2)), (vec![1, 5], vec![], vec![2]));
        assert!(kept[1].is_null(3));
    }

    #[test]
    fn derived_keys_are_the_stored_keys() {
        // Keys derived from a fetched term set are those 40_fingerprints.sql
        // stored for it (`minhash_keys`, the same function), trimmed.
        let plan = MinHashPlan::new(8, 2).unwrap();
        let (tonight, same_story, other) = ((0..20).collect::<Vec<u64>>(), (2..22).collect::<Vec<u64>>(), (100..120).collect::<Vec<u64>>());
        let index = NightIndex::new(None, [(7u64, &plan.keys(&tonight)[..])]);
        let mut sets = ListBuilder::new(UInt64Builder::new());
        for set in [&same_story, &other] {
            sets.values().append_slice(set);
            sets.append(true);
        }
        let schema = Schema::new(vec![Field::new("simhash", DataType::UInt64, true), Field::new("term_set", keys_type(), true)]);
        let columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(vec![8, 9])), Arc::new(sets.finish())];
        let rows = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
        let kept = keys_meeting_tonight(&[rows], plan, &index, std::time::Instant::now()).unwrap();
        let kept = kept[0].as_list::<i32>();
        let shared: Vec<u64> = plan.keys(&same_story).into_iter().filter(|k| plan.keys(&tonight).contains(k)).collect();
        assert!(!shared.is_empty() && shared.len() < 8, "{shared:?}");
        assert_eq!(values(kept, 0), shared);
        assert_eq!(values(kept, 1), Vec::<u64>::new());
    }
}
