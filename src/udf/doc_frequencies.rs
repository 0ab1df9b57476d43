//! `doc_frequencies(terms)`: each term's document frequency over the rows
//! of `terms` lists (sql/31_corpus_df.sql), as a list of `{hash, term, df}`
//! in hash order: the rows of
//!
//! ```sql
//! SELECT t['hash'] AS hash, min(t['term']) AS term, count(*) AS df
//! FROM (SELECT unnest(terms) AS t FROM terms) GROUP BY t['hash']
//! ```
//!
//! without unnesting the lists or keeping a running minimum per row: each
//! partition counts into one hash table whose terms sit in one buffer
//! ([`DfCounts`]), and a term is compared only with the one its hash already
//! holds. The result does not depend on row order or partitioning: counts
//! add up, and of two terms under one hash (a 64-bit collision) the least
//! is kept, as `min` keeps it.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray, StringArray, StringBuilder, StructArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Int64Type, UInt64Type};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility};

use super::args::doc;
use crate::text::HashKeyed;

/// Document frequencies by term hash, with the least term seen under each.
///
/// The counts are kept in [`PARTS`] tables by the hash's top bits, and the
/// entries of the documents counted wait, by table, until about
/// [`PENDING`] have come: then each table takes its own at once. One table
/// of every term (Heybox: 231,174, 7.4 MB) is far larger than a core's
/// caches, and each of the 4.7 million entries missed them twice (the
/// table's control bytes and its slot, some 100 ns an entry); a part is a
/// few tens of kilobytes, and its entries are counted while it is cached.
/// The parts in order are the counts in hash order, each sorted alone.
#[derive(Debug, Default)]
pub struct DfCounts {
    /// Per part, per hash ([`slot_key`]): its count and its term. A term of
    /// up to [`INLINE`] bytes (most words: a Chinese word of five characters
    /// is 15) sits in the entry itself, so that the comparison with the term
    /// already held reads the cache line the probe brought in; kept in
    /// `text`, every entry counted cost a second miss of the cache.
    parts: Vec<HashKeyed<(i64, Term)>>,
    /// Every longer term kept, one after another.
    text: String,
    /// Per part, entries of one document each that wait to be counted, with
    /// a short term: `(hash, term)`.
    pending: Vec<Vec<(u64, Term)>>,
    pending_len: usize,
}

/// The counts' tables, by the top [`PART_BITS`] bits of the hash.
const PART_BITS: u32 = 8;
const PARTS: usize = 1 << PART_BITS;

/// Entries that wait before the tables take them: enough to be many per
/// table, few enough to hold (24 bytes each, 12 MB).
const PENDING: usize = 1 << 19;

/// The table of a hash.
fn part_of(hash: u64) -> usize {
    (hash >> (64 - PART_BITS)) as usize
}

/// A hash as its part's table keys it. The table places a key by its low
/// bits and tells keys apart in a probe by its top 7 (hashbrown), and a
/// part's hashes share their top bits: rotated, the shared bits lie in
/// the middle, which neither uses.
fn slot_key(hash: u64) -> u64 {
    hash.rotate_right(PART_BITS)
}

fn hash_of(key: u64) -> u64 {
    key.rotate_left(PART_BITS)
}

/// Terms up to this many bytes are kept in their entry.
const INLINE: usize = 15;

// An entry with its hash fills half a cache line, as a byte range did.
const _: () = assert!(std::mem::size_of::<(u64, (i64, Term))>() == 32);

/// A term held by [`DfCounts`]: its bytes, with their length in the last
/// byte, or (for longer terms) its byte range in the counts' `text`, with
/// `u8::MAX` in the last byte.
/// Two short terms are equal as entries exactly when their bytes are: the
/// bytes past a term's length are always zero ([`Term::inline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Term([u8; INLINE + 1]);

