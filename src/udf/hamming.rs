//! `hamming(a, b)`: the number of bits in which two fingerprints differ.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Int32Array, UInt64Array};
use datafusion::arrow::compute::kernels::arity::binary;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::as_uint64_array;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};
use super::numeric::coerce_numeric;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Hamming {
    signature: Signature,
}

impl Default for Hamming {
    fn default() -> Self {
        Hamming { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// Both fingerprint columns as `u64` arrays of equal length.
pub(crate) fn fingerprint_pair(args: &ScalarFunctionArgs) -> Result<(UInt64Array, UInt64Array, bool)> {
    let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
    Ok((as_uint64_array(&arrays[0])?.clone(), as_uint64_array(&arrays[1])?.clone(), all_scalar))
}

impl ScalarUDFImpl for Hamming {
    fn name(&self) -> &str {
        "hamming"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_numeric(self.name(), &["a", "b"], arg_types, &[DataType::UInt64, DataType::UInt64])
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (a, b, all_scalar) = fingerprint_pair(&args)?;
        let out: Int32Array = binary(&a, &b, |x, y| (x ^ y).count_ones() as i32)?;
        finish(Arc::new(out), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Hamming distance of two 64-bit fingerprints: popcount(a XOR b), 0 to 64.",
                "hamming(a, b)",
                "```sql\n> SELECT hamming(11, 1);\n2\n```",
                &[("a", "A UInt64 fingerprint."), ("b", "Another UInt64 fingerprint.")],
            )
        }))
    }
}
