//! The store's run and segment files, written by this process from a
//! query's sorted stream with fixed writer settings.
//!
//! A night fetches stored rows page by page, so these files must have small
//! pages with a page index, whatever engine computed them: the cluster's
//! executors do not receive a COPY statement's own writer options. Written
//! here, a run file is the same bytes embedded and on a cluster.

use datafusion::arrow::compute::concat_batches;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use object_store::buffered::BufWriter;
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::locate;
use crate::error::{Error, Result};

/// Rows per row group and per page of a store file.
pub const ROW_GROUP_ROWS: usize = 65_536;
pub const PAGE_ROWS: usize = 256;

/// The writer settings of every store file (also used by the store
/// benchmark's generator, so that its segments are the bytes of real ones).
pub fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_write_batch_size(PAGE_ROWS)
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("a valid zstd level")))
        // Every night reads these two columns of every stored row (the
        // probe); their bytes are most of what a night reads. MinHash keys
        // are packed, six bytes a key in one binary value a row
        // (crate::minhash::pack_keys): a dictionary would only fill up with
        // unique keys and be dropped, and zstd finds the rows that repeat.
        // Fingerprints are sorted: their deltas take about 44 of 64 bits at
        // 10^6 rows a file.
        .set_column_dictionary_enabled(ColumnPath::from("minhash"), false)
        .set_column_dictionary_enabled(ColumnPath::from("simhash"), false)
        .set_column_encoding(ColumnPath::from("simhash"), Encoding::DELTA_BINARY_PACKED)
        .build()
}

/// Run `statement` (a query with an ORDER BY) and write its rows, in order,
/// as one Parquet file at `url`; returns the rows written.
pub async fn write_query(ctx: &SessionContext, statement: &str, url: &str) -> Result<u64> {
    let started = std::time::Instant::now();
    let df = crate::statement::sql(ctx, statement).await?;
    let mut stream = df.execute_stream().await?;
    let schema = stream.schema();
    if let Some(dir) = super::local_path(url).and_then(|p| p.parent().map(|p| p.to_path_buf())) {
        std::fs::create_dir_all(dir)?;
    }
    let (store, path) = locate(ctx, url)?;
    let failed = |e: parquet::errors::ParquetError| Error::runtime(format!("cannot write '{url}': {e}"));
    let mut writer =
        AsyncArrowWriter::try_new(BufWriter::new(store, path), schema.clone(), Some(writer_properties())).map_err(failed)?;
    // Pages are cut between the writer's mini-batches: hand it batches of
    // exactly PAGE_ROWS rows, so that the pages do not depend on how the
    // engine happened to batch the stream.
    let (mut rows, mut pending, mut pending_rows) = (0, Vec::new(), 0);
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        pending_rows += batch.num_rows();
        pending.push(batch);
        if pending_rows >= PAGE_ROWS {
            let all = concat_batches(&schema, &pending)?;
            let whole = all.num_rows() / PAGE_ROWS * PAGE_ROWS;
            for start in (0..whole).step_by(PAGE_ROWS) {
                writer.write(&all.slice(start, PAGE_ROWS)).await.map_err(failed)?;
            }
            pending = vec![all.slice(whole, all.num_rows() - whole)];
            pending_rows = all.num_rows() - whole;
        }
    }
    if pending_rows > 0 {
        writer.write(&concat_batches(&schema, &pending)?).await.map_err(failed)?;
    }
    writer.close().await.map_err(failed)?;
    // The statement log (crate::job::query) does not see this statement:
    // its stream is written here.
    log::debug!("{:>6} ms  sorted file: {rows} rows computed and written", started.elapsed().as_millis());
    Ok(rows)
}
