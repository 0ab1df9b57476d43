//! A stage of a pass-through node (pass_through.rs) that hands its parent
//! batches of exactly `rows` rows (the last may be shorter), whatever sizes
//! its input gives: put under a Parquet sink, it makes the file's pages
//! independent of how the engine happened to batch the rows.
//!
//! The Parquet writer cuts a page, and falls back from a dictionary,
//! between the mini-batches it splits each given batch into, and those start
//! at every batch. A `COPY` over two or more partitions ends in a merge that
//! gives batches of exactly the session's size; over one, the sink read the
//! work table's batches as segmentation made them, and `--target-partitions
//! 1` wrote the same rows in other pages (Weibo's `fingerprints/` and
//! `clusters/`). DataFusion's own coalescing passes batches of more than
//! half its target through, so it cannot make them whole.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{stream, StreamExt};

use super::pass_through::Stage;

/// The stage: batches of `rows` rows.
#[derive(Debug)]
pub(super) struct WholeBatches {
    rows: usize,
}

impl WholeBatches {
    pub(super) fn new(rows: usize) -> WholeBatches {
        WholeBatches { rows: rows.max(1) }
    }
}

impl Stage for WholeBatches {
    const NAME: &'static str = "WholeBatches";

    fn describe(&self) -> String {
        format!("rows={}", self.rows)
    }

    fn stream(&self, input: SendableRecordBatchStream, _: usize) -> Result<SendableRecordBatchStream> {
        let schema = input.schema();
        let mut cut = Cutter::new(schema.clone(), self.rows);
        // Each input batch gives the whole batches it completes; the end of
        // the input gives the rest.
        let whole = input
            .map(Some)
            .chain(stream::once(async { None }))
            .flat_map(move |batch| {
                let out: Vec<Result<RecordBatch>> = match batch.map(|b| b.and_then(|b| cut.push(b))) {
                    Some(Ok(whole)) => whole.into_iter().map(Ok).collect(),
                    Some(Err(e)) => vec![Err(e)],
                    None => cut.finish().transpose().into_iter().collect(),
                };
                stream::iter(out)
            });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, whole)))
    }
}

/// Batches cut to `rows` rows: slices of the batches given where a whole
/// batch lies within one (no copy), joined only where one spans two.
struct Cutter {
    schema: SchemaRef,
    rows: usize,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
}

impl Cutter {
    fn new(schema: SchemaRef, rows: usize) -> Cutter {
        Cutter { schema, rows, pending: Vec::new(), pending_rows: 0 }
    }

    /// The whole batches `batch` completes; its rest is kept.
    fn push(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let mut start = 0;
        if self.pending_rows > 0 {
            let needed = (self.rows - self.pending_rows).min(batch.num_rows());
            self.pending.push(batch.slice(0, needed));
            self.pending_rows += needed;
            start = needed;
            if self.pending_rows < self.rows {
                return Ok(out);
            }
            out.push(self.take_pending()?);
        }
        while batch.num_rows() - start >= self.rows {
            out.push(batch.slice(start, self.rows));
            start += self.rows;
        }
        if start < batch.num_rows() {
            self.pending_rows = batch.num_rows() - start;
            self.pending.push(batch.slice(start, self.pending_rows));
        }
        Ok(out)
    }

    /// What is left, as one last batch (none when nothing is).
    fn finish(&mut self) -> Result<Option<RecordBatch>> {
        match self.pending_rows {
            0 => Ok(None),
            _ => self.take_pending().map(Some),
        }
    }

    fn take_pending(&mut self) -> Result<RecordBatch> {
        let joined = match self.pending.len() {
            1 => self.pending.pop().expect("one pending batch"),
            _ => concat_batches(&self.schema, &self.pending)?,
        };
        self.pending.clear();
        self.pending_rows = 0;
        Ok(joined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use datafusion::arrow::array::{Array, UInt64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn batch(schema: &SchemaRef, values: std::ops::Range<u64>) -> RecordBatch {
        RecordBatch::try_new(schema.clone(), vec![Arc::new(UInt64Array::from_iter_values(values))]).unwrap()
    }

    #[test]
    fn any_batches_come_out_whole_and_in_order() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("v", DataType::UInt64, false)]));
        for sizes in [vec![10], vec![3, 3, 3, 1], vec![1, 9, 4, 4, 2], vec![25], vec![4, 0, 7, 0], vec![]] {
            let mut cut = Cutter::new(schema.clone(), 4);
            let (mut out, mut next) = (Vec::new(), 0);
            for n in &sizes {
                out.extend(cut.push(batch(&schema, next..next + n)).unwrap());
                next += n;
            }
            out.extend(cut.finish().unwrap());
            let lengths: Vec<usize> = out.iter().map(RecordBatch::num_rows).collect();
            let total = next as usize;
            let expected: Vec<usize> = (0..total.div_ceil(4)).map(|i| (total - 4 * i).min(4)).collect();
            assert_eq!(lengths, expected, "{sizes:?}");
            let values: Vec<u64> = out.iter().flat_map(|b| b.column(0).as_any().downcast_ref::<UInt64Array>().unwrap().values().to_vec()).collect();
            assert_eq!(values, (0..next).collect::<Vec<_>>(), "{sizes:?}");
        }
    }
}
