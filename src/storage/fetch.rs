//! Rows of sorted Parquet files, fetched by fingerprint through the page index.
//!
//! A store's run files are sorted by `simhash` and written in small pages
//! with a page index, so the pages that can hold a given fingerprint are
//! known from the footer alone. A night needs the bulky columns (term sets,
//! representatives) of a few thousand stored fingerprints among millions:
//! it reads just the pages whose `[min, max]` holds one of them, and counts
//! what it read.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::{Array, AsArray, BooleanArray, RecordBatch, UInt64Array};
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef, UInt64Type};
use datafusion::prelude::SessionContext;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::page_index::column_index::ColumnIndexMetaData;

use super::locate;
use crate::error::{Error, Result};

/// What a fetch read: bytes of pages and footers, objects opened, rows kept.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Fetched {
    pub bytes: u64,
    pub objects: u64,
    pub rows: u64,
}

/// A Parquet file in an object store, read by ranges, counting the bytes
/// it asks for (footer and page index included).
#[derive(Clone)]
struct Counting {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    size: u64,
    bytes: Arc<AtomicU64>,
}

fn parquet_error(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for Counting {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        self.bytes.fetch_add(range.end - range.start, Ordering::Relaxed);
        async move { self.store.get_range(&self.path, range).await.map_err(parquet_error) }.boxed()
    }
    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        self.bytes.fetch_add(ranges.iter().map(|r| r.end - r.start).sum(), Ordering::Relaxed);
        async move { self.store.get_ranges(&self.path, &ranges).await.map_err(parquet_error) }.boxed()
    }
    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            // The page index is what makes the fetch selective: read it when present.
            let reader = ParquetMetaDataReader::new().with_page_index_policy(PageIndexPolicy::Optional);
            Ok(Arc::new(reader.load_and_finish(self, size).await?))
        }
        .boxed()
    }
}

/// A counting reader of the Parquet file at `url`.
async fn open(ctx: &SessionContext, url: &str, bytes: Arc<AtomicU64>) -> Result<Counting> {
    let (store, path) = locate(ctx, url)?;
    Counting::open(store, path, url, bytes).await
}

impl Counting {
    /// A counting reader of the object at `path` (`url`, for messages).
    async fn open(store: Arc<dyn ObjectStore>, path: ObjectPath, url: &str, bytes: Arc<AtomicU64>) -> Result<Counting> {
        let size = store.head(&path).await.map_err(|e| super::store_failure(format!("cannot open '{url}'"), &e))?.size;
        Ok(Counting { store, path, size, bytes })
    }
}

/// Whether the sorted `wanted` holds a value in `[min, max]`.
fn holds_any(wanted: &[u64], min: u64, max: u64) -> bool {
    let i = wanted.partition_point(|&w| w < min);
    i < wanted.len() && wanted[i] <= max
}

/// The rows of row group `rg` to read: the pages of column `col` whose
/// statistics allow one of `wanted` (or a NULL, with `nulls`); the whole
/// row group where the file has no page index.
fn pages_to_read(meta: &ParquetMetaData, rg: usize, col: usize, wanted: &[u64], nulls: bool) -> Vec<RowSelector> {
    let rows = meta.row_group(rg).num_rows() as usize;
    let indexes = meta.column_index().zip(meta.offset_index());
    let Some((ColumnIndexMetaData::INT64(index), offsets)) = indexes.map(|(c, o)| (&c[rg][col], &o[rg][col])) else {
        return vec![RowSelector::select(rows)];
    };
    let starts: Vec<usize> = offsets.page_locations().iter().map(|p| p.first_row_index as usize).collect();
    let mut selectors: Vec<RowSelector> = Vec::new();
    for (p, &start) in starts.iter().enumerate() {
        let end = starts.get(p + 1).copied().unwrap_or(rows);
        // UInt64 is stored as INT64 with unsigned order: the bits are the value.
        let values = match (index.min_value(p), index.max_value(p)) {
            (Some(&min), Some(&max)) => holds_any(wanted, min as u64, max as u64),
            _ => false,
        };
        let has_nulls = index.null_count(p).is_none_or(|n| n > 0);
        let select = values || (nulls && has_nulls);
        match selectors.last_mut() {
            Some(last) if last.skip != select => last.row_count += end - start,
            _ => selectors.push(if select { RowSelector::select(end - start) } else { RowSelector::skip(end - start) }),
        }
    }
    selectors
}

