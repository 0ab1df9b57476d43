//! Helpers shared by the integration tests: run the real binary, read its
//! Parquet outputs back, and find the shared real-text folder.
#![allow(dead_code)]

pub mod cluster;
pub mod gcs;
pub mod s3;
pub mod tls;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn sample(name: &str) -> String {
    root().join("sample_data").join(name).display().to_string()
}

/// `../shared/data/NAME` if present (a user's fresh checkout has no ../shared).
pub fn shared_data(name: &str) -> Option<PathBuf> {
    let p = root().join("../shared/data").join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("SKIPPED: {} is absent (the shared data folder is not beside this checkout)", p.display());
        None
    }
}

/// Run the neardup binary with `args`.
pub fn neardup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup")).args(args).output().expect("run neardup")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Assert success and return standard output.
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "neardup failed ({:?}):\n{}", o.status.code(), stderr(o));
    stdout(o)
}

/// What neardup's footer (the `neardup` key) of the Parquet file `file` holds.
pub fn footer(file: &Path) -> serde_json::Value {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap()).unwrap();
    let kv = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    let neardup = kv.iter().find(|kv| kv.key == "neardup").and_then(|kv| kv.value.clone()).unwrap_or_else(|| panic!("{} has no neardup footer", file.display()));
    serde_json::from_str(&neardup).unwrap()
}

/// All rows of every Parquet file under `dir`.
pub fn read_dir(dir: &Path) -> Vec<RecordBatch> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(f).unwrap()).unwrap().build().unwrap();
            reader.map(|b| b.unwrap()).collect::<Vec<_>>()
        })
        .collect()
}

/// Column `name` of `batches` rendered as strings ("NULL" for nulls).
pub fn strings(batches: &[RecordBatch], name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        let col = b.column_by_name(name).unwrap_or_else(|| panic!("no column {name}"));
        let col = cast(col, &DataType::Utf8).unwrap();
        let col = col.as_string::<i32>();
        for i in 0..col.len() {
            out.push(if col.is_null(i) { "NULL".into() } else { col.value(i).to_string() });
        }
    }
    out
}

pub fn u64s(batches: &[RecordBatch], name: &str) -> Vec<Option<u64>> {
    let mut out = Vec::new();
    for b in batches {
        let col = cast(b.column_by_name(name).unwrap(), &DataType::UInt64).unwrap();
        let col = col.as_primitive::<UInt64Type>();
        out.extend((0..col.len()).map(|i| col.is_valid(i).then(|| col.value(i))));
    }
    out
}

/// The SimHash vector of each document ("source/id") of fingerprint rows
/// with a `vector` column; documents without one are left out.
pub fn vectors(batches: &[RecordBatch]) -> BTreeMap<String, Vec<i8>> {
    let (sources, ids) = (strings(batches, "source"), strings(batches, "id"));
    let mut out = BTreeMap::new();
    let mut row = 0;
    for b in batches {
        let column = b.column_by_name("vector").expect("a vector column");
        let column = column.as_fixed_size_binary();
        for r in 0..b.num_rows() {
            if column.is_valid(r) {
                out.insert(format!("{}/{}", sources[row], ids[row]), column.value(r).iter().map(|&v| v as i8).collect());
            }
            row += 1;
        }
    }
    out
}

/// Cosine of two SimHash vectors, computed here in floating point.
pub fn cosine(a: &[i8], b: &[i8]) -> f64 {
    let dot = |x: &[i8], y: &[i8]| x.iter().zip(y).map(|(&p, &q)| f64::from(p) * f64::from(q)).sum::<f64>();
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

/// Clusters of a dedup output as sets of "source/id".
pub fn clusters(out: &Path) -> BTreeSet<BTreeSet<String>> {
    let b = read_dir(&out.join("clusters"));
    let (s, i, c) = (strings(&b, "source"), strings(&b, "id"), strings(&b, "cluster_id"));
    let mut by: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for n in 0..s.len() {
        by.entry(c[n].clone()).or_default().insert(format!("{}/{}", s[n], i[n]));
    }
    by.into_values().collect()
}

/// Pairs of a dedup output as ("source/id", "source/id", hamming).
pub fn pairs(out: &Path) -> Vec<(String, String, String)> {
    let b = read_dir(&out.join("pairs"));
    let (sa, ia, sb, ib, h) =
        (strings(&b, "source_a"), strings(&b, "id_a"), strings(&b, "source_b"), strings(&b, "id_b"), strings(&b, "hamming"));
    (0..sa.len()).map(|n| (format!("{}/{}", sa[n], ia[n]), format!("{}/{}", sb[n], ib[n]), h[n].clone())).collect()
}

pub fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// Start the Python test server `script` (with `args`), which prints one
/// JSON line when it serves and stops when its standard input closes.
pub fn start_server(python: &str, script: &str, args: &[&str]) -> (std::process::Child, serde_json::Value) {
    let mut child = std::process::Command::new(python)
        .arg(root().join(script))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let info = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{script} did not start ({e}): {line:?}"));
    (child, info)
}

/// Assert that a run exited with `code` and that its standard error holds
/// every one of `needles`.
pub fn exits_with(o: &Output, code: i32, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "expected exit {code}, stderr:\n{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}:\n{err}");
    }
}

