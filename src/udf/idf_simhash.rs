//! `idf_simhash(terms, model, version, n, weighting [, formula [, top_k [, with_vector]]])`:
//! a document's SimHash from its `term_stats`, weighted with corpus document
//! frequencies, in one pass over the row.
//!
//! It computes what `unnest` + `LEFT JOIN` on the df table + `term_weight` +
//! `simhash_agg … GROUP BY document` compute (the same weights, the same
//! fixed-point votes, so the same fingerprints), without the join and the
//! grouping: the df table is read once per process and kept in memory,
//! keyed by its location and version. Every node of a cluster reads it for
//! itself, as it builds its own analyzer, so the function stays stateless
//! from the plan's point of view. An embedded run may instead hold the df
//! table it counted in memory ([`HeldDf`]), at a `held:` location that only
//! its own process can read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use datafusion::arrow::array::{new_null_array, Array, ArrayRef, AsArray, FixedSizeBinaryBuilder, Int64Array, ListArray, RecordBatch, StructArray, UInt64Array};
use datafusion::arrow::compute::{cast, cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Float64Type, UInt64Type};
use datafusion::common::{exec_err, plan_err, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use object_store::ObjectStoreExt;
use parquet::arrow::ProjectionMask;

use super::args::{doc, finish, is_string, scalar_str, to_arrays, ProcessCache};
use crate::fingerprint::{fixed_weight, SimHasher};
use crate::text::HashKeyed;
use super::term_stats::FactorColumns;
use crate::weight::{IdfFormula, Weighting};

/// Models kept per process (the latest ones used).
const CACHED_MODELS: usize = 4;

/// The idf of each of a df table's terms, by the term's hash.
type IdfByHash = HashKeyed<f64>;

/// The idf of every term of a df table, for one formula and corpus size.
/// Made once per process: a corpus has far fewer distinct terms than
/// (document, term) rows (Heybox: 231,174 against about 5 million), and
/// the logarithm per row was a tenth of the fingerprints' statement.
struct IdfTable {
    by_hash: IdfByHash,
    /// The idf of a term missing from the table, which counts as df = 1.
    missing: f64,
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IdfSimhash {
    signature: Signature,
}

impl Default for IdfSimhash {
    fn default() -> Self {
        IdfSimhash { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

fn result_fields() -> Fields {
    Fields::from(vec![
        Field::new("simhash", DataType::UInt64, true),
        Field::new("n_terms", DataType::Int64, false),
        Field::new("vector", vector_type(), true),
    ])
}

/// The type of a SimHash vector (`crate::fingerprint::VECTOR_SCHEME`): 64
/// 8-bit votes in 64 bytes, each a two's-complement `i8`. Fixed-size
/// binary rather than a list: Parquet writes it as one value a document,
/// where a list of 64 items costs a level per item (Weibo: fingerprints
/// 2.3 s → 3.2 s as a list).
pub fn vector_type() -> DataType {
    DataType::FixedSizeBinary(VECTOR_BYTES)
}

const VECTOR_BYTES: i32 = 64;

/// Each row's fingerprint, number of kept terms and vector.
struct Fingerprints {
    simhashes: Vec<Option<u64>>,
    n_terms: Vec<i64>,
    /// None when the call asks for no vectors.
    vectors: Option<FixedSizeBinaryBuilder>,
}

impl Fingerprints {
    /// The vectors, or NULLs for a call that asks for none.
    fn vectors(&mut self) -> ArrayRef {
        match &mut self.vectors {
            Some(v) => Arc::new(v.finish()),
            None => new_null_array(&vector_type(), self.simhashes.len()),
        }
    }
}

fn execution(e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("idf_simhash: {e}"))
}

/// The constant arguments of a call, read once per batch.
struct Options {
    weighting: Weighting,
    top_k: Option<usize>,
    /// Whether the result carries the SimHash vector (else NULL): building
    /// 64 bytes a document that no one reads cost a Weibo run 0.3 s.
    with_vector: bool,
    /// The idf of every term, when the weighting uses IDF.
    idfs: Option<Arc<IdfTable>>,
}

impl Options {
    fn of(args: &[ColumnarValue], name: &str) -> Result<Options> {
        let weighting: Weighting = match scalar_str(args, 4, name, "weighting")? {
            Some(w) => w.parse().map_err(execution)?,
            None => Weighting::default(),
        };
        let formula: IdfFormula = match scalar_str(args, 5, name, "formula")? {
            Some(f) => f.parse().map_err(execution)?,
            None => IdfFormula::default(),
        };
        let top_k = match args.get(6) {
            None | Some(ColumnarValue::Scalar(ScalarValue::Int64(None) | ScalarValue::Null)) => None,
            Some(ColumnarValue::Scalar(ScalarValue::Int64(Some(k)))) if *k > 0 => Some(*k as usize),
            Some(_) => return exec_err!("idf_simhash: 'top_k' must be a positive integer constant or NULL"),
        };
        let with_vector = match args.get(7) {
            None | Some(ColumnarValue::Scalar(ScalarValue::Boolean(None) | ScalarValue::Null)) => false,
            Some(ColumnarValue::Scalar(ScalarValue::Boolean(Some(v)))) => *v,
            Some(_) => return exec_err!("idf_simhash: 'with_vector' must be a boolean constant"),
        };
        let n = match &args[3] {
            ColumnarValue::Scalar(ScalarValue::Float64(n)) => *n,
            _ => return exec_err!("idf_simhash: 'n' must be a constant"),
        };
        let n = match (weighting.needs_idf(), n) {
            (true, None) => return exec_err!("idf_simhash: weighting '{weighting}' needs the corpus size n"),
            // Every idf over no documents is 0 or not a number: every fingerprint would be 0.
            (true, Some(n)) if !(n.is_finite() && n > 0.0) => {
                return exec_err!("idf_simhash: 'n' must be a positive number of documents, got {n}")
            }
            (_, n) => n.unwrap_or(0.0),
        };
        let idfs = match (weighting.needs_idf(), scalar_str(args, 1, name, "model")?) {
            (false, _) => None,
            (true, Some(urls)) if !urls.is_empty() => {
                let version = scalar_str(args, 2, name, "version")?.unwrap_or_default();
                Some(idf_table(&urls, &version, formula, n)?)
            }
            (true, _) => return exec_err!("idf_simhash: weighting '{weighting}' needs a df table ('model')"),
        };
        Ok(Options { weighting, top_k, with_vector, idfs })
    }

    /// The idf of every term of the batch (`hash` between the first and
    /// the last of `offsets`), in order, when the weighting has a model.
    /// Looked up in a loop of their own: the table (Weibo: 600,000 terms) is
    /// far larger than a core's cache, and every lookup waits for memory
    /// twice. Here the lookups do not wait for each other, where between the
    /// weights they did (the lookups were four fifths of the function's time).
    fn idfs(&self, hash: &UInt64Array, offsets: &[i32]) -> Option<Vec<f64>> {
        let table = self.idfs.as_ref()?;
        let (first, last) = (offsets.first().copied()?, offsets.last().copied()?);
        let hashes = &hash.values()[first as usize..last as usize];
        Some(hashes.iter().map(|h| table.by_hash.get(h).copied().unwrap_or(table.missing)).collect())
    }

    /// Each row's fingerprint and vector (NULL without terms) and its number
    /// of kept terms, from its terms' hashes and factors.
    fn fingerprints(&self, list: &ListArray, hash: &UInt64Array, factors: &FactorColumns) -> Fingerprints {
        let offsets = list.value_offsets();
        let mut simhashes = Vec::with_capacity(list.len());
        let mut n_terms = Vec::with_capacity(list.len());
        let mut vectors = self.with_vector.then(|| FixedSizeBinaryBuilder::with_capacity(list.len(), VECTOR_BYTES));
        let mut votes: Vec<(u64, f64, u32)> = Vec::new();
        let mut fixed: Vec<(u64, i64)> = Vec::new();
        let idfs = self.idfs(hash, offsets);
        let first = offsets.first().map_or(0, |&o| o as usize);
        for row in 0..list.len() {
            votes.clear();
            if list.is_valid(row) {
                for j in offsets[row] as usize..offsets[row + 1] as usize {
                    let factors = factors.get(j);
                    let idf = idfs.as_ref().map_or(1.0, |idfs| idfs[j - first]);
                    votes.push((hash.value(j), self.weighting.weight(&factors, idf), factors.count));
                }
            }
            if let Some(k) = self.top_k.filter(|&k| k < votes.len()) {
                // The K heaviest terms; ties go to the smaller hash.
                votes.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                votes.truncate(k);
            }
            if votes.is_empty() {
                simhashes.push(None);
                n_terms.push(0);
                if let Some(v) = &mut vectors {
                    v.append_null();
                }
                continue;
            }
            let mut hasher = SimHasher::default();
            fixed.clear();
            fixed.extend(votes.iter().map(|&(h, w, _)| (h, fixed_weight(w))));
            hasher.add_all_fixed(&fixed);
            simhashes.push(Some(hasher.finish()));
            n_terms.push(votes.iter().map(|v| i64::from(v.2)).sum());
            if let Some(v) = &mut vectors {
                v.append_value(hasher.vector().map(|q| q as u8)).expect("a vector is 64 bytes");
            }
        }
        Fingerprints { simhashes, n_terms, vectors }
    }
}

impl ScalarUDFImpl for IdfSimhash {
    fn name(&self) -> &str {
        "idf_simhash"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(5..=8).contains(&arg_types.len()) {
            return plan_err!(
                "idf_simhash takes 5 to 8 arguments (terms, model, version, n, weighting [, formula [, top_k [, with_vector]]]), got {}",
                arg_types.len()
            );
        }
        let mut out = Vec::with_capacity(arg_types.len());
        match &arg_types[0] {
            t @ DataType::List(f) if matches!(f.data_type(), DataType::Struct(_)) => out.push(t.clone()),
            other => return plan_err!("idf_simhash: argument 'terms' must be the list term_stats returns, got {other}"),
        }
        for (i, t) in arg_types.iter().enumerate().skip(1) {
            out.push(match i {
                1 | 2 | 4 | 5 if is_string(t) => DataType::Utf8,
                3 if t.is_numeric() || t == &DataType::Null => DataType::Float64,
                6 if t.is_integer() || t == &DataType::Null => DataType::Int64,
                7 if t == &DataType::Boolean || t == &DataType::Null => DataType::Boolean,
                _ => return plan_err!("idf_simhash: argument {} has the wrong type {t}", i + 1),
            });
        }
        Ok(out)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(result_fields()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let options = Options::of(&args.args, self.name())?;
        let (arrays, all_scalar) = to_arrays(&args.args[..1], args.number_rows)?;
        let list = arrays[0].as_list::<i32>();
        let items = list.values().as_struct();
        let hash = cast(
            items.column_by_name("hash").ok_or_else(|| execution("the terms have no field 'hash' (pass the list term_stats returns)"))?,
            &DataType::UInt64,
        )?;
        let factors = FactorColumns::of(items, |name| {
            format!("idf_simhash: the terms have no field '{name}' (pass the list term_stats returns)")
        })?;
        let mut f = options.fingerprints(list, hash.as_primitive::<UInt64Type>(), &factors);
        crate::progress::add(list.len() as u64, 0);
        let vectors = f.vectors();
        let columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(f.simhashes)), Arc::new(Int64Array::from(f.n_terms)), vectors];
        finish(Arc::new(StructArray::new(result_fields(), columns, None)), all_scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "A document's SimHash from its term_stats, each term weighted as term_weight does \
                 with its document frequency from a df table, the votes summed as simhash_agg sums \
                 them: the same fingerprint as unnest, a join on the df table and simhash_agg grouped \
                 by document, computed row by row. The df table (Parquet with columns hash and df, \
                 as --save-idf-model writes) is read once per process and kept by location and \
                 version. Returns {simhash, n_terms, vector}: vector (with with_vector = true) is \
                 the 64 votes before their sign step, scaled to 8 bits, in 64 bytes (SimHash-cosine, \
                 compared with simhash_cosine). NULL, 0 and NULL for a document without terms.",
                "idf_simhash(terms, model, version, n, weighting [, formula [, top_k [, with_vector]]])",
                "```sql\n> SELECT idf_simhash(term_stats('北京 北京', NULL), NULL, NULL, NULL, 'tf')['n_terms'];\n2\n```",
                &[
                    ("terms", "The list term_stats returns."),
                    ("model", "Location of the df table (a path or URL; several separated by line breaks), NULL for weightings without idf."),
                    ("version", "Any text that changes when the table does (e.g. its size and time): part of the cache key."),
                    ("n", "Documents of the corpus with at least one term."),
                    ("weighting", "none, tf, tfidf, improved, or improved:F+F… as for term_weight."),
                    ("formula", "standard (default) or df-plus-one."),
                    ("top_k", "Only the K heaviest terms vote (ties: smaller hash first); NULL for all."),
                    ("with_vector", "true to return the SimHash vector too (NULL otherwise, the default)."),
                ],
            )
        }))
    }
}

