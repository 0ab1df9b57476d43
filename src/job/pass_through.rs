//! A pass-through node of a physical plan: its input's properties, order and
//! rows, each partition's stream handed through a [`Stage`] on its way up.
//! The client puts one under a `COPY`'s sink to keep the rows it writes
//! (tap.rs) or to give the writer whole batches (whole_batches.rs).

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PhysicalExpr, PlanProperties, ReplaceChildrenOptions};

/// What a [`PassThrough`] does to each partition's stream.
pub(super) trait Stage: fmt::Debug + Send + Sync + 'static {
    /// The node's name in a plan.
    const NAME: &'static str;
    /// The node's line in a plan, after its name.
    fn describe(&self) -> String;
    /// The stream of one of `partitions` partitions, passed through.
    fn stream(&self, input: SendableRecordBatchStream, partitions: usize) -> Result<SendableRecordBatchStream>;
}

#[derive(Debug)]
pub(super) struct PassThrough<S> {
    input: Arc<dyn ExecutionPlan>,
    stage: Arc<S>,
}

impl<S: Stage> PassThrough<S> {
    pub(super) fn new(input: Arc<dyn ExecutionPlan>, stage: S) -> PassThrough<S> {
        PassThrough { input, stage: Arc::new(stage) }
    }

    pub(super) fn stage(&self) -> &S {
        &self.stage
    }
}

impl<S: Stage> DisplayAs for PassThrough<S> {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: {}", S::NAME, self.stage.describe())
    }
}

impl<S: Stage> ExecutionPlan for PassThrough<S> {
    fn name(&self) -> &str {
        S::NAME
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
            Ok([input]) => Ok(Arc::new(PassThrough { input, stage: self.stage.clone() })),
            Err(_) => internal_err!("{} has one input", S::NAME),
        }
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let partitions = self.input.output_partitioning().partition_count();
        self.stage.stream(self.input.execute(partition, context)?, partitions)
    }
}
