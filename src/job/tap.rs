//! A pass-through node of a physical plan that keeps a copy of every batch
//! its input gives: put under a `COPY`'s sink, the statement writes its file
//! as it always does, streaming, and the client keeps the rows it wrote
//! (`query::copy_and_hold`).

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr, PlanProperties, ReplaceChildrenOptions};
use futures::StreamExt;

/// The node: its input's properties, its input's batches, each also kept.
#[derive(Debug)]
pub(super) struct Tap {
    input: Arc<dyn ExecutionPlan>,
    kept: Arc<Mutex<Vec<RecordBatch>>>,
}

impl Tap {
    pub(super) fn new(input: Arc<dyn ExecutionPlan>) -> Tap {
        Tap { input, kept: Default::default() }
    }

    /// The batches kept so far, in the order they passed, taken out.
    pub(super) fn take(&self) -> Vec<RecordBatch> {
        std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl DisplayAs for Tap {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Tap: the rows kept by the client")
    }
}

impl ExecutionPlan for Tap {
    fn name(&self) -> &str {
        "Tap"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(&self, _: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>, _: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([input]) => Ok(Arc::new(Tap { input, kept: self.kept.clone() })),
            Err(_) => internal_err!("a tap has one input"),
        }
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        // One partition, whose batches then come in one order.
        if self.input.output_partitioning().partition_count() != 1 {
            return internal_err!("a tap keeps the batches of one partition");
        }
        let stream = self.input.execute(partition, context)?;
        let kept = self.kept.clone();
        let tapped = stream.inspect(move |batch| {
            if let Ok(batch) = batch {
                kept.lock().unwrap_or_else(|e| e.into_inner()).push(batch.clone());
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.input.schema(), tapped)))
    }
}
