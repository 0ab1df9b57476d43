//! The hardware reference for the fingerprint stage: raw `jieba-rs` on one
//! core, on the same texts. It reads one string column of a Parquet file
//! into memory, then times `cut` (with HMM), `tag` (POS, with HMM) and
//! `cut_all` over every text, one mode after another, and prints one JSON
//! object: bytes, documents and, per mode, seconds, MB/s and word count.
//!
//! ```text
//! cargo run --release --example jieba_baseline -- FILE.parquet [COLUMN] [MAX_DOCS]
//! ```
//!
//! `JIEBA_BASELINE_WARMUP=N` tags the first N texts before timing (100 by
//! default). `JIEBA_BASELINE_THREADS=N` segments on N threads at once (1 by
//! default), each taking the next 64 texts as it finishes its last, and
//! gives the MB/s of them all: raw jieba-rs on all of a machine's cores,
//! which a run of neardup on all of them is compared with. It is measured,
//! not inferred from one core: cores share caches, memory and, on a virtual
//! machine, a host, and the two figures do not stay a fixed factor apart.
//!
//! The benchmark suite (`bench/perf/run.py`) runs it beside neardup.

use std::fs::File;
use std::hint::black_box;
use std::time::Instant;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use jieba_rs::Jieba;
use neardup::parallel::claimed;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn main() {
    if let Err(e) = run() {
        eprintln!("jieba_baseline: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: jieba_baseline FILE.parquet [COLUMN] [MAX_DOCS]")?;
    let column = args.next().unwrap_or_else(|| "text".into());
    let max_docs: usize = match args.next() {
        Some(n) => n.parse().map_err(|_| format!("MAX_DOCS '{n}' is not a number"))?,
        None => usize::MAX,
    };
    let texts = read_texts(&path, &column, max_docs)?;
    let bytes: usize = texts.iter().map(String::len).sum();

    let jieba = Jieba::new();
    // Warm the dictionary's pages and the allocator before timing; none
    // when instructions are counted (bench/perf/instructions.sh), so that
    // `tag` sees each text once.
    let warm_up = std::env::var("JIEBA_BASELINE_WARMUP").ok().and_then(|n| n.parse().ok()).unwrap_or(100);
    for text in texts.iter().take(warm_up) {
        black_box(jieba.tag(text, true));
    }
    let threads: usize = match std::env::var("JIEBA_BASELINE_THREADS") {
        Ok(n) => n.parse().ok().filter(|&n| n > 0).ok_or_else(|| format!("JIEBA_BASELINE_THREADS '{n}' is not a positive number"))?,
        Err(_) => 1,
    };
    let modes: [(&str, &(dyn Fn(&str) -> usize + Sync)); 3] = [
        ("cut", &|t| jieba.cut(t, true).len()),
        ("tag", &|t| jieba.tag(t, true).len()),
        ("cut_all", &|t| jieba.cut_all(t).len()),
    ];
    let mut results = Vec::new();
    for (name, segment) in modes {
        let started = Instant::now();
        let words = on_threads(&texts, threads, segment);
        let seconds = started.elapsed().as_secs_f64();
        results.push(format!(
            r#""{name}": {{"seconds": {seconds:.3}, "mb_per_s": {:.2}, "words": {words}}}"#,
            bytes as f64 / 1e6 / seconds
        ));
    }
    println!(
        r#"{{"file": {:?}, "column": {:?}, "documents": {}, "bytes": {bytes}, "threads": {threads}, {}}}"#,
        path,
        column,
        texts.len(),
        results.join(", ")
    );
    Ok(())
}

/// The words `segment` finds in all `texts`, on `threads` threads that
/// take the texts 64 at a time, in turn.
fn on_threads(texts: &[String], threads: usize, segment: &(dyn Fn(&str) -> usize + Sync)) -> usize {
    let parts: Vec<&[String]> = texts.chunks(64).collect();
    claimed(parts, threads, |part| part.iter().map(|t| black_box(segment(t))).sum::<usize>()).into_iter().sum()
}

/// The non-null values of `column`, at most `max_docs` of them.
fn read_texts(path: &str, column: &str, max_docs: usize) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let file = File::open(path).map_err(|e| format!("cannot open '{path}': {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| format!("'{path}' is not Parquet: {e}"))?;
    let index = builder
        .schema()
        .index_of(column)
        .map_err(|_| format!("'{path}' has no column '{column}'"))?;
    let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), [index]);
    let mut texts = Vec::new();
    for batch in builder.with_projection(mask).build()? {
        let values = cast(batch?.column(0), &DataType::Utf8)?;
        let values = values.as_string::<i32>();
        for i in 0..values.len() {
            if texts.len() == max_docs {
                return Ok(texts);
            }
            if values.is_valid(i) {
                texts.push(values.value(i).to_string());
            }
        }
    }
    Ok(texts)
}
