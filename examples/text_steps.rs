//! Where a document's time goes before the engine sees it: each step of
//! the segmentation statement's per-text work, timed on its own over every
//! text of a Parquet column, beside raw jieba-rs on the same texts. One
//! core, in memory; prints one JSON object (seconds and nanoseconds per
//! character of each step, the medians of the rounds).
//!
//! ```text
//! cargo run --release --example text_steps -- FILE.parquet [COLUMN] [ROUNDS]
//! ```
//!
//! Steps: `normalize` (NFKC, case, spaces); `sketch` (the shingle sketch
//! of the normalised text); `cut` and `tag` (jieba-rs, with HMM, on the
//! normalised text); `words` (the analyzer's words, untagged, as the
//! statement cuts them); `stats` (the term statistics of those words, POS
//! factors learned once a word). `words` + `stats` is `DocStats::compute`.
//! The analyzer keeps the tags it learns, so `stats`' first round learns
//! every new word's and the later ones find them: with three rounds or
//! more its median is of the counting alone.
//!
//! `per_text_over_tag` is the four steps every document needs together
//! (`normalize`, `sketch`, `words`, `stats`) over `tag`: the least a
//! segmentation statement can cost against raw jieba-rs, before anything
//! around them. Run one round for the figure with the tags learned, as a
//! job learns them (docs/performance.md, "What the per-core targets leave").

use std::hint::black_box;
use std::time::Instant;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use neardup::text::shingles::Sketcher;
use neardup::text::{normalize_into, Analyzer, DocStats, Mode, StatsScratch, Token};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn main() {
    if let Err(e) = run() {
        eprintln!("text_steps: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: text_steps FILE.parquet [COLUMN] [ROUNDS]")?;
    let column = args.next().unwrap_or_else(|| "text".into());
    let rounds: usize = match args.next() {
        Some(n) => n.parse().map_err(|_| format!("ROUNDS '{n}' is not a number"))?,
        None => 3,
    };
    let texts = read_texts(&path, &column)?;
    let analyzer = Analyzer::get("")?;
    let jieba = jieba_rs::Jieba::new();
    let mut normal = vec![String::new(); texts.len()];
    texts.iter().zip(&mut normal).for_each(|(t, n)| normalize_into(t, n));
    let chars: usize = normal.iter().map(|t| t.chars().count()).sum();
    // The words as the statement cuts them, for `stats` alone.
    let cut: Vec<(Vec<Token>, bool)> = normal
        .iter()
        .map(|t| {
            let mut words = Vec::new();
            let untagged = analyzer.words_untagged(t, Mode::Precise, true, &mut words);
            (words, untagged)
        })
        .collect();
    let (mut sketcher, mut sketch, mut scratch) = (Sketcher::default(), Vec::new(), StatsScratch::default());
    let mut buffer = String::new();
    let mut steps: Vec<(&str, Box<dyn FnMut()>)> = vec![
        ("normalize", Box::new(|| texts.iter().for_each(|t| normalize_into(t, black_box(&mut buffer))))),
        ("sketch", Box::new(|| normal.iter().for_each(|t| sketcher.sketch(t, black_box(&mut sketch))))),
        ("cut", Box::new(|| normal.iter().for_each(|t| drop(black_box(jieba.cut(t, true)))))),
        ("tag", Box::new(|| normal.iter().for_each(|t| drop(black_box(jieba.tag(t, true)))))),
        ("words", Box::new(|| {
            let mut words = Vec::new();
            for t in &normal {
                words.clear();
                black_box(analyzer.words_untagged(t, Mode::Precise, true, &mut words));
            }
        })),
        ("stats", Box::new(|| {
            let mut terms = Vec::new();
            for (t, (words, untagged)) in normal.iter().zip(&cut) {
                let stats = DocStats::of_words(&analyzer, (t, None), (Mode::Precise, *untagged), (words, terms), &mut scratch);
                terms = black_box(stats).recycle();
            }
        })),
    ];
    let mut results = Vec::new();
    let mut medians = std::collections::HashMap::new();
    for (name, step) in &mut steps {
        let mut seconds: Vec<f64> = (0..rounds.max(1))
            .map(|_| {
                let started = Instant::now();
                step();
                started.elapsed().as_secs_f64()
            })
            .collect();
        seconds.sort_by(f64::total_cmp);
        let median = seconds[seconds.len() / 2];
        medians.insert(*name, median);
        results.push(format!(r#""{name}": {{"seconds": {median:.3}, "ns_per_char": {:.2}}}"#, median * 1e9 / chars.max(1) as f64));
    }
    let per_text: f64 = ["normalize", "sketch", "words", "stats"].iter().map(|s| medians[s]).sum();
    results.push(format!(r#""per_text_over_tag": {:.3}"#, per_text / medians["tag"].max(f64::MIN_POSITIVE)));
    println!(r#"{{"file": {path:?}, "column": {column:?}, "documents": {}, "chars": {chars}, "rounds": {rounds}, {}}}"#, texts.len(), results.join(", "));
    Ok(())
}

/// The non-null values of `column`.
fn read_texts(path: &str, column: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open '{path}': {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| format!("'{path}' is not Parquet: {e}"))?;
    let index = builder.schema().index_of(column).map_err(|_| format!("'{path}' has no column '{column}'"))?;
    let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), [index]);
    let mut texts = Vec::new();
    for batch in builder.with_projection(mask).build()? {
        let values = cast(batch?.column(0), &DataType::Utf8)?;
        let values = values.as_string::<i32>();
        texts.extend((0..values.len()).filter(|&i| values.is_valid(i)).map(|i| values.value(i).to_string()));
    }
    Ok(texts)
}
