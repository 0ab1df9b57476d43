//! Planning statements so that they write the same bytes embedded and on a
//! Ballista cluster.
//!
//! A `COPY … TO … STORED AS PARQUET OPTIONS (…)` keeps its options in the
//! logical plan's `CopyTo::options`, and DataFusion 55's plan codec drops
//! that field: the scheduler decodes every `COPY` with no options, so a
//! cluster writes with the engine's defaults (other row groups, other
//! compression) where an embedded run honours the statement. The codec does
//! carry the options *of the file format* itself. So before a plan leaves the
//! client, [`portable`] resolves each Parquet `COPY`'s options against the
//! session's defaults, exactly as the engine would, and moves the result
//! into the file format. Embedded and cluster runs then execute one and the
//! same plan.
//!
//! The physical codec loses one more thing on the way to an executor: the
//! sort order a Parquet sink records in each row group (`sorting_columns`,
//! which readers use to skip sorts). The sink's plan node keeps its input's
//! order, so [`SortedSinks`], the executors' plan codec, gives the sink
//! its sorting columns back, built by DataFusion's own Parquet format
//! as the embedded engine builds them.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::config::ConfigFileType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::file_format::format_as_file_type;
use datafusion::datasource::file_format::parquet::ParquetFormatFactory;
use datafusion::execution::SessionState;
use datafusion::logical_expr::dml::CopyTo;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{DataFrame, SessionContext};

