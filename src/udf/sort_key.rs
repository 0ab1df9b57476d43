//! `sort_key(a, b, …)`: one byte string a row whose byte order is the order
//! of `ORDER BY a, b, …` (each ascending, NULLs last).
//!
//! DataFusion sorts a batch by several columns through one comparator a
//! column, called through a pointer for every comparison; for rows whose
//! leading strings are equal (every pair of `weibo_reposts` has the same
//! 13-byte source, one byte longer than a string view holds inline) each
//! comparison reads every column's bytes from scattered buffers. A sort by
//! one binary column compares two byte slices, and the merge after it reads
//! one column too (docs/performance.md).
//!
//! Strings, what the job sorts by (sources and ids), are written by
//! [`push_string`]: a byte that says whether the value is NULL, then its
//! bytes as they are (a zero byte escaped) and a closing byte.
//! Arrow's row format, which any other type still takes, writes a string
//! in blocks of eight bytes, each followed by a byte that says whether
//! more follow: the keys of the pairs of 150,000 Weibo posts (four strings
//! a row, made for the sort and again for the merge) took 150 million
//! instructions that way, 101 million this way (docs/performance.md).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ArrayRef, BinaryArray};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{exec_err, plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays, Strings};

/// `ORDER BY`'s default: ascending, NULLs last.
const ASCENDING: SortOptions = SortOptions { descending: false, nulls_first: false };

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SortKey {
    signature: Signature,
}

impl Default for SortKey {
    fn default() -> Self {
        SortKey { signature: Signature::variadic_any(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for SortKey {
    fn name(&self) -> &str {
        "sort_key"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        if arg_types.is_empty() {
            return plan_err!("sort_key takes at least one column");
        }
        Ok(DataType::Binary)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        if let Some(keys) = string_keys(&arrays)? {
            return finish(Arc::new(keys), all_scalar);
        }
        let fields = arrays.iter().map(|a| SortField::new_with_options(a.data_type().clone(), ASCENDING)).collect();
        let rows = RowConverter::new(fields)?.convert_columns(&arrays)?;
        finish(Arc::new(rows.try_into_binary()?), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "A byte string whose order is the order of its arguments, compared as ORDER BY \
                 compares them (each ascending, NULLs last): ORDER BY sort_key(a, b) sorts as \
                 ORDER BY a, b, comparing one value a row. Strings are written as they are, \
                 other types in Arrow's row format. The bytes are a sort key only; they are \
                 not meant to be stored.",
                "sort_key(expression[, ...])",
                "```sql\n> SELECT x FROM (VALUES ('b', 1), ('a', 2), ('a', 1)) AS t(x, y) ORDER BY sort_key(x, y);\n```",
                &[("expression", "Columns of any type the row format orders (strings, numbers, lists, ...).")],
            )
        }))
    }
}

/// The keys of rows whose columns are all strings, or `None` when one is
/// not (Arrow's row format orders those).
fn string_keys(arrays: &[ArrayRef]) -> Result<Option<BinaryArray>> {
    let Some(columns) = arrays.iter().map(|a| Strings::try_new(a, "sort_key", "expression").ok()).collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let rows = arrays.first().map_or(0, |a| a.len());
    // Room for a short id or source a value (counting every value's bytes
    // first was 8 % of the keys' instructions); longer ones grow the vector.
    let mut values = Vec::with_capacity(rows * columns.len() * 24);
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i32);
    for row in 0..rows {
        for column in &columns {
            push_string(&mut values, column.get(row));
        }
        let Ok(end) = i32::try_from(values.len()) else {
            return exec_err!("sort_key: the keys of one batch pass 2 GiB; lower datafusion.execution.batch_size");
        };
        offsets.push(end);
    }
    Ok(Some(BinaryArray::new(OffsetBuffer::new(offsets.into()), values.into(), None)))
}

/// Append to `key` a string's place in ascending order, NULLs last: a NULL
/// is the byte 2; any other string is the byte 1, its bytes with each zero
/// byte written as 0 255, and a closing 0. Two keys made of the same
/// number of such values compare, byte by byte, as their values do one
/// after another. A NULL's 2 comes after any string's 1. Two strings agree
/// up to where they first differ; there the smaller byte is smaller written
/// out too (a 0 is 0 255, and any other byte is above 0). A string that is
/// the beginning of a longer one ends with its 0 where the longer one goes
/// on with a byte above 0, or with a zero byte written 0 255: after the
/// closing 0 comes the next value's 1 or 2, or the key's end, all below 255.
fn push_string(key: &mut Vec<u8>, value: Option<&str>) {
    let Some(value) = value else {
        key.push(2);
        return;
    };
    key.push(1);
    let bytes = value.as_bytes();
    // Ids and sources hold no zero byte: the bytes are copied, once looked
    // over (a call to memchr cost more than the rest for strings this short).
    if has_zero(bytes) {
        for &b in bytes {
            key.push(b);
            if b == 0 {
                key.push(255);
            }
        }
    } else {
        key.extend_from_slice(bytes);
    }
    key.push(0);
}

