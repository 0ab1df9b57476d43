//! `hash64(text)`: the stable 64-bit feature hash.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::UInt64Array;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{coerce_text_then_settings, doc, finish, to_arrays, Strings};
use crate::fingerprint::hash64;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Hash64 {
    signature: Signature,
}

impl Default for Hash64 {
    fn default() -> Self {
        Hash64 { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Hash64 {
    fn name(&self) -> &str {
        "hash64"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_text_then_settings(self.name(), arg_types, 1, 1, 1)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let texts = Strings::try_new(&arrays[0], self.name(), "text")?;
        let out: UInt64Array = (0..arrays[0].len()).map(|i| texts.get(i).map(|s| hash64(s.as_bytes()))).collect();
        finish(Arc::new(out), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The stable 64-bit hash of a text's UTF-8 bytes (xxh3-64 with neardup's fixed seed): \
                 the feature hash inside every SimHash, identical on every machine and release.",
                "hash64(text)",
                "```sql\n> SELECT hash64('北京') = hash64('北京'), hash64('a') <> hash64('b');\ntrue true\n```",
                &[("text", "Any text.")],
            )
        }))
    }
}
