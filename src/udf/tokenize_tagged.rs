//! `tokenize_tagged(text [, mode [, options]])`: features with their POS tags.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ArrayBuilder, ArrayRef, ListArray, StringBuilder, StructArray};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{coerce_text_then_settings, doc, finish, to_arrays, Strings, TextSettings};
use crate::text::{normalize_into, recycle, Token};

fn item_fields() -> Fields {
    Fields::from(vec![Field::new("term", DataType::Utf8, false), Field::new("pos", DataType::Utf8, false)])
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TokenizeTagged {
    signature: Signature,
}

impl Default for TokenizeTagged {
    fn default() -> Self {
        TokenizeTagged { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TokenizeTagged {
    fn name(&self) -> &str {
        "tokenize_tagged"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_text_then_settings(self.name(), arg_types, 1, 1, 3)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new("item", DataType::Struct(item_fields()), true))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let settings = TextSettings::from_args(&args.args, 1, self.name())?;
        let (arrays, all_scalar) = to_arrays(&args.args[..1], args.number_rows)?;
        let texts = Strings::try_new(&arrays[0], self.name(), "text")?;
        let rows = arrays[0].len();
        let (mut terms, mut tags) = (StringBuilder::new(), StringBuilder::new());
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0i32);
        let mut valid = Vec::with_capacity(rows);
        let mut normalized = String::new();
        let mut spare: Vec<Token> = Vec::new();
        for i in 0..rows {
            if let Some(text) = texts.get(i) {
                normalize_into(text, &mut normalized);
                let mut tokens = recycle(std::mem::take(&mut spare));
                settings.analyzer.tokens(&normalized, settings.mode, true, &mut tokens);
                for t in &tokens {
                    terms.append_value(t.term);
                    tags.append_value(t.pos);
                }
                spare = recycle(tokens);
            }
            valid.push(texts.get(i).is_some());
            offsets.push(terms.len() as i32);
        }
        let items = StructArray::new(
            item_fields(),
            vec![Arc::new(terms.finish()) as ArrayRef, Arc::new(tags.finish())],
            None,
        );
        let field = Arc::new(Field::new("item", DataType::Struct(item_fields()), true));
        let list = ListArray::new(field, OffsetBuffer::new(offsets.into()), Arc::new(items), Some(NullBuffer::from(valid)));
        finish(Arc::new(list), all_scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Like tokenize, but every feature comes with its part-of-speech tag from jieba \
                 (ICTCLAS/PKU tag set: n* nouns, v* verbs, m numerals, eng Latin words, x untagged).",
                "tokenize_tagged(text [, mode [, options]])",
                "```sql\n> SELECT tokenize_tagged('我爱北京天安门');\n[{term: 爱, pos: v}, {term: 北京, pos: ns}, {term: 天安门, pos: ns}]\n```",
                &[
                    ("text", "The text to segment."),
                    ("mode", "precise (default), full, search or char-N."),
                    ("options", "Analyzer files, as for tokenize."),
                ],
            )
        }))
    }
}
