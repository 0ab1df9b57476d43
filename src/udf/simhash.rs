//! `simhash(terms)` and `simhash(hashes, weights)`: a fingerprint from lists.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, UInt64Builder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::{as_float64_array, as_list_array, as_uint64_array};
use datafusion::common::{plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, is_string, list_of, to_arrays, Strings};
use crate::fingerprint::{hash64, SimHasher};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Simhash {
    signature: Signature,
}

impl Default for Simhash {
    fn default() -> Self {
        Simhash { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

fn element(t: &DataType) -> Option<&DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Some(f.data_type()),
        _ => None,
    }
}

impl ScalarUDFImpl for Simhash {
    fn name(&self) -> &str {
        "simhash"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [terms] if element(terms).is_some_and(is_string) => Ok(vec![list_of(DataType::Utf8)]),
            [hashes, weights]
                if element(hashes).is_some_and(DataType::is_numeric) && element(weights).is_some_and(DataType::is_numeric) =>
            {
                Ok(vec![list_of(DataType::UInt64), list_of(DataType::Float64)])
            }
            _ => plan_err!(
                "simhash takes a list of terms, or a list of UInt64 hashes and a list of weights; got {arg_types:?}"
            ),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let first = as_list_array(&arrays[0])?;
        let mut out = UInt64Builder::with_capacity(first.len());
        if arrays.len() == 1 {
            // Terms: weight = occurrences in the list.
            let values = first.values();
            let terms = Strings::try_new(values, self.name(), "terms")?;
            let mut counts: HashMap<u64, f64> = HashMap::new();
            for (row, window) in first.offsets().windows(2).enumerate() {
                if first.is_null(row) {
                    out.append_null();
                    continue;
                }
                counts.clear();
                for i in window[0] as usize..window[1] as usize {
                    if let Some(t) = terms.get(i) {
                        *counts.entry(hash64(t.as_bytes())).or_default() += 1.0;
                    }
                }
                let mut h = SimHasher::default();
                counts.iter().for_each(|(&hash, &w)| h.add(hash, w));
                out.append_value(h.finish());
            }
        } else {
            let weights_list = as_list_array(&arrays[1])?;
            let hashes = as_uint64_array(first.values())?;
            let weights = as_float64_array(weights_list.values())?;
            for row in 0..first.len() {
                if first.is_null(row) || weights_list.is_null(row) {
                    out.append_null();
                    continue;
                }
                let (hs, he) = (first.value_offsets()[row] as usize, first.value_offsets()[row + 1] as usize);
                let (ws, we) = (weights_list.value_offsets()[row] as usize, weights_list.value_offsets()[row + 1] as usize);
                if he - hs != we - ws {
                    return datafusion::common::exec_err!(
                        "simhash: row {row} has {} hashes but {} weights; the lists must be equally long",
                        he - hs,
                        we - ws
                    );
                }
                let mut h = SimHasher::default();
                for (i, j) in (hs..he).zip(ws..we) {
                    if hashes.is_valid(i) && weights.is_valid(j) {
                        h.add(hashes.value(i), weights.value(j));
                    }
                }
                out.append_value(h.finish());
            }
        }
        finish(Arc::new(out.finish()) as ArrayRef, all_scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "64-bit SimHash of a list of terms (each distinct term weighted by its number of \
                 occurrences), or of parallel lists of feature hashes and weights. Bit j is 1 when \
                 the weights of features with bit j set outweigh the others. See simhash_agg for \
                 the aggregate form the pipeline uses.",
                "simhash(terms) | simhash(hashes, weights)",
                "```sql\n> SELECT simhash(tokenize('今天天气很好')) = simhash(tokenize('今天 天气 很好！'));\ntrue\n> SELECT simhash([hash64('a')], [1.0]) = hash64('a');\ntrue\n```",
                &[
                    ("terms", "A list of terms, e.g. tokenize(text)."),
                    ("hashes", "A list of UInt64 feature hashes."),
                    ("weights", "A list of weights, as long as hashes; weights ≤ 0 vote nothing."),
                ],
            )
        }))
    }
}
