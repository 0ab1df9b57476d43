//! `tokenize(text [, mode [, options]])`: the features of a text.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ArrayRef, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{coerce_text_then_settings, doc, finish, to_arrays, Strings, TextSettings};
use crate::text::{normalize_into, recycle, Token};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Tokenize {
    signature: Signature,
}

impl Default for Tokenize {
    fn default() -> Self {
        Tokenize { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for Tokenize {
    fn name(&self) -> &str {
        "tokenize"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_text_then_settings(self.name(), arg_types, 1, 1, 3)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let settings = TextSettings::from_args(&args.args, 1, self.name())?;
        let (arrays, all_scalar) = to_arrays(&args.args[..1], args.number_rows)?;
        let texts = Strings::try_new(&arrays[0], self.name(), "text")?;
        let mut builder = ListBuilder::new(StringBuilder::new());
        let mut normalized = String::new();
        let mut spare: Vec<Token> = Vec::new();
        for i in 0..arrays[0].len() {
            let Some(text) = texts.get(i) else {
                builder.append_null();
                continue;
            };
            normalize_into(text, &mut normalized);
            let mut tokens = recycle(std::mem::take(&mut spare));
            settings.analyzer.tokens(&normalized, settings.mode, false, &mut tokens);
            for t in &tokens {
                builder.values().append_value(t.term);
            }
            builder.append(true);
            spare = recycle(tokens);
        }
        finish(Arc::new(builder.finish()) as ArrayRef, all_scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Normalises a text (NFKC, lower case, collapsed white space) and splits it into \
                 features: jieba words for text with Han characters, Unicode words otherwise, or \
                 character n-grams. Stop words and punctuation are dropped. NULL text gives NULL.",
                "tokenize(text [, mode [, options]])",
                "```sql\n> SELECT tokenize('我们在北京大学学习，很开心！');\n[北京大学, 学习, 开心]\n> SELECT tokenize('北京大学', 'full');\n[北京, 北京大学, 大学]\n```",
                &[
                    ("text", "The text to segment."),
                    ("mode", "precise (default), full, search or char-N (N = 1..16)."),
                    ("options", "Analyzer files as 'user_dict=PATH;stopwords=PATH;signal_words=PATH'; '' for the built-ins."),
                ],
            )
        }))
    }
}