/// Copy `src` (at most 15 bytes) to the front of `dst`, leaving the rest
/// as it is, in at most two overlapping moves of a word or of half a word:
/// a copy of a length known only at run time is otherwise a call to
/// `memcpy`, made for every (document, term) entry counted.
#[inline]
fn copy_short(src: &[u8], dst: &mut [u8]) {
    let n = src.len();
    debug_assert!(n <= INLINE && n <= dst.len());
    match n {
        8.. => {
            dst[..8].copy_from_slice(&src[..8]);
            dst[n - 8..n].copy_from_slice(&src[n - 8..]);
        }
        4.. => {
            dst[..4].copy_from_slice(&src[..4]);
            dst[n - 4..n].copy_from_slice(&src[n - 4..]);
        }
        // The first, middle and last bytes cover one to three.
        1.. => {
            dst[0] = src[0];
            dst[n / 2] = src[n / 2];
            dst[n - 1] = src[n - 1];
        }
        0 => {}
    }
}

impl Term {
    /// A term of up to [`INLINE`] bytes, in the entry.
    fn inline(term: &str) -> Option<Term> {
        if term.len() > INLINE {
            return None;
        }
        let mut bytes = [0u8; INLINE + 1];
        copy_short(term.as_bytes(), &mut bytes[..INLINE]);
        bytes[INLINE] = term.len() as u8;
        Some(Term(bytes))
    }

    /// Any term: in the entry, or appended to `text`.
    fn keep(text: &mut String, term: &str) -> Term {
        Term::inline(term).unwrap_or_else(|| {
            let mut bytes = [0u8; INLINE + 1];
            let (start, end) = keep(text, term);
            bytes[..8].copy_from_slice(&(start as u64).to_le_bytes());
            bytes[8..12].copy_from_slice(&((end - start) as u32).to_le_bytes());
            bytes[INLINE] = u8::MAX;
            Term(bytes)
        })
    }

    /// The term's bytes, in the entry or in `text`.
    fn bytes<'a>(&'a self, text: &'a str) -> &'a [u8] {
        let Term(bytes) = self;
        match bytes[INLINE] {
            u8::MAX => {
                let start = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
                let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
                &text.as_bytes()[start..start + len]
            }
            len => &bytes[..usize::from(len)],
        }
    }

    fn as_str<'a>(&'a self, text: &'a str) -> &'a str {
        std::str::from_utf8(self.bytes(text)).expect("a term kept from a string")
    }
}

impl DfCounts {
    /// Count `n` documents with the term `term`, whose hash is `hash`.
    pub fn add(&mut self, hash: u64, term: &str, n: i64) {
        let table = self.table(hash);
        let Self { parts, text, .. } = self;
        match parts[table].get_mut(&slot_key(hash)) {
            Some((count, kept)) => {
                *count += n;
                // Strings order as their bytes do.
                if term.as_bytes() < kept.bytes(text) {
                    *kept = Term::keep(text, term);
                }
            }
            None => {
                let kept = Term::keep(text, term);
                parts[table].insert(slot_key(hash), (n, kept));
            }
        }
    }

    /// Count one document with the term `term`, whose hash is `hash`: a
    /// short term when its table next takes its entries, a longer one now
    /// (kept waiting, each would take room in `text`).
    pub fn add_one(&mut self, hash: u64, term: &str) {
        let Some(short) = Term::inline(term) else {
            return self.add(hash, term, 1);
        };
        let table = self.table(hash);
        self.pending[table].push((hash, short));
        self.pending_len += 1;
        if self.pending_len >= PENDING {
            self.count_pending();
        }
    }

    /// The part of `hash`, the tables made on first use.
    #[inline]
    fn table(&mut self, hash: u64) -> usize {
        if self.parts.is_empty() {
            self.make_tables();
        }
        part_of(hash)
    }

    #[cold]
    fn make_tables(&mut self) {
        self.parts = (0..PARTS).map(|_| HashKeyed::default()).collect();
        self.pending = vec![Vec::new(); PARTS];
    }

