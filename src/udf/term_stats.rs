//! `term_stats(text, title [, mode [, options [, with_pos [, boilerplate]]]])`:
//! the per-document term statistics every weighting is computed from.

use std::collections::hash_map::Entry;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::arrow::array::{
    ArrayRef, AsArray, Float64Array, ListArray, StringArray, StructArray, UInt32Array, UInt64Array, UInt8Array,
};
use datafusion::arrow::buffer::{Buffer, NullBuffer, OffsetBuffer};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{exec_err, plan_err, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, is_string, scalar_str, to_arrays, Strings, TextSettings};
use super::shingle_sketch::SketchLists;
use crate::text::shingles::Sketcher;
use crate::text::{normalize_into, parse_set, recycle, strip_lines, DocStats, HashKeyed, StatsScratch, TermStat, Token};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};
use crate::weight::TermFactors;

/// The boilerplate set of a `boilerplate` argument, parsed once per process
/// for each distinct argument (the same constant arrives with every batch).
pub(crate) fn boilerplate_set(text: &str) -> Result<Arc<HashSet<u64>>> {
    static CACHE: OnceLock<Mutex<Option<(u64, Arc<HashSet<u64>>)>>> = OnceLock::new();
    let key = xxhash_rust::xxh3::xxh3_64(text.as_bytes());
    let cache = CACHE.get_or_init(Default::default);
    if let Some((k, set)) = cache.lock().expect("boilerplate cache poisoned").as_ref() {
        if *k == key {
            return Ok(set.clone());
        }
    }
    let set = Arc::new(parse_set(text).map_err(|e| DataFusionError::Execution(format!("term_stats: {e}")))?);
    *cache.lock().expect("boilerplate cache poisoned") = Some((key, set.clone()));
    Ok(set)
}

/// The weight factors of a column of term statistics (elements of
/// `term_stats`), read back typed: what `term_weight` and `idf_simhash` weigh.
pub(crate) struct FactorColumns {
    count: UInt32Array,
    tf: Float64Array,
    cx: UInt8Array,
    len: Float64Array,
    logo: UInt8Array,
    title: UInt8Array,
}

impl FactorColumns {
    /// `missing` completes the error for a struct without one of the fields.
    pub(crate) fn of(stats: &StructArray, missing: impl Fn(&str) -> String) -> Result<FactorColumns> {
        let field = |name: &str, t: &DataType| -> Result<ArrayRef> {
            let column = stats.column_by_name(name).ok_or_else(|| DataFusionError::Execution(missing(name)))?;
            Ok(cast(column, t)?)
        };
        Ok(FactorColumns {
            count: field("count", &DataType::UInt32)?.as_primitive().clone(),
            tf: field("tf", &DataType::Float64)?.as_primitive().clone(),
            cx: field("cx", &DataType::UInt8)?.as_primitive().clone(),
            len: field("len", &DataType::Float64)?.as_primitive().clone(),
            logo: field("logo", &DataType::UInt8)?.as_primitive().clone(),
            title: field("title", &DataType::UInt8)?.as_primitive().clone(),
        })
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> TermFactors {
        TermFactors {
            count: self.count.value(i),
            tf: self.tf.value(i),
            cx: self.cx.value(i),
            len: self.len.value(i),
            logo: self.logo.value(i),
            title: self.title.value(i),
        }
    }
}

/// Fields of one term's statistics.
pub fn term_fields() -> Fields {
    Fields::from(vec![
        Field::new("term", DataType::Utf8, false),
        Field::new("hash", DataType::UInt64, false),
        Field::new("count", DataType::UInt32, false),
        Field::new("tf", DataType::Float64, false),
        Field::new("cx", DataType::UInt8, false),
        Field::new("len", DataType::Float64, false),
        Field::new("logo", DataType::UInt8, false),
        Field::new("title", DataType::UInt8, false),
    ])
}

pub(super) fn item_field() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Struct(term_fields()), true))
}