/// Whether `bytes` hold a zero byte, eight at a time: a word has one when
/// subtracting one from each byte borrows into a byte whose top bit was
/// clear. A short string is read in two overlapping words (or halves).
fn has_zero(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const TOPS: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_in = |w: u64| w.wrapping_sub(ONES) & !w & TOPS != 0;
    let word = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    let half = |at: usize| u64::from(u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("four bytes"))) | 0xFFFF_FFFF << 32;
    let n = bytes.len();
    match n {
        0 => false,
        1..=3 => bytes.contains(&0),
        4..=7 => zero_in(half(0)) || zero_in(half(n - 4)),
        _ => (0..n / 8).any(|i| zero_in(word(i * 8))) || zero_in(word(n - 8)),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::logical_expr::ScalarUDF;
    use datafusion::prelude::SessionContext;

    /// Rows ordered by the key come out as ORDER BY the columns orders
    /// them, strings past a view's inline 12 bytes, equal prefixes, empty
    /// strings and NULLs included.
    #[tokio::test]
    async fn orders_as_the_columns_do() {
        let ctx = SessionContext::new();
        ctx.register_udf(ScalarUDF::from(super::SortKey::default()));
        let rows = "(1, 'weibo_reposts', '10', 3), (2, 'weibo_reposts', '9', 3), (3, 'weibo_repost', '9', NULL), \
                    (4, 'weibo_reposts', '10', NULL), (5, '', 'x', 1), (6, NULL, 'x', 1), (7, 'weibo_reposts', '10', -2), \
                    (8, 'weibo_reposts_and_more', '', 0), (9, 'weibo_reposts', '', 0)";
        let order = |by: &str| {
            let sql = format!("SELECT n FROM (VALUES {rows}) AS t(n, s, i, v) ORDER BY {by}");
            let ctx = ctx.clone();
            async move {
                let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
                batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect::<Vec<i64>>()
            }
        };
        let by_key = order("sort_key(s, i, v)").await;
        assert_eq!(by_key, order("s, i, v").await);
        assert_eq!(by_key, vec![5, 3, 9, 7, 1, 4, 2, 8, 6]);
        // Strings alone take the key of `push_string`.
        let by_strings = order("sort_key(s, i), n").await;
        assert_eq!(by_strings, order("s, i, n").await);
        assert_eq!(by_strings, vec![5, 3, 9, 1, 4, 7, 2, 8, 6]);
        // Every string layout takes it: views and large strings.
        assert_eq!(order("sort_key(arrow_cast(s, 'Utf8View'), arrow_cast(i, 'LargeUtf8')), n").await, by_strings);
    }

    /// Every place of a zero byte in strings of every length to 24, and
    /// bytes that only look like one to a careless word test (1 and 0x80).
    #[test]
    fn zero_bytes_are_found_wherever_they_are() {
        for n in 0..24 {
            for fill in [b'a', 1, 0x80, 0xff] {
                let mut bytes = vec![fill; n];
                assert!(!super::has_zero(&bytes), "{n} bytes of {fill}");
                for at in 0..n {
                    bytes[at] = 0;
                    assert!(super::has_zero(&bytes), "{n} bytes of {fill}, zero at {at}");
                    bytes[at] = fill;
                }
            }
        }
    }

    /// Keys of string columns order as the columns do, for tuples of short
    /// strings over U+0 (the byte the key escapes), U+1 and U+2 (its own
    /// bytes for a present value and a NULL) and characters of two bytes,
    /// with NULLs, empty strings and prefixes of each other.
    #[test]
    fn string_keys_order_as_the_strings_do() {
        use rand::{Rng, SeedableRng};
        let letters = ["\0", "\u{1}", "\u{2}", "a", "\u{ff}", "\u{7ff}"];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let value = |rng: &mut rand::rngs::StdRng| -> Option<String> {
            (rng.random_range(0..8) > 0).then(|| (0..rng.random_range(0..4)).map(|_| letters[rng.random_range(0..letters.len())]).collect())
        };
        let tuples: Vec<Vec<Option<String>>> = (0..3000).map(|_| (0..3).map(|_| value(&mut rng)).collect()).collect();
        // NULLs last: a present value before a missing one.
        let last = |v: &Option<String>| (v.is_none(), v.clone());
        let key = |t: &[Option<String>]| {
            let mut k = Vec::new();
            t.iter().for_each(|v| super::push_string(&mut k, v.as_deref()));
            k
        };
        for pair in tuples.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let expected = a.iter().map(last).cmp(b.iter().map(last));
            assert_eq!(key(a).cmp(&key(b)), expected, "{a:?} against {b:?}");
        }
        let mut by_key = tuples.clone();
        by_key.sort_by_key(|t| key(t));
        let mut by_values = tuples;
        by_values.sort_by(|a, b| a.iter().map(last).cmp(b.iter().map(last)));
        assert_eq!(by_key, by_values);
    }
}
