//! Runs every `tests/sql/*.slt` file against a neardup session: each SQL
//! function's behaviour, written as queries and their expected output.

use std::path::PathBuf;

use datafusion::arrow::array::Array;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::SessionContext;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};

struct Neardup {
    ctx: SessionContext,
}

#[derive(Debug)]
struct SqlError(String);

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for SqlError {}

#[async_trait::async_trait]
impl AsyncDB for Neardup {
    type Error = SqlError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqlError> {
        let df = self.ctx.sql(sql).await.map_err(|e| SqlError(e.to_string()))?;
        let is_query = !df.schema().fields().is_empty() && !sql.trim_start().to_uppercase().starts_with("CREATE");
        let batches = df.collect().await.map_err(|e| SqlError(e.to_string()))?;
        if !is_query {
            return Ok(DBOutput::StatementComplete(0));
        }
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        let mut types = Vec::new();
        for batch in &batches {
            if types.is_empty() {
                types = batch
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| match f.data_type() {
                        t if t.is_integer() => DefaultColumnType::Integer,
                        t if t.is_floating() => DefaultColumnType::FloatingPoint,
                        t if t.is_numeric() => DefaultColumnType::FloatingPoint,
                        datafusion::arrow::datatypes::DataType::Utf8
                        | datafusion::arrow::datatypes::DataType::Utf8View
                        | datafusion::arrow::datatypes::DataType::LargeUtf8 => DefaultColumnType::Text,
                        _ => DefaultColumnType::Any,
                    })
                    .collect();
            }
            let formatters: Vec<ArrayFormatter> = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref() as &dyn Array, &options))
                .collect::<Result<_, _>>()
                .map_err(|e| SqlError(e.to_string()))?;
            for r in 0..batch.num_rows() {
                rows.push(
                    formatters
                        .iter()
                        .map(|f| {
                            let s = f.value(r).to_string();
                            if s.is_empty() { "(empty)".to_string() } else { s }
                        })
                        .collect(),
                );
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "neardup"
    }
}

#[tokio::test]
async fn sql_functions() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "slt"));
    files.sort();
    assert!(files.len() >= 5, "expected the .slt files in {}", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        let mut runner = sqllogictest::Runner::new(|| async {
            Ok(Neardup { ctx: neardup::session::new_context(&Default::default()).map_err(|e| SqlError(e.to_string()))? })
        });
        if let Err(e) = runner.run_file_async(file).await {
            failures.push(format!("{}:\n{e}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A line `{{sql/FILE name=value …}}` of a fixture, replaced by the
/// statement of `sql/FILE` rendered with those values: `3` is a number,
/// `0.5` a fraction, `'x'` text, `"x"` a name, `NULL` nothing, `true` or
/// `false` a boolean, and `[…]` a piece of SQL. `path` is given for the
/// statement, `{{tmp}}/out.parquet`, unless the line gives another. Comments and blank lines are dropped
/// (a blank line ends a record).
fn render_statement(directive: &str, tmp: &str) -> String {
    use neardup::job::sql::{render, Param, ALL};
    let inner = directive.trim().trim_start_matches("{{sql/").trim_end_matches("}}");
    let (file, args) = inner.split_once(' ').unwrap_or((inner, ""));
    let statement = *ALL.iter().find(|s| s.file == file).unwrap_or_else(|| panic!("no statement {file}"));
    let mut values: Vec<(String, String)> = Vec::new();
    let mut rest = args.trim();
    while !rest.is_empty() {
        let (name, value) = rest.split_once('=').unwrap_or_else(|| panic!("'{rest}' is not name=value"));
        let end = match value.as_bytes()[0] {
            b'[' => value.find(']').expect("a closing ]") + 1,
            q @ (b'\'' | b'"') => value[1..].find(q as char).expect("a closing quote") + 2,
            _ => value.find(' ').unwrap_or(value.len()),
        };
        values.push((name.trim().to_string(), value[..end].to_string()));
        rest = value[end..].trim();
    }
    let out = format!("{tmp}/out.parquet");
    if statement.params.contains(&"path") && !values.iter().any(|(name, _)| name == "path") {
        values.push(("path".into(), format!("'{out}'")));
    }
    let params: Vec<(&str, Param)> = values
        .iter()
        .map(|(name, v)| {
            let param = match v.as_bytes()[0] {
                b'[' => Param::Sql(&v[1..v.len() - 1]),
                b'\'' => Param::Text(&v[1..v.len() - 1]),
                b'"' => Param::Ident(&v[1..v.len() - 1]),
                _ if v == "NULL" => Param::IntOrNull(None),
                _ if v == "true" || v == "false" => Param::Bool(v == "true"),
                _ if v.contains('.') => Param::Float(v.parse().unwrap()),
                _ => Param::Int(v.parse().unwrap_or_else(|_| panic!("'{v}' is no value"))),
            };
            (name.as_str(), param)
        })
        .collect();
    let sql = render(statement, &params);
    sql.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n")
}

/// Each statement of `sql/` on a small input of its own
/// (`tests/statements/FILE.slt`, one per file): the tables it reads made
/// with VALUES, the statement rendered with fixed settings, and what it
/// writes or returns read back.
#[tokio::test]
async fn each_statement_on_its_fixture() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/statements");
    let mut failures = Vec::new();
    for statement in neardup::job::sql::ALL {
        let fixture = dir.join(statement.file.replace(".sql", ".slt"));
        let Ok(text) = std::fs::read_to_string(&fixture) else {
            failures.push(format!("{} has no fixture {}", statement.file, fixture.display()));
            continue;
        };
        let tmp = tempfile::tempdir().unwrap();
        let tmp_path = tmp.path().display().to_string();
        let text = text.replace("{{tmp}}", &tmp_path);
        let rendered: Vec<String> =
            text.lines().map(|l| if l.starts_with("{{sql/") { render_statement(l, &tmp_path) } else { l.to_string() }).collect();
        assert!(text.contains(&format!("{{{{sql/{} ", statement.file)) || text.contains(&format!("{{{{sql/{}}}}}", statement.file)), "{} does not run its statement", fixture.display());
        let script = tmp.path().join("fixture.slt");
        std::fs::write(&script, rendered.join("\n") + "\n").unwrap();
        let mut runner = sqllogictest::Runner::new(|| async {
            Ok(Neardup { ctx: neardup::session::new_context(&Default::default()).map_err(|e| SqlError(e.to_string()))? })
        });
        if let Err(e) = runner.run_file_async(&script).await {
            failures.push(format!("{}:\n{e}", fixture.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
