//! What a night reads of the store beyond the probe: the stored rows of
//! the fingerprints tonight touches (sql/89_store_probe.sql), fetched by
//! page ([`crate::storage::fetch`]), reduced to the rows and MinHash keys the
//! night's statements read, and registered as the work tables `stored` and
//! `stored_term_sets`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, ListArray, ListBuilder, RecordBatch, StringViewArray, UInt64Array, UInt64Builder};
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef, UInt64Type};
use datafusion::common::{HashMap, HashSet};
use datafusion::prelude::SessionContext;

use super::config::JoinOptions;
use super::store_run::StoreRun;
use super::query::{collect, collect_measured};
use super::sql::{self, render, table, Param};
use super::summary::StoreReads;
use super::tables::{conform, create_view, write_batches};
use crate::error::{Error, Result};
use crate::join::BandPlan;
use crate::probe::NightIndex;
use crate::storage::fetch::{narrow_minhash, rows_by_key, Take};
use crate::storage::{literal, register_parquet, OutputDir};
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
    let (rows, schema, fetched) = rows_by_key(ctx, &store.earlier_files(), "simhash", &probed.wanted, Take::FirstPer("run")).await?;
    let rows = rows.into_iter().map(narrow_minhash).collect::<Result<Vec<_>>>()?;
    log::debug!("{:>6} ms  fetch: {} rows from {} files", started.elapsed().as_millis(), fetched.rows, fetched.objects);
    reads.fetch_bytes += fetched.bytes;
    reads.fetch_objects += fetched.objects;
    reads.fetched_rows = fetched.rows;
    let schema = schema.ok_or_else(|| Error::runtime(format!("store '{}' has no readable runs", store.url())))?;
    let firsts = FirstRows::of(&schema, rows)?;
    log::debug!("{:>6} ms  fetch: {} rows chosen", started.elapsed().as_millis(), firsts.chosen.len());
    let tonight = night_index(&probed.index, &probed.version, probed.k, probed.m).map_err(Error::from)?;
    let (term_sets, rest) = work_tables(&schema, &firsts, &tonight, started)?;
    out.put("_work/stored_term_sets.parquet", term_sets).await?;
    out.put("_work/stored.parquet", rest).await?;
    log::debug!("{:>6} ms  fetch: stored.parquet and stored_term_sets.parquet written", started.elapsed().as_millis());
    register_parquet(ctx, table::STORED, &out.staged("_work/stored.parquet")).await?;
    register_parquet(ctx, table::STORED_TERM_SETS, &out.staged("_work/stored_term_sets.parquet")).await?;
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

/// The two work files, made at once on two cores: `stored_term_sets` (the
/// first rows by document, their keys trimmed) and `stored` (the chosen
/// rows without term sets and keys), as Parquet bytes.
fn work_tables(schema: &SchemaRef, firsts: &FirstRows, tonight: &NightIndex, started: std::time::Instant) -> Result<(Vec<u8>, Vec<u8>)> {
    let (term_sets, rest) = (columns(schema, &TERM_SET_COLUMNS)?, columns_but(schema, &["term_set", "minhash"])?);
    let (term_sets, rest) = std::thread::scope(|scope| {
        let term_sets = scope.spawn(|| -> Result<Vec<u8>> {
            let rows = firsts.gather(&firsts.by_doc, &term_sets)?;
            let all_keys = minhash_key_count(&rows);
            let rows = keys_meeting_tonight(&rows, tonight)?;
            log::debug!("{:>6} ms  fetch: {} of their {all_keys} MinHash keys kept", started.elapsed().as_millis(), minhash_key_count(&rows));
            write_batches(Arc::new(schema.project(&term_sets)?), &rows)
        });
        let rest = firsts.gather(&firsts.chosen, &rest).and_then(|rows| write_batches(Arc::new(schema.project(&rest)?), &rows));
        (term_sets.join().expect("the term sets' thread does not panic"), rest)
    });
    Ok((term_sets?, rest?))
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
pub(super) async fn register_nothing_stored(ctx: &SessionContext, keep_key: &str) -> Result<()> {
    let query = format!(
        "SELECT source, id, simhash, n_terms, n_chars{keep_key}, \
         source AS representative_source, id AS representative_id, CAST(NULL AS VARCHAR) AS representative_run, \
         CAST(NULL AS VARCHAR) AS run FROM fingerprints WHERE false"
    );
    create_view(ctx, table::STORED, &query).await?;
    no_stored_term_sets(ctx).await
}

/// Register `stored_term_sets` with no rows: nothing is stored.
pub async fn no_stored_term_sets(ctx: &SessionContext) -> Result<()> {
    create_view(ctx, table::STORED_TERM_SETS, "SELECT simhash, source, id, term_set, minhash FROM fingerprints WHERE false").await?;
    Ok(())
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