    /// Every waiting entry counted, table after table.
    fn count_pending(&mut self) {
        let Self { parts, text, pending, pending_len } = self;
        for (table, entries) in parts.iter_mut().zip(pending.iter_mut()) {
            for (hash, term) in entries.drain(..) {
                match table.get_mut(&slot_key(hash)) {
                    Some((count, kept)) => {
                        *count += 1;
                        // Nearly always the same word: the 16-byte entries
                        // compared at once, the strings only when they differ.
                        if term != *kept && term.bytes(text) < kept.bytes(text) {
                            *kept = term;
                        }
                    }
                    None => {
                        table.insert(slot_key(hash), (1, term));
                    }
                }
            }
        }
        *pending_len = 0;
    }

    /// `(hash, term, df)` in hash order, every entry counted. By radix,
    /// part by part: the last partition to finish sorts its rows while the
    /// others wait for the merge (Weibo: 135,000 rows, 20 ms all at once by
    /// comparisons).
    pub fn sorted(&mut self) -> Vec<(u64, &str, i64)> {
        self.count_pending();
        let mut rows = Vec::with_capacity(self.parts.iter().map(HashKeyed::len).sum());
        for table in &self.parts {
            let start = rows.len();
            rows.extend(table.iter().map(|(&key, (n, term))| (hash_of(key), term.as_str(&self.text), *n)));
            radsort::sort_by_key(&mut rows[start..], |r| r.0);
        }
        rows
    }

    fn size(&self) -> usize {
        self.parts.iter().map(|t| t.capacity() * 32).sum::<usize>()
            + self.text.capacity()
            + self.pending.iter().map(|p| p.capacity() * std::mem::size_of::<(u64, Term)>()).sum::<usize>()
    }
}

/// Append `term` to `text`; its byte range there.
fn keep(text: &mut String, term: &str) -> (usize, usize) {
    let start = text.len();
    text.push_str(term);
    (start, text.len())
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DocFrequencies {
    signature: Signature,
}

impl Default for DocFrequencies {
    fn default() -> Self {
        DocFrequencies { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

fn df_fields() -> Fields {
    Fields::from(vec![Field::new("hash", DataType::UInt64, false), Field::new("term", DataType::Utf8, false), Field::new("df", DataType::Int64, false)])
}

fn df_list() -> DataType {
    DataType::new_list(DataType::Struct(df_fields()), true)
}

/// A list of one row whose entries are `columns` (hash, term, df): a
/// partial state or the result.
fn one_row_list(columns: Vec<ArrayRef>) -> ListArray {
    let structs = StructArray::new(df_fields(), columns, None);
    let field = Arc::new(Field::new("item", DataType::Struct(df_fields()), true));
    ListArray::new(field, OffsetBuffer::from_lengths([structs.len()]), Arc::new(structs), None)
}

/// Whether `t` is a list of structs with a `hash` and a `term`.
fn is_terms(t: &DataType) -> bool {
    match t {
        DataType::List(item) => match item.data_type() {
            DataType::Struct(fields) => ["hash", "term"].iter().all(|name| fields.iter().any(|f| f.name() == name)),
            _ => false,
        },
        _ => false,
    }
}

impl AggregateUDFImpl for DocFrequencies {
    fn name(&self) -> &str {
        "doc_frequencies"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [terms] if is_terms(terms) => Ok(vec![terms.clone()]),
            _ => plan_err!("doc_frequencies takes (terms): a list of structs with 'hash' and 'term' fields (see term_stats), got {arg_types:?}"),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(df_list())
    }
    fn state_fields(&self, _: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new("counts", df_list(), true))])
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(DfAccumulator::default()))
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Each term's document frequency over rows of term lists: a list of {hash, term, df} in \
                 hash order, where df counts the list entries with that hash and term is the least of \
                 their terms. The same rows as grouping the unnested entries by hash with min(term) and \
                 count(*). NULL lists count nothing.",
                "doc_frequencies(terms)",
                "```sql\n> SELECT unnest(doc_frequencies(terms)) FROM terms;\n```",
                &[("terms", "A row's terms: a list of structs with 'hash' (UInt64) and 'term' (string) fields.")],
            )
        }))
    }
}