/// The idf of every term of the df table at `urls` (one or more files,
/// line-separated) by `formula` over `n` documents, from the process's
/// cache or read now. The idf is the formula's of the term's df, the same
/// value as computing it row by row.
fn idf_table(urls: &str, version: &str, formula: IdfFormula, n: f64) -> Result<Arc<IdfTable>> {
    static CACHE: ProcessCache<IdfTable> = ProcessCache::new(CACHED_MODELS);
    // n's bits, not its decimal text: two sizes never share a table.
    CACHE.get_or_load(format!("{urls}\n{version}\n{formula}\n{:x}", n.to_bits()), || {
        let mut rows = Vec::new();
        for url in urls.lines().filter(|u| !u.is_empty()) {
            match held_rows(url)? {
                Some(held) => rows.extend_from_slice(&held),
                None => read_df_file(url, &mut rows)?,
            }
        }
        Ok(IdfTable { by_hash: table_of(rows, |df| formula.idf(df, n)), missing: formula.idf(1.0, n) })
    })
}

/// The table of `rows` (hash, df) with `idf` of each df; of rows with
/// one hash, the last. The table places a key by its low bits (its hasher
/// is the identity), so the rows are inserted in that order: the inserts
/// walk the table from one end to the other, where in the files' order
/// (by hash) every one missed the cache (Weibo's 270,644 terms: 60 ms, on
/// one thread while the statement's others waited for the model).
fn table_of(mut rows: Vec<(u64, f64)>, idf: impl Fn(f64) -> f64) -> IdfByHash {
    let mut table = IdfByHash::with_capacity_and_hasher(rows.len(), Default::default());
    // hashbrown holds 7 keys in 8 slots; the slots are a power of two.
    let slot_bits = (table.capacity() * 8 / 7).next_power_of_two().trailing_zeros();
    // Stable: of rows with one hash the last is still inserted last.
    radsort::sort_by_key(&mut rows, |&(hash, _)| hash.wrapping_shl(64 - slot_bits));
    table.extend(rows.into_iter().map(|(hash, df)| (hash, idf(df))));
    table
}

