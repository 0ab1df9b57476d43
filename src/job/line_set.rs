//! A frozen set of boilerplate lines: the hashes of the lines that
//! `sql/15_boilerplate_lines.sql` found, as a small Parquet file (one
//! `line_hash` column, sorted). A store writes the set of its first night
//! to `idf/boilerplate.parquet`, beside its frozen IDF model, and every
//! later night drops those lines instead of counting its own: the line set
//! depends on the corpus, like document frequencies, and nights must
//! fingerprint alike. `--boilerplate-set FILE` gives a one-shot run the
//! same set.

use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::{Array, AsArray, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, UInt64Type};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;

use crate::error::{Error, Result};

/// The column a line set's file holds.
const COLUMN: &str = "line_hash";

/// A run's boilerplate lines, with the bytes of their file and its
/// identity, made once: segmentation reads the hashes, the footers record
/// the identity, and a new store writes the bytes.
pub struct LineSet {
    pub hashes: Vec<u64>,
    /// The file's bytes: as read, or [`encode`]d from counted hashes.
    pub bytes: Bytes,
    /// `xxh3:<digest>` of `bytes`, as a store's manifest and the footers
    /// record it.
    pub identity: String,
}

impl LineSet {
    /// The set of lines a run counted.
    pub fn counted(hashes: Vec<u64>) -> Result<LineSet> {
        let bytes = Bytes::from(encode(&hashes)?);
        Ok(LineSet::of(hashes, bytes))
    }

    /// The set in the file `bytes` read from `url` (see [`decode`]).
    pub fn read(bytes: Bytes, url: &str) -> Result<LineSet> {
        Ok(LineSet::of(decode(bytes.clone(), url)?, bytes))
    }

    fn of(hashes: Vec<u64>, bytes: Bytes) -> LineSet {
        LineSet { identity: super::summary::content_identity(&bytes), hashes, bytes }
    }
}

/// The bytes of a line-set file holding `hashes` (sorted, without repeats).
pub fn encode(hashes: &[u64]) -> Result<Vec<u8>> {
    let mut sorted = hashes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let schema = Arc::new(Schema::new(vec![Field::new(COLUMN, DataType::UInt64, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(UInt64Array::from(sorted))])?;
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, schema, None)?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(bytes)
}

/// The hashes of the line-set file `bytes`, read from `url` (named in the
/// errors: a file that is not Parquet, or has no UInt64 `line_hash`).
pub fn decode(bytes: Bytes, url: &str) -> Result<Vec<u64>> {
    let not_a_set = |why: String| Error::input(format!("boilerplate line set '{url}' {why}: give a store's idf/boilerplate.parquet"));
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| not_a_set(format!("is not Parquet ({e})")))?;
    let mut hashes = Vec::new();
    for batch in reader.build().map_err(|e| not_a_set(format!("cannot be read ({e})")))? {
        let batch = batch.map_err(|e| not_a_set(format!("cannot be read ({e})")))?;
        let column = batch.column_by_name(COLUMN).ok_or_else(|| not_a_set(format!("has no column '{COLUMN}'")))?;
        let values = column.as_primitive_opt::<UInt64Type>().ok_or_else(|| not_a_set(format!("has a '{COLUMN}' that is not UInt64")))?;
        if values.null_count() > 0 {
            return Err(not_a_set(format!("has NULL values in '{COLUMN}'")));
        }
        hashes.extend_from_slice(values.values());
    }
    Ok(hashes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_reads_back_sorted_and_without_repeats() {
        let bytes = encode(&[9, 3, 9, 1]).unwrap();
        assert_eq!(decode(Bytes::from(bytes.clone()), "set.parquet").unwrap(), [1, 3, 9]);
        // The same set gives the same bytes: its identity is recorded, and
        // reading the file back gives the identity counting gave.
        assert_eq!(encode(&[1, 3, 9]).unwrap(), bytes);
        let counted = LineSet::counted(vec![1, 3, 9]).unwrap();
        assert_eq!(LineSet::read(counted.bytes.clone(), "set.parquet").unwrap().identity, counted.identity);
    }

    #[test]
    fn a_file_that_is_no_set_is_named() {
        let e = decode(Bytes::from_static(b"not parquet"), "x.parquet").unwrap_err().to_string();
        assert!(e.contains("'x.parquet' is not Parquet"), "{e}");
        let schema = Arc::new(Schema::new(vec![Field::new("hash", DataType::UInt64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(UInt64Array::from(vec![1u64]))]).unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let e = decode(Bytes::from(bytes), "y.parquet").unwrap_err().to_string();
        assert!(e.contains("'y.parquet' has no column 'line_hash'"), "{e}");
    }
}
