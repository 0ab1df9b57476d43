//! The inputs of a run: every file of every input checked before any work
//! (its id, text and title columns, with their types: a crawl's files drift),
//! the files that cannot be used refused or, with `--on-bad-file skip`, left
//! out and named; the rest registered as one view of documents with their
//! source, repeated ids refused or dropped, and a file that cannot be decoded
//! named.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::prelude::SessionContext;

use super::config::{DuplicateIds, JobSpec, KeepRule, OnBadFile};
use super::query::{collect, collect_with, column_u64, strings, work_batches, work_table_with, WHOLE_FILE_SCANS};
use super::summary::SkippedFile;
use super::tables::{create_view, view_without};
use super::sql::{self, render, Param};
use crate::error::{Error, Result};
use crate::storage::{ident, input_files, literal, register_files, register_parquet, InputFile, InputSpec, OutputDir};

/// Text in any of Arrow's encodings: plain, large, view, or dictionary
/// (as pandas categoricals and some writers store it).
fn is_text(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, values) => is_text(values),
        _ => false,
    }
}

fn is_id(t: &DataType) -> bool {
    is_text(t) || t.is_integer() || matches!(t, DataType::Date32 | DataType::Date64 | DataType::Decimal128(..))
}

/// The type one column is read as when an input's files disagree on it:
/// text of any encoding as text, integers as 64-bit integers, and, for the
/// id (compared as text anyway), text and integers as text. None when the
/// files cannot make one column.
fn common_type(a: &DataType, b: &DataType, id: bool) -> Option<DataType> {
    match (a, b) {
        _ if a == b => Some(a.clone()),
        _ if is_text(a) && is_text(b) => Some(DataType::Utf8View),
        _ if a.is_integer() && b.is_integer() => Some(if a.is_unsigned_integer() && b.is_unsigned_integer() { DataType::UInt64 } else { DataType::Int64 }),
        _ if id && is_id(a) && is_id(b) => Some(DataType::Utf8View),
        _ => None,
    }
}

/// The files of one input a run reads, and the one schema they are read with.
pub(super) struct CheckedInput {
    files: Vec<InputFile>,
    schema: Schema,
    /// Hive-style partition keys (`date` of `date=2026-11-21/`) that are not
    /// columns of the files: read as text columns.
    partition_keys: Vec<String>,
}

impl CheckedInput {
    pub(super) fn files(&self) -> usize {
        self.files.len()
    }

    pub(super) fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Its rows, and the bytes of `columns` before compression, as its
    /// files' footers record them.
    pub(super) fn contents(&self, columns: &[&str]) -> (u64, u64) {
        self.files.iter().fold((0, 0), |(rows, bytes), f| {
            (rows + f.contents.rows, bytes + columns.iter().map(|c| f.contents.bytes_of(c)).sum::<u64>())
        })
    }
}

/// Every input's files checked: what a run reads, and what it leaves out.
pub(super) struct CheckedInputs {
    pub(super) inputs: Vec<CheckedInput>,
    pub(super) skipped: Vec<SkippedFile>,
}

/// The columns of one file that the run reads, checked against the job's
/// columns: why the file cannot be used, or None.
fn column_problem(spec: &JobSpec, file: &str, schema: &Schema) -> Option<String> {
    let columns = || schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ");
    let roles = [
        (Some(&spec.columns.id), "document id", "--id-col"),
        (Some(&spec.columns.text), "document text", "--text-col"),
        (spec.columns.title.as_ref().filter(|t| !t.is_empty()), "title", "--title-col"),
    ];
    for (column, role, flag) in roles {
        let Some(column) = column else { continue };
        let Ok(f) = schema.field_with_name(column) else {
            return Some(format!(
                "file '{file}' has no column '{column}' for the {role}; its columns are: {}. If the column was renamed, \
                 rename it back in this file, or name it with {flag} when every file uses the new name",
                columns()
            ));
        };
        let fits = if role == "document id" { is_id(f.data_type()) } else { is_text(f.data_type()) };
        if !fits {
            let must = if role == "document id" { "ids must be text or integers" } else { "it must be text (string)" };
            return Some(format!(
                "file '{file}': column '{column}' holds {}, but {must} for the {role}. Rewrite the file with the \
                 right type, or name another column with {flag}",
                f.data_type()
            ));
        }
    }
    None
}

