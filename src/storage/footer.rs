//! One footer for every table neardup writes, whichever engine wrote it.
//!
//! `COPY … TO` writes the rows, and the footer then depends on the engine:
//! an embedded run records the sort order of the rows (sorting columns) and
//! the `format.metadata::…` options, while a Ballista 55 cluster run drops
//! both on the way to the executors (DataFusion's plan serialisation does not
//! carry them). So neardup writes its tables without them and then rewrites
//! each footer here: the column chunks are copied byte for byte (nothing is
//! decoded), the original key-value metadata is kept, and neardup's entry is
//! added. Embedded and cluster runs thus give identical files.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::parquet::column::writer::ColumnCloseResult;
use datafusion::parquet::errors::Result as ParquetResult;
use datafusion::parquet::file::metadata::{KeyValue, PageIndexPolicy, ParquetMetaDataReader};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::file::reader::{ChunkReader, Length};
use datafusion::parquet::file::writer::SerializedFileWriter;
use datafusion::prelude::SessionContext;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};

/// `file` with key-value metadata `entry` = (key, value) added (replacing an
/// earlier value of the key) and no sorting columns; rows, pages and page
/// indexes unchanged.
pub fn rewrite(file: &Bytes, entry: Option<(&str, &str)>) -> ParquetResult<Vec<u8>> {
    let mut out = Vec::with_capacity(file.len() + entry.map_or(0, |(_, v)| v.len()) + 256);
    rewrite_into(file, entry, &mut out)?;
    Ok(out)
}

/// [`rewrite`] of the file `file` reads, into `out`.
fn rewrite_into<R: ChunkReader, W: Write + Send>(file: &R, entry: Option<(&str, &str)>, out: W) -> ParquetResult<()> {
    let metadata = ParquetMetaDataReader::new().with_page_index_policy(PageIndexPolicy::Optional).parse_and_finish(file)?;
    let file_metadata = metadata.file_metadata();
    let replaced = entry.map(|(key, _)| key);
    let mut key_values: Vec<KeyValue> =
        file_metadata.key_value_metadata().into_iter().flatten().filter(|kv| Some(kv.key.as_str()) != replaced).cloned().collect();
    if let Some((key, value)) = entry {
        key_values.push(KeyValue::new(key.to_string(), value.to_string()));
    }
    let mut properties = WriterProperties::builder().set_key_value_metadata(Some(key_values));
    if let Some(created_by) = file_metadata.created_by() {
        properties = properties.set_created_by(created_by.to_string());
    }
    let schema = file_metadata.schema_descr().root_schema_ptr();
    let mut writer = SerializedFileWriter::new(out, schema, Arc::new(properties.build()))?;
    for (g, group) in metadata.row_groups().iter().enumerate() {
        let mut group_writer = writer.next_row_group()?;
        for (c, column) in group.columns().iter().enumerate() {
            // neardup's COPY statements write no bloom filters; a chunk is copied with its page indexes.
            let column_index = metadata.column_index().and_then(|i| i.get(g)).and_then(|r| r.get(c)).cloned();
            let offset_index = metadata.offset_index().and_then(|i| i.get(g)).and_then(|r| r.get(c)).cloned();
            let chunk = ColumnCloseResult {
                bytes_written: column.compressed_size() as u64,
                rows_written: group.num_rows() as u64,
                metadata: column.clone(),
                bloom_filter: None,
                column_index,
                offset_index,
            };
            group_writer.append_column(file, chunk)?;
        }
        group_writer.close()?;
    }
    writer.close()?;
    Ok(())
}

/// A local Parquet file as [`rewrite`] reads it, for [`rewrite_in_place`]:
/// the bytes from `data_end` on (page indexes and footer) as they are, and
/// zeros before. The rewrite copies the column chunks, which end at
/// `data_end`, without looking at them, and the zeros it writes in their
/// place are never kept.
struct Sparse {
    data_end: u64,
    tail: Bytes,
}

impl Length for Sparse {
    fn len(&self) -> u64 {
        self.data_end + self.tail.len() as u64
    }
}

impl ChunkReader for Sparse {
    type T = std::io::Chain<std::io::Take<std::io::Repeat>, std::io::Cursor<Bytes>>;

    fn get_read(&self, start: u64) -> ParquetResult<Self::T> {
        let zeros = self.data_end.saturating_sub(start);
        let from = start.saturating_sub(self.data_end).min(self.tail.len() as u64) as usize;
        Ok(std::io::repeat(0).take(zeros).chain(std::io::Cursor::new(self.tail.slice(from..))))
    }

    fn get_bytes(&self, start: u64, length: usize) -> ParquetResult<Bytes> {
        let mut bytes = Vec::with_capacity(length);
        self.get_read(start)?.take(length as u64).read_to_end(&mut bytes)?;
        Ok(bytes.into())
    }
}

/// The bytes written from position `keep_from` on.
struct Tail {
    at: u64,
    keep_from: u64,
    kept: Vec<u8>,
}

