//! Running the pipeline's statements and reading their small answers.

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch, UInt64Array};
use datafusion::arrow::compute::{cast, BatchCoalescer};
use datafusion::arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef, UInt64Type};
use datafusion::physical_plan::display::DisplayableExecutionPlan;
use datafusion::physical_plan::{displayable, ChildrenPropertiesMode, ExecutionPlan, ExecutionPlanProperties, ReplaceChildrenOptions};
use futures::StreamExt;
use datafusion::dataframe::DataFrame;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::file_format::parquet::ParquetSink;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::MemTable;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::common::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::logical_expr::{LogicalPlan, SortExpr};
use datafusion::prelude::{col, SessionContext};

use super::tables::conform;
use super::pass_through::PassThrough;
use super::tap::Tap;
use super::whole_batches::WholeBatches;
use crate::error::{Error, Result};

/// Run one statement. With `NEARDUP_EXPLAIN=1` in the environment, print
/// its physical plan to standard error first; with `NEARDUP_EXPLAIN=analyze`,
/// print the plan with each operator's rows and time after it ran (aids to
/// profiling, see docs/performance.md).
pub(super) async fn collect(ctx: &SessionContext, statement: &str) -> Result<Vec<RecordBatch>> {
    let df = crate::statement::sql(ctx, statement).await?;
    let partitions = run(ctx, df, statement).await?;
    Ok(partitions.into_iter().flatten().collect())
}

/// Filters evaluated inside the Parquet reader, which then decodes the
/// other columns of the rows that pass only: for a statement whose join
/// keeps few of a file's rows (a join's dynamic filter reaches the scan).
pub(super) const LATE_MATERIALIZATION: (&str, &str) = ("datafusion.execution.parquet.pushdown_filters", "true");

/// Hash joins that collect their build side whole on every partition
/// instead of repartitioning both sides by the key: for a statement that
/// joins many wide rows against a few keys.
const COLLECTED_JOINS: (&str, &str) = ("datafusion.optimizer.repartition_joins", "false");

/// [`COLLECTED_JOINS`] when the run's work is in memory, where every side
/// of a join is small enough to collect; a run under a memory limit or on
/// a cluster keeps the engine's partitioned joins.
pub(super) fn collected_joins_in_memory(ctx: &SessionContext) -> Option<(&'static str, &'static str)> {
    crate::session::work_in_memory(ctx).then_some(COLLECTED_JOINS)
}

/// Read each input file whole instead of by byte ranges. The ranges of a
/// file of one Parquet row group leave all its rows in one partition, on one
/// core; read whole, its batches are dealt round robin to every core.
pub(super) const WHOLE_FILE_SCANS: (&str, &str) = ("datafusion.optimizer.repartition_file_scans", "false");

/// Run a work statement, `COPY (query) TO path …` of sql/, as the work
/// table `name`: in memory when the session keeps work tables there
/// ([`crate::session::WorkInMemory`]), the query's partitions as they come,
/// with nothing encoded or decoded; else written to `path` and registered.
pub(super) async fn work_table(ctx: &SessionContext, statement: &str, path: &str, name: &str) -> Result<()> {
    work_table_sorted(ctx, statement, path, name, &[]).await
}

/// [`work_table`], each of whose partitions, when kept in memory, is then
/// sorted by the columns `sorted_by` (ascending, NULLs last; a partition
/// that came out in that order is only checked) and declared so. A later
/// statement ordered by them merges the partitions as they come instead of
/// holding every row to sort it, and its other operators keep
/// every core (Weibo's fingerprints: the sort of 768,035 rows with their
/// MinHash keys set the run's peak memory). A work file, under a memory
/// limit or on a cluster, is left as written: there the later sort spills.
async fn work_table_sorted(ctx: &SessionContext, statement: &str, path: &str, name: &str, sorted_by: &[&str]) -> Result<()> {
    if !crate::session::work_in_memory(ctx) {
        collect(ctx, statement).await?;
        crate::storage::register_parquet(ctx, name, path).await?;
        return Ok(());
    }
    let LogicalPlan::Copy(copy) = ctx.state().create_logical_plan(statement).await? else {
        return Err(Error::runtime(format!("a work statement is not a COPY: {}", statement_label(statement))));
    };
    let query = DataFrame::new(ctx.state(), copy.input.as_ref().clone());
    let schema = query.schema().as_arrow().clone();
    let mut partitions = run(ctx, query, statement).await?;
    if !sorted_by.is_empty() {
        // Pieces of one partition, in order, make one again: checked below.
        partitions = joined(partitions, ctx.state().config().target_partitions());
        let started = Instant::now();
        // One thread a partition: as many as the statement ran on.
        partitions = each_on_its_thread(partitions, |p| match super::tables::is_sorted_partition(&p, sorted_by)? {
            true => Ok(p),
            false => super::tables::sort_partition(p, sorted_by, WORK_BATCH_ROWS),
        })?;
        log::debug!("{:>6} ms  {name} sorted by {}", started.elapsed().as_millis(), sorted_by.join(", "));
    }
    register_in_memory(ctx, name, &schema, partitions, sorted_by)
}