/// Add one file's schema to the input's: a column the file lacks becomes
/// nullable, a new one is added, differing types meet in [`common_type`].
/// A column the run reads whose types cannot meet makes the file unusable;
/// any other such column is left out of the table (`dropped`).
fn merge_schema(
    fields: &mut Vec<Field>,
    dropped: &mut BTreeSet<String>,
    reads: &[&str],
    id: &str,
    (file, schema): (&str, &Schema),
    first: &str,
) -> std::result::Result<(), String> {
    let mut merged = fields.clone();
    let mut conflicts = Vec::new();
    for f in &mut merged {
        if schema.field_with_name(f.name()).is_err() {
            *f = f.clone().with_nullable(true);
        }
    }
    for f in schema.fields() {
        if dropped.contains(f.name()) {
            continue;
        }
        match merged.iter_mut().find(|m| m.name() == f.name()) {
            None => merged.push(f.as_ref().clone().with_nullable(true)),
            Some(m) if m.data_type() == f.data_type() => *m = m.clone().with_nullable(m.is_nullable() || f.is_nullable()),
            Some(m) => match common_type(m.data_type(), f.data_type(), f.name() == id) {
                Some(t) => *m = Field::new(m.name(), t, true),
                None if reads.contains(&f.name().as_str()) => {
                    return Err(format!(
                        "file '{file}': column '{}' holds {}, but {} in '{first}', the input's first file: the files of one \
                         input must agree on the columns the run reads. Rewrite the file with the first file's type",
                        f.name(),
                        f.data_type(),
                        m.data_type()
                    ))
                }
                None => conflicts.push(f.name().clone()),
            },
        }
    }
    merged.retain(|f| !conflicts.contains(f.name()));
    dropped.extend(conflicts);
    *fields = merged;
    Ok(())
}

/// Check every file of every input before any work. A file that cannot be
/// read, or whose columns do not fit the job, is refused (exit 2, naming the
/// file, the column and the type found) or, with `--on-bad-file skip`, left
/// out and returned with its reason. `known_bad` are files found damaged by
/// an earlier attempt of this run (their pages could not be decoded).
pub(super) async fn check_inputs(ctx: &SessionContext, spec: &JobSpec, keep: &KeepRule, known_bad: &[SkippedFile]) -> Result<CheckedInputs> {
    let mut checked = CheckedInputs { inputs: Vec::new(), skipped: Vec::new() };
    for input in &spec.inputs {
        let files = input_files(ctx, &input.url).await.map_err(|e| e.context(format!("input '{}'", input.name)))?;
        let total = files.len();
        let (good, bad) = check_files(spec, keep, input, files, known_bad);
        for (file, reason) in bad {
            if spec.columns.on_bad_file == OnBadFile::Error {
                return Err(Error::input(format!(
                    "input '{}': {reason} (or pass --on-bad-file skip to leave such files out: the run then exits 3)",
                    input.name
                )));
            }
            checked.skipped.push(SkippedFile { input: input.name.clone(), file, reason });
        }
        if good.files.is_empty() {
            let reasons: Vec<&str> = checked.skipped.iter().filter(|s| s.input == input.name).map(|s| s.reason.as_str()).collect();
            return Err(Error::input(format!(
                "input '{}' ({}): none of its {total} file(s) can be used: {}",
                input.name,
                input.url,
                reasons.join("; ")
            )));
        }
        checked.inputs.push(good);
    }
    Ok(checked)
}

/// One input's files: those the run reads (with their common schema) and
/// those it cannot use, with why.
fn check_files(spec: &JobSpec, keep: &KeepRule, input: &InputSpec, files: Vec<InputFile>, known_bad: &[SkippedFile]) -> (CheckedInput, Vec<(String, String)>) {
    let mut reads = vec![spec.columns.id.as_str(), spec.columns.text.as_str()];
    reads.extend(spec.columns.title.as_deref().filter(|t| !t.is_empty()));
    reads.extend(keep.column());
    let (mut fields, mut dropped, mut bad, mut good) = (Vec::new(), BTreeSet::new(), Vec::new(), Vec::new());
    let mut first: Option<String> = None;
    for file in files {
        if let Some(known) = known_bad.iter().find(|k| k.input == input.name && k.file == file.url) {
            bad.push((file.url.clone(), known.reason.clone()));
            continue;
        }
        let schema = match &file.schema {
            Ok(schema) => schema.clone(),
            Err(e) => {
                bad.push((file.url.clone(), e.to_string()));
                continue;
            }
        };
        if let Some(problem) = column_problem(spec, &file.url, &schema) {
            bad.push((file.url.clone(), problem));
            continue;
        }
        let first_file = first.get_or_insert_with(|| file.url.clone()).clone();
        if good.is_empty() {
            fields = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        } else if let Err(problem) = merge_schema(&mut fields, &mut dropped, &reads, &spec.columns.id, (&file.url, &schema), &first_file) {
            bad.push((file.url.clone(), problem));
            continue;
        }
        good.push(file);
    }
    // Text the run reads is read as plain text whatever its encoding.
    for f in &mut fields {
        if reads.contains(&f.name().as_str()) && matches!(f.data_type(), DataType::Dictionary(..)) && is_text(f.data_type()) {
            *f = Field::new(f.name(), DataType::Utf8View, f.is_nullable());
        }
    }
    let partition_keys = partition_keys(&good, &fields);
    (CheckedInput { files: good, schema: Schema::new(fields), partition_keys }, bad)
}