fn read_df_file(url: &str, into: &mut Vec<(u64, f64)>) -> Result<()> {
    let bytes = fetch(url).map_err(|e| execution(format!("cannot read the df table '{url}': {e}")))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| execution(format!("df table '{url}' is not Parquet: {e}")))?;
    let schema = builder.schema().clone();
    let (Ok(h), Ok(d)) = (schema.index_of("hash"), schema.index_of("df")) else {
        return exec_err!("idf_simhash: df table '{url}' lacks the columns hash and df");
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [h, d]);
    let rows = builder.metadata().file_metadata().num_rows();
    into.reserve(usize::try_from(rows).unwrap_or(0));
    for batch in builder.with_projection(mask).build()? {
        rows_of(&batch?, url, into)?;
    }
    Ok(())
}

/// The (hash, df) rows of a batch of a df table (columns `hash` and `df`),
/// appended to `into`; `url` names the table in errors.
fn rows_of(batch: &RecordBatch, url: &str, into: &mut Vec<(u64, f64)>) -> Result<()> {
    let schema = batch.schema();
    let (Ok(hi), Ok(di)) = (schema.index_of("hash"), schema.index_of("df")) else {
        return exec_err!("idf_simhash: df table '{url}' lacks the columns hash and df");
    };
    // Strict casts: a value that does not convert (a negative hash of a
    // signed column, say) is an error, not a NULL whose row is left out.
    let strict = CastOptions { safe: false, ..Default::default() };
    let column = |i: usize, to: &DataType, what: &str| {
        let converted = cast_with_options(batch.column(i), to, &strict)
            .map_err(|e| execution(format!("df table '{url}': column {what} does not convert to {to} ({e}): write it as {to}")))?;
        match converted.null_count() {
            0 => Ok(converted),
            nulls => Err(execution(format!("df table '{url}': {nulls} row(s) without a {what}: every term needs its hash and df"))),
        }
    };
    let (hashes, dfs) = (column(hi, &DataType::UInt64, "hash")?, column(di, &DataType::Float64, "df")?);
    let (hashes, dfs) = (hashes.as_primitive::<UInt64Type>(), dfs.as_primitive::<Float64Type>());
    into.extend(hashes.values().iter().copied().zip(dfs.values().iter().copied()));
    Ok(())
}