/// The term statistics of every row of `args` (term_stats's arguments) and,
/// when `with_sketches`, each row's shingle sketch, made from the same
/// stripped and normalised text (shingle_sketch, on its own, strips and
/// normalises the text again: a tenth of the segmentation statement's time
/// on long articles); and whether every argument was a constant.
pub(super) fn analyze(args: &ScalarFunctionArgs, name: &str, with_sketches: bool) -> Result<(ListArray, Option<ListArray>, bool)> {
    let settings = TextSettings::from_args(&args.args, 2, name)?;
    let with_pos = match args.args.get(4) {
        None | Some(ColumnarValue::Scalar(ScalarValue::Null | ScalarValue::Boolean(None))) => true,
        Some(ColumnarValue::Scalar(ScalarValue::Boolean(Some(b)))) => *b,
        Some(_) => return exec_err!("{name}: 'with_pos' must be a boolean constant"),
    };
    let boilerplate = match scalar_str(&args.args, 5, name, "boilerplate")? {
        Some(set) if !set.is_empty() => Some(boilerplate_set(&set)?),
        _ => None,
    };
    let (arrays, all_scalar) = to_arrays(&args.args[..2], args.number_rows)?;
    let texts = Strings::try_new(&arrays[0], name, "text")?;
    let titles = Strings::try_new(&arrays[1], name, "title")?;
    let rows = arrays[0].len();
    let repeats = earlier_copies(&texts, &titles, rows);
    let mut columns = Columns::with_room(texts.bytes(0..rows));
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i32);
    let mut valid = Vec::with_capacity(rows);
    let mut sketch_lists = with_sketches.then(|| SketchLists::new(rows));
    let mut spare: Vec<Token> = Vec::new();
    let mut spare_text = String::new();
    let mut spare_terms: Vec<TermStat> = Vec::new();
    let mut scratch = StatsScratch::default();
    let mut cut: Vec<(Range<usize>, bool)> = Vec::new();
    let (mut written, mut bytes) = (0usize, 0u64);
    for chunk in (0..rows).step_by(NORMALISED_ROWS).map(|start| start..rows.min(start + NORMALISED_ROWS)) {
        let inputs = (&texts, &titles, chunk.clone());
        let batch = Normalised::of(inputs, &repeats, boilerplate.as_deref(), (sketch_lists.as_mut(), std::mem::take(&mut spare_text)), name)?;
        bytes += batch.bytes;
        let mut words = recycle(std::mem::take(&mut spare));
        words.reserve(2 * GROUP_WORDS);
        let mut group = chunk.start;
        while group < chunk.end {
            // Cut a group of documents, then count them: jieba-rs's code and
            // the statistics' each stay in the core's instruction cache.
            let end = cut_group((&settings, with_pos), &batch, (&repeats, group..chunk.end), &mut words, &mut cut);
            let mut cut_docs = cut.iter();
            for i in group..end {
                let present = if let Some(first) = repeats[i].map(|j| j as usize) {
                    let terms = offsets[first] as usize..offsets[first + 1] as usize;
                    written += terms.len();
                    columns.repeat(terms, name)?;
                    true
                } else if let Some(doc) = batch.get(i) {
                    let (range, untagged) = cut_docs.next().expect("a document cut above").clone();
                    let terms = std::mem::take(&mut spare_terms);
                    let stats = DocStats::of_words(&settings.analyzer, doc, (settings.mode, untagged), (&words[range], terms), &mut scratch);
                    columns.push(&stats, name)?;
                    written += stats.terms.len();
                    spare_terms = stats.recycle();
                    true
                } else {
                    false
                };
                valid.push(present);
                let Ok(offset) = i32::try_from(written) else {
                    return exec_err!("{name}: more than 2^31 terms in one batch; lower datafusion.execution.batch_size");
                };
                offsets.push(offset);
            }
            group = end;
        }
        spare = recycle(words);
        spare_text = batch.text;
    }
    let nulls = Some(NullBuffer::from(valid));
    let terms = ListArray::new(item_field(), OffsetBuffer::new(offsets.into()), Arc::new(columns.finish()), nulls.clone());
    crate::progress::add(rows as u64, bytes);
    Ok((terms, sketch_lists.map(|lists| lists.finish(nulls)), all_scalar))
}

