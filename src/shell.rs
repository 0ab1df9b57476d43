//! `neardup sql`: ad-hoc SQL over Parquet with every neardup function.
//!
//! Statements come from `-c`, `-f`, standard input, or an interactive prompt
//! when standard input is a terminal. Results go to standard output as a
//! table, CSV or JSON lines; a closed pipe (`| head`) ends quietly.

use std::io::{BufRead, IsTerminal, Write};

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParser;

use crate::error::{Error, Result};
use crate::session::EngineOptions;
use crate::storage::register_parquet;

/// How query results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned table for people.
    Table,
    /// CSV with a header line.
    Csv,
    /// One JSON object per row (JSON lines).
    Json,
}

/// What a shell session runs: a script (`command`, a `file`, or standard
/// input when it is not a terminal; else statements typed one by one)
/// over the Parquet `tables` (`NAME=URL`).
#[derive(Debug, Clone)]
pub struct Session {
    pub command: Option<String>,
    pub file: Option<std::path::PathBuf>,
    pub tables: Vec<String>,
    pub format: Format,
    pub engine: EngineOptions,
}

/// CSV has no lists or structs: render such columns as text, as the table format does.
fn nested_as_text(batch: &RecordBatch) -> Result<RecordBatch, datafusion::arrow::error::ArrowError> {
    use datafusion::arrow::array::{ArrayRef, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if field.data_type().is_nested() {
            let f = ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())?;
            let text: StringArray = (0..column.len()).map(|i| column.is_valid(i).then(|| f.value(i).to_string())).collect();
            fields.push(Field::new(field.name(), DataType::Utf8, true));
            columns.push(std::sync::Arc::new(text));
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns)
}

/// Print batches in `format`. A broken pipe is not an error.
fn print(batches: &[RecordBatch], format: Format) -> Result<()> {
    let mut out = Stdout { inner: std::io::stdout().lock(), closed: false };
    let written = match format {
        Format::Table => {
            let table = pretty_format_batches(batches)?;
            writeln!(out, "{table}").map_err(Error::from)
        }
        Format::Csv => {
            let mut w = datafusion::arrow::csv::WriterBuilder::new().with_header(true).build(&mut out);
            batches.iter().try_for_each(|b| w.write(&nested_as_text(b)?)).map_err(Error::from)
        }
        Format::Json => {
            let mut w = datafusion::arrow::json::LineDelimitedWriter::new(&mut out);
            batches.iter().try_for_each(|b| w.write(b)).and_then(|_| w.finish()).map_err(Error::from)
        }
    };
    let written = written.and_then(|_| out.flush().map_err(Error::from));
    // The reader went away (`neardup sql … | head`): not an error.
    if out.closed {
        std::process::exit(0);
    }
    written
}

/// Standard output that remembers whether a write found the pipe closed:
/// the CSV writer reports its I/O errors as text, and the kind is known here.
struct Stdout {
    inner: std::io::StdoutLock<'static>,
    closed: bool,
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf);
        self.closed |= written.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
        written
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let flushed = self.inner.flush();
        self.closed |= flushed.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
        flushed
    }
}

/// Run every statement of `sql`, printing the results of those that return rows.
pub async fn run_statements(ctx: &SessionContext, sql: &str, format: Format) -> Result<()> {
    let statements = DFParser::parse_sql(sql).map_err(|e| Error::input(e.to_string()))?;
    for statement in statements {
        let state = ctx.state();
        let plan = state.statement_to_plan(statement).await?;
        let batches = crate::statement::execute(ctx, &state, plan).await?.collect().await?;
        if batches.iter().any(|b| b.num_columns() > 0) {
            print(&batches, format)?;
        }
    }
    Ok(())
}

/// A statement is complete when it ends with ';' outside quotes and comments.
fn complete(buffer: &str) -> bool {
    let (mut single, mut double) = (false, false);
    let mut last = ' ';
    for line in buffer.lines() {
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                '-' if !single && !double && chars.peek() == Some(&'-') => break,
                _ => {}
            }
            if !c.is_whitespace() {
                last = c;
            }
        }
    }
    !single && !double && last == ';'
}

async fn interactive(ctx: &SessionContext, format: Format) -> Result<()> {
    eprintln!("neardup SQL shell: end statements with ';', quit with \\q or Ctrl-D. `SHOW TABLES;` lists tables.");
    let stdin = std::io::stdin();
    let mut buffer = String::new();
    loop {
        eprint!("{}", if buffer.is_empty() { "neardup> " } else { "     ..> " });
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        if buffer.is_empty() && matches!(line.trim(), "\\q" | "quit" | "exit") {
            return Ok(());
        }
        buffer.push_str(&line);
        if complete(&buffer) {
            if let Err(e) = run_statements(ctx, &buffer, format).await {
                eprintln!("error: {e}");
            }
            buffer.clear();
        }
    }
}

/// `neardup sql`.
pub async fn run(args: &Session) -> Result<()> {
    let ctx = crate::session::context(&args.engine).await?;
    for t in &args.tables {
        let (name, url) = t
            .split_once('=')
            .filter(|(n, u)| !n.is_empty() && !u.is_empty())
            .ok_or_else(|| Error::input(format!("--table '{t}' must be NAME=URL")))?;
        register_parquet(&ctx, name, url).await.map_err(|e| e.context(format!("table '{name}'")))?;
    }
    let script = match (&args.command, &args.file) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f).map_err(|e| Error::input(format!("cannot read SQL file '{}': {e}", f.display())))?,
        ),
        (None, None) if !std::io::stdin().is_terminal() => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
            Some(s)
        }
        (None, None) => None,
    };
    match script {
        Some(s) => run_statements(&ctx, &s, args.format).await,
        None => interactive(&ctx, args.format).await,
    }
}

#[cfg(test)]
mod tests {
    use super::complete;

    #[test]
    fn statement_completion() {
        assert!(complete("SELECT 1;"));
        assert!(!complete("SELECT ';'"));
        assert!(complete("SELECT ';' ;  "));
        assert!(!complete("SELECT 1 -- done;"));
    }
}
