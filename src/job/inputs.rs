//! The inputs of a run: each input's columns checked (the id, the text and
//! the title, with their types), registered as one view of documents with
//! their source, repeated ids refused or dropped, and a file that cannot be
//! decoded named.

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::prelude::SessionContext;

use super::config::{DuplicateIds, JobSpec, KeepRule};
use super::query::{collect, column_u64, strings};
use super::tables::{create_view, view_without};
use super::sql::{self, render, Param};
use crate::error::{Error, Result};
use crate::storage::{ident, register_parquet, InputSpec, OutputDir};

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
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

/// Register every input and build the view `view` (the documents) over them.
pub(super) async fn register_documents(ctx: &SessionContext, spec: &JobSpec, keep: &KeepRule, view: &str) -> Result<Vec<SchemaRef>> {
    let mut schemas = Vec::new();
    for (i, input) in spec.inputs.iter().enumerate() {
        let table = format!("input_{i}");
        let schema = register_parquet(ctx, &table, &input.url).await.map_err(|e| e.context(format!("input '{}'", input.name)))?;
        schemas.push(schema);
    }
    // The keep rule's column may be missing from some inputs (their
    // documents rank last), but not from all.
    let keep_type = match keep.column() {
        Some(c) => {
            let found = schemas.iter().find_map(|s| s.field_with_name(c).ok().map(|f| f.data_type().clone()));
            Some(found.ok_or_else(|| {
                Error::input(format!("no input has the column '{c}' that the keep rule '{keep}' orders by: check --keep"))
            })?)
        }
        None => None,
    };
    let mut selects = Vec::new();
    for (i, (input, schema)) in spec.inputs.iter().zip(&schemas).enumerate() {
        let table = format!("input_{i}");
        check_id(field(&schema, &spec.columns.id, input, "document id", "--id-col")?, input)?;
        check_text(field(&schema, &spec.columns.text, input, "document text", "--text-col")?, input, "document text")?;
        let title = title_column(spec, input, schema)?;
        let keep_key = match (keep.column(), &keep_type) {
            (Some(c), Some(t)) if schema.field_with_name(c).is_ok() => format!(",\n       arrow_cast({}, '{t}') AS keep_key", ident(c)),
            (Some(_), Some(t)) => format!(",\n       arrow_cast(NULL, '{t}') AS keep_key"),
            _ => String::new(),
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

/// What [`check_ids`] found: the rows to drop as repeated ids, and the ids
/// (source, id) that repeat.
pub(super) struct Ids {
    pub dropped: u64,
    repeated: Vec<(String, String)>,
}

/// With `--duplicate-ids keep-first`, the view `view` over `{view}_rows`
/// with one row per id: of a repeated id, the first by text and title, the
/// same whatever the order rows are read in. Only the rows of repeated ids
/// (`ids`, written to the work folder) are ranked: ranking every row sorted
/// every text of the corpus (a fifth of the time of a run over
/// `weibo_reposts`, for its 538 repeated ids).
pub(super) async fn keep_one_per_id(ctx: &SessionContext, out: &OutputDir, view: &str, ids: &Ids, duplicates: DuplicateIds) -> Result<()> {
    let rows = format!("{view}_rows");
    if duplicates == DuplicateIds::Error {
        return Ok(());
    }
    if ids.repeated.is_empty() {
        return create_view(ctx, view, &format!("SELECT * FROM {rows}")).await;
    }
    let name = format!("{view}_repeated_ids");
    let (repeated, unique) = (format!("{rows}_repeated"), format!("{rows}_unique"));
    view_without(ctx, out, &unique, &rows, &name, &ids.repeated).await?;
    let of_repeated = format!("SELECT * FROM {rows} t WHERE EXISTS (SELECT 1 FROM {name} x WHERE x.source = t.source AND x.id = t.id)");
    create_view(ctx, &repeated, &of_repeated).await?;
    let first = format!(
        "SELECT * FROM {unique} UNION ALL SELECT * EXCLUDE (duplicate_rank) FROM (\
         SELECT *, row_number() OVER (PARTITION BY source, id ORDER BY text, title) AS duplicate_rank FROM {repeated}) \
         WHERE duplicate_rank = 1"
    );
    create_view(ctx, view, &first).await
}

/// Every document needs an id, unique within its input: a duplicate or
/// missing id is bad input (named, with the input), never silently merged.
/// Returns the rows dropped as repeated ids (with `--duplicate-ids keep-first`).
pub(super) async fn check_ids(ctx: &SessionContext, view: &str, duplicates: DuplicateIds) -> Result<Ids> {
    let repeated = match duplicates {
        DuplicateIds::Error => "count(*) > 1 OR id IS NULL",
        DuplicateIds::KeepFirst => "id IS NULL",
    };
    let batches = collect(
        ctx,
        &format!(
            "SELECT source, id, count(*) AS n FROM {view}_rows GROUP BY source, id HAVING {repeated} \
             ORDER BY n DESC, source, id LIMIT 5"
        ),
    )
    .await?;
    let mut found = Vec::new();
    for b in &batches {
        let (sources, counts) = (strings(b, 0)?, column_u64(b, 2)?);
        let ids = b.column(1);
        for r in 0..b.num_rows() {
            found.push(match ids.is_null(r) {
                true => format!("input '{}': {} document(s) without an id", sources[r], counts.value(r)),
                false => format!("input '{}': id '{}' on {} documents", sources[r], strings(b, 1)?[r], counts.value(r)),
            });
        }
    }
    if !found.is_empty() {
        return Err(Error::input(format!(
            "document ids must be present and unique within an input: {}. Remove the duplicates, keep one \
             row per id with --duplicate-ids keep-first, or give the right id column with --id-col",
            found.join("; ")
        )));
    }
    let mut ids = Ids { dropped: 0, repeated: Vec::new() };
    if duplicates == DuplicateIds::KeepFirst {
        let query = format!("SELECT source, id, count(*) AS n FROM {view}_rows GROUP BY source, id HAVING count(*) > 1");
        for b in &collect(ctx, &query).await? {
            let (sources, ids_of, counts) = (strings(b, 0)?, strings(b, 1)?, column_u64(b, 2)?);
            ids.dropped += counts.values().iter().map(|n| n - 1).sum::<u64>();
            ids.repeated.extend(sources.into_iter().zip(ids_of));
        }
    }
    Ok(ids)
}

/// After a failed read: find the input file that cannot be decoded (damaged
/// pages, text that is not UTF-8) and name it, reading each file alone.
/// Returns `error` unchanged when every file reads.
pub(super) async fn name_bad_file(ctx: &SessionContext, spec: &JobSpec, error: Error) -> Error {
    if error.kind() != crate::error::Kind::Unreadable {
        return error;
    }
    for input in &spec.inputs {
        let Ok((table_url, files)) = crate::storage::list_parquet_files(ctx, &input.url).await else { continue };
        for f in files {
            let url = format!("{}{}", table_url.object_store().as_str(), f.location);
            let probe = async {
                let schema = register_parquet(ctx, "probe_file", &url).await?;
                // Functions of every value: a bare count could be answered from statistics.
                let mut columns = vec![format!("sum(length(CAST({} AS VARCHAR)))", ident(&spec.columns.id))];
                for c in [Some(&spec.columns.text), spec.columns.title.as_ref()].into_iter().flatten() {
                    if schema.field_with_name(c).is_ok() && !c.is_empty() {
                        columns.push(format!("sum(length({}))", ident(c)));
                    }
                }
                collect(ctx, &format!("SELECT {} FROM probe_file", columns.join(", "))).await
            }
            .await;
            let _ = ctx.deregister_table("probe_file");
            if let Err(e) = probe {
                return Error::input(format!(
                    "input '{}': file '{}' cannot be read: {e}. The file is damaged or its text is not valid \
                     UTF-8: repair it or remove it from the input",
                    input.name,
                    crate::storage::display_location(&url)
                ));
            }
        }
    }
    error
}
