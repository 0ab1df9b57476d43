//! Tables as the pipeline writes them: a statement's output made a sealed,
//! registered table ([`materialize`]); tables written by the client rather
//! than by a statement (small work tables as in-memory Parquet); and the
//! footer every output table carries.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int32Array, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::compute::{cast, concat, interleave_record_batch, lexsort_to_indices, SortColumn, SortOptions};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::catalog::TableProvider;
use datafusion::prelude::SessionContext;

use super::query::{collect, collected_joins_in_memory, column_u64, copy_and_hold, with_settings, work_batches, work_table, LATE_MATERIALIZATION};
use super::sql::{self, render, table, Param, Statement};
use super::summary::{FingerprintSettings, SharedText};
use crate::error::{Error, Result};
use crate::minhash::MinHashPlan;
use crate::text::shingles::SKETCH_SCHEME;
use crate::storage::{register_parquet, OutputDir};

/// The Parquet key-value metadata key of neardup's tables, added to each
/// footer after the write (see [`crate::storage::footer`]).
pub const METADATA_KEY: &str = "neardup";

/// What `METADATA_KEY` holds: the fingerprint settings, and N for tables
/// made with corpus document frequencies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileMetadata {
    pub settings: FingerprintSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idf_n_docs: Option<u64>,
    /// Store runs: the digest of the store's frozen IDF model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idf_model: Option<String>,
    /// The MinHash plan of the `minhash` column, when it holds band keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minhash: Option<MinHashPlan>,
    /// The scheme of the `shingles` sketches, when the table has them
    /// ([`crate::text::shingles::SKETCH_SCHEME`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shingles: Option<String>,
    /// The scheme of the `vector` column, when the table has one
    /// ([`crate::fingerprint::VECTOR_SCHEME`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<String>,
    /// The run's duplication policy (`--min-shared`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_shared: Option<crate::sets::MinShared>,
    /// The boilerplate lines dropped before segmentation, when the settings
    /// drop any: `xxh3:<digest>` of their line-set file (a store's
    /// `idf/boilerplate.parquet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boilerplate_set: Option<String>,
}

impl FileMetadata {
    fn json(&self) -> String {
        serde_json::to_string(self).expect("metadata serialises")
    }
}