/// Run `statement`, a `COPY (query) TO path …` of sql/, and also keep the
/// rows it wrote: returned as an in-memory table in the types the engine
/// reads back from the file. A tap under the statement's sink
/// ([`super::tap::Tap`], a [`PassThrough`] stage) keeps each batch as it goes to the writer, so the
/// statement runs and writes as it always does, streaming, and the next
/// stage's reader finds the rows decoded (Weibo's fingerprints: a read of
/// 49 MB of term sets and sketches, about 0.13 s).
pub(super) async fn copy_and_hold(ctx: &SessionContext, statement: &str) -> Result<Arc<dyn TableProvider>> {
    let started = Instant::now();
    let plan = crate::statement::sql(ctx, statement).await?.create_physical_plan().await?;
    let input = match plan.children()[..] {
        [input] => input.clone(),
        _ => return Err(Error::runtime(format!("a statement to hold is not a COPY: {}", statement_label(statement)))),
    };
    let tap = Arc::new(PassThrough::new(input.clone(), Tap::default()));
    // The tap has its input's properties.
    let plan = plan.replace_children(vec![tap.clone()], ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep))?;
    run_plan(ctx, plan, statement, started).await?;
    let batches = tap.stage().take();
    let schema = as_read_back(&batches.first().map_or_else(|| input.schema(), RecordBatch::schema));
    let batches = batches.iter().map(|b| conform(b, &schema)).collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(MemTable::try_new(schema, vec![batches])?))
}

/// The rows of `statement` as an in-memory table of as many partitions as
/// the session has: its batches are dealt round robin, then each partition
/// is sorted by the columns `sorted_by` (ascending, NULLs last) on its own
/// core, in batches of `rows`, and declared so. Strings are compacted batch
/// by batch: a sorted batch's values would otherwise point into the buffers
/// of every batch it was gathered from.
pub(super) async fn sorted_in_memory(ctx: &SessionContext, statement: &str, sorted_by: &[&str], rows: usize) -> Result<Arc<dyn TableProvider>> {
    let (schema, batches) = read_whole(ctx, statement).await?;
    let started = Instant::now();
    let count = ctx.state().config().target_partitions().max(1);
    let partitions = deal_by_text(&batches, count)?;
    let sort = |p: Vec<RecordBatch>| -> Result<Vec<RecordBatch>> {
        let sorted = super::tables::sort_partition(p, sorted_by, rows)?;
        sorted.iter().map(|b| compact_strings(&conform(b, &schema)?)).collect()
    };
    let partitions = each_on_its_thread(partitions, sort)?;
    log::debug!("{:>6} ms  sorted by {} in {count} partitions", started.elapsed().as_millis(), sorted_by.join(", "));
    held_table(schema, partitions, sorted_by)
}

/// What a row costs to segment, roughly: the bytes of its text and title,
/// and a little for the row itself.
const ROW_BYTES: u64 = 64;

/// `batches` cut into `count` runs of rows, in order, whose texts and
/// titles have about as many bytes each: segmentation's time goes with
/// them, and a partition with more of them keeps one core busy after the
/// others are done. Dealing whole batches round robin did that: Heybox's
/// batches of 8,192, 8,192 and 1,676 articles made partitions of 9,868 and
/// 8,192. Batches are sliced, not copied.
fn deal_by_text(batches: &[RecordBatch], count: usize) -> Result<Vec<Vec<RecordBatch>>> {
    Ok(deal_by_bytes(batches, &all_row_bytes(batches)?, count))
}

/// Every row's [`row_bytes`], batch after batch.
fn all_row_bytes(batches: &[RecordBatch]) -> Result<Vec<u64>> {
    Ok(batches.iter().map(row_bytes).collect::<Result<Vec<_>>>()?.concat())
}

/// [`deal_by_text`] with each row's bytes (`bytes`) already known.
fn deal_by_bytes(batches: &[RecordBatch], bytes: &[u64], count: usize) -> Vec<Vec<RecordBatch>> {
    let mut partitions = vec![Vec::new(); count.max(1)];
    let (mut batch, mut offset) = (0, 0);
    for (part, rows) in crate::parallel::cut(bytes.len(), count, |i| bytes[i]).into_iter().enumerate() {
        // The run's rows, batch by batch from where the last run ended.
        let mut wanted = rows.len();
        while wanted > 0 {
            let take = wanted.min(batches[batch].num_rows() - offset);
            if take > 0 {
                partitions[part].push(batches[batch].slice(offset, take));
            }
            (wanted, offset) = (wanted - take, offset + take);
            if offset == batches[batch].num_rows() {
                (batch, offset) = (batch + 1, 0);
            }
        }
    }
    partitions
}