/// Cut the documents of `batch` from the first of `rows` on, those that
/// do not repeat an earlier row, until `words` holds [`GROUP_WORDS`] or the
/// rows end; into `cut`, each one's range of `words` and whether its words
/// are untagged ([`crate::text::Analyzer::words_untagged`]). Returns the
/// row after the last one looked at.
fn cut_group<'a>(
    (settings, with_pos): (&'a TextSettings, bool),
    batch: &'a Normalised,
    (repeats, rows): (&[Option<u32>], Range<usize>),
    words: &mut Vec<Token<'a>>,
    cut: &mut Vec<(Range<usize>, bool)>,
) -> usize {
    words.clear();
    cut.clear();
    let mut end = rows.start;
    while end < rows.end && words.len() < GROUP_WORDS {
        if let (None, Some((text, _))) = (repeats[end], batch.get(end)) {
            let start = words.len();
            let untagged = settings.analyzer.words_untagged(text, settings.mode, with_pos, words);
            cut.push((start..words.len(), untagged));
        }
        end += 1;
    }
    end
}

/// For each of `rows`, the first earlier row with the same text and title
/// (both as they came), whose statistics and sketch it then copies; None for
/// a row whose text is new to the batch, or NULL. Reposts and template
/// comments repeat word for word (Weibo: 143,530 of 768,573 posts repeat one
/// of the 8,192 posts of their batch), and jieba-rs need not cut them again.
fn earlier_copies(texts: &Strings, titles: &Strings, rows: usize) -> Vec<Option<u32>> {
    let mut first: HashKeyed<u32> = HashKeyed::with_capacity_and_hasher(rows, Default::default());
    (0..rows)
        .map(|i| {
            let (text, title) = (texts.get(i)?, titles.get(i));
            let key = xxh3_64_with_seed(text.as_bytes(), title.map_or(0, |t| xxh3_64(t.as_bytes()) | 1));
            // Rows under one key but with other texts are cut as new ones.
            match first.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(i as u32);
                    None
                }
                Entry::Occupied(seen) => {
                    let j = *seen.get();
                    (texts.get(j as usize) == Some(text) && titles.get(j as usize) == title).then_some(j)
                }
            }
        })
        .collect()
}

/// Rows that `analyze` normalises (and sketches) before it segments any:
/// with jieba-rs alone in the second pass, its tables stay in the cache
/// (one-core `text_features` over `weibo_reposts`: 10 of 13 interleaved
/// rounds faster, by 4 % at the median; docs/performance.md). Few enough
/// that long articles' normal forms stay in the cache too.
const NORMALISED_ROWS: usize = 256;

/// Words, at least, that `analyze` cuts before it counts any of them.
/// Cutting a post and counting its words one after the other, jieba-rs's
/// code and the statistics' pushed each other out of the core's
/// instruction cache: cachegrind over Weibo's first 80,000 posts counted
/// 6.0 million misses of its 32 KB, 2.3 million in groups of 4,096 words
/// (and as many in groups of 16,384), for the same instructions. The
/// group's words (32 bytes each) stay in the core's L2 cache.
const GROUP_WORDS: usize = 4096;

/// Some rows' texts and titles, stripped of boilerplate lines and
/// normalised, one after another in one string.
struct Normalised {
    /// The first row.
    first: usize,
    text: String,
    /// Each row's text and title, as ranges of `text`; None for a NULL text.
    docs: Vec<Option<(Range<usize>, Option<Range<usize>>)>>,
    /// The bytes of the texts as they came, for the progress bar.
    bytes: u64,
}

impl Normalised {
    /// The `rows` of `texts` and `titles` normalised and, given the lists, sketched.
    /// Rows that `repeats` marks as copies of earlier ones are counted but
    /// neither normalised nor sketched again: they take the earlier sketch.
    /// `text` is the string of the last rows, emptied and used again, with
    /// room made at once for as many bytes as the rows' texts and titles
    /// (their normal forms are about as long). Made anew and grown by
    /// doubling, each chunk's string was copied at every doubling: 94,000
    /// of the statement's 2.26 million L2 write misses (cachegrind, Heybox's
    /// first 1,500 articles; docs/performance.md).
    fn of(
        (texts, titles, rows): (&Strings, &Strings, Range<usize>),
        repeats: &[Option<u32>],
        boilerplate: Option<&HashSet<u64>>,
        (mut sketches, mut text): (Option<&mut SketchLists>, String),
        name: &str,
    ) -> Result<Normalised> {
        let new = || rows.clone().filter(|&i| repeats[i].is_none());
        text.clear();
        text.reserve(texts.bytes(new()) + titles.bytes(new()));
        let mut batch = Normalised { first: rows.start, text, docs: Vec::with_capacity(rows.len()), bytes: 0 };
        let (mut buf, mut line_buf, mut stripped) = (String::new(), String::new(), String::new());
        let (mut sketcher, mut sketch) = (Sketcher::default(), Vec::new());
        for i in rows {
            if let Some(first) = repeats[i] {
                batch.bytes += texts.get(i).map_or(0, |t| t.len() as u64);
                batch.docs.push(None);
                if let Some(lists) = sketches.as_deref_mut() {
                    lists.repeat(first as usize, name)?;
                }
                continue;
            }
            sketch.clear();
            let doc = texts.get(i).map(|mut text| {
                batch.bytes += text.len() as u64;
                if let Some(set) = boilerplate {
                    strip_lines(text, set, &mut line_buf, &mut stripped);
                    text = stripped.as_str();
                }
                normalize_into(text, &mut buf);
                if sketches.is_some() {
                    sketcher.sketch(&buf, &mut sketch);
                }
                let text = batch.push(&buf);
                let title = titles.get(i).map(|title| {
                    normalize_into(title, &mut buf);
                    batch.push(&buf)
                });
                (text, title)
            });
            batch.docs.push(doc);
            if let Some(lists) = sketches.as_deref_mut() {
                lists.push(&sketch, name)?;
            }
        }
        Ok(batch)
    }