/// Run `statement` (a `COPY (…) TO {{path}}` statement of `sql/`, with
/// `params`) into the single file `path`, give it neardup's footer (`meta`)
/// and register it as `table`: each step of the pipeline that writes a table.
pub(super) async fn materialize(
    ctx: &SessionContext,
    statement: Statement,
    params: &[(&str, Param<'_>)],
    path: &str,
    table: &str,
    meta: Option<&FileMetadata>,
) -> Result<()> {
    materialize_held(ctx, (statement, params), (path, table), meta, false).await.map(drop)
}

/// [`materialize`], with `hold` also returning the rows written, held in
/// memory ([`super::query::copy_and_hold`]) for a reader that would read the
/// whole file back next.
pub(super) async fn materialize_held(
    ctx: &SessionContext,
    (statement, params): (Statement, &[(&str, Param<'_>)]),
    (path, table): (&str, &str),
    meta: Option<&FileMetadata>,
    hold: bool,
) -> Result<Option<Arc<dyn TableProvider>>> {
    let mut all = params.to_vec();
    all.push(("path", Param::Text(path)));
    let statement = render(statement, &all);
    let held = match hold {
        true => Some(copy_and_hold(ctx, &statement).await?),
        false => collect(ctx, &statement).await.map(|_| None)?,
    };
    seal(ctx, path, meta).await?;
    register_parquet(ctx, table, path).await?;
    Ok(held)
}

/// Register `replacement` as the table `name`; returns the one it replaces.
pub(super) fn swap_table(ctx: &SessionContext, name: &str, replacement: Arc<dyn TableProvider>) -> Result<Arc<dyn TableProvider>> {
    let replaced = ctx.deregister_table(name)?;
    let replaced = replaced.ok_or_else(|| Error::runtime(format!("no table {name} to replace")))?;
    ctx.register_table(name, replacement)?;
    Ok(replaced)
}

/// The report's `pairs` (sql/70_pairs.sql), from the anchors of
/// sql/69_anchors.sql, for one-shot and store runs alike.
/// Both read the documents of a few fingerprints (those in clusters, and
/// the anchors) with their shingle sketches, out of every eligible one: the
/// joins' filters on the fingerprint are evaluated in the scan, so only
/// those rows' sketches are decoded, and only they go through `eligible`'s
/// anti join (Weibo: 768,035 rows with their sketches did, for 175,800
/// pairs).
pub(super) async fn pairs_table(ctx: &SessionContext, out: &OutputDir, meta: Option<&FileMetadata>) -> Result<SharedText> {
    let anchors = out.staged("_work/anchors.parquet");
    with_settings(ctx, &[LATE_MATERIALIZATION], async {
        // In memory when the work is: written, its sketches were encoded on
        // one core and decoded again by the pairs' three joins.
        work_table(ctx, &render(sql::ANCHORS, &[("path", Param::Text(&anchors))]), &anchors, table::ANCHORS).await?;
        // In memory the anchors are collected whole on each core, and the
        // documents in clusters, with their sketches, stay in their
        // partitions (Weibo: 203,712 rows, 36 MB, moved for 27,894 anchors).
        let settings: Vec<_> = collected_joins_in_memory(ctx).into_iter().collect();
        let path = out.staged("pairs/part-00000.parquet");
        with_settings(ctx, &settings, materialize(ctx, sql::PAIRS, &[], &path, table::PAIRS, meta)).await
    })
    .await?;
    shared_text(ctx).await
}

/// How much text the pairs share, by the share of each pair's shorter
/// document (for the summary).
async fn shared_text(ctx: &SessionContext) -> Result<SharedText> {
    const BINS: u64 = 10;
    let by_bin = format!(
        "SELECT COALESCE(least(CAST(floor(greatest(shared_a, shared_b) * {BINS}) AS BIGINT), {last}), -1), count(*) FROM pairs GROUP BY 1",
        last = BINS - 1
    );
    let mut shared = SharedText { measure: SKETCH_SCHEME.into(), pairs_by_share: vec![0; BINS as usize], unmeasured: 0 };
    for b in collect(ctx, &by_bin).await? {
        let (bins, counts) = (b.column(0).as_primitive::<Int64Type>(), column_u64(&b, 1)?);
        for (bin, count) in bins.values().iter().zip(counts.values()) {
            match usize::try_from(*bin) {
                Ok(bin) => shared.pairs_by_share[bin] += count,
                Err(_) => shared.unmeasured += count,
            }
        }
    }
    Ok(shared)
}

/// Register `query` as the view `name` (one of [`super::sql::table`]).
pub(super) async fn create_view(ctx: &SessionContext, name: &str, query: &str) -> Result<()> {
    collect(ctx, &format!("CREATE VIEW {} AS {query}", crate::storage::ident(name))).await?;
    Ok(())
}

/// Give the table written at `path` neardup's footer: `meta` under
/// [`METADATA_KEY`] (when known), no engine-dependent entries.
pub(super) async fn seal(ctx: &SessionContext, path: &str, meta: Option<&FileMetadata>) -> Result<()> {
    let json = meta.map(FileMetadata::json);
    crate::storage::footer::rewrite_footer(ctx, path, json.as_deref().map(|j| (METADATA_KEY, j))).await
}

/// `(source, id)` rows.
fn documents_batch(rows: &[(String, String)]) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![Field::new("source", DataType::Utf8, false), Field::new("id", DataType::Utf8, false)]));
    let sources: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str())));
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str())));
    Ok(RecordBatch::try_new(schema, vec![sources, ids])?)
}

/// `(simhash, source, id)` rows.
pub(super) fn fingerprint_documents_batch(rows: &[(u64, String, String)]) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("simhash", DataType::UInt64, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("id", DataType::Utf8, false),
    ]));
    let simhashes: ArrayRef = Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.0)));
    let sources: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str())));
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2.as_str())));
    Ok(RecordBatch::try_new(schema, vec![simhashes, sources, ids])?)
}

/// Record batches of one schema as an in-memory Parquet file.
pub(super) fn write_batches(schema: SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut buffer = Vec::new();
    // A work file, read once: dictionaries of hashes and ids would cost
    // more to build than they save.
    let props = WriterProperties::builder().set_dictionary_enabled(false).build();
    let mut writer = ArrowWriter::try_new(&mut buffer, schema.clone(), Some(props))?;
    for batch in batches {
        writer.write(&conform(batch, &schema)?)?;
    }
    writer.close()?;
    Ok(buffer)
}