/// Each row's bytes of `text` and `title` (those present), plus [`ROW_BYTES`].
fn row_bytes(batch: &RecordBatch) -> Result<Vec<u64>> {
    let mut bytes = vec![ROW_BYTES; batch.num_rows()];
    for column in ["text", "title"].iter().filter_map(|c| batch.column_by_name(c)) {
        let lengths = cast(&datafusion::arrow::compute::kernels::length::length(column)?, &DataType::UInt64)?;
        for (b, n) in bytes.iter_mut().zip(lengths.as_primitive::<UInt64Type>().iter()) {
            *b += n.unwrap_or(0);
        }
    }
    Ok(bytes)
}

/// The documents of `statement` as [`sorted_in_memory`] holds them by
/// (source, id), one row per id ([`super::first_per_id`]): the rows of an
/// id meet in one partition, dealt there by the id's hash rather than
/// round robin. Also returns what was left out, and the rows kept of the
/// repeated ids (compacted, in the table's types).
pub(super) async fn first_per_id_in_memory(ctx: &SessionContext, statement: &str, rows: usize) -> Result<(Arc<dyn TableProvider>, super::first_per_id::FirstPerId)> {
    let (schema, batches) = read_whole(ctx, statement).await?;
    let started = Instant::now();
    let parts = ctx.state().config().target_partitions().max(1);
    let mut found = super::first_per_id::first_per_id(&batches, parts, rows, |b| compact_strings(&conform(&b, &schema)?))?;
    let partitions = std::mem::take(&mut found.partitions);
    log::debug!("{:>6} ms  one row per id, sorted by source, id in {parts} partitions", started.elapsed().as_millis());
    Ok((held_table(schema, partitions, &["source", "id"])?, found))
}

/// Every batch of `statement`, in the types the engine reads back from a
/// file of them.
async fn read_whole(ctx: &SessionContext, statement: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let df = crate::statement::sql(ctx, statement).await?;
    let schema = as_read_back(df.schema().as_arrow());
    Ok((schema, run(ctx, df, statement).await?.into_iter().flatten().collect()))
}

/// How many pieces each partition of the documents held for segmentation
/// is scanned in at most ([`held_table`]). The last piece to finish runs
/// alone: with 4, a Weibo or Heybox run spent 0.1–0.8 s (mean 0.3–0.5 s, at
/// half this machine's usual speed) with one core idle at the statement's
/// end; with 16, 0.06–0.22 s.
const PIECES: usize = 16;

/// The least [`row_bytes`] of a piece: about two batches of short posts
/// (Weibo's rows are 107 such bytes), so that segmentation still finds the
/// texts that repeat within a batch when many cores cut the documents fine.
const PIECE_BYTES: u64 = 2 << 20;

/// How many pieces partitions of `bytes` each are scanned in.
fn pieces_of(bytes: u64) -> usize {
    (bytes / PIECE_BYTES).clamp(1, PIECES as u64) as usize
}

/// `partitions`, each sorted by `sorted_by`, as an in-memory table declared
/// so, each cut into up to [`PIECES`] runs of rows in order ([`deal_by_text`]),
/// each a partition of the table. A statement over it runs a task a piece,
/// and a core that is done takes the next piece: with one task a core, the
/// core whose texts were slower to segment (Heybox: 8 % more time for as
/// many bytes) kept the statement running alone for half a second.
/// [`work_table_sorted`] joins the pieces' results again.
fn held_table(schema: SchemaRef, partitions: Vec<Vec<RecordBatch>>, sorted_by: &[&str]) -> Result<Arc<dyn TableProvider>> {
    let order: Vec<SortExpr> = sorted_by.iter().map(|c| col(*c).sort(true, false)).collect();
    // As many pieces in every partition: the statement's results are
    // joined back in runs of that many ([`joined`]).
    let bytes = partitions.iter().map(|p| all_row_bytes(p)).collect::<Result<Vec<_>>>()?;
    let count = pieces_of(bytes.iter().flatten().sum::<u64>() / partitions.len().max(1) as u64);
    let pieces = partitions.iter().zip(&bytes).map(|(p, bytes)| deal_by_bytes(p, bytes, count));
    Ok(Arc::new(MemTable::try_new(schema, pieces.flatten().collect())?.with_sort_order(vec![order])))
}

/// `partitions` joined into `count`, each of a run of consecutive ones: the
/// results of a statement over a table held in pieces ([`held_table`]), a
/// partition again of each partition's pieces, in order.
fn joined(partitions: Vec<Vec<RecordBatch>>, count: usize) -> Vec<Vec<RecordBatch>> {
    if partitions.len() <= count.max(1) {
        return partitions;
    }
    let run = partitions.len().div_ceil(count.max(1));
    let mut joined = vec![Vec::new(); partitions.len().div_ceil(run)];
    for (i, batches) in partitions.into_iter().enumerate() {
        joined[i / run].extend(batches);
    }
    joined
}

