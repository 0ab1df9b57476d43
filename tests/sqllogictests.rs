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