/// Which of the rows with a wanted key a fetch returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Every one.
    All,
    /// Of each key, the first row (in file order) with each value of this
    /// column. A store's files are sorted by fingerprint, then by source and
    /// id, so `FirstPer("run")` is each fingerprint's first document of each
    /// run: all that a night reads of a stored fingerprint, in a third of
    /// the rows of a popular repost's fingerprint (its other copies are
    /// skipped inside their pages, never decoded).
    FirstPer(&'static str),
}

/// Files fetched at once: their pages are decoded in parallel, on every
/// core of the runtime, and read concurrently from an object store.
const FILES_AT_ONCE: usize = 4;

/// The rows of the Parquet `files` whose `column` (UInt64, sorted within
/// each file) is in that file's sorted, distinct `wanted` values, or NULL
/// when its flag says so: `wanted[i]` is for `files[i]`, and a file with
/// nothing wanted is not opened. Returns the rows (in file order), the schema
/// of the files (of the first file opened, or of the last file when none
/// is wanted), and what was read. `take` says which of the wanted rows;
/// the columns named in `leave_out` are neither read nor returned.
pub async fn rows_by_key(
    ctx: &SessionContext,
    files: &[String],
    column: &str,
    wanted: &[(Vec<u64>, bool)],
    take: Take,
    leave_out: &'static [&'static str],
) -> Result<(Vec<RecordBatch>, Option<SchemaRef>, Fetched)> {
    let bytes = Arc::new(AtomicU64::new(0));
    let mut opened: Vec<usize> = (0..files.len()).filter(|&i| !wanted[i].0.is_empty() || wanted[i].1).collect();
    if opened.is_empty() && !files.is_empty() {
        opened.push(files.len() - 1);
    }
    let mut tasks = Vec::with_capacity(opened.len());
    for i in opened {
        // Each file is opened in its task: on an object store the requests
        // for its size overlap too.
        let (store, path) = locate(ctx, &files[i])?;
        let (url, column, wanted, bytes) = (files[i].clone(), column.to_string(), wanted[i].clone(), bytes.clone());
        tasks.push(async move {
            let reader = Counting::open(store, path, &url, bytes).await?;
            file_rows_by_key(reader, url, (column, leave_out), wanted, take).await
        });
    }
    let mut results = futures::stream::iter(tasks.into_iter().map(tokio::spawn)).buffered(FILES_AT_ONCE);
    let mut fetched = Fetched::default();
    let (mut batches, mut schema) = (Vec::new(), None);
    while let Some(result) = results.next().await {
        let (file_schema, kept) = result.map_err(|e| Error::runtime(format!("a fetch task failed: {e}")))??;
        fetched.objects += 1;
        schema.get_or_insert(file_schema);
        fetched.rows += kept.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        batches.extend(kept);
    }
    fetched.bytes = bytes.load(Ordering::Relaxed);
    Ok((batches, schema, fetched))
}