/// `work` applied to each of `parts` on a thread of its own (the client's
/// share of a statement's work: a sort of each of its partitions, the check
/// of a run of groups), the results in the parts' order. A panic in one is
/// raised again here.
pub(super) fn each_on_its_thread<P: Send, T: Send>(parts: Vec<P>, work: impl Fn(P) -> Result<T> + Sync) -> Result<Vec<T>> {
    crate::parallel::on_threads(parts, work).into_iter().collect()
}

/// `batch` with each string view column's values copied into buffers of
/// its own (`StringViewArray::gc`).
fn compact_strings(batch: &RecordBatch) -> Result<RecordBatch> {
    let columns = batch.columns().iter().map(|c| match c.as_string_view_opt() {
        Some(views) => Arc::new(views.gc()) as ArrayRef,
        None => c.clone(),
    });
    Ok(RecordBatch::try_new(batch.schema(), columns.collect())?)
}

/// Register `batches` (of `schema`), made by the client, as the work table
/// `name`: in memory as [`work_table`] keeps its tables, else written to
/// `file` in the work folder of `out`.
pub(super) async fn work_batches(ctx: &SessionContext, out: &crate::storage::OutputDir, (name, file): (&str, &str), (schema, batches): (SchemaRef, Vec<RecordBatch>)) -> Result<()> {
    if crate::session::work_in_memory(ctx) {
        return register_in_memory(ctx, name, &schema, vec![batches], &[]);
    }
    out.put(file, super::tables::write_batches(schema, &batches)?).await?;
    crate::storage::register_parquet(ctx, name, &out.staged(file)).await?;
    Ok(())
}

/// Register `partitions` (of `schema`) as the in-memory table `name`, in
/// the types the engine would read back from a file of them; each
/// partition's rows in the order of the columns `sorted_by` (see
/// [`work_table_sorted`]).
pub(super) fn register_in_memory(ctx: &SessionContext, name: &str, schema: &Schema, partitions: Vec<Vec<RecordBatch>>, sorted_by: &[&str]) -> Result<()> {
    let schema = as_read_back(schema);
    let partitions: Vec<Vec<RecordBatch>> = partitions.iter().map(|p| p.iter().map(|b| conform(b, &schema)).collect()).collect::<Result<_>>()?;
    if log::log_enabled!(log::Level::Debug) {
        let batches = partitions.iter().flatten();
        let (rows, bytes) = batches.fold((0, 0), |(r, m), b| (r + b.num_rows(), m + b.get_array_memory_size()));
        log::debug!("         {name}: {rows} rows in memory, {} MB", bytes >> 20);
    }
    let order: Vec<SortExpr> = sorted_by.iter().map(|c| col(*c).sort(true, false)).collect();
    let table = MemTable::try_new(schema, partitions)?;
    let table = match order.is_empty() {
        true => table,
        false => table.with_sort_order(vec![order]),
    };
    ctx.register_table(name, Arc::new(table))?;
    Ok(())
}

/// Replace the in-memory table `name` (a [`MemTable`]; anything else is
/// left as it is) by one whose next reader takes its rows: each batch is let
/// go once that reader's plan has passed it on, where a [`MemTable`] keeps
/// every batch until the table is dropped. For a table's last reader: the
/// fingerprints statement over `terms` (Heybox: 302 MB), whose results
/// grew while all the terms were still held, the run's peak. A second
/// reading of the table is an error, never an empty table. The replaced
/// table is emptied, so nothing may keep it: the job makes no view over a
/// work table, and each statement names the table it reads.
pub(super) fn read_once(ctx: &SessionContext, name: &str) -> Result<()> {
    let Some(provider) = ctx.deregister_table(name)? else {
        return Ok(());
    };
    let Some(table) = provider.downcast_ref::<MemTable>() else {
        ctx.register_table(name, provider)?;
        return Ok(());
    };
    let schema = table.schema();
    let mut partitions: Vec<Arc<dyn PartitionStream>> = Vec::with_capacity(table.batches.len());
    for partition in &table.batches {
        // Nothing else holds the table: it was just deregistered.
        let mut held = partition.try_write().map_err(|_| Error::runtime(format!("the in-memory table {name} is in use")))?;
        let batches = std::sync::Mutex::new(Some(std::mem::take(&mut *held)));
        partitions.push(Arc::new(TakenOnce { name: name.to_string(), schema: schema.clone(), batches }));
    }
    let order = table.sort_order.lock().first().cloned().unwrap_or_default();
    let once = StreamingTable::try_new(schema, partitions)?.with_sort_order(order);
    ctx.register_table(name, Arc::new(once))?;
    Ok(())
}

/// One partition of a [`read_once`] table.
struct TakenOnce {
    name: String,
    schema: SchemaRef,
    batches: std::sync::Mutex<Option<Vec<RecordBatch>>>,
}

