//! Grow a neardup store with synthetic segments, for the store benchmark
//! (bench/store/run.py).
//!
//! ```text
//! cargo run --release --example synthetic_store -- STORE NIGHT_FINGERPRINTS DOCUMENTS SEGMENT_ROWS PLANTED SEED [ARTICLES PERCENT]
//! ```
//!
//! STORE is a store made by a real first night (its run file gives the
//! schema and settings). NIGHT_FINGERPRINTS is the `fingerprints/` file of
//! the night to be measured (`neardup fingerprint` with the store's model):
//! term-set sizes are drawn from it, and PLANTED of its documents get a
//! near copy in the store (1 to 3 fingerprint bits flipped, a tenth of the
//! terms replaced) or an exact one, spread over the segments, so that a
//! night finds real pairs in every part of the store. The other DOCUMENTS −
//! PLANTED rows are random fingerprints and term sets. With ARTICLES (the
//! `fingerprints/` file of a corpus of long documents, such as Heybox
//! articles) and PERCENT, that percentage of them take the term-set size
//! and length of a random one of its documents instead, so that the store
//! holds posts and articles as a mixed crawl does. Rows are written as
//! segments of SEGMENT_ROWS rows, sorted by fingerprint, with the pages and
//! page index of a run; each segment claims one run id `0001-synth-SEED-NNNNN`
//! (before any dated night).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, RecordBatch, StringArray, UInt64Array, UInt64Builder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef, UInt64Type};
use neardup::fingerprint::hash64;
use neardup::minhash::{mix, pack_keys, MinHashPlan};
use neardup::text::shingles::SKETCH_SIZE;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use neardup::storage::sorted::{writer_properties, PAGE_ROWS};

/// A small, fast generator (splitmix64): the same seed gives the same store.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

fn read(path: &Path) -> (SchemaRef, Vec<RecordBatch>) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap();
    let schema = builder.schema().clone();
    (schema, builder.build().unwrap().map(|b| b.unwrap()).collect())
}

fn u64_column(batch: &RecordBatch, name: &str) -> Vec<Option<u64>> {
    let c = cast(batch.column_by_name(name).unwrap(), &DataType::UInt64).unwrap();
    c.as_primitive::<UInt64Type>().iter().collect()
}

fn sets(batch: &RecordBatch, name: &str) -> Vec<Vec<u64>> {
    let list = batch.column_by_name(name).unwrap().as_list::<i32>();
    (0..list.len())
        .map(|i| if list.is_null(i) { Vec::new() } else { list.value(i).as_primitive::<UInt64Type>().values().to_vec() })
        .collect()
}

/// One synthetic document.
struct Row {
    id: String,
    simhash: u64,
    term_set: Vec<u64>,
    chars: u64,
}

/// `(term-set size, length in characters)` of every document with terms.
fn shapes(batches: &[RecordBatch]) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    for b in batches {
        let chars = u64_column(b, "n_chars");
        for (set, chars) in sets(b, "term_set").into_iter().zip(chars) {
            if !set.is_empty() {
                out.push((set.len(), chars.unwrap_or(0)));
            }
        }
    }
    assert!(!out.is_empty(), "no documents with terms to draw sizes from");
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (fixed, articles) = match args.len() {
        6 => (&args[..], None),
        8 => (&args[..6], Some((PathBuf::from(&args[6]), args[7].parse::<u64>().unwrap()))),
        _ => {
            eprintln!("usage: synthetic_store STORE NIGHT_FINGERPRINTS DOCUMENTS SEGMENT_ROWS PLANTED SEED [ARTICLES PERCENT]");
            std::process::exit(2);
        }
    };
    let [store, night, documents, segment_rows, planted, seed] = fixed else { unreachable!() };
    let store = PathBuf::from(store);
    let (documents, segment_rows, planted, seed): (u64, u64, u64, u64) =
        (documents.parse().unwrap(), segment_rows.parse().unwrap(), planted.parse().unwrap(), seed.parse().unwrap());
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(store.join("store.json")).unwrap()).unwrap();
    let plan: Option<MinHashPlan> = manifest["minhash"].as_str().map(|p| p.parse().unwrap());
    let template = std::fs::read_dir(store.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path().join("part-00000.parquet"))
        .find(|p| p.exists())
        .expect("a committed run to copy the schema from");
    let (schema, _) = read(&template);

    // The night: its fingerprints and term sets.
    let (_, batches) = read(Path::new(night));
    let mut night_rows: Vec<(u64, Vec<u64>, u64)> = Vec::new();
    for b in &batches {
        let chars = u64_column(b, "n_chars");
        for ((h, s), chars) in u64_column(b, "simhash").into_iter().zip(sets(b, "term_set")).zip(chars) {
            if let Some(h) = h {
                night_rows.push((h, s, chars.unwrap_or(0)));
            }
        }
    }
    assert!(!night_rows.is_empty(), "the night has no fingerprints");
    let sizes = shapes(&batches);
    let (article_sizes, article_percent) = match &articles {
        Some((path, percent)) => (shapes(&read(path).1), *percent),
        None => (Vec::new(), 0),
    };

    let mut rng = Rng(seed);
    let segments = documents.div_ceil(segment_rows);
    let mut made = 0u64;
    for segment in 0..segments {
        let rows_here = segment_rows.min(documents - made);
        // Planted copies are spread evenly over the segments.
        let planted_here = planted * (segment + 1) / segments - planted * segment / segments;
        let mut rows: Vec<Row> = Vec::with_capacity(rows_here as usize);
        for i in 0..rows_here {
            let id = format!("s{seed}-{segment}-{i}");
            if i < planted_here {
                let (h, set, chars) = &night_rows[rng.below(night_rows.len() as u64) as usize];
                let exact = rng.below(4) == 0;
                let mut simhash = *h;
                let mut term_set = set.clone();
                if !exact {
                    for _ in 0..1 + rng.below(3) {
                        simhash ^= 1 << rng.below(64);
                    }
                    for t in term_set.iter_mut() {
                        if rng.below(10) == 0 {
                            *t = rng.next();
                        }
                    }
                    term_set.sort_unstable();
                    term_set.dedup();
                }
                rows.push(Row { id, simhash, term_set, chars: *chars });
            } else {
                // No draw without articles: a seed makes the same documents as before.
                let pool = if article_percent > 0 && rng.below(100) < article_percent { &article_sizes } else { &sizes };
                let (n, chars) = pool[rng.below(pool.len() as u64) as usize];
                let mut term_set: Vec<u64> = (0..n).map(|_| rng.next()).collect();
                term_set.sort_unstable();
                term_set.dedup();
                rows.push(Row { id, simhash: rng.next(), term_set, chars });
            }
        }
        rows.sort_by(|a, b| (a.simhash, &a.id).cmp(&(b.simhash, &b.id)));
        let run = format!("0001-synth-{seed:03}-{segment:05}");
        write_segment(&store, &run, &schema, &rows, plan);
        made += rows_here;
        eprintln!("synthetic_store: segment {run}: {rows_here} rows ({made} of {documents})");
    }
}