/// The wanted rows of one file (see [`rows_by_key`]), with its schema
/// (without the columns left out).
async fn file_rows_by_key(
    mut reader: Counting,
    url: String,
    (column, leave_out): (String, &[&str]),
    wanted: (Vec<u64>, bool),
    take: Take,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let (wanted, nulls) = (wanted.0.as_slice(), wanted.1);
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
    let metadata = ArrowReaderMetadata::load_async(&mut reader, options)
        .await
        .map_err(|e| Error::input(format!("'{url}' is not a readable Parquet file: {e}")))?;
    let roots: Vec<usize> = (0..metadata.schema().fields().len()).filter(|&c| !leave_out.contains(&metadata.schema().field(c).name().as_str())).collect();
    let schema = Arc::new(metadata.schema().project(&roots)?);
    let meta = metadata.metadata().clone();
    let leaf = |name: &str| {
        let columns = meta.file_metadata().schema_descr().columns();
        columns.iter().position(|c| c.path().string() == name).ok_or_else(|| Error::input(format!("'{url}' has no column '{name}'")))
    };
    let col = leaf(&column)?;
    // The keys are read as UInt64 below (statistics, pages and values): a
    // file rewritten by another tool may hold them signed or as decimals.
    match metadata.schema().field_with_name(&column).map(|f| f.data_type()) {
        Ok(DataType::UInt64) | Err(_) => {}
        Ok(other) => {
            return Err(Error::input(format!(
                "'{url}': column '{column}' holds {other}, not UInt64: the file was not written by neardup, \
                 or rewritten with another type; write it back as UInt64"
            )))
        }
    }
    let (mut groups, mut selectors) = (Vec::new(), Vec::new());
    for rg in 0..meta.num_row_groups() {
        let pages = pages_to_read(&meta, rg, col, wanted, nulls);
        if pages.iter().any(|s| !s.skip) {
            groups.push(rg);
            selectors.extend(pages);
        }
    }
    if groups.is_empty() {
        return Ok((schema, Vec::new()));
    }
    let cannot_read = |e: ParquetError| Error::runtime(format!("cannot read '{url}': {e}"));
    let mut selection = RowSelection::from(selectors);
    let rows = groups.iter().map(|&g| meta.row_group(g).num_rows() as usize).sum();
    if let Take::FirstPer(by) = take {
        let columns = Columns { key: (col, &column), by: (leaf(by)?, by) };
        let within = Within { metadata: by_pages_if_sparse(&metadata, &selection, rows)?, groups: groups.clone(), selection };
        selection = first_per(reader.clone(), within, columns, wanted, nulls).await.map_err(cannot_read)?;
    }
    let projection = ProjectionMask::roots(meta.file_metadata().schema_descr(), roots);
    let metadata = by_pages_if_sparse(&metadata, &selection, rows)?;
    let stream = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
        .with_projection(projection)
        .with_row_groups(groups)
        .with_row_selection(selection)
        .build()
        .map_err(cannot_read)?;
    let read: Vec<RecordBatch> = stream.try_collect().await.map_err(cannot_read)?;
    let mut kept = Vec::new();
    for batch in read {
        let keys = batch.column_by_name(&column).expect("the column was found").as_primitive::<UInt64Type>().clone();
        let keep: BooleanArray = (0..batch.num_rows()).map(|i| Some(is_wanted(&keys, i, wanted, nulls))).collect();
        let batch = filter_record_batch(&batch, &keep)?;
        if batch.num_rows() > 0 {
            kept.push(batch);
        }
    }
    Ok((schema, kept))
}

/// `metadata` as it is (page index included) when `selection` picks few of
/// the `rows` of the chosen row groups, so that the reader fetches and
/// decodes only the pages that hold them; without its page index when it
/// picks many, so that the reader takes each column chunk whole and skips
/// rows as it decodes. Where most pages hold a wanted row (the popular
/// reposts a night of posts touches), reading them one by one saves no
/// bytes, and the reader keeps each page of each column as a buffered range
/// of its own: on the tenth of ten Weibo nights (171,254 rows of 691,227)
/// the read took 0.20–0.22 s by page and 0.15–0.19 s whole.
fn by_pages_if_sparse(metadata: &ArrowReaderMetadata, selection: &RowSelection, rows: usize) -> Result<ArrowReaderMetadata> {
    if selection.row_count().saturating_mul(SPARSE) < rows || metadata.metadata().offset_index().is_none() {
        return Ok(metadata.clone());
    }
    let whole = metadata.metadata().as_ref().clone().into_builder().set_column_index(None).set_offset_index(None).build();
    Ok(ArrowReaderMetadata::try_new(Arc::new(whole), ArrowReaderOptions::new())?)
}