/// `batch` with the column types of `schema`: files written by other
/// versions or engines may hold a column in another layout of the same type
/// (Utf8 and Utf8View).
pub(super) fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch.columns().iter().zip(schema.fields()).map(|(c, f)| cast(c, f.data_type())).collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// Whether the rows of `batches` (one partition of a table) are already in
/// the order of the columns `keys`, ascending, NULLs last: a partition made
/// from rows read in that order (the documents held sorted in memory, see
/// stages.rs) needs no sort. Stops at the first row out of order.
pub(super) fn is_sorted_partition(batches: &[RecordBatch], keys: &[&str]) -> Result<bool> {
    let Some(first) = batches.first() else {
        return Ok(true);
    };
    let options = SortOptions { descending: false, nulls_first: false };
    let fields = keys
        .iter()
        .map(|k| Ok(SortField::new_with_options(first.schema().field_with_name(k)?.data_type().clone(), options)))
        .collect::<Result<Vec<_>>>()?;
    let converter = RowConverter::new(fields)?;
    let mut last: Option<OwnedRow> = None;
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let columns = keys.iter().map(|k| Ok(batch.schema().index_of(k).map(|i| batch.column(i).clone())?)).collect::<Result<Vec<ArrayRef>>>()?;
        let rows = converter.convert_columns(&columns)?;
        if last.as_ref().is_some_and(|l| l.row() > rows.row(0)) || !rows.iter().is_sorted() {
            return Ok(false);
        }
        last = Some(rows.row(rows.num_rows() - 1).owned());
    }
    Ok(true)
}

/// The rows of `batches` (one partition of a table) sorted by the columns
/// `keys`, ascending, NULLs last, in batches of `rows`. Only the key columns
/// are joined to find the order; the rows are then gathered from the batches
/// where they are, so the partition is copied once, not twice (as joining
/// it first and taking from the join would). Ties keep their order in
/// `batches`.
pub(super) fn sort_partition(batches: Vec<RecordBatch>, keys: &[&str], rows: usize) -> Result<Vec<RecordBatch>> {
    if batches.is_empty() {
        return Ok(batches);
    }
    let key = |name: &str| -> Result<SortColumn> {
        let parts = batches.iter().map(|b| b.column_by_name(name).map(|c| c.as_ref())).collect::<Option<Vec<&dyn Array>>>();
        let parts = parts.ok_or_else(|| Error::runtime(format!("no column {name} to sort by")))?;
        Ok(SortColumn { values: concat(&parts)?, options: Some(SortOptions { descending: false, nulls_first: false }) })
    };
    let mut columns = keys.iter().map(|k| key(k)).collect::<Result<Vec<_>>>()?;
    // Ties by position: lexsort_to_indices alone does not promise a stable order.
    let positions = UInt64Array::from_iter_values(0..columns[0].values.len() as u64);
    columns.push(SortColumn { values: Arc::new(positions), options: None });
    let order = lexsort_to_indices(&columns, None)?;
    drop(columns);
    let rows_at: Vec<(usize, usize)> = batches.iter().enumerate().flat_map(|(b, batch)| (0..batch.num_rows()).map(move |r| (b, r))).collect();
    let located: Vec<(usize, usize)> = order.values().iter().map(|&i| rows_at[i as usize]).collect();
    let inputs: Vec<&RecordBatch> = batches.iter().collect();
    located.chunks(rows.max(1)).map(|chunk| Ok(interleave_record_batch(&inputs, chunk)?)).collect()
}

/// One record batch as an in-memory Parquet file.
fn write_parquet(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<Vec<u8>> {
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, schema, None)?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(buffer)
}

/// Candidate pairs `(simhash_a, simhash_b)`, sorted, in the columns
/// 52_minhash_candidates.sql writes: each pair's Hamming distance, no
/// similarity yet.
pub(super) fn candidates_batch(pairs: &[(u64, u64)]) -> Result<RecordBatch> {
    sorted_pairs_batch(
        pairs.iter().map(|p| p.0),
        pairs.iter().map(|p| p.1),
        vec![
            ("hamming", Arc::new(Int32Array::from_iter_values(pairs.iter().map(|p| (p.0 ^ p.1).count_ones() as i32)))),
            ("similarity", Arc::new(Float64Array::new_null(pairs.len()))),
        ],
    )
}

/// A candidate pair that passed the check (sql/55_verified_pairs.sql).
pub(super) struct Checked {
    pub a: u64,
    pub b: u64,
    pub hamming: i32,
    pub similarity: f64,
    /// The share of `a`'s shingles found in `b`'s, and the reverse.
    pub shared: (Option<f64>, Option<f64>),
}

/// Checked pairs, sorted, in the columns 55_verified_pairs.sql writes.
pub(super) fn checked_pairs_batch(pairs: &[Checked]) -> Result<RecordBatch> {
    sorted_pairs_batch(
        pairs.iter().map(|p| p.a),
        pairs.iter().map(|p| p.b),
        vec![
            ("hamming", Arc::new(Int32Array::from_iter_values(pairs.iter().map(|p| p.hamming)))),
            ("similarity", Arc::new(Float64Array::from_iter_values(pairs.iter().map(|p| p.similarity)))),
            ("shared_a", Arc::new(Float64Array::from_iter(pairs.iter().map(|p| p.shared.0)))),
            ("shared_b", Arc::new(Float64Array::from_iter(pairs.iter().map(|p| p.shared.1)))),
        ],
    )
}

