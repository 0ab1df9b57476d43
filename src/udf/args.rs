//! Argument handling shared by the SQL functions: string columns of any
//! Arrow string type, constant (scalar) settings arguments, type coercion,
//! and documentation boilerplate.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, LargeStringArray, ListArray, StringArray, StringViewArray, StructArray};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, DocSection, Documentation};

pub(crate) const DOC_SECTION: DocSection = DocSection {
    include: true,
    label: "neardup functions",
    description: Some("Segmentation, term weighting, SimHash fingerprints and banded joins"),
};

/// Build a function's documentation: description, syntax and an SQL example.
pub(crate) fn doc(description: &str, syntax: &str, example: &str, args: &[(&str, &str)]) -> Documentation {
    let mut b = Documentation::builder(DOC_SECTION, description, syntax).with_sql_example(example);
    for (name, text) in args {
        b = b.with_argument(*name, *text);
    }
    b.build()
}

/// A list type of `t` (items named "item" and nullable, as Arrow's builders
/// make them).
pub(crate) fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", t, true)))
}

/// Lists of structs of `fields`, one a row: `columns` hold every row's items
/// in turn, and `offsets` (from 0) where each row's end.
pub(crate) fn struct_lists(fields: Fields, columns: Vec<ArrayRef>, offsets: Vec<i32>) -> ListArray {
    let items = StructArray::new(fields.clone(), columns, None);
    let field = Field::new("item", DataType::Struct(fields), true);
    ListArray::new(Arc::new(field), OffsetBuffer::new(offsets.into()), Arc::new(items), None)
}