/// One aggregate state's entries (sorted by hash, as [`DfAccumulator`]
/// gives them): its columns, shared with the batch of states it came in,
/// and its rows' ranges of them.
#[derive(Debug)]
struct SortedStates {
    hashes: UInt64Array,
    terms: StringArray,
    df: Int64Array,
    rows: Vec<Range<usize>>,
}


/// Counts its rows' terms in a [`DfCounts`]; keeps the partial states it
/// merges, each sorted by hash, and merges them in hash order at the end.
/// Adding them to one hash table and sorting it ran on one core while the
/// other waited (Heybox: 460,000 entries of two states, for 231,174 terms).
#[derive(Debug, Default)]
struct DfAccumulator {
    counts: DfCounts,
    states: Vec<SortedStates>,
}

/// The `hash`, `term` (as Utf8) and, when `with_df`, `df` columns of a
/// list's items.
fn columns(list: &ListArray, with_df: bool) -> Result<(UInt64Array, StringArray, Option<Int64Array>)> {
    let items = list.values().as_struct();
    let field = |name: &str, t: &DataType| -> Result<ArrayRef> {
        match items.column_by_name(name) {
            Some(c) => Ok(cast(c, t)?),
            None => exec_err!("doc_frequencies: the list's items have no '{name}' field"),
        }
    };
    let (hashes, terms) = (field("hash", &DataType::UInt64)?, field("term", &DataType::Utf8)?);
    let df = match with_df {
        true => Some(field("df", &DataType::Int64)?.as_primitive::<Int64Type>().clone()),
        false => None,
    };
    Ok((hashes.as_primitive::<UInt64Type>().clone(), terms.as_string::<i32>().clone(), df))
}

impl DfAccumulator {
    /// Add every entry of the non-NULL rows of `list`, each counting one
    /// document (a row's terms).
    fn add(&mut self, list: &ListArray) -> Result<()> {
        let (hashes, terms, _) = columns(list, false)?;
        let offsets = list.value_offsets();
        for row in (0..list.len()).filter(|&r| list.is_valid(r)) {
            for j in offsets[row] as usize..offsets[row + 1] as usize {
                if hashes.is_null(j) || terms.is_null(j) {
                    return exec_err!("doc_frequencies: a term without a hash or text in row {row}");
                }
                self.counts.add_one(hashes.value(j), terms.value(j));
            }
        }
        Ok(())
    }

    /// Keep the non-NULL rows of `list`, partial states, to merge at the
    /// end; a state not sorted by hash is added to the counts instead.
    fn keep_states(&mut self, list: &ListArray) -> Result<()> {
        let (hashes, terms, Some(df)) = columns(list, true)? else {
            return exec_err!("doc_frequencies: a partial state without counts");
        };
        if hashes.null_count() + terms.null_count() + df.null_count() > 0 {
            return exec_err!("doc_frequencies: a partial state with a term without a hash, text or count");
        }
        let offsets = list.value_offsets();
        let mut sorted = Vec::new();
        for row in (0..list.len()).filter(|&r| list.is_valid(r)) {
            let range = offsets[row] as usize..offsets[row + 1] as usize;
            match hashes.values()[range.clone()].is_sorted() {
                true => sorted.push(range),
                false => range.for_each(|j| self.counts.add(hashes.value(j), terms.value(j), df.value(j))),
            }
        }
        self.states.push(SortedStates { hashes, terms, df, rows: sorted });
        Ok(())
    }