/// The steps a dry run's plan (`--dry-run --json` output) lists, with
/// `inputs`, which every run reports first: what the run's summary must
/// then time, no more and no fewer.
pub fn planned_steps(plan: &str) -> BTreeSet<String> {
    let plan: serde_json::Value = serde_json::from_str(plan).unwrap_or_else(|e| panic!("{e}: {plan}"));
    let mut steps = BTreeSet::from(["inputs".to_string()]);
    for stage in plan["plan"]["stages"].as_array().expect("a plan lists stages") {
        let stage = stage.as_str().unwrap();
        let (names, files) = stage.split_once(" (").unwrap_or_else(|| panic!("no files in '{stage}'"));
        assert!(files.ends_with(".sql)"), "{stage}");
        steps.extend(names.split(", ").map(String::from));
    }
    steps
}

/// The steps a run's summary timed.
pub fn timed_steps(out: &Path) -> BTreeSet<String> {
    summary(out)["timings_ms"].as_object().expect("timings").keys().cloned().collect()
}

/// A storage server on loopback that tests run neardup against.
pub trait Bucket {
    /// `neardup ARGS` with the server's credentials.
    fn run(&self, args: &[&str]) -> Output;

    /// The tests' bucket as a URL: s3://archive, gs://archive.
    fn root(&self) -> &'static str;

    /// A query's result as CSV, over tables given as `NAME=URL`.
    fn sql_csv(&self, tables: &[&str], query: &str) -> String {
        let mut args = vec!["sql", "--format", "csv", "-c", query];
        for t in tables {
            args.extend(["--table", t]);
        }
        ok(&self.run(&args))
    }

    /// Copy the sample corpus to ROOT/crawl/{news,reprints}.parquet (through neardup).
    fn upload_sample(&self) {
        for name in ["news", "reprints"] {
            let table = format!("t={}", sample(&format!("{name}.parquet")));
            let root = self.root();
            self.sql_csv(&[&table], &format!("COPY (SELECT * FROM t) TO '{root}/crawl/{name}.parquet' STORED AS PARQUET"));
        }
    }
}

/// Run `neardup ARGS` twice at once with `env`, as an orchestrator's retry
/// overlapping a slow night would: each run finishes, or is turned away
/// with exit code 1 because the other holds the store's lease (its message
/// names `holder`), and at least one finishes.
///
/// A run may also stop at its commit, having found the other's lease in
/// place of its own, and commit nothing. Real S3, GCS and Azure refuse the
/// second conditional create, but moto checks `If-None-Match` and stores
/// the object in two steps, so two creates a few microseconds apart can
/// both succeed there (seen once in CI on a loaded machine). The check
/// before the commit is what keeps such a store whole, so it is accepted
/// here as the third way a run may end; that no run took a lease over as
/// stale rules out our own staleness test as its cause.
pub fn twice_at_once(args: &[String], env: &[(&'static str, String)], holder: &str) {
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_neardup"))
                .args(args)
                .envs(env.iter().cloned())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut finished = 0;
    for child in children {
        let o = child.wait_with_output().unwrap();
        // Both runs live, with leases of minutes: neither lease is stale, so
        // a run that lost the store cannot have been displaced by our code.
        assert!(!stderr(&o).contains("is stale; taking it over"), "{}", stderr(&o));
        match o.status.code() {
            Some(0) => finished += 1,
            Some(1) => {
                let err = stderr(&o);
                let turned_away = err.contains(&format!("is held by {holder}"));
                let stopped_at_commit = err.contains("took the store over: nothing was committed")
                    && err.contains(holder);
                assert!(turned_away || stopped_at_commit, "{err}");
                if stopped_at_commit {
                    eprintln!("one run stopped at its commit: {err}");
                }
            }
            other => panic!("exit {other:?}: {}", stderr(&o)),
        }
    }
    assert!(finished >= 1, "neither run finished");
}
