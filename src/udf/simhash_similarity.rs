//! `simhash_similarity(a, b)`: `(64 − hamming(a, b)) / 64`.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::Float64Array;
use datafusion::arrow::compute::kernels::arity::binary;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish};
use super::hamming::fingerprint_pair;
use super::numeric::coerce_numeric;
use crate::fingerprint::similarity;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SimhashSimilarity {
    signature: Signature,
}

impl Default for SimhashSimilarity {
    fn default() -> Self {
        SimhashSimilarity { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for SimhashSimilarity {
    fn name(&self) -> &str {
        "simhash_similarity"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_numeric(self.name(), &["a", "b"], arg_types, &[DataType::UInt64, DataType::UInt64])
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (a, b, all_scalar) = fingerprint_pair(&args)?;
        let out: Float64Array = binary(&a, &b, similarity)?;
        finish(Arc::new(out), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Similarity of two fingerprints as the share of equal bits, (64 − hamming) / 64. \
                 0.95 or more is hamming ≤ 3 (the default threshold); the source blog's 70 % is hamming ≤ 19.",
                "simhash_similarity(a, b)",
                "```sql\n> SELECT simhash_similarity(0, 15);\n0.9375\n```",
                &[("a", "A UInt64 fingerprint."), ("b", "Another UInt64 fingerprint.")],
            )
        }))
    }
}