/// Pairs sorted by `(simhash_a, simhash_b)`, with more `columns`.
fn sorted_pairs_batch(a: impl Iterator<Item = u64>, b: impl Iterator<Item = u64>, columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    let mut fields = vec![Field::new("simhash_a", DataType::UInt64, true), Field::new("simhash_b", DataType::UInt64, true)];
    fields.extend(columns.iter().map(|(name, c)| Field::new(*name, c.data_type().clone(), true)));
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from_iter_values(a)), Arc::new(UInt64Array::from_iter_values(b))];
    arrays.extend(columns.into_iter().map(|(_, c)| c));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// `(simhash, cluster_id)` for every fingerprint with a near pair, as Parquet.
pub(super) fn components_parquet(labels: &[(u64, u64)]) -> Result<Vec<u8>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("simhash", DataType::UInt64, false),
        Field::new("cluster_id", DataType::UInt64, false),
    ]));
    let nodes: ArrayRef = Arc::new(UInt64Array::from_iter_values(labels.iter().map(|l| l.0)));
    let ids: ArrayRef = Arc::new(UInt64Array::from_iter_values(labels.iter().map(|l| l.1)));
    write_parquet(schema, vec![nodes, ids])
}

/// Register the view `view`: table `from` without the documents `left_out`
/// (`source`, `id`), which are kept in the work folder as table `name`.
pub(super) async fn view_without(ctx: &SessionContext, out: &OutputDir, view: &str, from: &str, name: &str, left_out: &[(String, String)]) -> Result<()> {
    let batch = documents_batch(left_out)?;
    work_batches(ctx, out, (name, &format!("_work/{name}.parquet")), (batch.schema(), vec![batch])).await?;
    let statement = format!(
        "CREATE VIEW {view} AS SELECT * FROM {from} t WHERE NOT EXISTS (SELECT 1 FROM {name} x WHERE x.source = t.source AND x.id = t.id)"
    );
    collect(ctx, &statement).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::UInt32Array;

    fn batch(sources: &[&str], ids: &[&str], rows: &[u32]) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("source", DataType::Utf8, false), Field::new("id", DataType::Utf8, false), Field::new("row", DataType::UInt32, false)]);
        let columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from(sources.to_vec())), Arc::new(StringArray::from(ids.to_vec())), Arc::new(UInt32Array::from(rows.to_vec()))];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    #[test]
    fn a_partition_is_sorted_by_its_keys_with_ties_in_place() {
        let batches = vec![batch(&["b", "a", "a"], &["1", "2", "10"], &[0, 1, 2]), batch(&["a", "b"], &["2", "0"], &[3, 4])];
        let sorted = sort_partition(batches, &["source", "id"], 2).unwrap();
        assert_eq!(sorted.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [2, 2, 1]);
        let rows: Vec<u32> = sorted.iter().flat_map(|b| b.column(2).as_primitive::<datafusion::arrow::datatypes::UInt32Type>().values().to_vec()).collect();
        // ("a","10"), then the tie ("a","2") in input order, ("b","0"), ("b","1").
        assert_eq!(rows, [2, 1, 3, 4, 0]);
        assert!(sort_partition(Vec::new(), &["id"], 2).unwrap().is_empty());
        assert!(sort_partition(vec![batch(&["a"], &["1"], &[0])], &["title"], 2).is_err());
    }

    #[test]
    fn a_partition_in_order_is_told_from_one_that_is_not() {
        let keys = ["source", "id"];
        let sorted = |batches: &[RecordBatch]| is_sorted_partition(batches, &keys).unwrap();
        // In order across batches, with a tie and an empty batch between;
        // ids compare as text ("10" < "2").
        let in_order = [batch(&["a", "a"], &["10", "2"], &[0, 1]), batch(&[], &[], &[]), batch(&["a", "b"], &["2", "0"], &[2, 3])];
        assert!(sorted(&in_order));
        assert!(sorted(&[]));
        // Out of order inside a batch, and only across two batches.
        assert!(!sorted(&[batch(&["a", "a"], &["2", "10"], &[0, 1])]));
        assert!(!sorted(&[batch(&["b"], &["0"], &[0]), batch(&["a"], &["9"], &[1])]));
        // What sort_partition makes passes.
        let made = sort_partition(vec![batch(&["b", "a", "a"], &["1", "2", "10"], &[0, 1, 2])], &keys, 2).unwrap();
        assert!(sorted(&made));
        assert!(is_sorted_partition(&in_order, &["title"]).is_err());
    }
}
