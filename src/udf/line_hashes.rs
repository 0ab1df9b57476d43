//! `line_hashes(text)`: the hashes of a text's distinct normalised lines,
//! for finding boilerplate lines shared by many documents.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ListBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{coerce_text_then_settings, doc, finish, to_arrays, Strings};
use crate::text::line_hashes_into;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LineHashes {
    signature: Signature,
}

impl Default for LineHashes {
    fn default() -> Self {
        LineHashes { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for LineHashes {
    fn name(&self) -> &str {
        "line_hashes"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_text_then_settings(self.name(), arg_types, 1, 1, 1)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let texts = Strings::try_new(&arrays[0], self.name(), "text")?;
        let rows = arrays[0].len();
        // About a line a row: short posts are one, and longer texts' hashes
        // grow the values as they come.
        let mut out = ListBuilder::with_capacity(UInt64Builder::with_capacity(rows), rows);
        let (mut buf, mut hashes) = (String::new(), Vec::new());
        for i in 0..rows {
            match texts.get(i) {
                Some(text) => {
                    hashes.clear();
                    line_hashes_into(text, &mut buf, &mut hashes);
                    out.values().append_slice(&hashes);
                    out.append(true);
                }
                None => out.append(false),
            }
        }
        finish(Arc::new(out.finish()), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The sorted, distinct hash64 values of a text's non-empty lines after normalisation. \
                 Counting documents per line hash finds boilerplate: lines that recur across many \
                 documents, which term_stats can drop before segmentation.",
                "line_hashes(text)",
                "```sql\n> SELECT cardinality(line_hashes('首页\\n正文\\n\\n首页'));\n2\n```",
                &[("text", "The document text.")],
            )
        }))
    }
}
