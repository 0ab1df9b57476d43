//! `set_similarity(a, b [, measure])`: Jaccard or overlap coefficient of two term sets.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, Float64Builder};
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::arrow::array::AsArray;
use datafusion::common::{exec_err, plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, is_string, scalar_str, to_arrays};
use super::term_set::{as_sets, coerce_set, set_values};
use crate::sets::measure_by_name;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SetSimilarity {
    signature: Signature,
}

impl Default for SetSimilarity {
    fn default() -> Self {
        SetSimilarity { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for SetSimilarity {
    fn name(&self) -> &str {
        "set_similarity"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(2..=3).contains(&arg_types.len()) {
            return plan_err!("set_similarity takes 2 or 3 arguments (a, b [, measure]), got {}", arg_types.len());
        }
        let mut out = vec![coerce_set(self.name(), "a", &arg_types[0])?, coerce_set(self.name(), "b", &arg_types[1])?];
        if let Some(t) = arg_types.get(2) {
            if !is_string(t) {
                return plan_err!("set_similarity: 'measure' must be text ('jaccard' or 'overlap'), got {t}");
            }
            out.push(DataType::Utf8);
        }
        Ok(out)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = scalar_str(&args.args, 2, self.name(), "measure")?.unwrap_or_else(|| "jaccard".into());
        let Some(measure) = measure_by_name(&name) else {
            return exec_err!("set_similarity: unknown measure '{name}': use 'jaccard' or 'overlap'");
        };
        let (arrays, all_scalar) = to_arrays(&args.args[..2], args.number_rows)?;
        let (a, b) = (as_sets(&arrays[0])?, as_sets(&arrays[1])?);
        let (av, bv) = (a.values().as_primitive::<UInt64Type>().clone(), b.values().as_primitive::<UInt64Type>().clone());
        let mut out = Float64Builder::with_capacity(a.len());
        for i in 0..a.len() {
            match (set_values(&a, &av, i, self.name())?, set_values(&b, &bv, i, self.name())?) {
                (Some(x), Some(y)) => {
                    if !x.is_sorted() || !y.is_sorted() {
                        return exec_err!("set_similarity: term sets must be sorted: build them with term_set");
                    }
                    out.append_value(measure(x, y))
                }
                _ => out.append_null(),
            }
        }
        finish(Arc::new(out.finish()), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Similarity of two term sets (as built by term_set): 'jaccard' (the default) is \
                 |A ∩ B| / |A ∪ B|; 'overlap' is |A ∩ B| / min(|A|, |B|), high when one document \
                 contains the other.",
                "set_similarity(a, b [, measure])",
                "```sql\n> SELECT set_similarity([1, 2, 3, 4], [3, 4, 5, 6, 7, 8]), set_similarity([3, 4], [3, 4, 5], 'overlap');\n0.25 1.0\n```",
                &[
                    ("a", "A term set: sorted distinct UInt64 hashes."),
                    ("b", "Another term set."),
                    ("measure", "'jaccard' or 'overlap'."),
                ],
            )
        }))
    }
}
