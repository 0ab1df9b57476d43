//! `first_common_band(a, b, k, m)`: the first band in which two fingerprints
//! share a key, so that the banded join can report each pair once.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, UInt32Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::as_uint64_array;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};
use super::band_keys::plan_from_args;
use super::numeric::coerce_numeric;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FirstCommonBand {
    signature: Signature,
}

impl Default for FirstCommonBand {
    fn default() -> Self {
        FirstCommonBand { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for FirstCommonBand {
    fn name(&self) -> &str {
        "first_common_band"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_numeric(
            self.name(),
            &["a", "b", "k", "m"],
            arg_types,
            &[DataType::UInt64, DataType::UInt64, DataType::Int64, DataType::Int64],
        )
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt32)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let plan = plan_from_args(&args.args, 2, self.name())?;
        let (arrays, all_scalar) = to_arrays(&args.args[..2], args.number_rows)?;
        let (a, b) = (as_uint64_array(&arrays[0])?, as_uint64_array(&arrays[1])?);
        let out: UInt32Array = (0..a.len())
            .map(|i| (a.is_valid(i) && b.is_valid(i)).then(|| plan.first_common_band(a.value(i), b.value(i))).flatten())
            .collect();
        finish(Arc::new(out), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The first band (as numbered by band_keys) in which two fingerprints have the same \
                 key, or NULL if none. Keeping a candidate pair only from that band reports each \
                 pair once however many bands it shares.",
                "first_common_band(a, b, k, m)",
                "```sql\n> SELECT first_common_band(0, 1, 1, 2), first_common_band(0, 4294967297, 1, 2);\n1 NULL\n```",
                &[
                    ("a", "A UInt64 fingerprint."),
                    ("b", "Another UInt64 fingerprint."),
                    ("k", "As for band_keys."),
                    ("m", "As for band_keys."),
                ],
            )
        }))
    }
}