impl std::fmt::Debug for TakenOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TakenOnce({})", self.name)
    }
}

impl PartitionStream for TakenOnce {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
        let taken = self.batches.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let batches: Vec<datafusion::common::Result<RecordBatch>> = match taken {
            Some(batches) => batches.into_iter().map(Ok).collect(),
            None => vec![Err(DataFusionError::Execution(format!("the in-memory table {} was read once and let go", self.name)))],
        };
        // Moved into the stream, each batch goes when it is yielded.
        Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), futures::stream::iter(batches)))
    }
}

/// `schema` as the engine reads it back from Parquet: strings and binaries
/// as views (`datafusion.execution.parquet.schema_force_view_types`) and no
/// metadata, of the schema or of a field (`skip_metadata`), so that
/// statements over a work table plan, and write, the same in memory as from
/// a file. (A fetched stored row's schema carries the store file's footer:
/// kept, it reached the night's run file.)
fn as_read_back(schema: &Schema) -> SchemaRef {
    let view = |f: &FieldRef| {
        let f = f.as_ref().clone().with_metadata(Default::default());
        match f.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 => f.with_data_type(DataType::Utf8View),
            DataType::Binary | DataType::LargeBinary => f.with_data_type(DataType::BinaryView),
            _ => f,
        }
    };
    Arc::new(Schema::new(schema.fields().iter().map(view).collect::<Vec<_>>()))
}

/// Run `df` (planned from `statement`), partition by partition; see [`collect`].
async fn run(ctx: &SessionContext, df: DataFrame, statement: &str) -> Result<Vec<Vec<RecordBatch>>> {
    let started = Instant::now();
    run_plan(ctx, df.create_physical_plan().await?, statement, started).await
}

/// [`run`] of a physical plan, planned since `started`.
async fn run_plan(ctx: &SessionContext, plan: Arc<dyn ExecutionPlan>, statement: &str, started: Instant) -> Result<Vec<Vec<RecordBatch>>> {
    let plan = whole_batches_to_sinks(plan, ctx.state().config().batch_size())?;
    let explain = std::env::var("NEARDUP_EXPLAIN").unwrap_or_default();
    if explain == "1" {
        eprintln!("neardup: plan of\n{statement}\n{}", displayable(plan.as_ref()).indent(true));
    }
    let partitions = collect_coalesced(plan.clone(), ctx).await?;
    if explain == "analyze" {
        eprintln!("neardup: plan and metrics of\n{statement}\n{}", DisplayableExecutionPlan::with_metrics(plan.as_ref()).indent(true));
    }
    log::debug!("{:>6} ms  {}", started.elapsed().as_millis(), statement_label(statement));
    Ok(partitions)
}

/// `plan` with every Parquet sink given its rows in batches of exactly
/// `rows` ([`WholeBatches`], a [`PassThrough`] stage): the pages of a file
/// then do not depend on the partitions that computed it. (A cluster's plan
/// is the scheduler's; its sinks read a merge's whole batches.)
fn whole_batches_to_sinks(plan: Arc<dyn ExecutionPlan>, rows: usize) -> Result<Arc<dyn ExecutionPlan>> {
    let rebuilt = plan.transform_up(|node| {
        let Some(input) = node.downcast_ref::<DataSinkExec>().filter(|sink| sink.sink().downcast_ref::<ParquetSink>().is_some()).map(|sink| sink.input().clone()) else {
            return Ok(Transformed::no(node));
        };
        let whole: Arc<dyn ExecutionPlan> = Arc::new(PassThrough::new(input, WholeBatches::new(rows)));
        // The node has its input's properties.
        Ok(Transformed::yes(node.replace_children(vec![whole], ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep))?))
    })?;
    Ok(rebuilt.data)
}

/// Rows of a work table per batch: the engine's own batch size. Segmentation
/// over inputs read from their files scans small batches so that every core
/// gets some of a few long documents; kept as they came, its table of terms
/// was 3,000 batches of 256 posts, and every statement over it (the
/// fingerprints' UDFs and their sort by id) paid per batch (Weibo: the sort
/// alone 0.36 s of CPU against 0.18 s). Over the documents held in memory it
/// scans batches of this size (stages.rs, `PerDocument`).
pub(super) const WORK_BATCH_ROWS: usize = 8192;