/// The Hive-style partition keys of an input's files, in folder order, that
/// are not also columns of the files (a column in the file wins).
fn partition_keys(files: &[InputFile], fields: &[Field]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (key, _) in files.iter().flat_map(|f| &f.partitions) {
        if !keys.contains(key) && !fields.iter().any(|f| f.name() == key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// Register one checked input as the table `name`: its files with their
/// common schema, and, for Hive-style folders, the partition values as text
/// columns (one table per partition, joined by a view).
async fn register_input(ctx: &SessionContext, name: &str, input: &CheckedInput) -> Result<SchemaRef> {
    let schema = Arc::new(input.schema.clone());
    let urls = |files: &[&InputFile]| files.iter().map(|f| f.url.clone()).collect::<Vec<_>>();
    if input.partition_keys.is_empty() {
        register_files(ctx, name, &urls(&input.files.iter().collect::<Vec<_>>()), schema.clone()).await?;
        return Ok(schema);
    }
    let mut groups: BTreeMap<Vec<Option<&str>>, Vec<&InputFile>> = BTreeMap::new();
    for f in &input.files {
        let value = |key: &String| f.partitions.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        groups.entry(input.partition_keys.iter().map(value).collect()).or_default().push(f);
    }
    let mut selects = Vec::new();
    for (g, (values, files)) in groups.iter().enumerate() {
        let table = format!("{name}_partition_{g}");
        register_files(ctx, &table, &urls(files), schema.clone()).await?;
        let columns: Vec<String> = values
            .iter()
            .zip(&input.partition_keys)
            .map(|(v, key)| format!("CAST({} AS VARCHAR) AS {}", v.map_or("NULL".into(), literal), ident(key)))
            .collect();
        selects.push(format!("SELECT *, {} FROM {}", columns.join(", "), ident(&table)));
    }
    create_view(ctx, name, &selects.join("\nUNION ALL\n")).await?;
    let mut fields: Vec<Field> = input.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(input.partition_keys.iter().map(|k| Field::new(k, DataType::Utf8, true)));
    Ok(Arc::new(Schema::new(fields)))
}

/// The field `column` of an input, or an error naming the input and its columns.
pub(super) fn field<'a>(schema: &'a Schema, column: &str, input: &InputSpec, role: &str, flag: &str) -> Result<&'a Field> {
    schema.field_with_name(column).map_err(|_| {
        let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        Error::input(format!(
            "input '{}' ({}) has no column '{column}' for the {role}; its columns are: {}. Name the right one with {flag}",
            input.name,
            input.url,
            columns.join(", ")
        ))
    })
}

fn check_text(f: &Field, input: &InputSpec, role: &str) -> Result<()> {
    if is_text(f.data_type()) {
        Ok(())
    } else {
        Err(Error::input(format!(
            "column '{}' of input '{}' ({}) holds {}, but the {role} must be text (string)",
            f.name(),
            input.name,
            input.url,
            f.data_type()
        )))
    }
}

pub(super) fn check_id(f: &Field, input: &InputSpec) -> Result<()> {
    let t = f.data_type();
    if is_text(t) || t.is_integer() || matches!(t, DataType::Date32 | DataType::Date64 | DataType::Decimal128(..)) {
        Ok(())
    } else {
        Err(Error::input(format!(
            "id column '{}' of input '{}' ({}) holds {t}: ids must be text or integers",
            f.name(),
            input.name,
            input.url
        )))
    }
}

/// The title of an input's documents, as SQL: the title column (checked to
/// be text), or NULL when there is none.
fn title_column(spec: &JobSpec, input: &InputSpec, schema: &Schema) -> Result<String> {
    Ok(match &spec.columns.title {
        Some(t) if t.is_empty() => "CAST(NULL AS VARCHAR)".into(),
        Some(t) => {
            check_text(field(schema, t, input, "title", "--title-col")?, input, "title")?;
            ident(t)
        }
        None => match schema.field_with_name("title") {
            Ok(f) if is_text(f.data_type()) => ident("title"),
            _ => "CAST(NULL AS VARCHAR)".into(),
        },
    })
}

/// Register every checked input and build the view `view` (the documents) over them.
pub(super) async fn register_documents(ctx: &SessionContext, spec: &JobSpec, checked: &CheckedInputs, keep: &KeepRule, view: &str) -> Result<Vec<SchemaRef>> {
    let mut schemas = Vec::new();
    for (i, (input, files)) in spec.inputs.iter().zip(&checked.inputs).enumerate() {
        let table = format!("input_{i}");
        let schema = register_input(ctx, &table, files).await.map_err(|e| e.context(format!("input '{}'", input.name)))?;
        schemas.push(schema);
    }
    let keep_type = keep_type(keep, &schemas)?;
    let mut selects = Vec::new();
    for (i, (input, schema)) in spec.inputs.iter().zip(&schemas).enumerate() {
        let table = format!("input_{i}");
        let title = title_column(spec, input, schema)?;
        let keep_key = match keep_key(keep, keep_type.as_ref(), schema) {
            Some(key) => format!(",\n       {key} AS keep_key"),
            None => String::new(),
        };
        selects.push(render(
            sql::DOCUMENTS,
            &[
                ("source", Param::Text(&input.name)),
                ("id", Param::Ident(&spec.columns.id)),
                ("text", Param::Ident(&spec.columns.text)),
                ("title", Param::Sql(&title)),
                ("keep_key", Param::Sql(&keep_key)),
                ("table", Param::Ident(&table)),
            ],
        ));
    }
    collect(ctx, &format!("CREATE VIEW {view}_rows AS\n{}", selects.join("\nUNION ALL\n"))).await?;
    // With --duplicate-ids keep-first, the view waits for the repeated ids
    // (`check_ids`, then `keep_one_per_id`).
    if spec.columns.duplicate_ids == DuplicateIds::Error {
        collect(ctx, &format!("CREATE VIEW {view} AS SELECT * FROM {view}_rows")).await?;
    }
    Ok(schemas)
}

/// The type of the keep rule's column, as the documents carry it: its type
/// in the first input that has it. It may be missing from some inputs
/// (their documents rank last), but not from all.
fn keep_type(keep: &KeepRule, schemas: &[SchemaRef]) -> Result<Option<DataType>> {
    let Some(c) = keep.column() else {
        return Ok(None);
    };
    let found = schemas.iter().find_map(|s| s.field_with_name(c).ok().map(|f| f.data_type().clone()));
    found
        .map(Some)
        .ok_or_else(|| Error::input(format!("no input has the column '{c}' that the keep rule '{keep}' orders by: check --keep")))
}

/// The keep rule's key of an input's rows, as SQL (`keep_type` from
/// [`keep_type`]); none without a keep column.
fn keep_key(keep: &KeepRule, keep_type: Option<&DataType>, schema: &Schema) -> Option<String> {
    match (keep.column(), keep_type) {
        (Some(c), Some(t)) if schema.field_with_name(c).is_ok() => Some(format!("arrow_cast({}, '{t}')", ident(c))),
        (Some(_), Some(t)) => Some(format!("arrow_cast(NULL, '{t}')")),
        _ => None,
    }
}

/// The rows of input `i` that survive, as queries over `surviving`
/// (sql/80_survivors.sql), one a file: all of them; or, with
/// `--duplicate-ids keep-first` and ids that repeat (`repeated`, the table
/// of their (source, id)), the rows of the other ids, then of each repeated
/// id the one row the documents kept, in id order. The kept row is the
/// first by text, title and keep key as the documents make them
/// ([`keep_one_per_id`], first_per_id.rs), then by the input's other
/// columns of a type that orders, so that rows alike in those three give
/// the same row on every run. Only the rows of repeated ids are ranked:
/// ranking every row took 1.3 s of a Weibo run, for its 538 repeated ids.
pub(super) fn surviving_rows(spec: &JobSpec, keep: &KeepRule, schemas: &[SchemaRef], i: usize, repeated: Option<&str>) -> Result<Vec<Surviving>> {
    let Some(repeated) = repeated.filter(|_| spec.columns.duplicate_ids != DuplicateIds::Error) else {
        return Ok(vec![Surviving { rows: "SELECT * FROM surviving".into(), few: false }]);
    };
    let schema = &schemas[i];
    let id = format!("CAST(i.{} AS VARCHAR)", ident(&spec.columns.id));
    let mut order = vec![ident(&spec.columns.text), title_column(spec, &spec.inputs[i], schema)?];
    order.extend(keep_key(keep, keep_type(keep, schemas)?.as_ref(), schema));
    // The id is the window's own, the text its first key.
    let others = schema.fields().iter().filter(|f| ![&spec.columns.id, &spec.columns.text].contains(&f.name()));
    order.extend(others.filter(|f| orders(f.data_type())).map(|f| format!("i.{}", ident(f.name()))));
    let of_repeated = format!("SELECT 1 FROM {repeated} r WHERE r.source = {} AND r.id = {id}", literal(&spec.inputs[i].name));
    Ok(vec![
        Surviving { rows: format!("SELECT * FROM surviving i WHERE NOT EXISTS ({of_repeated})"), few: false },
        Surviving {
            rows: format!(
                "SELECT * FROM surviving i WHERE EXISTS ({of_repeated})\n  \
                 QUALIFY row_number() OVER (PARTITION BY {id} ORDER BY {}) = 1\n  ORDER BY {id}",
                order.join(", ")
            ),
            few: true,
        },
    ])
}

/// A query of [`surviving_rows`], and whether it keeps few of the input's
/// rows (those of repeated ids), which are best found by the ids alone
/// before the other columns are decoded.
pub(super) struct Surviving {
    pub rows: String,
    pub few: bool,
}

/// Whether the engine sorts values of type `t` (not lists, maps or structs,
/// whose order is not needed to tell rows apart in practice).
fn orders(t: &DataType) -> bool {
    t.is_primitive() || matches!(t, DataType::Boolean | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_))
        || matches!(t, DataType::Dictionary(_, v) if orders(v))
}

