//! `simhash_cosine(a, b)`: SimHash-cosine, the cosine of two documents'
//! SimHash vectors (the votes before their sign step, `idf_simhash`'s
//! `vector`; src/fingerprint.rs).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, Float64Builder, ListArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int8Type};
use datafusion::common::{plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};
use super::idf_simhash::vector_type;
use super::term_set::list_values;
use crate::fingerprint::cosine;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SimhashCosine {
    signature: Signature,
}

impl Default for SimhashCosine {
    fn default() -> Self {
        SimhashCosine { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// Coerce an argument to a vector, naming it.
fn coerce_vector(argument: &str, t: &DataType) -> Result<DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) if f.data_type().is_integer() || f.data_type() == &DataType::Null => Ok(vector_type()),
        DataType::Null => Ok(vector_type()),
        other => plan_err!(
            "simhash_cosine: argument '{argument}' must be a SimHash vector (a list of 8-bit integers, the column \
             'vector' of fingerprints), got {other}"
        ),
    }
}

impl ScalarUDFImpl for SimhashCosine {
    fn name(&self) -> &str {
        "simhash_cosine"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [a, b] => Ok(vec![coerce_vector("a", a)?, coerce_vector("b", b)?]),
            _ => plan_err!("simhash_cosine takes 2 arguments (a, b), got {}", arg_types.len()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let (a, b) = (cast(&arrays[0], &vector_type())?, cast(&arrays[1], &vector_type())?);
        let (a, b): (&ListArray, &ListArray) = (a.as_list::<i32>(), b.as_list::<i32>());
        let (av, bv) = (a.values().as_primitive::<Int8Type>(), b.values().as_primitive::<Int8Type>());
        let mut out = Float64Builder::with_capacity(a.len());
        for i in 0..a.len() {
            let x = list_values(a, av, i, self.name(), "a vector")?;
            let y = list_values(b, bv, i, self.name(), "a vector")?;
            out.append_option(x.zip(y).and_then(|(x, y)| cosine(x, y)));
        }
        finish(Arc::new(out.finish()), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "SimHash-cosine: the cosine of two documents' SimHash vectors, the 64 weighted votes \
                 before the sign step that makes the fingerprint (the column vector of fingerprints, \
                 kept at 8 bits). NULL when either is NULL, all zeros, or the two differ in length.",
                "simhash_cosine(a, b)",
                "```sql\n> SELECT simhash_cosine([3, 4, 0], [6, 8, 0]), simhash_cosine([3, 4, 0], [4, -3, 5]);\n1.0 0.0\n```",
                &[("a", "A document's SimHash vector."), ("b", "The other document's.")],
            )
        }))
    }
}