/// The output of `plan`, partition by partition, in batches of about
/// [`WORK_BATCH_ROWS`] rows: each partition's small batches are joined as
/// they come, on its own task, while they are still in cache. Batches of
/// half that or more are kept as they come, not copied.
async fn collect_coalesced(plan: Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> Result<Vec<Vec<RecordBatch>>> {
    let count = plan.output_partitioning().partition_count();
    // A JoinSet: when one partition fails, dropping the set stops the others.
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for i in 0..count {
        let mut stream = plan.execute(i, ctx.task_ctx())?;
        tasks.spawn(async move {
            let mut coalescer = BatchCoalescer::new(stream.schema(), WORK_BATCH_ROWS).with_biggest_coalesce_batch_size(Some(WORK_BATCH_ROWS / 2));
            let mut batches = Vec::new();
            while let Some(batch) = stream.next().await {
                coalescer.push_batch(batch?)?;
                batches.extend(std::iter::from_fn(|| coalescer.next_completed_batch()));
            }
            coalescer.finish_buffered_batch()?;
            batches.extend(std::iter::from_fn(|| coalescer.next_completed_batch()));
            if count > 1 {
                // How evenly the work was shared: each partition's end.
                let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
                log::debug!("{:>6} ms  partition {i} of {count} done: {rows} rows", started.elapsed().as_millis());
            }
            Ok::<_, datafusion::error::DataFusionError>((i, batches))
        });
    }
    let mut partitions = vec![Vec::new(); count];
    while let Some(done) = tasks.join_next().await {
        let (i, batches) = done.map_err(|e| Error::runtime(format!("a work table's task failed: {e}")))??;
        partitions[i] = batches;
    }
    Ok(partitions)
}

/// A statement's first words after its comments, for the debug log.
fn statement_label(statement: &str) -> String {
    let code = statement.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join(" ");
    code.split_whitespace().take(12).collect::<Vec<_>>().join(" ")
}

/// Run one statement and measure the bytes its Parquet scans read (0 when
/// the engine does not report them, as on a cluster).
pub(super) async fn collect_measured(ctx: &SessionContext, statement: &str) -> Result<(Vec<RecordBatch>, u64)> {
    let started = Instant::now();
    let plan = crate::statement::sql(ctx, statement).await?.create_physical_plan().await?;
    let batches = datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx()).await?;
    if std::env::var("NEARDUP_EXPLAIN").is_ok_and(|e| e == "analyze") {
        eprintln!("neardup: plan and metrics of\n{statement}\n{}", DisplayableExecutionPlan::with_metrics(plan.as_ref()).indent(true));
    }
    log::debug!("{:>6} ms  {}", started.elapsed().as_millis(), statement_label(statement));
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

/// [`work_table`] with session settings changed, restoring them afterwards.
pub(super) async fn work_table_with(ctx: &SessionContext, settings: &[(&str, &str)], (statement, path, name): (&str, &str, &str), sorted_by: &[&str]) -> Result<()> {
    with_settings(ctx, settings, work_table_sorted(ctx, statement, path, name, sorted_by)).await
}

/// [`collect`] with session settings changed, restoring them afterwards.
pub(super) async fn collect_with(ctx: &SessionContext, settings: &[(&str, &str)], statement: &str) -> Result<Vec<RecordBatch>> {
    with_settings(ctx, settings, collect(ctx, statement)).await
}

/// `work`, a statement of wide rows (term sets, sketches, vectors), under a
/// memory limit in batches of a row per 2 MiB of the limit (at least 64, at
/// most the session's); without a limit as it is. Its sorts each have a
/// share of the limit: 8,192 Heybox articles of a store's night
/// (sql/94_store_run.sql) made a batch of 54 MB, more than a share of
/// `--memory-limit 2G`, and the run stopped out of memory; 1,024 rows fit,
/// and 256 rows a share of 512 MiB. Smaller batches change a file's pages,
/// not its rows.
pub(super) async fn with_wide_rows<T>(ctx: &SessionContext, work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    match ctx.runtime_env().memory_pool.memory_limit() {
        MemoryLimit::Finite(limit) => {
            let rows = (limit >> 21).max(64).min(ctx.state().config().batch_size()).to_string();
            with_settings(ctx, &[("datafusion.execution.batch_size", &rows)], work).await
        }
        _ => work.await,
    }
}

/// `work` run with session settings changed; they are restored whether it
/// succeeds or fails.
pub(super) async fn with_settings<T>(ctx: &SessionContext, settings: &[(&str, &str)], work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let previous = change_settings(ctx, settings).await?;
    let result = work.await;
    change_settings(ctx, &previous.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>()).await?;
    result
}

/// Set each of `settings`; returns what they were.
async fn change_settings(ctx: &SessionContext, settings: &[(&str, &str)]) -> Result<Vec<(String, String)>> {
    let options = ctx.state().config().options().clone();
    let mut previous = Vec::new();
    for (key, value) in settings {
        let old = options.entries().into_iter().find(|e| e.key == *key).and_then(|e| e.value);
        previous.push((key.to_string(), old.ok_or_else(|| Error::runtime(format!("no engine setting {key}")))?));
        collect(ctx, &format!("SET {key} = {value}")).await?;
    }
    Ok(previous)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{state, Role};
    use datafusion::prelude::SessionConfig;

    #[test]
    fn rows_are_dealt_in_order_by_the_bytes_of_their_texts() {
        use datafusion::arrow::array::{StringArray, StringViewArray};
        let batch = |texts: &[Option<&str>], view: bool| {
            let text: ArrayRef = match view {
                true => Arc::new(StringViewArray::from(texts.to_vec())),
                false => Arc::new(StringArray::from(texts.to_vec())),
            };
            let n: ArrayRef = Arc::new(UInt64Array::from_iter_values(0..texts.len() as u64));
            RecordBatch::try_from_iter([("n", n), ("text", text)]).unwrap()
        };
        let long = "x".repeat(1000);
        // Two long texts in the last, short batch: they make half the bytes.
        let batches = [
            batch(&[Some("a"), None, Some("bb"), Some("c")], false),
            batch(&[Some("d"); 4], false),
            batch(&[Some(&long), Some(&long)], true),
        ];
        let rows = |p: &Vec<RecordBatch>| p.iter().map(RecordBatch::num_rows).sum::<usize>();
        let dealt = deal_by_text(&batches, 2).unwrap();
        assert_eq!(dealt.iter().map(rows).collect::<Vec<_>>(), [9, 1]);
        // A partition ends once the bytes before a row reach its share: the
        // long texts fall in the first and second of three, none in the third.
        let dealt = deal_by_text(&batches, 3).unwrap();
        assert_eq!(dealt.iter().map(rows).collect::<Vec<_>>(), [9, 1, 0]);
        // Every row once, in order.
        let n: Vec<u64> = dealt.iter().flatten().flat_map(|b| b.column(0).as_primitive::<UInt64Type>().values().to_vec()).collect();
        assert_eq!(n, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]);
        // Rows alike are shared alike, and more partitions than rows leave some empty.
        let even = [batch(&[Some("a"); 6], false)];
        assert_eq!(deal_by_text(&even, 3).unwrap().iter().map(rows).collect::<Vec<_>>(), [2, 2, 2]);
        assert_eq!(deal_by_text(&even, 8).unwrap().iter().map(rows).sum::<usize>(), 6);
        assert!(deal_by_text(&[], 2).unwrap().iter().all(Vec::is_empty));
    }

    #[test]
    fn a_partition_is_scanned_in_pieces_of_at_least_two_megabytes() {
        assert_eq!([0, PIECE_BYTES - 1, 3 * PIECE_BYTES, 100 * PIECE_BYTES].map(pieces_of), [1, 1, 3, PIECES]);
    }

    #[test]
    fn pieces_are_joined_in_order_into_as_many_partitions_as_asked() {
        let batch = |n: u64| RecordBatch::try_from_iter([("n", Arc::new(UInt64Array::from(vec![n])) as ArrayRef)]).unwrap();
        let pieces: Vec<Vec<RecordBatch>> = (0..8).map(|n| if n == 5 { vec![] } else { vec![batch(n)] }).collect();
        let numbers = |p: &Vec<RecordBatch>| p.iter().map(|b| b.column(0).as_primitive::<UInt64Type>().value(0)).collect::<Vec<_>>();
        assert_eq!(joined(pieces.clone(), 2).iter().map(numbers).collect::<Vec<_>>(), [vec![0, 1, 2, 3], vec![4, 6, 7]]);
        assert_eq!(joined(pieces.clone(), 3).iter().map(numbers).collect::<Vec<_>>(), [vec![0, 1, 2], vec![3, 4], vec![6, 7]]);
        assert_eq!(joined(pieces.clone(), 8).len(), 8);
        assert_eq!(joined(pieces, 1).iter().map(numbers).collect::<Vec<_>>(), [vec![0, 1, 2, 3, 4, 6, 7]]);
    }

    #[tokio::test]
    async fn a_sorted_work_table_is_read_in_order_without_a_sort() {
        let config = SessionConfig::new().with_target_partitions(3).with_batch_size(2);
        let ctx = SessionContext::new_with_state(state(Role::Embedded { memory_limit: None, work_in_memory: true }, config).unwrap());
        // Three partitions, one for each VALUES.
        let values = ["('b', '1', 0), ('a', '2', 1)", "('a', '10', 2), ('b', '0', 3)", "('a', '3', 4)"];
        let rows = values.map(|v| format!("SELECT * FROM (VALUES {v}) AS v(source, id, n)")).join(" UNION ALL ");
        collect(&ctx, &format!("CREATE VIEW documents AS {rows}")).await.unwrap();
        let copy = "COPY (SELECT source, id, n FROM documents) TO '/nonexistent/t.parquet' STORED AS PARQUET";
        work_table_with(&ctx, &[("datafusion.execution.batch_size", "1")], (copy, "/nonexistent/t.parquet", "t"), &["source", "id"]).await.unwrap();
        let ordered = "SELECT n FROM t ORDER BY source, id";
        let plan = ctx.sql(ordered).await.unwrap().create_physical_plan().await.unwrap();
        let shown = displayable(plan.as_ref()).indent(false).to_string();
        assert!(shown.contains("SortPreservingMergeExec") && !shown.contains("SortExec"), "{shown}");
        let n: Vec<i64> = collect(&ctx, ordered).await.unwrap().iter().flat_map(|b| b.column(0).as_primitive::<datafusion::arrow::datatypes::Int64Type>().values().to_vec()).collect();
        assert_eq!(n, [2, 1, 4, 3, 0]);
    }

    #[tokio::test]
    async fn a_table_read_once_lets_each_batch_go_and_keeps_its_order() {
        let config = SessionConfig::new().with_target_partitions(2);
        let ctx = SessionContext::new_with_state(state(Role::Embedded { memory_limit: None, work_in_memory: true }, config).unwrap());
        let batch = |ids: &[&str], n: &[i64]| {
            let id: ArrayRef = Arc::new(datafusion::arrow::array::StringViewArray::from(ids.to_vec()));
            let n: ArrayRef = Arc::new(datafusion::arrow::array::Int64Array::from(n.to_vec()));
            RecordBatch::try_from_iter([("id", id), ("n", n)]).unwrap()
        };
        // Two partitions, each sorted by id, as the terms are.
        let (first, second) = (batch(&["a", "c"], &[0, 2]), batch(&["b", "d"], &[1, 3]));
        register_in_memory(&ctx, "t", &first.schema(), vec![vec![first], vec![second]], &["id"]).unwrap();
        let table = ctx.table_provider("t").await.unwrap();
        let kept = table.downcast_ref::<MemTable>().unwrap().batches[0].read().await[0].column(1).clone();
        let ordered = "SELECT n FROM t ORDER BY id";
        let numbers = |b: &[RecordBatch]| b.iter().flat_map(|b| b.column(0).as_primitive::<datafusion::arrow::datatypes::Int64Type>().values().to_vec()).collect::<Vec<_>>();
        // An ordinary in-memory table holds its batches after a read.
        assert_eq!(numbers(&collect(&ctx, ordered).await.unwrap()), [0, 1, 2, 3]);
        assert_eq!(Arc::strong_count(&kept), 2);
        read_once(&ctx, "t").unwrap();
        let plan = ctx.sql(ordered).await.unwrap().create_physical_plan().await.unwrap();
        let shown = displayable(plan.as_ref()).indent(false).to_string();
        assert!(shown.contains("SortPreservingMergeExec") && !shown.contains("SortExec"), "the order is still declared: {shown}");
        assert_eq!(numbers(&collect(&ctx, ordered).await.unwrap()), [0, 1, 2, 3]);
        assert_eq!(Arc::strong_count(&kept), 1, "read, the batch is let go");
        let again = collect(&ctx, ordered).await.unwrap_err().to_string();
        assert!(again.contains("the in-memory table t was read once"), "{again}");
        // A table of another kind is left as it is.
        collect(&ctx, "CREATE VIEW v AS SELECT 1 AS one").await.unwrap();
        read_once(&ctx, "v").unwrap();
        read_once(&ctx, "missing").unwrap();
        assert_eq!(collect(&ctx, "SELECT one FROM v").await.unwrap()[0].num_rows(), 1);
    }

    #[tokio::test]
    async fn rows_held_as_written_are_the_file_of_the_statement_itself() {
        // Many small batches on three partitions, merged in order for the
        // file.
        let config = SessionConfig::new().with_target_partitions(3).with_batch_size(64);
        let ctx = SessionContext::new_with_state(state(Role::Embedded { memory_limit: None, work_in_memory: true }, config).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let copy = |name: &str| {
            let path = dir.path().join(name).display().to_string();
            let query = "SELECT CAST(value * 7919 % 20011 AS VARCHAR) AS id, value, [value, value + 1] AS list FROM range(20000) ORDER BY id";
            (format!("COPY ({query}) TO '{path}' STORED AS PARQUET OPTIONS ('format.max_row_group_size' '4096')"), path)
        };
        let ((by_statement, written), (by_hold, held_path)) = (copy("a.parquet"), copy("b.parquet"));
        collect(&ctx, &by_statement).await.unwrap();
        let held = copy_and_hold(&ctx, &by_hold).await.unwrap();
        // The statement's own file.
        assert_eq!(std::fs::read(&written).unwrap(), std::fs::read(&held_path).unwrap());
        // The held rows are the file's, in its order, in the types read back.
        ctx.register_table("held", held).unwrap();
        ctx.register_parquet("file", &written, Default::default()).await.unwrap();
        let ids = |table: &str| format!("SELECT id, value, list FROM {table}");
        let (held, file) = (collect(&ctx, &ids("held")).await.unwrap(), collect(&ctx, &ids("file")).await.unwrap());
        let one = |b: &[RecordBatch]| datafusion::arrow::compute::concat_batches(&b[0].schema(), b).unwrap();
        assert_eq!(one(&held), one(&file));
        assert_eq!(one(&held).num_rows(), 20000);
        assert_eq!(one(&held).schema().field(0).data_type(), &DataType::Utf8View);
    }
}