fn list_column(values: impl Iterator<Item = Vec<u64>>) -> ArrayRef {
    let mut b = ListBuilder::new(UInt64Builder::new());
    for v in values {
        b.values().append_slice(&v);
        b.append(true);
    }
    Arc::new(b.finish())
}

fn write_segment(store: &Path, run: &str, schema: &SchemaRef, rows: &[Row], plan: Option<MinHashPlan>) {
    let text = |f: &dyn Fn(&Row) -> String| -> ArrayRef { Arc::new(StringArray::from_iter_values(rows.iter().map(f))) };
    let mut columns: Vec<ArrayRef> = Vec::new();
    for field in schema.fields() {
        let column: ArrayRef = match field.name().as_str() {
            "source" | "representative_source" => text(&|_| "synthetic".to_string()),
            "id" | "representative_id" => text(&|r| r.id.clone()),
            "run" | "representative_run" => text(&|_| run.to_string()),
            "doc_key" => Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| hash64(format!("synthetic\0{}", r.id).as_bytes())))),
            "simhash" => Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.simhash))),
            "n_terms" => Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.term_set.len() as u64))),
            "n_chars" => Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.chars))),
            "term_set" => list_column(rows.iter().map(|r| r.term_set.clone())),
            "minhash" => match plan {
                // Packed, as a run writes them (sql/94_store_run.sql).
                Some(plan) => {
                    let mut hasher = plan.hasher();
                    let (mut keys, mut packed) = (Vec::new(), Vec::new());
                    Arc::new(arrow::array::BinaryArray::from_iter_values(rows.iter().map(|r| {
                        keys.clear();
                        hasher.keys_into(&r.term_set, &mut keys);
                        packed.clear();
                        pack_keys(&keys, &mut packed);
                        packed.clone()
                    })))
                }
                None => arrow::array::new_null_array(field.data_type(), rows.len()),
            },
            // A sketch as long as the document's would be (about one shingle
            // per character, at most SKETCH_SIZE), of random 32-bit hashes.
            "shingles" => list_column(rows.iter().map(|r| {
                let n = (r.chars.max(5) - 4).min(SKETCH_SIZE as u64);
                let seed = hash64(r.id.as_bytes());
                let mut sketch: Vec<u64> = (0..n).map(|i| mix(seed.wrapping_add(i)) >> 32).collect();
                sketch.sort_unstable();
                sketch.dedup();
                sketch
            })),
            // A store made by term-set nights keeps no SimHash vectors.
            "vector" => arrow::array::new_null_array(field.data_type(), rows.len()),
            other => panic!("synthetic_store: no generator for column '{other}'"),
        };
        columns.push(cast(&column, field.data_type()).unwrap());
    }
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let folder = store.join("segments").join(format!("seg={run}"));
    std::fs::create_dir_all(&folder).unwrap();
    // The pages, row groups and compression of a run.
    let props = writer_properties();
    let mut writer = ArrowWriter::try_new(File::create(folder.join("part-00000.parquet")).unwrap(), schema.clone(), Some(props)).unwrap();
    for start in (0..batch.num_rows()).step_by(PAGE_ROWS) {
        writer.write(&batch.slice(start, PAGE_ROWS.min(batch.num_rows() - start))).unwrap();
    }
    writer.close().unwrap();
    let summary = serde_json::json!({ "runs": [run], "documents": rows.len() });
    std::fs::write(folder.join("summary.json"), serde_json::to_vec_pretty(&summary).unwrap()).unwrap();
    std::fs::write(folder.join("_SUCCESS"), b"").unwrap();
}
