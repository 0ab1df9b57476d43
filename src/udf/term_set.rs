//! `term_set(terms)`: a document's term set, the sorted distinct hashes of
//! its `term_stats` entries (or of a list of integer hashes).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, ListArray, PrimitiveArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{exec_err, plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};

/// The type of a term set: a list of UInt64 hashes.
pub(crate) fn set_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::UInt64, true)))
}

/// Coerce a list argument to a term set, naming the function and argument.
pub(crate) fn coerce_set(function: &str, argument: &str, t: &DataType) -> Result<DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)
            if f.data_type().is_integer() || f.data_type() == &DataType::Null =>
        {
            Ok(set_type())
        }
        DataType::Null => Ok(set_type()),
        other => plan_err!("{function}: argument '{argument}' must be a term set (a list of UInt64 hashes), got {other}"),
    }
}

/// A term-set column as one list array of UInt64.
pub(crate) fn as_sets(array: &ArrayRef) -> Result<ListArray> {
    let casted = cast(array, &set_type())?;
    Ok(casted.as_list::<i32>().clone())
}

/// The values of row `i` of a term-set column (NULL items are not allowed).
pub(crate) fn set_values<'a>(sets: &ListArray, values: &'a UInt64Array, i: usize, function: &str) -> Result<Option<&'a [u64]>> {
    list_values(sets, values, i, function, "a term set")
}

/// The values of row `i` of a list column of hashes (`what` names it in
/// the error for a NULL item, which is not allowed).
pub(crate) fn list_values<'a, T: ArrowPrimitiveType>(
    lists: &ListArray,
    values: &'a PrimitiveArray<T>,
    i: usize,
    function: &str,
    what: &str,
) -> Result<Option<&'a [T::Native]>> {
    if lists.is_null(i) {
        return Ok(None);
    }
    let offsets = lists.value_offsets();
    let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
    if values.null_count() > 0 && (start..end).any(|j| values.is_null(j)) {
        return exec_err!("{function}: {what} holds a NULL hash");
    }
    Ok(Some(&values.values()[start..end]))
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TermSet {
    signature: Signature,
}

impl Default for TermSet {
    fn default() -> Self {
        TermSet { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TermSet {
    fn name(&self) -> &str {
        "term_set"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t @ DataType::List(f)] if matches!(f.data_type(), DataType::Struct(s) if s.find("hash").is_some()) => Ok(vec![t.clone()]),
            [t] => Ok(vec![coerce_set(self.name(), "terms", t)?]),
            _ => plan_err!("term_set takes one argument (the terms of term_stats), got {}", arg_types.len()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(set_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let list = arrays[0].as_list::<i32>();
        let hashes: ArrayRef = match list.values().data_type() {
            DataType::Struct(_) => {
                let items = list.values().as_struct();
                cast(items.column_by_name("hash").expect("coerced to a struct with a hash"), &DataType::UInt64)?
            }
            _ => cast(list.values(), &DataType::UInt64)?,
        };
        let hashes = hashes.as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
        let mut out = Vec::with_capacity(hashes.len());
        let mut row = Vec::new();
        let mut offsets = Vec::with_capacity(list.len() + 1);
        offsets.push(0i32);
        let bounds = list.value_offsets();
        for i in 0..list.len() {
            if list.is_valid(i) {
                row.clear();
                row.extend((bounds[i] as usize..bounds[i + 1] as usize).filter(|&j| hashes.is_valid(j)).map(|j| hashes.value(j)));
                row.sort_unstable();
                row.dedup();
                out.extend_from_slice(&row);
            }
            offsets.push(out.len() as i32);
        }
        let field = Arc::new(Field::new("item", DataType::UInt64, true));
        let values = Arc::new(UInt64Array::from(out));
        let result = ListArray::new(field, OffsetBuffer::new(offsets.into()), values, list.nulls().cloned());
        finish(Arc::new(result), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "A document's term set: the sorted, distinct 64-bit hashes of its terms. The input is \
                 the list term_stats returns, or a list of integer hashes. Compare sets with set_similarity \
                 and band them with minhash_keys.",
                "term_set(terms)",
                "```sql\n> SELECT term_set([5, 3, 5, 1]);\n[1, 3, 5]\n```",
                &[("terms", "The list returned by term_stats, or a list of integer hashes.")],
            )
        }))
    }
}