/// Where a df table held in memory is found: `held:` and a number.
const HELD_SCHEME: &str = "held:";

/// The df tables held in memory by the runs that made them, by location.
static HELD: Mutex<Vec<(String, Arc<Vec<(u64, f64)>>)>> = Mutex::new(Vec::new());

/// A df table held in memory for `idf_simhash`, under [`HeldDf::location`],
/// as long as this lives. An embedded one-shot run, whose work tables are
/// in memory, weighs its fingerprints with the df table it has just
/// counted: written to a work file, that table was encoded on one core at
/// the end of its statement and read back, decoded and checked again on
/// one core at the start of the next (docs/performance.md, "The df table
/// held in memory").
pub struct HeldDf {
    location: String,
}

impl HeldDf {
    /// Hold the (hash, df) rows of `batches`, a df table's.
    pub fn of(batches: &[RecordBatch]) -> Result<HeldDf> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let location = format!("{HELD_SCHEME}corpus_df/{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let mut rows = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
        for batch in batches {
            rows_of(batch, &location, &mut rows)?;
        }
        held().push((location.clone(), Arc::new(rows)));
        Ok(HeldDf { location })
    }

    /// The location to give `idf_simhash` as its `model`; its version is
    /// the location itself (no table is held twice under one).
    pub fn location(&self) -> &str {
        &self.location
    }
}