    /// Everything counted and merged, as one list in hash order: the
    /// counts' rows sorted, and the states', merged in order; the df of a
    /// hash added up, the least of its terms kept.
    fn list(&mut self) -> ScalarValue {
        let counted = self.counts.sorted();
        let mut runs: Vec<Run> = self.states.iter().flat_map(|s| s.rows.iter().map(move |r| Run::State(s, r.clone()))).collect();
        runs.push(Run::Counted(&counted));
        runs.retain(|r| !r.is_empty());
        let most = runs.iter().map(Run::len).max().unwrap_or(0);
        let (mut hashes, mut terms, mut dfs) = (Vec::with_capacity(most), StringBuilder::new(), Vec::with_capacity(most));
        // A merge of the runs' heads, the least hash first. The runs are
        // few (a state a partition), so the least is found by looking at
        // each. This merge runs on one thread while the other cores wait:
        // through boxed iterators, a heap and groups it was two fifths of
        // the statement's stretch on one core (Heybox, 70 ms).
        while let Some(hash) = runs.iter().filter_map(Run::head).min() {
            let (mut least, mut df): (Option<&str>, i64) = (None, 0);
            for run in runs.iter_mut() {
                // A state's row is taken as a run when it is in order, which
                // a row that repeats a hash still is: all of them count.
                while run.head() == Some(hash) {
                    let (term, n) = run.take();
                    // Strings order as their bytes do, as in `DfCounts::add`.
                    least = Some(least.map_or(term, |t| t.min(term)));
                    df += n;
                }
            }
            hashes.push(hash);
            terms.append_value(least.unwrap_or_default());
            dfs.push(df);
        }
        let columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(hashes)), Arc::new(terms.finish()), Arc::new(Int64Array::from(dfs))];
        ScalarValue::List(Arc::new(one_row_list(columns)))
    }
}

/// A run of entries in hash order: a partial state's row, or the
/// accumulator's own counts, sorted; consumed from the front.
enum Run<'a> {
    State(&'a SortedStates, Range<usize>),
    Counted(&'a [(u64, &'a str, i64)]),
}