/// What [`check_ids`] found: the rows to drop as repeated ids, and the ids
/// (source, id) that repeat; or that the documents held in memory will find
/// them (`in_hold`).
pub(super) struct Ids {
    pub dropped: u64,
    repeated: Vec<(String, String)>,
    pub in_hold: bool,
}

/// With `--duplicate-ids keep-first`, the view `view` over `{view}_rows`
/// with one row per id: of a repeated id, the first by text, title and
/// keep key, the same whatever the order rows are read in. Only the rows of repeated ids
/// (`ids`, written to the work folder) are ranked: ranking every row sorted
/// every text of the corpus (a fifth of the time of a run over
/// `weibo_reposts`, for its 538 repeated ids). The rows kept of them are a
/// work table, ranked once: as a view, every statement that read the
/// documents (boilerplate lines, segmentation, the report's texts) read
/// the inputs twice, once for the other rows and once to find these.
/// When the held documents find the repeated ids (`ids.in_hold`), the view
/// has every row until then (stages.rs, `hold_documents`).
pub(super) async fn keep_one_per_id(ctx: &SessionContext, out: &OutputDir, view: &str, ids: &Ids, duplicates: DuplicateIds) -> Result<()> {
    let rows = format!("{view}_rows");
    if duplicates == DuplicateIds::Error {
        return Ok(());
    }
    if ids.repeated.is_empty() {
        return create_view(ctx, view, &format!("SELECT * FROM {rows}")).await;
    }
    let (name, unique, kept) = first_rows_names(view);
    view_without(ctx, out, &unique, &rows, &name, &ids.repeated).await?;
    let repeated = format!("{rows}_repeated");
    let of_repeated = format!("SELECT * FROM {rows} t WHERE EXISTS (SELECT 1 FROM {name} x WHERE x.source = t.source AND x.id = t.id)");
    create_view(ctx, &repeated, &of_repeated).await?;
    let path = out.staged(&format!("_work/{kept}.parquet"));
    // Rows alike in text and title differ at most in the keep rule's key:
    // ordered by it too, the row kept is the same on every run.
    let keep_key = match ctx.table(rows.as_str()).await?.schema().has_column_with_unqualified_name("keep_key") {
        true => ", keep_key",
        false => "",
    };
    let first = format!(
        "COPY (SELECT * EXCLUDE (duplicate_rank) FROM (\
         SELECT *, row_number() OVER (PARTITION BY source, id ORDER BY text, title{keep_key}) AS duplicate_rank FROM {repeated}) \
         WHERE duplicate_rank = 1) TO {} STORED AS PARQUET {}",
        literal(&path),
        sql::WORK_FILE
    );
    // The rows are found by the join's filter on the ids inside the scan,
    // which then decodes the texts of those rows only.
    let late = [("datafusion.execution.parquet.pushdown_filters", "true")];
    work_table_with(ctx, &late, (&first, &path, &kept), &[]).await?;
    union_with_kept(ctx, view, &unique, &kept).await
}

