//! `idf(df, n [, formula])`: inverse document frequency.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::Float64Array;
use datafusion::arrow::compute::kernels::arity::binary;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::as_float64_array;
use datafusion::common::{plan_err, DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, is_string, scalar_str, to_arrays};
use super::numeric::coerce_numeric;
use crate::weight::IdfFormula;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Idf {
    signature: Signature,
}

impl Default for Idf {
    fn default() -> Self {
        Idf { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Idf {
    fn name(&self) -> &str {
        "idf"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [df, n] => coerce_numeric(self.name(), &["df", "n"], &[df.clone(), n.clone()], &[DataType::Float64, DataType::Float64]),
            [df, n, f] if is_string(f) => {
                let mut t = coerce_numeric(self.name(), &["df", "n"], &[df.clone(), n.clone()], &[DataType::Float64, DataType::Float64])?;
                t.push(DataType::Utf8);
                Ok(t)
            }
            _ => plan_err!("idf takes (df, n) or (df, n, formula), got {arg_types:?}"),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let formula: IdfFormula = match scalar_str(&args.args, 2, self.name(), "formula")? {
            Some(f) => f.parse().map_err(|e: String| DataFusionError::Execution(format!("idf: {e}")))?,
            None => IdfFormula::default(),
        };
        let (arrays, all_scalar) = to_arrays(&args.args[..2], args.number_rows)?;
        let out: Float64Array =
            binary(as_float64_array(&arrays[0])?, as_float64_array(&arrays[1])?, |df, n| formula.idf(df, n))?;
        finish(Arc::new(out), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Inverse document frequency of a term found in df of n documents. Formula \
                 'standard' (default, paper 000): ln(n / df + 0.01); 'df-plus-one' (paper 001): \
                 ln(n / (df + 1)), clamped at 0.",
                "idf(df, n [, formula])",
                "```sql\n> SELECT round(idf(10, 100), 4), idf(99, 100, 'df-plus-one');\n2.3036 0.0\n```",
                &[
                    ("df", "Documents containing the term."),
                    ("n", "Documents in the corpus (with at least one term)."),
                    ("formula", "'standard' or 'df-plus-one'."),
                ],
            )
        }))
    }
}
