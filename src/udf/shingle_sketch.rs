//! `shingle_sketch(text [, boilerplate])`: the shingle sketch of a document,
//! what `containment` compares (src/text/shingles.rs).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ListArray, UInt32Array};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, is_string, scalar_str, to_arrays, Strings};
use super::term_stats::boilerplate_set;
use crate::text::shingles::Sketcher;
use crate::text::{normalize_into, strip_lines};

/// The type of a shingle sketch: a list of UInt32 hashes.
pub fn sketch_type() -> DataType {
    DataType::List(sketch_item())
}

fn sketch_item() -> FieldRef {
    Arc::new(Field::new("item", DataType::UInt32, true))
}

/// Shingle sketches listed a row at a time, as shingle_sketch and
/// text_features return them.
pub(super) struct SketchLists {
    values: Vec<u32>,
    offsets: Vec<i32>,
}

impl SketchLists {
    pub(super) fn new(rows: usize) -> SketchLists {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        SketchLists { values: Vec::new(), offsets }
    }

    /// End the next row, whose sketch is `sketch` (none for a NULL text).
    pub(super) fn push(&mut self, sketch: &[u32], function: &str) -> Result<()> {
        self.values.extend_from_slice(sketch);
        let Ok(offset) = i32::try_from(self.values.len()) else {
            return exec_err!("{function}: more than 2^31 hashes in one batch; lower datafusion.execution.batch_size");
        };
        self.offsets.push(offset);
        Ok(())
    }

    /// End the next row with a copy of row `row`'s sketch.
    pub(super) fn repeat(&mut self, row: usize, function: &str) -> Result<()> {
        let (start, end) = (self.offsets[row] as usize, self.offsets[row + 1] as usize);
        self.values.extend_from_within(start..end);
        self.push(&[], function)
    }

    /// The lists, NULL where `nulls` says so.
    pub(super) fn finish(self, nulls: Option<NullBuffer>) -> ListArray {
        ListArray::new(sketch_item(), OffsetBuffer::new(self.offsets.into()), Arc::new(UInt32Array::from(self.values)), nulls)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ShingleSketch {
    signature: Signature,
}

impl Default for ShingleSketch {
    fn default() -> Self {
        ShingleSketch { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for ShingleSketch {
    fn name(&self) -> &str {
        "shingle_sketch"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] | [t, _] if !is_string(t) => plan_err!("shingle_sketch: 'text' must be text, got {t}"),
            [_, b] if !is_string(b) => plan_err!("shingle_sketch: 'boilerplate' must be text, got {b}"),
            [DataType::Null] => Ok(vec![DataType::Utf8]),
            [t] => Ok(vec![t.clone()]),
            [DataType::Null, _] => Ok(vec![DataType::Utf8, DataType::Utf8]),
            [t, _] => Ok(vec![t.clone(), DataType::Utf8]),
            _ => plan_err!("shingle_sketch takes 1 or 2 arguments (text [, boilerplate]), got {}", arg_types.len()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(sketch_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let boilerplate = match scalar_str(&args.args, 1, self.name(), "boilerplate")? {
            Some(set) if !set.is_empty() => Some(boilerplate_set(&set)?),
            _ => None,
        };
        let (arrays, all_scalar) = to_arrays(&args.args[..1], args.number_rows)?;
        let texts = Strings::try_new(&arrays[0], self.name(), "text")?;
        let rows = arrays[0].len();
        let (mut lists, mut valid) = (SketchLists::new(rows), Vec::with_capacity(rows));
        let (mut normalized, mut line_buf, mut stripped, mut sketch) = (String::new(), String::new(), String::new(), Vec::new());
        let mut sketcher = Sketcher::default();
        for i in 0..rows {
            sketch.clear();
            if let Some(mut text) = texts.get(i) {
                // The text term_stats segments: boilerplate lines dropped, then normalised.
                if let Some(set) = &boilerplate {
                    strip_lines(text, set, &mut line_buf, &mut stripped);
                    text = stripped.as_str();
                }
                normalize_into(text, &mut normalized);
                sketcher.sketch(&normalized, &mut sketch);
            }
            valid.push(texts.get(i).is_some());
            lists.push(&sketch, self.name())?;
        }
        let list = lists.finish(Some(NullBuffer::from(valid)));
        finish(Arc::new(list), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The shingle sketch of a text: the 256 smallest distinct 32-bit hashes of its runs \
                 of five tokens (a token is a Han, kana or Hangul character, or a word of another \
                 script; punctuation and spacing are not tokens), sorted; all of them for a \
                 shorter text. The text is normalised as for term_stats. NULL text gives NULL, a \
                 text without tokens an empty list. containment compares two sketches.",
                "shingle_sketch(text [, boilerplate])",
                "```sql\n> SELECT list_length(shingle_sketch('国家统计局今天发布了数据')), list_length(shingle_sketch('one two'));\n8 1\n```",
                &[
                    ("text", "The document text."),
                    ("boilerplate", "Lines to drop first, as for term_stats."),
                ],
            )
        }))
    }
}