    fn push(&mut self, normal: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(normal);
        start..self.text.len()
    }

    /// Row `i`'s normalised text and title.
    fn get(&self, i: usize) -> Option<(&str, Option<&str>)> {
        let (text, title) = self.docs[i - self.first].as_ref()?;
        Some((&self.text[text.clone()], title.as_ref().map(|t| &self.text[t.clone()])))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TermStats {
    signature: Signature,
}

impl Default for TermStats {
    fn default() -> Self {
        TermStats { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// The most text [`Columns::with_room`] makes room for. The room is about
/// 18 bytes a byte of text: 18 MiB of address space for the job's batches
/// of about 1 MiB of text (`job::footprint`), at most 148 MiB for a larger
/// batch of `neardup sql`, which grows past it.
const MAX_ROOM_BYTES: usize = 1 << 23;

/// The term statistics of a batch, column by column. The numbers go into
/// plain vectors, made arrays without a copy: a builder per column checks
/// and grows a validity bitmap for every value of fields that are never
/// null (3 % of the instructions of `text_features` on long articles).
/// The terms' bytes and offsets too, made an array without checking them
/// for UTF-8 again (2 % more instructions on long articles): each is a
/// `&str`.
///
/// Every vector has room for the batch from the start ([`Columns::with_room`])
/// and gives back what it did not use at the end. Grown by doubling, each
/// was copied into a new block a few times a batch, and those copies' writes
/// pushed jieba-rs's tables out of the core's L2 cache between two groups of
/// cuts (cachegrind, Heybox's first 1,500 articles: the statement's L2 misses
/// 3.49 → 3.06 million, jieba-rs's prefix walk's 908 → 854 thousand).
struct Columns {
    term_bytes: Vec<u8>,
    /// Where each term ends in `term_bytes`, after a first 0: Arrow's offsets.
    term_ends: Vec<i32>,
    hash: Vec<u64>,
    count: Vec<u32>,
    tf: Vec<f64>,
    cx: Vec<u8>,
    len: Vec<f64>,
    logo: Vec<u8>,
    title: Vec<u8>,
}

impl Columns {
    /// Columns with room for the terms of texts of `text_bytes` bytes: at
    /// most one term for every two bytes (a word of one character and a
    /// space, or one Chinese character) and all of their bytes. The room a
    /// batch does not use is never written, so it takes address space only;
    /// it stops at [`MAX_ROOM_BYTES`] of text, past which the columns grow.
    fn with_room(text_bytes: usize) -> Columns {
        let text_bytes = text_bytes.min(MAX_ROOM_BYTES);
        let terms = text_bytes / 2;
        let mut term_ends = Vec::with_capacity(terms + 1);
        term_ends.push(0);
        Columns {
            term_bytes: Vec::with_capacity(text_bytes),
            term_ends,
            hash: Vec::with_capacity(terms),
            count: Vec::with_capacity(terms),
            tf: Vec::with_capacity(terms),
            cx: Vec::with_capacity(terms),
            len: Vec::with_capacity(terms),
            logo: Vec::with_capacity(terms),
            title: Vec::with_capacity(terms),
        }
    }

    fn push(&mut self, stats: &DocStats, name: &str) -> Result<()> {
        for t in &stats.terms {
            self.term_bytes.extend_from_slice(t.term.as_bytes());
            self.end_term(name)?;
        }
        let factors = || stats.terms.iter().map(|t| &t.factors);
        self.hash.extend(stats.terms.iter().map(|t| t.hash));
        self.count.extend(factors().map(|f| f.count));
        self.tf.extend(factors().map(|f| f.tf));
        self.cx.extend(factors().map(|f| f.cx));
        self.len.extend(factors().map(|f| f.len));
        self.logo.extend(factors().map(|f| f.logo));
        self.title.extend(factors().map(|f| f.title));
        Ok(())
    }

    /// Close the term whose bytes were just added.
    fn end_term(&mut self, name: &str) -> Result<()> {
        let Ok(end) = i32::try_from(self.term_bytes.len()) else {
            return exec_err!("{name}: more than 2 GiB of terms in one batch; lower datafusion.execution.batch_size");
        };
        self.term_ends.push(end);
        Ok(())
    }

    /// Append again the terms at `rows` (an earlier document's).
    fn repeat(&mut self, rows: Range<usize>, name: &str) -> Result<()> {
        for i in rows.clone() {
            let (start, end) = (self.term_ends[i] as usize, self.term_ends[i + 1] as usize);
            self.term_bytes.extend_from_within(start..end);
            self.end_term(name)?;
        }
        self.hash.extend_from_within(rows.clone());
        self.count.extend_from_within(rows.clone());
        self.tf.extend_from_within(rows.clone());
        self.cx.extend_from_within(rows.clone());
        self.len.extend_from_within(rows.clone());
        self.logo.extend_from_within(rows.clone());
        self.title.extend_from_within(rows);
        Ok(())
    }

    fn finish(self) -> StructArray {
        // What the batch did not use goes back in place (a shrinking
        // `realloc` moves nothing), so the terms' table holds its rows only.
        fn fitted<T>(mut v: Vec<T>) -> Vec<T> {
            v.shrink_to_fit();
            v
        }
        let offsets = OffsetBuffer::new(fitted(self.term_ends).into());
        // SAFETY: the bytes are whole `&str`s one after another, and the
        // offsets start at 0 and end each of them, in order.
        let terms = unsafe { StringArray::new_unchecked(offsets, Buffer::from_vec(fitted(self.term_bytes)), None) };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(terms),
            Arc::new(UInt64Array::from(fitted(self.hash))),
            Arc::new(UInt32Array::from(fitted(self.count))),
            Arc::new(Float64Array::from(fitted(self.tf))),
            Arc::new(UInt8Array::from(fitted(self.cx))),
            Arc::new(Float64Array::from(fitted(self.len))),
            Arc::new(UInt8Array::from(fitted(self.logo))),
            Arc::new(UInt8Array::from(fitted(self.title))),
        ];
        StructArray::new(term_fields(), columns, None)
    }
}

impl ScalarUDFImpl for TermStats {
    fn name(&self) -> &str {
        "term_stats"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(2..=6).contains(&arg_types.len()) {
            return plan_err!("term_stats takes 2 to 6 arguments, got {}", arg_types.len());
        }
        arg_types
            .iter()
            .enumerate()
            .map(|(i, t)| match (i, t) {
                (0 | 1, DataType::Null) => Ok(DataType::Utf8),
                (0 | 1, t) if is_string(t) => Ok(t.clone()),
                (2 | 3 | 5, t) if is_string(t) => Ok(DataType::Utf8),
                (4, DataType::Boolean | DataType::Null) => Ok(DataType::Boolean),
                (i, t) => plan_err!("term_stats: argument {} has the wrong type {t}", i + 1),
            })
            .collect()
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(item_field()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (terms, _, all_scalar) = analyze(&args, self.name(), false)?;
        finish(Arc::new(terms), all_scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Per-document statistics of every distinct kept term, sorted by hash: term, hash \
                 (hash64 of the term), count, tf (count / kept terms), and the factors of the \
                 improved weight: cx (3 noun, 2 verb, 1 other), len ((chars − min) / (max − min) \
                 over the document's terms), logo (5 if it is or contains a signal word) and title \
                 (5 if it occurs among the title's terms). NULL text gives NULL; a text with no \
                 kept terms gives an empty list.",
                "term_stats(text, title [, mode [, options [, with_pos [, boilerplate]]]])",
                "```sql\n> SELECT t['term'], t['count'], t['cx'], t['title']\n  FROM (SELECT unnest(term_stats('北京 北京 天安门', '天安门')) AS t);\n北京   2 3 0\n天安门 1 3 5\n```",
                &[
                    ("text", "The document text."),
                    ("title", "The document title, or NULL."),
                    ("mode", "precise (default), full, search or char-N."),
                    ("options", "Analyzer files, as for tokenize."),
                    ("with_pos", "Tag parts of speech (default true); false is faster and sets every cx to 1."),
                    (
                        "boilerplate",
                        "Lines to drop before segmentation: hex hashes (hash64 of the normalised line) \
                         separated by commas, as line_hashes gives them; a text made only of such lines is kept whole.",
                    ),
                ],
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, StringArray, StringViewArray};

    #[test]
    fn a_row_copies_the_first_row_of_the_same_text_and_title() {
        let texts = [Some("甲"), Some("乙"), Some("甲"), None, Some("甲"), None, Some("甲"), Some("乙")];
        let titles = [None, None, None, None, Some("题"), None, Some("题"), Some("")];
        let expected = vec![None, None, Some(0), None, None, None, Some(4), None];
        // Every string layout gives the same rows.
        let utf8: ArrayRef = Arc::new(StringArray::from(texts.to_vec()));
        let view: ArrayRef = Arc::new(StringViewArray::from(texts.to_vec()));
        let title: ArrayRef = Arc::new(StringArray::from(titles.to_vec()));
        let title_strings = Strings::try_new(&title, "t", "title").unwrap();
        for text in [&utf8, &view] {
            let text_strings = Strings::try_new(text, "t", "text").unwrap();
            assert_eq!(earlier_copies(&text_strings, &title_strings, texts.len()), expected);
        }
    }

    #[test]
    fn columns_hold_the_terms_pushed_and_repeated_and_no_more_room() {
        let doc = |words: &[&'static str], count: u32| DocStats {
            total: count * words.len() as u32,
            terms: words
                .iter()
                .map(|w| {
                    let factors = TermFactors { count, tf: f64::from(count) / 10.0, cx: 2, len: 0.5, logo: 0, title: 5 };
                    TermStat { term: w, hash: crate::fingerprint::hash64(w.as_bytes()), factors }
                })
                .collect(),
        };
        // Room for two terms of two bytes at most: the rest grows past it.
        for room in [0, 4, 1 << 12] {
            let mut columns = Columns::with_room(room);
            columns.push(&doc(&["北京", "ab"], 1), "t").unwrap();
            columns.push(&doc(&["天安门广场", "", "x"], 3), "t").unwrap();
            columns.repeat(0..2, "t").unwrap();
            columns.repeat(2..5, "t").unwrap();
            let terms = columns.finish();
            let words = ["北京", "ab", "天安门广场", "", "x", "北京", "ab", "天安门广场", "", "x"];
            let strings = terms.column(0).as_string::<i32>();
            assert_eq!(strings.iter().map(Option::unwrap).collect::<Vec<_>>(), words, "room {room}");
            let hashes = terms.column(1).as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
            assert_eq!(hashes.values().to_vec(), words.map(|w| crate::fingerprint::hash64(w.as_bytes())).to_vec());
            let counts = terms.column(2).as_primitive::<datafusion::arrow::datatypes::UInt32Type>();
            assert_eq!(counts.values().to_vec(), [1, 1, 3, 3, 3, 1, 1, 3, 3, 3]);
            // The room not used is given back: the arrays hold their values only.
            assert_eq!(strings.values().len(), words.iter().map(|w| w.len()).sum::<usize>());
            assert!(strings.get_buffer_memory_size() < 64 + 64 + 64, "{} bytes held", strings.get_buffer_memory_size());
            assert!(hashes.get_buffer_memory_size() <= 10 * 8 + 64, "{} bytes held", hashes.get_buffer_memory_size());
        }
        // A batch of a GiB of text asks for room for 8 MiB of it, no more.
        let large = Columns::with_room(1 << 30);
        assert!(large.term_bytes.capacity() < 2 * MAX_ROOM_BYTES && large.hash.capacity() < MAX_ROOM_BYTES);
    }
}