use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::datasource::file_format::parquet::{ParquetFormat, ParquetSink};
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::physical_plan::FileSink;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::execution::{SessionStateBuilder, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use futures::FutureExt;

use crate::error::Result;

/// Plan and start `statement` (one SQL statement), as `SessionContext::sql`
/// does, with its `COPY` options made [`portable`].
pub async fn sql(ctx: &SessionContext, statement: &str) -> Result<DataFrame> {
    let state = ctx.state();
    let plan = state.create_logical_plan(statement).await?;
    execute(ctx, &state, plan).await
}

/// Execute a logical plan, with its `COPY` options made [`portable`].
pub async fn execute(ctx: &SessionContext, state: &SessionState, plan: LogicalPlan) -> Result<DataFrame> {
    Ok(ctx.execute_logical_plan(portable(state, plan)?).await?)
}

/// `plan` with every Parquet `COPY`'s options resolved into its file format,
/// so that they survive serialisation. Other plans come back unchanged.
pub fn portable(state: &SessionState, plan: LogicalPlan) -> Result<LogicalPlan> {
    let rewritten = plan.transform_up(|node| match node {
        LogicalPlan::Copy(copy) if foldable(&copy) => {
            // The same resolution as `ParquetFormatFactory::create` makes
            // for a factory without options: session defaults, then the
            // statement's format options, checked here, on the client.
            let mut table = state.default_table_options();
            table.set_config_format(ConfigFileType::PARQUET);
            table.alter_with_string_hash_map(&copy.options)?;
            let format = ParquetFormatFactory::new_with_options(table.parquet);
            Ok(Transformed::yes(LogicalPlan::Copy(CopyTo::new(
                copy.input,
                copy.output_url,
                copy.partition_by,
                format_as_file_type(Arc::new(format)),
                HashMap::new(),
            ))))
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(rewritten.data)
}

/// The executors' physical plan codec: Ballista's own, after giving every
/// Parquet sink of a decoded task the sorting columns its order calls for.
/// (A task's root is always one of Ballista's shuffle writers, an extension
/// node, so every sink passes through [`PhysicalExtensionCodec::try_decode`]
/// as one of its inputs.)
#[derive(Debug, Default)]
pub struct SortedSinks(BallistaPhysicalExtensionCodec);

impl PhysicalExtensionCodec for SortedSinks {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let config = ctx.session_config();
        let inputs = inputs.iter().map(|input| Ok(input.clone().transform_up(|node| sorted_sink(node, config))?.data));
        self.0.try_decode(buf, &inputs.collect::<datafusion::error::Result<Vec<_>>>()?, ctx, converter)
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> datafusion::error::Result<()> {
        self.0.try_encode(node, buf, converter)
    }
}

/// `node` rebuilt by DataFusion's Parquet format when it is a Parquet sink
/// with an input order, which records that order in the files it writes.
fn sorted_sink(node: Arc<dyn ExecutionPlan>, config: &SessionConfig) -> datafusion::error::Result<Transformed<Arc<dyn ExecutionPlan>>> {
    let Some(exec) = node.downcast_ref::<DataSinkExec>() else { return Ok(Transformed::no(node)) };
    let (Some(sink), Some(order)) = (exec.sink().downcast_ref::<ParquetSink>(), exec.sort_order()) else {
        return Ok(Transformed::no(node));
    };
    let format = ParquetFormat::default().with_options(sink.parquet_options().clone());
    let state = SessionStateBuilder::new().with_config(config.clone()).build();
    // The future does no I/O: it only builds the plan node, so it is ready
    // at its first poll.
    let rebuilt = format
        .create_writer_physical_plan(exec.input().clone(), &state, sink.config().clone(), Some(order.clone()))
        .now_or_never()
        .ok_or_else(|| datafusion::error::DataFusionError::Internal("building a Parquet sink waited".into()))??;
    Ok(Transformed::yes(rebuilt))
}

/// Whether a `COPY`'s options can move into its format: it writes Parquet
/// and has format options only. (SQL spells every option of a `COPY` as
/// `format.…` but `execution.…`; the planner reads `execution.*` options
/// itself, and a format with options of its own would reject them, so such
/// a statement is left as it was planned.)
fn foldable(copy: &CopyTo) -> bool {
    copy.file_type.get_ext().eq_ignore_ascii_case("parquet")
        && copy.options.keys().all(|key| key.starts_with("format."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballista_core::serde::BallistaLogicalExtensionCodec;
    use datafusion::datasource::file_format::file_type_to_format;
    use datafusion::datasource::file_format::parquet::ParquetFormat;
    use datafusion::prelude::SessionConfig;
    use datafusion_proto::bytes::{logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec};

    /// The Parquet options a `COPY` plan writes with, in short.
    fn written_with(ctx: &SessionContext, plan: &LogicalPlan) -> String {
        let LogicalPlan::Copy(copy) = plan else { panic!("not a COPY: {plan}") };
        let format = file_type_to_format(&copy.file_type).unwrap().create(&ctx.state(), &copy.options).unwrap();
        let global = &format.downcast_ref::<ParquetFormat>().unwrap().options().global;
        format!("{} rows, {:?}, dictionary {:?}", global.max_row_group_size, global.compression, global.dictionary_enabled)
    }

    /// `plan` after the trip a Ballista client makes it take to the scheduler.
    fn over_the_wire(ctx: &SessionContext, plan: &LogicalPlan) -> LogicalPlan {
        let codec = BallistaLogicalExtensionCodec::default();
        let bytes = logical_plan_to_bytes_with_extension_codec(plan, &codec).unwrap();
        logical_plan_from_bytes_with_extension_codec(&bytes, &ctx.task_ctx(), &codec).unwrap()
    }

    #[tokio::test]
    async fn copy_options_survive_the_plan_codec() {
        let config = SessionConfig::new().set_str("datafusion.execution.parquet.compression", "snappy");
        let ctx = SessionContext::new_with_config(config);
        let statement = "COPY (SELECT 1 AS x) TO '/tmp/neardup-never-written.parquet' STORED AS PARQUET \
                         OPTIONS ('format.max_row_group_size' '1024', 'format.dictionary_enabled' 'false')";
        let state = ctx.state();
        let plan = state.create_logical_plan(statement).await.unwrap();
        let embedded = written_with(&ctx, &plan);
        assert_eq!(embedded, "1024 rows, Some(\"snappy\"), dictionary Some(false)");
        // DataFusion alone loses the statement's options on the way.
        assert_ne!(written_with(&ctx, &over_the_wire(&ctx, &plan)), embedded);
        let portable = portable(&state, plan).unwrap();
        assert_eq!(written_with(&ctx, &portable), embedded);
        assert_eq!(written_with(&ctx, &over_the_wire(&ctx, &portable)), embedded);
    }

    #[tokio::test]
    async fn a_copy_with_execution_options_runs_as_planned() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = SessionContext::new();
        let statement = format!(
            "COPY (SELECT 1 AS x, 'a' AS p) TO '{}/out' STORED AS PARQUET PARTITIONED BY (p) \
             OPTIONS ('execution.keep_partition_by_columns' 'true', 'format.compression' 'snappy')",
            dir.path().display()
        );
        sql(&ctx, &statement).await.unwrap().collect().await.unwrap();
        let written = std::fs::read_dir(dir.path().join("out/p=a")).unwrap().next().unwrap().unwrap().path();
        let reader = parquet::file::reader::SerializedFileReader::new(std::fs::File::open(written).unwrap()).unwrap();
        use parquet::file::reader::FileReader;
        // The partition column was kept, and the file compressed, as the statement asked.
        assert_eq!(reader.metadata().file_metadata().schema_descr().num_columns(), 2);
        assert_eq!(reader.metadata().row_group(0).column(0).compression(), parquet::basic::Compression::SNAPPY);
    }

    #[tokio::test]
    async fn a_bad_copy_option_is_refused_on_the_client() {
        let ctx = SessionContext::new();
        let statement = "COPY (SELECT 1 AS x) TO '/tmp/neardup-never-written.parquet' STORED AS PARQUET \
                         OPTIONS ('format.no_such_option' '1')";
        let error = sql(&ctx, statement).await.unwrap_err().to_string();
        assert!(error.contains("no_such_option"), "{error}");
    }
}