impl Drop for HeldDf {
    fn drop(&mut self) {
        held().retain(|(location, _)| *location != self.location);
    }
}

/// The held tables; a panic while one was held leaves them all still right.
fn held() -> std::sync::MutexGuard<'static, Vec<(String, Arc<Vec<(u64, f64)>>)>> {
    HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The rows of the table held at `url`; `None` for any other location.
fn held_rows(url: &str) -> Result<Option<Arc<Vec<(u64, f64)>>>> {
    if !url.starts_with(HELD_SCHEME) {
        return Ok(None);
    }
    match held().iter().find(|(location, _)| location == url) {
        Some((_, rows)) => Ok(Some(rows.clone())),
        None => exec_err!(
            "idf_simhash: the df table '{url}' was held in memory by a run that has ended: give the location of a df table's files (--save-idf-model writes one)"
        ),
    }
}

/// A file's bytes: local paths directly, object-store URLs through a store
/// built from the environment (as every neardup process builds them), on a
/// thread of its own so that no async runtime is entered from this one.
pub(super) fn fetch(url: &str) -> std::result::Result<Bytes, String> {
    if let Some(path) = url.strip_prefix("file://").or((!url.contains("://")).then_some(url)) {
        return std::fs::read(path).map(Bytes::from).map_err(|e| e.to_string());
    }
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    let store = crate::storage::stores::store_from_env(&parsed).map_err(|e| e.to_string())?;
    let path = object_store::path::Path::from_url_path(parsed.path()).map_err(|e| e.to_string())?;
    std::thread::scope(|s| {
        s.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
            runtime.block_on(async { store.get(&path).await?.bytes().await }).map_err(|e| e.to_string())
        })
        .join()
        .map_err(|_| "the reading thread panicked".to_string())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_df_table_weighs_as_its_rows_do_and_only_while_held() {
        use datafusion::arrow::array::Int64Array;
        let hashes: Vec<u64> = (0..5000u64).map(|i| crate::fingerprint::hash64(&i.to_le_bytes())).collect();
        let dfs: Vec<i64> = (0..5000).map(|i| i % 97 + 1).collect();
        let batch = |range: std::ops::Range<usize>| {
            let hash: ArrayRef = Arc::new(UInt64Array::from(hashes[range.clone()].to_vec()));
            let df: ArrayRef = Arc::new(Int64Array::from(dfs[range].to_vec()));
            RecordBatch::try_from_iter([("hash", hash), ("df", df)]).unwrap()
        };
        let held = HeldDf::of(&[batch(0..3000), batch(3000..5000)]).unwrap();
        let other = HeldDf::of(&[batch(0..10)]).unwrap();
        assert_ne!(held.location(), other.location());
        let (formula, n) = (IdfFormula::Standard, 12_345.0);
        let table = idf_table(held.location(), held.location(), formula, n).unwrap();
        assert_eq!((table.by_hash.len(), table.missing), (5000, formula.idf(1.0, n)));
        for (h, df) in hashes.iter().zip(&dfs) {
            assert_eq!(table.by_hash.get(h), Some(&formula.idf(*df as f64, n)));
        }
        let location = other.location().to_string();
        drop(other);
        let ended = idf_table(&location, &location, formula, n).err().unwrap().to_string();
        assert!(ended.contains("held in memory by a run that has ended") && ended.contains(&location), "{ended}");
        // A table without the columns is named.
        let bad = RecordBatch::try_from_iter([("h", Arc::new(UInt64Array::from(vec![1u64])) as ArrayRef)]).unwrap();
        let error = HeldDf::of(&[bad]).err().unwrap().to_string();
        assert!(error.contains("lacks the columns hash and df"), "{error}");
    }

    #[test]
    fn the_table_holds_every_hash_with_its_last_row() {
        // Hashes spread over the low bits and the high, some repeated (two
        // files of one model); small tables and one past a resize.
        for n in [0u64, 1, 3, 7, 8, 1000, 100_000] {
            let mut rows: Vec<(u64, f64)> = (0..n).map(|i| (crate::fingerprint::hash64(&i.to_le_bytes()), i as f64)).collect();
            let again: Vec<(u64, f64)> = (0..n / 3).map(|i| (rows[(i * 2) as usize].0, -(i as f64))).collect();
            rows.extend(again);
            let mut expected = std::collections::HashMap::new();
            for &(h, df) in &rows {
                expected.insert(h, df * 2.0);
            }
            let table = table_of(rows, |df| df * 2.0);
            assert_eq!(table.len(), expected.len(), "{n} rows");
            assert!(expected.iter().all(|(h, v)| table.get(h) == Some(v)), "{n} rows");
        }
    }
}
