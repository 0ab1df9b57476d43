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

use std::sync::Arc;

use bytes::Bytes;
use datafusion::parquet::column::writer::ColumnCloseResult;
use datafusion::parquet::errors::Result as ParquetResult;
use datafusion::parquet::file::metadata::{KeyValue, PageIndexPolicy, ParquetMetaDataReader};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::file::writer::SerializedFileWriter;
use datafusion::prelude::SessionContext;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};

/// `file` with key-value metadata `entry` = (key, value) added (replacing an
/// earlier value of the key) and no sorting columns; rows, pages and page
/// indexes unchanged.
pub fn rewrite(file: &Bytes, entry: Option<(&str, &str)>) -> ParquetResult<Vec<u8>> {
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
    let mut out = Vec::with_capacity(file.len() + entry.map_or(0, |(_, v)| v.len()) + 256);
    let schema = file_metadata.schema_descr().root_schema_ptr();
    let mut writer = SerializedFileWriter::new(&mut out, schema, Arc::new(properties.build()))?;
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
    Ok(out)
}

/// Rewrite the footer of the Parquet file at `url` (any store), adding
/// `entry`; see [`rewrite`].
pub async fn rewrite_footer(ctx: &SessionContext, url: &str, entry: Option<(&str, &str)>) -> Result<()> {
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
        let plain = rewrite(&original, None).unwrap();
        let kv = ParquetMetaDataReader::new().parse_and_finish(&Bytes::from(plain)).unwrap().file_metadata().key_value_metadata().unwrap().len();
        assert_eq!(kv, 3, "ARROW:schema, keep, k");
    }
}