impl<'a> Run<'a> {
    fn len(&self) -> usize {
        match self {
            Run::State(_, rows) => rows.len(),
            Run::Counted(rows) => rows.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The hash of the first entry left.
    fn head(&self) -> Option<u64> {
        match self {
            Run::State(s, rows) => (!rows.is_empty()).then(|| s.hashes.value(rows.start)),
            Run::Counted(rows) => rows.first().map(|r| r.0),
        }
    }

    /// The first entry left's term and count, moving past it.
    fn take(&mut self) -> (&'a str, i64) {
        match self {
            Run::State(s, rows) => {
                let (s, j): (&'a SortedStates, _) = (*s, rows.next().expect("a run with a head"));
                (s.terms.value(j), s.df.value(j))
            }
            Run::Counted(rows) => {
                let ((_, term, n), rest) = rows.split_first().expect("a run with a head");
                *rows = rest;
                (term, *n)
            }
        }
    }
}

impl Accumulator for DfAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(values[0].as_list::<i32>())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.keep_states(states[0].as_list::<i32>())
    }
    // A state is sorted by hash, so that the merge is a merge: the sort of
    // each partition's terms runs on that partition's core.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.list()])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.list())
    }
    fn size(&self) -> usize {
        let held = |s: &SortedStates| s.hashes.get_array_memory_size() + s.terms.get_array_memory_size() + s.df.get_array_memory_size();
        std::mem::size_of_val(self) + self.counts.size() + self.states.iter().map(held).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use datafusion::logical_expr::AggregateUDF;
    use datafusion::prelude::{SessionConfig, SessionContext};

    #[test]
    fn short_copies_move_exactly_their_bytes() {
        let src: Vec<u8> = (1..=INLINE as u8).collect();
        for n in 0..=INLINE {
            let mut dst = [0u8; INLINE];
            copy_short(&src[..n], &mut dst);
            let mut expected = [0u8; INLINE];
            expected[..n].copy_from_slice(&src[..n]);
            assert_eq!(dst, expected, "{n} bytes");
        }
    }

    #[test]
    fn counts_add_up_and_keep_the_least_term_of_a_hash() {
        let mut counts = DfCounts::default();
        for (hash, term) in [(7, "北京"), (9, "天安门"), (7, "北京"), (8, "上海"), (9, "长城"), (9, "八达岭")] {
            counts.add(hash, term, 1);
        }
        counts.add(8, "上海", 3);
        // Hash 9 holds three terms (a collision): the least of them stays.
        let least = ["天安门", "长城", "八达岭"].into_iter().min().unwrap();
        assert_eq!(counts.sorted(), vec![(7, "北京", 2), (8, "上海", 4), (9, least, 3)]);
    }

    #[test]
    fn terms_long_and_short_keep_the_least_of_a_hash() {
        // 15 bytes sit in the entry, 16 and more in the counts' text; a
        // collision replaces either kind with either kind.
        let (five, six) = ("天安门广场", "天安门广场东");
        assert_eq!((five.len(), six.len()), (15, 18));
        let mut counts = DfCounts::default();
        for (hash, term) in [(1, six), (1, five), (2, five), (2, six), (3, "b"), (3, six), (4, six), (4, "长城长城长城长城")] {
            counts.add(hash, term, 1);
        }
        counts.add(2, five, 2);
        assert_eq!(counts.sorted(), vec![(1, five, 2), (2, five, 4), (3, "b", 2), (4, six.min("长城长城长城长城"), 2)]);
    }

    #[test]
    fn entries_that_wait_count_as_those_counted_at_once() {
        // More entries than wait at once, over every part, one at a time
        // and n at a time, with collisions of short and long terms.
        let words: Vec<String> = (0..5000).map(|i| format!("词{i}")).collect();
        let others = ["乙", "一个很长很长的词语超过十五字节", "甲", "另一个很长很长的词语也超过"];
        let mut counts = DfCounts::default();
        let mut expected: BTreeMap<u64, (String, i64)> = BTreeMap::new();
        for i in 0..(2 * PENDING + 12_345) {
            let k = i * 7919 % words.len();
            let hash = crate::fingerprint::hash64(&(k as u64).to_le_bytes());
            let term = match i % 1000 {
                0..=3 => others[i % 1000],
                _ => words[k].as_str(),
            };
            let n = if i % 777 == 0 { 3 } else { 1 };
            match n {
                1 => counts.add_one(hash, term),
                _ => counts.add(hash, term, n),
            }
            let e = expected.entry(hash).or_insert((term.to_string(), 0));
            e.1 += n;
            if term < e.0.as_str() {
                e.0 = term.to_string();
            }
        }
        let expected: Vec<(u64, &str, i64)> = expected.iter().map(|(&h, (t, n))| (h, t.as_str(), *n)).collect();
        assert!(expected.iter().map(|e| part_of(e.0)).collect::<std::collections::BTreeSet<_>>().len() == PARTS);
        assert_eq!(counts.sorted(), expected);
    }

    /// One row of a state: a list of `entries`, in the order given.
    fn state_of(entries: &[(u64, &str, i64)]) -> ArrayRef {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(entries.iter().map(|e| e.0))),
            Arc::new(StringArray::from_iter_values(entries.iter().map(|e| e.1))),
            Arc::new(Int64Array::from_iter_values(entries.iter().map(|e| e.2))),
        ];
        Arc::new(one_row_list(columns))
    }

    fn entries(list: ScalarValue) -> Vec<(u64, String, i64)> {
        let ScalarValue::List(list) = list else { panic!("a list") };
        let (h, t, n) = columns(&list, true).unwrap();
        let n = n.unwrap();
        (0..h.len()).map(|j| (h.value(j), t.value(j).to_string(), n.value(j))).collect()
    }

    #[test]
    fn states_merge_in_hash_order_sorted_or_not() {
        // Two partitions' states (sorted by hash, as `state` gives them),
        // one not sorted (added up in the counts) and the accumulator's own
        // rows: the counts of all of them, the least term of each hash.
        let mut parts = Vec::new();
        for rows in [&[(9, "天安门"), (7, "北京"), (3, "长城")][..], &[(7, "北京"), (9, "八达岭"), (5, "上海")][..]] {
            let mut part = DfAccumulator::default();
            for &(hash, term) in rows {
                part.add(state_of(&[(hash, term, 1)]).as_list::<i32>()).unwrap();
            }
            let state = part.state().unwrap().remove(0);
            assert!(entries(state.clone()).is_sorted_by_key(|e| e.0));
            parts.push(state.to_array().unwrap());
        }
        parts.push(state_of(&[(9, "八达岭", 2), (1, "上海", 4), (7, "北京", 1)]));
        // A state in order that holds a hash twice (none that `state` gives).
        parts.push(state_of(&[(3, "长城", 2), (3, "长城", 1)]));
        let mut last = DfAccumulator::default();
        last.add(state_of(&[(5, "上海", 1), (11, "广州", 1)]).as_list::<i32>()).unwrap();
        for state in &parts {
            last.merge_batch(std::slice::from_ref(state)).unwrap();
        }
        let least = "八达岭".min("天安门").to_string();
        let expected: Vec<(u64, String, i64)> =
            vec![(1, "上海".into(), 4), (3, "长城".into(), 4), (5, "上海".into(), 2), (7, "北京".into(), 3), (9, least, 4), (11, "广州".into(), 1)];
        assert_eq!(entries(last.evaluate().unwrap()), expected);
        assert_eq!(entries(last.state().unwrap().remove(0)), expected);
    }

    #[tokio::test]
    async fn doc_frequencies_are_the_grouped_unnested_terms_whatever_the_partitions() {
        let rows = "VALUES ([named_struct('hash', arrow_cast(7, 'UInt64'), 'term', '北京'), named_struct('hash', arrow_cast(9, 'UInt64'), 'term', '天安门')]), \
                    ([named_struct('hash', arrow_cast(7, 'UInt64'), 'term', '北京')]), (NULL), \
                    ([named_struct('hash', arrow_cast(9, 'UInt64'), 'term', '八达岭'), named_struct('hash', arrow_cast(8, 'UInt64'), 'term', '上海')])";
        let grouped = format!("SELECT t['hash'] AS hash, min(t['term']) AS term, count(*) AS df FROM (SELECT unnest(terms) AS t FROM ({rows}) AS r(terms)) GROUP BY t['hash'] ORDER BY hash");
        let udaf = format!("SELECT d['hash'] AS hash, d['term'] AS term, d['df'] AS df FROM (SELECT unnest(doc_frequencies(terms)) AS d FROM ({rows}) AS r(terms)) ORDER BY hash");
        let mut results = Vec::new();
        for (partitions, sql) in [(1, &grouped), (1, &udaf), (3, &udaf)] {
            let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions).with_batch_size(1));
            ctx.register_udaf(AggregateUDF::from(DocFrequencies::default()));
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            let mut got = Vec::new();
            for b in &batches {
                let (h, t, n) = (b.column(0).as_primitive::<UInt64Type>(), cast(b.column(1), &DataType::Utf8).unwrap(), b.column(2).as_primitive::<Int64Type>());
                got.extend((0..b.num_rows()).map(|i| (h.value(i), t.as_string::<i32>().value(i).to_string(), n.value(i))));
            }
            results.push(got);
        }
        let expected: Vec<(u64, String, i64)> = vec![(7, "北京".into(), 2), (8, "上海".into(), 1), (9, "八达岭".min("天安门").into(), 2)];
        assert_eq!(results[0], expected);
        assert_eq!(results[1], expected);
        assert_eq!(results[2], expected);
    }
}