/// The view `view` over `{view}_rows`, one row per id, when the documents
/// held in memory found the `repeated` ids and the rows `kept` of them
/// (first_per_id.rs): what [`keep_one_per_id`] makes, with nothing ranked.
pub(super) async fn view_of_first_rows(ctx: &SessionContext, out: &OutputDir, view: &str, repeated: &[(String, String)], kept: (SchemaRef, Vec<RecordBatch>)) -> Result<()> {
    let rows = format!("{view}_rows");
    if repeated.is_empty() {
        return create_view(ctx, view, &format!("SELECT * FROM {rows}")).await;
    }
    let (name, unique, kept_name) = first_rows_names(view);
    view_without(ctx, out, &unique, &rows, &name, repeated).await?;
    work_batches(ctx, out, (&kept_name, &format!("_work/{kept_name}.parquet")), kept).await?;
    union_with_kept(ctx, view, &unique, &kept_name).await
}

/// The table of the repeated ids (source, id) of the view `view` of one
/// row per id, when some repeat.
pub(super) fn repeated_ids_table(view: &str) -> String {
    first_rows_names(view).0
}

/// The names of the tables behind the view `view` of one row per id: the
/// repeated ids, the view of the other rows, and the rows kept of them.
fn first_rows_names(view: &str) -> (String, String, String) {
    (format!("{view}_repeated_ids"), format!("{view}_rows_unique"), format!("{view}_kept_of_repeated_ids"))
}

