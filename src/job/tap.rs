//! A stage of a pass-through node (pass_through.rs) that keeps a copy of
//! every batch its input gives: put under a `COPY`'s sink, the statement
//! writes its file as it always does, streaming, and the client keeps the
//! rows it wrote (`query::copy_and_hold`).

use std::sync::Mutex;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::{internal_err, Result};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;

use super::pass_through::Stage;

/// The batches kept, in the order they passed.
#[derive(Debug, Default)]
pub(super) struct Tap {
    kept: std::sync::Arc<Mutex<Vec<RecordBatch>>>,
}

impl Tap {
    /// The batches kept so far, in the order they passed, taken out.
    pub(super) fn take(&self) -> Vec<RecordBatch> {
        std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Stage for Tap {
    const NAME: &'static str = "Tap";

    fn describe(&self) -> String {
        "the rows kept by the client".into()
    }

    fn stream(&self, input: SendableRecordBatchStream, partitions: usize) -> Result<SendableRecordBatchStream> {
        // One partition, whose batches then come in one order.
        if partitions != 1 {
            return internal_err!("a tap keeps the batches of one partition");
        }
        let schema = input.schema();
        let kept = self.kept.clone();
        let tapped = input.inspect(move |batch| {
            if let Ok(batch) = batch {
                kept.lock().unwrap_or_else(|e| e.into_inner()).push(batch.clone());
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, tapped)))
    }
}