/// A string column of any of Arrow's three string layouts.
pub(crate) enum Strings<'a> {
    Utf8(&'a StringArray),
    Large(&'a LargeStringArray),
    View(&'a StringViewArray),
}

impl<'a> Strings<'a> {
    pub fn try_new(array: &'a ArrayRef, function: &str, argument: &str) -> Result<Self> {
        match array.data_type() {
            DataType::Utf8 => Ok(Strings::Utf8(array.as_any().downcast_ref().unwrap())),
            DataType::LargeUtf8 => Ok(Strings::Large(array.as_any().downcast_ref().unwrap())),
            DataType::Utf8View => Ok(Strings::View(array.as_any().downcast_ref().unwrap())),
            other => exec_err!("{function}: argument '{argument}' must be text, got {other}"),
        }
    }

    /// The bytes of the values of `rows` (a NULL has none).
    pub fn bytes(&self, rows: impl IntoIterator<Item = usize>) -> usize {
        rows.into_iter().filter_map(|i| self.get(i)).map(str::len).sum()
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Strings::Utf8(a) => a.is_valid(i).then(|| a.value(i)),
            Strings::Large(a) => a.is_valid(i).then(|| a.value(i)),
            Strings::View(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

/// Whether a type is one of Arrow's string types (or NULL, which casts to one).
pub(crate) fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null)
}

/// Coerce leading text arguments (kept in their string layout) and trailing
/// constant string settings (to Utf8), rejecting anything else by name.
pub(crate) fn coerce_text_then_settings(
    function: &str,
    arg_types: &[DataType],
    text_args: usize,
    min: usize,
    max: usize,
) -> Result<Vec<DataType>> {
    if arg_types.len() < min || arg_types.len() > max {
        return plan_err!("{function} takes {min} to {max} arguments, got {}", arg_types.len());
    }
    arg_types
        .iter()
        .enumerate()
        .map(|(i, t)| match t {
            DataType::Null => Ok(DataType::Utf8),
            t if is_string(t) && i < text_args => Ok(t.clone()),
            t if is_string(t) => Ok(DataType::Utf8),
            DataType::Dictionary(_, v) if is_string(v) => Ok(v.as_ref().clone()),
            other => plan_err!("{function}: argument {} must be text, got {other}", i + 1),
        })
        .collect()
}

/// A constant string argument (mode, options, formula). `None` when absent or NULL.
pub(crate) fn scalar_str(args: &[ColumnarValue], index: usize, function: &str, argument: &str) -> Result<Option<String>> {
    match args.get(index) {
        None => Ok(None),
        Some(ColumnarValue::Scalar(v)) => match v {
            ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => Ok(s.clone()),
            ScalarValue::Null => Ok(None),
            other => exec_err!("{function}: '{argument}' must be a text constant, got {other}"),
        },
        Some(ColumnarValue::Array(_)) => {
            exec_err!("{function}: '{argument}' must be a constant, not a column")
        }
    }
}

/// A constant non-negative integer argument (k, m).
pub(crate) fn scalar_u32(args: &[ColumnarValue], index: usize, function: &str, argument: &str) -> Result<u32> {
    let value = match args.get(index) {
        Some(ColumnarValue::Scalar(v)) => v.clone().cast_to(&DataType::Int64)?,
        Some(ColumnarValue::Array(_)) => return exec_err!("{function}: '{argument}' must be a constant, not a column"),
        None => return exec_err!("{function}: missing argument '{argument}'"),
    };
    match value {
        ScalarValue::Int64(Some(v)) if (0..=i64::from(u32::MAX)).contains(&v) => Ok(v as u32),
        other => exec_err!("{function}: '{argument}' must be a non-negative integer constant, got {other}"),
    }
}

/// Turn every argument into an array of `rows` rows; also say whether all
/// were scalars, in which case the result should be a scalar too.
pub(crate) fn to_arrays(args: &[ColumnarValue], rows: usize) -> Result<(Vec<ArrayRef>, bool)> {
    let all_scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let rows = if all_scalar { 1 } else { rows };
    let arrays = args.iter().map(|a| a.to_array(rows)).collect::<Result<Vec<_>>>()?;
    Ok((arrays, all_scalar))
}

/// Wrap a result array as the function's return value.
pub(crate) fn finish(result: ArrayRef, all_scalar: bool) -> Result<ColumnarValue> {
    if all_scalar {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?))
    } else {
        Ok(ColumnarValue::Array(result))
    }
}

/// The analyzer, mode and normaliser settings shared by the text functions,
/// read from their constant `mode` and `options` arguments.
pub(crate) struct TextSettings {
    pub analyzer: Arc<crate::text::Analyzer>,
    pub mode: crate::text::Mode,
}

impl TextSettings {
    pub fn from_args(args: &[ColumnarValue], mode_index: usize, function: &str) -> Result<Self> {
        let mode = match scalar_str(args, mode_index, function, "mode")? {
            Some(m) => m.parse().map_err(|e: String| datafusion::error::DataFusionError::Execution(format!("{function}: {e}")))?,
            None => crate::text::Mode::Precise,
        };
        let options = scalar_str(args, mode_index + 1, function, "options")?.unwrap_or_default();
        let analyzer = crate::text::Analyzer::get(&options)
            .map_err(|e| datafusion::error::DataFusionError::Execution(format!("{function}: {e}")))?;
        Ok(TextSettings { analyzer, mode })
    }
}

/// A table a function reads once per process (a df model, tonight's index),
/// kept for the latest `capacity` keys.
pub(crate) struct ProcessCache<T> {
    entries: std::sync::Mutex<std::collections::VecDeque<(String, Arc<T>)>>,
    capacity: usize,
}

impl<T> ProcessCache<T> {
    pub const fn new(capacity: usize) -> Self {
        ProcessCache { entries: std::sync::Mutex::new(std::collections::VecDeque::new()), capacity }
    }

    /// The value under `key`, or `load`'s, kept. The lock is held while
    /// loading: the other partitions need the same table anyway.
    pub fn get_or_load(&self, key: String, load: impl FnOnce() -> Result<T>) -> Result<Arc<T>> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| datafusion::error::DataFusionError::Execution("a function's table cache is poisoned".into()))?;
        if let Some((_, value)) = entries.iter().find(|(k, _)| *k == key) {
            return Ok(value.clone());
        }
        let value = Arc::new(load()?);
        if entries.len() == self.capacity {
            entries.pop_front();
        }
        entries.push_back((key, value.clone()));
        Ok(value)
    }
}