/// The view `view`: the rows of `unique` and of `kept`, in `unique`'s types.
async fn union_with_kept(ctx: &SessionContext, view: &str, unique: &str, kept: &str) -> Result<()> {
    // In the view's own types: a work table in memory holds its strings as
    // views (as read back from Parquet), and a union with them made every
    // row's source and id views too (Weibo: the terms 221 → 248 MB).
    let schema = ctx.table(unique).await?.schema().as_arrow().clone();
    let columns: Vec<String> = schema.fields().iter().map(|f| format!("arrow_cast({0}, '{1}') AS {0}", ident(f.name()), f.data_type())).collect();
    create_view(ctx, view, &format!("SELECT * FROM {unique} UNION ALL SELECT {} FROM {kept}", columns.join(", "))).await
}

/// Every document needs an id, unique within its input: a duplicate or
/// missing id is bad input (named, with the input), never silently merged.
/// Returns the rows dropped as repeated ids (with `--duplicate-ids keep-first`).
/// With `in_hold` and `--duplicate-ids keep-first`, the repeated ids are
/// not looked for: the documents held in memory find them.
pub(super) async fn check_ids(ctx: &SessionContext, view: &str, duplicates: DuplicateIds, in_hold: bool) -> Result<Ids> {
    let rows = format!("{view}_rows");
    let missing = format!("SELECT source, count(*) AS n FROM {rows} WHERE id IS NULL GROUP BY source ORDER BY n DESC, source LIMIT 5");
    let mut found = Vec::new();
    for b in &collect(ctx, &missing).await? {
        let (sources, counts) = (strings(b, 0)?, column_u64(b, 1)?);
        found.extend(sources.iter().zip(counts.values()).map(|(s, n)| format!("input '{s}': {n} document(s) without an id")));
    }
    let in_hold = in_hold && duplicates == DuplicateIds::KeepFirst;
    let repeated = match in_hold {
        true => Vec::new(),
        false => repeated_ids(ctx, &rows).await?,
    };
    if duplicates == DuplicateIds::Error {
        let mut worst: Vec<&(String, String, u64)> = repeated.iter().collect();
        worst.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
        found.extend(worst.iter().take(5).map(|(s, id, n)| format!("input '{s}': id '{id}' on {n} documents")));
        found.truncate(5);
    }
    if !found.is_empty() {
        return Err(Error::input(format!(
            "document ids must be present and unique within an input: {}. Remove the duplicates, keep one \
             row per id with --duplicate-ids keep-first, or give the right id column with --id-col",
            found.join("; ")
        )));
    }
    Ok(Ids {
        dropped: repeated.iter().map(|r| r.2 - 1).sum(),
        repeated: repeated.into_iter().map(|(s, id, _)| (s, id)).collect(),
        in_hold,
    })
}

