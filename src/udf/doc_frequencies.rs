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

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray, StringArray, StructArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Int64Type, UInt64Type};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility};

use super::args::doc;
use crate::text::HashKeyed;

/// Document frequencies by term hash, with the least term seen under each.
#[derive(Debug, Default)]
pub struct DfCounts {
    /// Per hash: its count and its term's byte range in `text`. The range
    /// sits in the entry: kept in a vector of its own, it cost a second
    /// miss of the cache for every entry counted, about a third of the
    /// counting's time on Heybox's 4.7 million (document, term) entries.
    by_hash: HashKeyed<(i64, usize, usize)>,
    /// Every term kept, one after another.
    text: String,
}

impl DfCounts {
    /// Count `n` documents with the term `term`, whose hash is `hash`.
    pub fn add(&mut self, hash: u64, term: &str, n: i64) {
        let Self { by_hash, text } = self;
        match by_hash.get_mut(&hash) {
            Some((count, start, end)) => {
                *count += n;
                // Strings order as their bytes do.
                if term.as_bytes() < &text.as_bytes()[*start..*end] {
                    (*start, *end) = keep(text, term);
                }
            }
            None => {
                let (start, end) = keep(text, term);
                by_hash.insert(hash, (n, start, end));
            }
        }
    }

    /// `(hash, term, df)`, in no particular order.
    pub fn rows(&self) -> Vec<(u64, &str, i64)> {
        self.by_hash.iter().map(|(&h, &(n, start, end))| (h, &self.text[start..end], n)).collect()
    }

    /// `(hash, term, df)` in hash order.
    pub fn sorted(&self) -> Vec<(u64, &str, i64)> {
        let mut rows = self.rows();
        rows.sort_unstable_by_key(|r| r.0);
        rows
    }

    fn size(&self) -> usize {
        self.by_hash.capacity() * 32 + self.text.capacity()
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

#[derive(Debug, Default)]
struct DfAccumulator {
    counts: DfCounts,
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
    /// Add every entry of the non-NULL rows of `list`: each counts one
    /// document (a row's terms) or, `with_df`, its `df` (a partial state).
    fn add(&mut self, list: &ListArray, with_df: bool) -> Result<()> {
        let (hashes, terms, df) = columns(list, with_df)?;
        let offsets = list.value_offsets();
        for row in (0..list.len()).filter(|&r| list.is_valid(r)) {
            for j in offsets[row] as usize..offsets[row + 1] as usize {
                if hashes.is_null(j) || terms.is_null(j) {
                    return exec_err!("doc_frequencies: a term without a hash or text in row {row}");
                }
                self.counts.add(hashes.value(j), terms.value(j), df.as_ref().map_or(1, |d| d.value(j)));
            }
        }
        Ok(())
    }

    /// The counts as one list: in hash order for the result, as they lie
    /// for a partial state, which the merge adds up in any order.
    fn list(&self, sorted: bool) -> ScalarValue {
        let rows = if sorted { self.counts.sorted() } else { self.counts.rows() };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ];
        let structs = StructArray::new(df_fields(), columns, None);
        let field = Arc::new(Field::new("item", DataType::Struct(df_fields()), true));
        ScalarValue::List(Arc::new(ListArray::new(field, OffsetBuffer::from_lengths([rows.len()]), Arc::new(structs), None)))
    }
}

impl Accumulator for DfAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(values[0].as_list::<i32>(), false)
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.add(states[0].as_list::<i32>(), true)
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.list(false)])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.list(true))
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.counts.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::AggregateUDF;
    use datafusion::prelude::{SessionConfig, SessionContext};

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
