//! Running the pipeline's statements and reading their small answers.

use std::time::Instant;

use datafusion::arrow::array::{AsArray, RecordBatch, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::physical_plan::display::DisplayableExecutionPlan;
use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;

use crate::error::{Error, Result};

/// Run one statement. With `NEARDUP_EXPLAIN=1` in the environment, print
/// its physical plan to standard error first; with `NEARDUP_EXPLAIN=analyze`,
/// print the plan with each operator's rows and time after it ran (aids to
/// profiling, see docs/performance.md).
pub(super) async fn collect(ctx: &SessionContext, statement: &str) -> Result<Vec<RecordBatch>> {
    let df = crate::statement::sql(ctx, statement).await?;
    let explain = std::env::var("NEARDUP_EXPLAIN").unwrap_or_default();
    let started = Instant::now();
    let batches = match explain.as_str() {
        "1" | "analyze" => {
            let plan = df.create_physical_plan().await?;
            if explain == "1" {
                eprintln!("neardup: plan of\n{statement}\n{}", displayable(plan.as_ref()).indent(true));
            }
            let batches = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await?;
            if explain == "analyze" {
                eprintln!("neardup: plan and metrics of\n{statement}\n{}", DisplayableExecutionPlan::with_metrics(plan.as_ref()).indent(true));
            }
            batches
        }
        _ => df.collect().await?,
    };
    log::debug!("{:>6} ms  {}", started.elapsed().as_millis(), statement_label(statement));
    Ok(batches)
}

/// A statement's first words after its comments, for the debug log.
fn statement_label(statement: &str) -> String {
    let code = statement.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join(" ");
    code.split_whitespace().take(12).collect::<Vec<_>>().join(" ")
}

/// Run one statement and measure the bytes its Parquet scans read (0 when
/// the engine does not report them, as on a cluster).
pub(super) async fn collect_measured(ctx: &SessionContext, statement: &str) -> Result<(Vec<RecordBatch>, u64)> {
    let plan = crate::statement::sql(ctx, statement).await?.create_physical_plan().await?;
    let batches = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await?;
    fn scanned(plan: &dyn datafusion::physical_plan::ExecutionPlan) -> u64 {
        let own = plan.metrics().and_then(|m| m.sum_by_name("bytes_scanned")).map_or(0, |v| v.as_usize() as u64);
        own + plan.children().into_iter().map(|c| scanned(c.as_ref())).sum::<u64>()
    }
    Ok((batches, scanned(plan.as_ref())))
}

pub(super) fn column_u64(batch: &RecordBatch, index: usize) -> Result<UInt64Array> {
    let casted = cast(batch.column(index), &DataType::UInt64)?;
    Ok(casted.as_primitive::<UInt64Type>().clone())
}

/// A column as text.
pub(super) fn strings(batch: &RecordBatch, index: usize) -> Result<Vec<String>> {
    let casted = cast(batch.column(index), &DataType::Utf8)?;
    Ok(casted.as_string::<i32>().iter().map(|v| v.unwrap_or_default().to_string()).collect())
}

/// The single integer a statement returns.
pub(super) async fn scalar_u64(ctx: &SessionContext, statement: &str) -> Result<u64> {
    let batches = collect(ctx, statement).await?;
    let batch = batches.iter().find(|b| b.num_rows() > 0).ok_or_else(|| Error::runtime("query returned no rows"))?;
    Ok(column_u64(batch, 0)?.value(0))
}

/// Run `statement` with session settings changed, restoring them afterwards.
pub(super) async fn collect_with(ctx: &SessionContext, settings: &[(&str, &str)], statement: &str) -> Result<Vec<RecordBatch>> {
    let options = ctx.state().config().options().clone();
    let mut previous = Vec::new();
    for (key, value) in settings {
        let old = options.entries().into_iter().find(|e| e.key == *key).and_then(|e| e.value);
        previous.push((key, old.ok_or_else(|| Error::runtime(format!("no engine setting {key}")))?));
        collect(ctx, &format!("SET {key} = {value}")).await?;
    }
    let result = collect(ctx, statement).await;
    for (key, old) in previous {
        collect(ctx, &format!("SET {key} = {old}")).await?;
    }
    result
}