/// A selection of fewer than one row in `SPARSE` is read by page. In pages
/// of 256 rows (crate::storage::sorted), rows picked at random at one in 64
/// leave 2 % of the pages unread, and at one in 256 still 37 %.
const SPARSE: usize = 64;

/// Whether row `i` of `keys` is wanted: its key is in the sorted `wanted`, or it is NULL and `nulls`.
fn is_wanted(keys: &UInt64Array, i: usize, wanted: &[u64], nulls: bool) -> bool {
    match keys.is_null(i) {
        true => nulls,
        false => wanted.binary_search(&keys.value(i)).is_ok(),
    }
}

/// The rows of a file a fetch reads: its chosen row groups, and the rows of
/// them (together, in order) that `selection` selects.
struct Within {
    metadata: ArrowReaderMetadata,
    groups: Vec<usize>,
    selection: RowSelection,
}

/// The key column and the column of [`Take::FirstPer`], as (leaf, name).
struct Columns<'a> {
    key: (usize, &'a str),
    by: (usize, &'a str),
}

/// `within.selection` narrowed to the first row of each wanted key for each
/// value of column `by` (see [`Take::FirstPer`]), found by reading the two
/// columns alone: the bulky columns are then decoded for those rows only.
async fn first_per(reader: Counting, within: Within, columns: Columns<'_>, wanted: &[u64], nulls: bool) -> parquet::errors::Result<RowSelection> {
    let Within { metadata, groups, selection } = within;
    let total = groups.iter().map(|&g| metadata.metadata().row_group(g).num_rows() as usize).sum();
    // The position of each selected row among the chosen row groups' rows.
    let mut positions = Vec::new();
    let mut at = 0;
    for s in selection.iter() {
        if !s.skip {
            positions.extend(at..at + s.row_count);
        }
        at += s.row_count;
    }
    let mask = ProjectionMask::leaves(metadata.metadata().file_metadata().schema_descr(), [columns.key.0, columns.by.0]);
    let mut stream = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
        .with_projection(mask)
        .with_row_groups(groups)
        .with_row_selection(selection)
        .build()?;
    let (mut positions, mut kept) = (positions.into_iter(), Vec::new());
    // The key of the rows in hand, and the values of `by` already taken for it.
    let (mut current, mut taken): (Option<Option<u64>>, Vec<Option<String>>) = (None, Vec::new());
    while let Some(batch) = stream.try_next().await? {
        let column = |name: &str| batch.column_by_name(name).cloned().ok_or_else(|| ParquetError::General(format!("no column '{name}'")));
        let keys = column(columns.key.1)?.as_primitive::<UInt64Type>().clone();
        let by = cast(&column(columns.by.1)?, &DataType::Utf8)?;
        let by = by.as_string::<i32>();
        for i in 0..batch.num_rows() {
            let at = positions.next().ok_or_else(|| ParquetError::General("more rows than selected".into()))?;
            if !is_wanted(&keys, i, wanted, nulls) {
                continue;
            }
            let key = keys.is_valid(i).then(|| keys.value(i));
            if current != Some(key) {
                (current, taken) = (Some(key), Vec::new());
            }
            // Most rows repeat a value already taken: compare before copying it.
            let value = by.is_valid(i).then(|| by.value(i));
            if !taken.iter().any(|t| t.as_deref() == value) {
                taken.push(value.map(str::to_string));
                kept.push(at..at + 1);
            }
        }
    }
    Ok(RowSelection::from_consecutive_ranges(kept.into_iter(), total))
}

/// Rows and bytes of one Parquet file, from its footer.
pub async fn file_rows(ctx: &SessionContext, url: &str) -> Result<(u64, u64)> {
    let mut reader = open(ctx, url, Arc::new(AtomicU64::new(0))).await?;
    let size = reader.size;
    let meta = reader
        .get_metadata(None)
        .await
        .map_err(|e| Error::input(format!("'{url}' is not a readable Parquet file: {e}")))?;
    Ok((meta.file_metadata().num_rows() as u64, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_lookups() {
        assert!(holds_any(&[3, 9, 20], 4, 9));
        assert!(!holds_any(&[3, 9, 20], 10, 19));
        assert!(holds_any(&[u64::MAX], 1 << 63, u64::MAX));
        assert!(!holds_any(&[], 0, u64::MAX));
    }

    /// A segment-like file: sorted by fingerprint, then id, with the rows of
    /// two runs interleaved, in pages of two rows.
    fn segment(dir: &std::path::Path) -> String {
        use datafusion::arrow::array::{ArrayRef, StringArray};
        use datafusion::arrow::datatypes::{Field, Schema};
        let rows: [(u64, &str, &str); 7] = [(1, "a", "1"), (2, "b", "2"), (2, "a", "3"), (2, "b", "4"), (2, "a", "5"), (5, "a", "6"), (5, "a", "7")];
        let schema = Arc::new(Schema::new(vec![
            Field::new("simhash", DataType::UInt64, true),
            Field::new("run", DataType::Utf8, false),
            Field::new("id", DataType::Utf8, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
        ];
        write(&dir.join("segment.parquet"), RecordBatch::try_new(schema, columns).unwrap(), 2)
    }

    /// `batch` written to `path` in pages of `page_rows` rows, with a page index.
    fn write(path: &std::path::Path, batch: RecordBatch, page_rows: usize) -> String {
        let props = parquet::file::properties::WriterProperties::builder().set_data_page_row_count_limit(page_rows).set_write_batch_size(page_rows).build();
        let mut writer = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        path.to_str().unwrap().to_string()
    }

    fn ids(batches: &[RecordBatch]) -> Vec<String> {
        batches.iter().flat_map(|b| b.column_by_name("id").unwrap().as_string::<i32>().iter().map(|v| v.unwrap().to_string()).collect::<Vec<_>>()).collect()
    }

    #[tokio::test]
    async fn first_per_run_takes_each_keys_first_row_of_each_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = segment(dir.path());
        let ctx = SessionContext::new();
        let wanted = [(vec![2, 5], false)];
        let (all, _, _) = rows_by_key(&ctx, std::slice::from_ref(&file), "simhash", &wanted, Take::All, &[]).await.unwrap();
        assert_eq!(ids(&all), ["2", "3", "4", "5", "6", "7"]);
        let (first, _, fetched) = rows_by_key(&ctx, &[file], "simhash", &wanted, Take::FirstPer("run"), &[]).await.unwrap();
        assert_eq!(ids(&first), ["2", "3", "6"]);
        assert_eq!(fetched.rows, 3);
    }

    /// A file of fingerprints 0..n, each with its number as id, written as
    /// the store writes its files (pages of 256 rows).
    fn numbered(dir: &std::path::Path, n: u64) -> String {
        use datafusion::arrow::array::{ArrayRef, StringArray};
        use datafusion::arrow::datatypes::{Field, Schema};
        let schema = Arc::new(Schema::new(vec![Field::new("simhash", DataType::UInt64, true), Field::new("id", DataType::Utf8, false)]));
        let columns: Vec<ArrayRef> =
            vec![Arc::new(UInt64Array::from_iter_values(0..n)), Arc::new(StringArray::from_iter_values((0..n).map(|i| i.to_string())))];
        let path = dir.join("numbered.parquet");
        let mut writer = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema.clone(), Some(crate::storage::sorted::writer_properties())).unwrap();
        writer.write(&RecordBatch::try_new(schema, columns).unwrap()).unwrap();
        writer.close().unwrap();
        path.to_str().unwrap().to_string()
    }

    #[tokio::test]
    async fn keys_of_another_type_are_refused_by_name() {
        use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
        use datafusion::arrow::datatypes::{Field, Schema};
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("simhash", DataType::Int64, true), Field::new("id", DataType::Utf8, false)]));
        let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![-1, 5])), Arc::new(StringArray::from(vec!["a", "b"]))];
        let file = write(&dir.path().join("signed.parquet"), RecordBatch::try_new(schema, columns).unwrap(), 256);
        let ctx = SessionContext::new();
        for take in [Take::All, Take::FirstPer("id")] {
            let err = rows_by_key(&ctx, std::slice::from_ref(&file), "simhash", &[(vec![5], false)], take, &[]).await.unwrap_err().to_string();
            assert!(err.contains("signed.parquet': column 'simhash' holds Int64, not UInt64"), "{err}");
        }
    }

    #[tokio::test]
    async fn sparse_fetches_read_by_page_and_dense_ones_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = numbered(dir.path(), 65_536);
        let ctx = SessionContext::new();
        let fetch = |wanted: Vec<u64>| {
            let (ctx, file) = (ctx.clone(), file.clone());
            async move {
                let (rows, _, fetched) = rows_by_key(&ctx, &[file], "simhash", &[(wanted, false)], Take::All, &[]).await.unwrap();
                (ids(&rows), fetched.bytes)
            }
        };
        let sparse: Vec<u64> = vec![5, 30_000];
        let dense: Vec<u64> = (0..65_536).step_by(7).collect();
        // Two rows are read by page, one in seven with whole column chunks
        // (see the choice below): both give exactly the wanted rows, and the
        // pages are a small part of the whole chunks' bytes.
        let names = |keys: &[u64]| keys.iter().map(u64::to_string).collect::<Vec<_>>();
        let ((sparse_rows, sparse_bytes), (dense_rows, dense_bytes)) = (fetch(sparse.clone()).await, fetch(dense.clone()).await);
        assert_eq!((sparse_rows, dense_rows), (names(&sparse), names(&dense)));
        // (A file as the store writes it: 163,186 bytes, of which the footer and
        // page index are 16,182 and the id column's dictionary page, which
        // any page of that column needs, most of the rest of the sparse read.)
        assert!(sparse_bytes * 3 < dense_bytes, "by page {sparse_bytes} bytes, whole {dense_bytes}");

        let meta = ArrowReaderMetadata::load(&std::fs::File::open(&file).unwrap(), ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional)).unwrap();
        let picks = |rows: usize| RowSelection::from(vec![RowSelector::select(rows), RowSelector::skip(65_536 - rows)]);
        assert!(by_pages_if_sparse(&meta, &picks(65_536 / SPARSE - 1), 65_536).unwrap().metadata().offset_index().is_some());
        assert!(by_pages_if_sparse(&meta, &picks(65_536 / SPARSE), 65_536).unwrap().metadata().offset_index().is_none());
    }

    #[tokio::test]
    async fn columns_left_out_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = segment(dir.path());
        let ctx = SessionContext::new();
        let wanted = [(vec![2, 5], false)];
        let (all, schema, whole) = rows_by_key(&ctx, std::slice::from_ref(&file), "simhash", &wanted, Take::FirstPer("run"), &[]).await.unwrap();
        let (some, narrow, fewer) = rows_by_key(&ctx, &[file], "simhash", &wanted, Take::FirstPer("run"), &["id"]).await.unwrap();
        let names = |s: &SchemaRef| s.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>();
        assert_eq!((names(&schema.unwrap()), names(&narrow.unwrap())), (vec!["simhash".to_string(), "run".into(), "id".into()], vec!["simhash".to_string(), "run".into()]));
        assert!(some.iter().all(|b| b.num_columns() == 2));
        assert_eq!(fewer.rows, whole.rows);
        assert!(fewer.bytes < whole.bytes, "{} bytes with the column, {} without", whole.bytes, fewer.bytes);
        assert_eq!(all.iter().map(|b| b.column(0).clone()).collect::<Vec<_>>(), some.iter().map(|b| b.column(0).clone()).collect::<Vec<_>>());
    }
}
