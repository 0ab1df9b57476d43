//! `minhash_keys(set, bands, rows)`: a term set's MinHash LSH band keys, one
//! per band (one-permutation hashing, see [`crate::minhash`]).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, UInt64Type};
use datafusion::common::{plan_err, DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, scalar_u32, to_arrays};
use super::term_set::{as_sets, coerce_set, set_values};
use crate::minhash::MinHashPlan;

/// The type of a row's band keys.
pub(crate) fn keys_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::UInt64, true)))
}

/// The band keys of each term set of `sets` under `plan` (an empty list for
/// an empty set, NULL for NULL): the column `minhash_keys` makes, also used
/// to derive a stored row's keys again from its term set, which costs less
/// than reading them.
pub(crate) fn keys_of_sets(plan: MinHashPlan, sets: &ArrayRef, function: &str) -> Result<ListArray> {
    keys_of_lists(plan, &as_sets(sets)?, function)
}

/// [`keys_of_sets`] of term sets already cast to their list type.
pub(crate) fn keys_of_lists(plan: MinHashPlan, sets: &ListArray, function: &str) -> Result<ListArray> {
    let values = sets.values().as_primitive::<UInt64Type>().clone();
    let mut hasher = plan.hasher();
    let mut keys = Vec::with_capacity(sets.len() * plan.bands as usize);
    let mut offsets = Vec::with_capacity(sets.len() + 1);
    offsets.push(0i32);
    for i in 0..sets.len() {
        // An empty set has no minima: it gets no keys.
        if let Some(set) = set_values(sets, &values, i, function)? {
            hasher.keys_into(set, &mut keys);
        }
        offsets.push(keys.len() as i32);
    }
    let field = Arc::new(Field::new("item", DataType::UInt64, true));
    Ok(ListArray::new(field, OffsetBuffer::new(offsets.into()), Arc::new(UInt64Array::from(keys)), sets.nulls().cloned()))
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MinhashKeys {
    signature: Signature,
}

impl Default for MinhashKeys {
    fn default() -> Self {
        MinhashKeys { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for MinhashKeys {
    fn name(&self) -> &str {
        "minhash_keys"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [set, b, r] if (b.is_integer() || b == &DataType::Null) && (r.is_integer() || r == &DataType::Null) => {
                Ok(vec![coerce_set(self.name(), "set", set)?, DataType::Int64, DataType::Int64])
            }
            _ => plan_err!("minhash_keys takes a term set and two integer constants (bands, rows), got {arg_types:?}"),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(keys_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let bands = scalar_u32(&args.args, 1, self.name(), "bands")?;
        let rows = scalar_u32(&args.args, 2, self.name(), "rows")?;
        let plan = MinHashPlan::new(bands, rows).map_err(|e| DataFusionError::Execution(format!("minhash_keys: {e}")))?;
        let (arrays, all_scalar) = to_arrays(&args.args[..1], args.number_rows)?;
        let list = keys_of_sets(plan, &arrays[0], self.name())?;
        finish(Arc::new(list), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "MinHash LSH keys of a term set: a one-permutation MinHash signature of bands × rows \
                 bins (optimal densification), and per band a key hashing the band's index and its \
                 rows values. Sets with Jaccard similarity s share the key of some band with \
                 probability 1 − (1 − s^rows)^bands, so an equi-join on the key gives the candidate \
                 pairs. Computed once per document (the `minhash` column of fingerprints).",
                "minhash_keys(set, bands, rows)",
                "```sql\n> SELECT count(*) FROM (SELECT unnest(minhash_keys([1, 2, 3], 32, 4)));\n32\n```",
                &[
                    ("set", "A term set (see term_set)."),
                    ("bands", "Number of bands."),
                    ("rows", "Bins per band (bands × rows at most 1024)."),
                ],
            )
        }))
    }
}