impl Write for Tail {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let end = self.at + buf.len() as u64;
        if end > self.keep_from {
            let skip = self.keep_from.saturating_sub(self.at) as usize;
            self.kept.extend_from_slice(&buf[skip..]);
        }
        self.at = end;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// [`rewrite`] of the local file at `path`, in place: the column chunks are
/// left where they are and only what follows them (page indexes and footer)
/// is replaced, so a table of 150 MB costs its footer, not a copy. Returns
/// false, changing nothing, when the chunks are not back to back from the
/// start of the file, as [`rewrite`] would lay them out. Not atomic: it is
/// for files in a staging folder, which a failed run removes.
pub fn rewrite_in_place(path: &Path, entry: Option<(&str, &str)>) -> ParquetResult<bool> {
    let mut file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    let read_at = |file: &mut std::fs::File, start: u64, n: usize| -> ParquetResult<Vec<u8>> {
        let mut buf = vec![0; n];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        Ok(buf)
    };
    if len < 12 {
        return Ok(false);
    }
    let end = read_at(&mut file, len - 8, 8)?;
    let footer_len = u64::from(u32::from_le_bytes(end[..4].try_into().expect("four bytes")));
    let Some(footer_start) = (len - 8).checked_sub(footer_len) else { return Ok(false) };
    let metadata = ParquetMetaDataReader::decode_metadata(&read_at(&mut file, footer_start, footer_len as usize)?)?;
    // The chunks, in file order, must start right after the magic bytes and
    // follow one another; the page indexes (if any) and the footer follow them.
    let mut data_end = 4u64;
    for column in metadata.row_groups().iter().flat_map(|g| g.columns()) {
        let start = column.dictionary_page_offset().unwrap_or_else(|| column.data_page_offset());
        if start as u64 != data_end {
            return Ok(false);
        }
        data_end += column.compressed_size() as u64;
    }
    let indexes = metadata.row_groups().iter().flat_map(|g| g.columns()).flat_map(|c| [c.column_index_offset(), c.offset_index_offset()]);
    if indexes.flatten().any(|offset| (offset as u64) < data_end) || footer_start < data_end {
        return Ok(false);
    }
    let tail = Bytes::from(read_at(&mut file, data_end, (len - data_end) as usize)?);
    let mut out = Tail { at: 0, keep_from: data_end, kept: Vec::new() };
    rewrite_into(&Sparse { data_end, tail }, entry, &mut out)?;
    file.set_len(data_end)?;
    file.seek(SeekFrom::Start(data_end))?;
    file.write_all(&out.kept)?;
    Ok(true)
}

/// Rewrite the footer of the Parquet file at `url` (any store), adding
/// `entry`; see [`rewrite`].
pub async fn rewrite_footer(ctx: &SessionContext, url: &str, entry: Option<(&str, &str)>) -> Result<()> {
    let failed = |e: datafusion::parquet::errors::ParquetError| Error::runtime(format!("cannot rewrite the footer of '{url}': {e}"));
    if let Some(path) = super::local_path(url) {
        if rewrite_in_place(&path, entry).map_err(failed)? {
            return Ok(());
        }
    }
    let file = super::read_object(ctx, url).await?;
    let rewritten = rewrite(&file, entry).map_err(|e| Error::runtime(format!("cannot rewrite the footer of '{url}': {e}")))?;
    let (store, path) = super::locate(ctx, url)?;
    store.put(&path, rewritten.into()).await.map_err(|e| Error::runtime(format!("cannot write '{url}': {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::EnabledStatistics;

    #[test]
    fn rows_stay_and_the_key_is_added() {
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from_iter_values(0..5000)) as _),
            ("text", Arc::new(StringArray::from_iter_values((0..5000).map(|i| format!("文本 {}", i % 97)))) as _),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(2000))
            .set_data_page_row_count_limit(300)
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_key_value_metadata(Some(vec![KeyValue::new("keep".into(), "me".to_string()), KeyValue::new("k".into(), "old".to_string())]))
            .build();
        let mut original = Vec::new();
        let mut w = ArrowWriter::try_new(&mut original, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let original = Bytes::from(original);

        let once = Bytes::from(rewrite(&original, Some(("k", "{\"v\":1}"))).unwrap());
        let reader = ParquetRecordBatchReaderBuilder::try_new(once.clone()).unwrap();
        let kv = reader.metadata().file_metadata().key_value_metadata().unwrap().clone();
        let pairs: Vec<(String, Option<String>)> = kv.into_iter().map(|kv| (kv.key, kv.value)).filter(|(k, _)| k != "ARROW:schema").collect();
        assert_eq!(pairs, vec![("keep".into(), Some("me".into())), ("k".into(), Some("{\"v\":1}".into()))]);
        assert_eq!(reader.metadata().num_row_groups(), 3);
        let rows: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(datafusion::arrow::compute::concat_batches(&batch.schema(), &rows).unwrap(), batch);
        // Page indexes survive, and a second rewrite with the same value is a fixed point.
        let metadata = ParquetMetaDataReader::new().with_page_index_policy(PageIndexPolicy::Required).parse_and_finish(&once).unwrap();
        assert!(metadata.offset_index().is_some_and(|o| o[0][0].page_locations().len() > 1));
        assert_eq!(rewrite(&once, Some(("k", "{\"v\":1}"))).unwrap(), once.to_vec());
        // In place, a local file becomes the same bytes.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        std::fs::write(&path, &original).unwrap();
        assert!(rewrite_in_place(&path, Some(("k", "{\"v\":1}"))).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), once.to_vec());
        // With bloom filters among the chunks, in place or not, the bytes of a full rewrite.
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(2000)).set_bloom_filter_enabled(true).build();
        let mut bloomed = Vec::new();
        let mut w = ArrowWriter::try_new(&mut bloomed, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        std::fs::write(&path, &bloomed).unwrap();
        let in_place = rewrite_in_place(&path, Some(("k", "x"))).unwrap();
        let expected = if in_place { rewrite(&Bytes::from(bloomed), Some(("k", "x"))).unwrap() } else { bloomed };
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        let plain = rewrite(&original, None).unwrap();
        let kv = ParquetMetaDataReader::new().parse_and_finish(&Bytes::from(plain)).unwrap().file_metadata().key_value_metadata().unwrap().len();
        assert_eq!(kv, 3, "ARROW:schema, keep, k");
    }
}
