//! `neardup sql` on the real binary: queries with neardup's functions over
//! attached tables, statements from standard input, a closed pipe, and the
//! plans and debug log of the fingerprint statement.

mod common;
use common::*;

#[test]
fn sql_runs_queries_with_the_functions_and_tables() {
    let out = ok(&neardup(&["sql", "--format", "csv", "-c", "SELECT hamming(11, 1) AS d, tokenize('北京天安门') AS t"]));
    assert_eq!(out, "d,t\n2,\"[北京, 天安门]\"\n");
    let table = format!("news={}", sample("news.parquet"));
    let out = ok(&neardup(&["sql", "--table", &table, "--format", "json", "-c", "SELECT count(*) AS n FROM news WHERE text IS NOT NULL AND text <> ''"]));
    assert_eq!(out.trim(), "{\"n\":405}");
    let out = ok(&neardup(&["sql", "-f", root().join("sql/examples/fingerprint_a_text.sql").to_str().unwrap()]));
    assert!(out.contains("| 0 ") && out.contains("1.0"), "{out}");
    let err = neardup(&["sql", "-c", "SELECT * FROM nowhere"]);
    assert_eq!(err.status.code(), Some(2));
    assert!(stderr(&err).contains("nowhere"), "{}", stderr(&err));
    let functions = ok(&neardup(&["functions"]));
    for f in ["tokenize", "tokenize_tagged", "term_stats", "idf", "hash64", "simhash", "simhash_agg", "hamming", "simhash_similarity", "band_keys", "first_common_band"] {
        assert!(functions.contains(&format!("{f}(")), "functions lists no {f}");
    }
}

#[test]
fn sql_reads_statements_from_standard_input() {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["sql", "--format", "csv"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"CREATE VIEW v AS SELECT 'a;b' AS s;\nSELECT s, hash64(s) = hash64('a;b') AS same FROM v;\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(ok(&out), "s,same\na;b,true\n");
}

/// A reader that stops early (`neardup sql … | head -1`) ends the output
/// quietly: no panic, no error message. The output (about 1.3 MB) is far
/// larger than a pipe's buffer, so the writer does meet the closed pipe.
#[test]
fn a_closed_pipe_ends_output_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["sql", "--format", "csv", "-c", "SELECT value, value * 2 AS twice FROM generate_series(1, 100000)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(!first.is_empty());
    assert!(output.status.success(), "{:?}", output.status);
    assert_eq!(stderr(&output), "");
}

/// Every document's fingerprint is computed once: the plan of the
/// fingerprint statement calls idf_simhash in one place, although the query
/// reads two fields of its result.
/// The standard error of `neardup fingerprint` on the sample news, run with
/// the environment variable `key` set to `value`.
fn fingerprint_stderr_with(key: &str, value: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["fingerprint", "-q", "-i", &sample("news.parquet"), "-o", out.to_str().unwrap()])
        .env(key, value)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    err
}

#[test]
fn the_fingerprint_plan_calls_idf_simhash_once() {
    let err = fingerprint_stderr_with("NEARDUP_EXPLAIN", "1");
    let plan = err.split("neardup: plan of").find(|p| p.contains("-- Stage 3")).expect("the stage 3 plan");
    let physical = &plan[plan.find("Exec:").unwrap()..];
    assert_eq!(physical.matches("idf_simhash(terms@").count(), 1, "{physical}");
}

#[test]
fn explain_analyze_prints_each_plan_with_its_metrics_after_it_ran() {
    let err = fingerprint_stderr_with("NEARDUP_EXPLAIN", "analyze");
    let plan = err.split("neardup: plan and metrics of").find(|p| p.contains("-- Stage 3")).expect("the stage 3 plan");
    let physical = &plan[plan.find("Exec:").unwrap()..];
    assert!(physical.contains("output_rows="), "{physical}");
    assert!(physical.contains("elapsed_compute="), "{physical}");
    assert!(!err.contains("neardup: plan of"), "analyze prints the plan once, after the run");
}

#[test]
fn debug_log_times_each_statement_without_the_engines_records() {
    let err = fingerprint_stderr_with("NEARDUP_LOG", "debug");
    // One line a statement, tagged with the job's role: its time, then its
    // first words (the segmentation statement writes the terms).
    let timed: Vec<&str> = err.lines().filter(|l| l.contains(" job DEBUG neardup::job::query: ")).collect();
    assert!(timed.iter().any(|l| l.contains(" ms  COPY ( SELECT source, id")), "{err}");
    assert!(timed.len() >= 4, "{err}");
    // DataFusion's and its parser's own debug records (every optimizer
    // pass) stay out.
    assert!(!err.contains("DEBUG datafusion") && !err.contains("DEBUG sqlparser"), "{err}");
}