/// The ids that more than one row of `rows` carries within one input, with
/// their counts. Grouping every (source, id) text cost a `weibo_reposts` run
/// 0.4 s; the ids are grouped by their 64-bit hash first, and only the rows
/// of a hash seen twice (the repeated ids, and rare collisions) are grouped
/// exactly. Inputs are read whole (`WHOLE_FILE_SCANS`), so that an input of
/// one row group is hashed on every core.
async fn repeated_ids(ctx: &SessionContext, rows: &str) -> Result<Vec<(String, String, u64)>> {
    let query = format!(
        "WITH suspects AS (SELECT hash64(id) AS h FROM {rows} WHERE id IS NOT NULL GROUP BY hash64(id) HAVING count(*) > 1) \
         SELECT source, id, count(*) AS n FROM {rows} \
         WHERE id IS NOT NULL AND hash64(id) IN (SELECT h FROM suspects) \
         GROUP BY source, id HAVING count(*) > 1"
    );
    let mut repeated = Vec::new();
    for b in &collect_with(ctx, &[WHOLE_FILE_SCANS], &query).await? {
        let (sources, ids, counts) = (strings(b, 0)?, strings(b, 1)?, column_u64(b, 2)?);
        repeated.extend(sources.into_iter().zip(ids).zip(counts.values().iter().copied()).map(|((s, id), n)| (s, id, n)));
    }
    Ok(repeated)
}

/// After a failed read: find the input file that cannot be decoded (damaged
/// pages, text that is not UTF-8) and name it, reading each file alone.
/// Returns `error` unchanged when every file reads, or when files are to be
/// skipped (the runner then finds the file and runs again without it).
pub(super) async fn name_bad_file(ctx: &SessionContext, spec: &JobSpec, error: Error) -> Error {
    if error.kind() != crate::error::Kind::Unreadable || spec.columns.on_bad_file == OnBadFile::Skip {
        return error;
    }
    match find_bad_file(ctx, spec, &[]).await {
        Some(bad) => Error::input(format!("input '{}': {}", bad.input, bad.reason)),
        None => error,
    }
}

/// The first input file, other than `known`, whose values cannot be
/// decoded, read alone: with why.
pub(super) async fn find_bad_file(ctx: &SessionContext, spec: &JobSpec, known: &[SkippedFile]) -> Option<SkippedFile> {
    for input in &spec.inputs {
        let Ok(files) = input_files(ctx, &input.url).await else { continue };
        for f in files.iter().filter(|f| f.schema.is_ok() && !known.iter().any(|k| k.input == input.name && k.file == f.url)) {
            if let Err(e) = read_every_value(ctx, spec, &f.url).await {
                let reason = format!(
                    "file '{}' cannot be read: {e}. The file is damaged or its text is not valid UTF-8: repair it or \
                     remove it from the input",
                    f.url
                );
                return Some(SkippedFile { input: input.name.clone(), file: f.url.clone(), reason });
            }
        }
    }
    None
}

/// Decode every value of the columns a run reads in one file.
async fn read_every_value(ctx: &SessionContext, spec: &JobSpec, url: &str) -> Result<()> {
    let probe = async {
        let schema = register_parquet(ctx, "probe_file", url).await?;
        // Functions of every value: a bare count could be answered from statistics.
        let mut columns = Vec::new();
        if schema.field_with_name(&spec.columns.id).is_ok() {
            columns.push(format!("sum(length(CAST({} AS VARCHAR)))", ident(&spec.columns.id)));
        }
        for c in [Some(&spec.columns.text), spec.columns.title.as_ref()].into_iter().flatten() {
            if schema.field_with_name(c).is_ok() && !c.is_empty() {
                columns.push(format!("sum(length(CAST({} AS VARCHAR)))", ident(c)));
            }
        }
        if columns.is_empty() {
            return Ok(());
        }
        collect(ctx, &format!("SELECT {} FROM probe_file", columns.join(", "))).await.map(|_| ())
    }
    .await;
    let _ = ctx.deregister_table("probe_file");
    probe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_drifting_files_meet_in_one_type() {
        use DataType::*;
        let dict = Dictionary(Box::new(Int32), Box::new(Utf8));
        assert_eq!(common_type(&Utf8, &Utf8, false), Some(Utf8));
        assert_eq!(common_type(&dict, &LargeUtf8, false), Some(Utf8View));
        assert_eq!(common_type(&Int32, &Int64, false), Some(Int64));
        assert_eq!(common_type(&UInt8, &UInt32, false), Some(UInt64));
        assert_eq!(common_type(&Int64, &Utf8, false), None, "a number is not text");
        assert_eq!(common_type(&Int64, &Utf8, true), Some(Utf8View), "ids are compared as text");
        assert_eq!(common_type(&Float64, &Utf8, true), None);
        assert!(is_text(&dict) && !is_text(&Binary));
    }

    #[test]
    fn a_file_that_retypes_a_column_the_run_reads_is_named() {
        let field = |name: &str, t: DataType| Field::new(name, t, false);
        let mut fields = vec![field("id", DataType::Utf8), field("text", DataType::Utf8), field("score", DataType::Int64)];
        let mut dropped = BTreeSet::new();
        let next = Schema::new(vec![field("id", DataType::Int64), field("text", DataType::Utf8), field("score", DataType::Float64), field("lang", DataType::Utf8)]);
        merge_schema(&mut fields, &mut dropped, &["id", "text"], "id", ("b.parquet", &next), "a.parquet").unwrap();
        let names: Vec<(&str, &DataType, bool)> = fields.iter().map(|f| (f.name().as_str(), f.data_type(), f.is_nullable())).collect();
        assert_eq!(
            names,
            [("id", &DataType::Utf8View, true), ("text", &DataType::Utf8, false), ("lang", &DataType::Utf8, true)],
            "a column no file agrees on and the run does not read is left out; a new one is nullable"
        );
        assert!(dropped.contains("score"));
        let retyped = Schema::new(vec![field("id", DataType::Utf8), field("text", DataType::Binary)]);
        let e = merge_schema(&mut fields, &mut dropped, &["id", "text"], "id", ("c.parquet", &retyped), "a.parquet").unwrap_err();
        assert!(e.contains("c.parquet") && e.contains("'text' holds Binary") && e.contains("Utf8 in 'a.parquet'"), "{e}");
        assert_eq!(fields.len(), 3, "a refused file changes nothing");
    }

    #[tokio::test]
    async fn the_kept_rows_of_repeated_ids_join_the_view_in_its_types() {
        let ctx = crate::session::new_context(&crate::session::EngineOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = OutputDir::prepare(&ctx, dir.path().join("out").to_str().unwrap(), false).await.unwrap();
        // Id b twice: the row first by text (x) stays, with the others.
        let rows = "SELECT 'in' AS source, column1 AS id, column2 AS text, CAST(NULL AS VARCHAR) AS title \
                    FROM (VALUES ('a', 'z'), ('b', 'y'), ('b', 'x'), ('c', 'w'))";
        for view in ["ranked", "held", "every"] {
            collect(&ctx, &format!("CREATE VIEW {view}_rows AS {rows}")).await.unwrap();
        }
        // Ranked by a statement, or found by held documents (first_per_id.rs),
        // which give the row kept in the types read back.
        let ids = Ids { dropped: 1, repeated: vec![("in".into(), "b".into())], in_hold: false };
        keep_one_per_id(&ctx, &out, "ranked", &ids, DuplicateIds::KeepFirst).await.unwrap();
        let kept = collect(&ctx, "SELECT arrow_cast(source, 'Utf8View') AS source, arrow_cast(id, 'Utf8View') AS id, \
                                  arrow_cast(text, 'Utf8View') AS text, arrow_cast(title, 'Utf8View') AS title FROM held_rows WHERE text = 'x'").await.unwrap();
        let schema = kept[0].schema();
        view_of_first_rows(&ctx, &out, "held", &ids.repeated, (schema.clone(), kept)).await.unwrap();
        let types = |t: String| {
            let ctx = ctx.clone();
            async move { ctx.table(t.as_str()).await.unwrap().schema().as_arrow().fields().iter().map(|f| f.data_type().clone()).collect::<Vec<_>>() }
        };
        for view in ["ranked", "held"] {
            assert_eq!(types(view.into()).await, types(format!("{view}_rows")).await);
            let batches = collect(&ctx, &format!("SELECT id, text FROM {view} ORDER BY id")).await.unwrap();
            let b = datafusion::arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
            let (ids, texts) = (strings(&b, 0).unwrap(), strings(&b, 1).unwrap());
            assert_eq!((ids, texts), (vec!["a".to_string(), "b".into(), "c".into()], vec!["z".to_string(), "x".into(), "w".into()]), "{view}");
        }
        // No repeated ids: every row.
        view_of_first_rows(&ctx, &out, "every", &[], (schema, Vec::new())).await.unwrap();
        assert_eq!(collect(&ctx, "SELECT * FROM every").await.unwrap().iter().map(RecordBatch::num_rows).sum::<usize>(), 4);
    }
}
