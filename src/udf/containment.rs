//! `containment(a, b)`: the share of one document's text found in another,
//! from their shingle sketches (src/text/shingles.rs).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, Float64Builder, ListArray, UInt32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, UInt32Type};
use datafusion::common::{exec_err, plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};
use super::shingle_sketch::sketch_type;
use super::term_set::list_values;
use crate::text::shingles::containment;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Containment {
    signature: Signature,
}

impl Default for Containment {
    fn default() -> Self {
        Containment { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// Coerce an argument to a sketch, naming it.
fn coerce_sketch(argument: &str, t: &DataType) -> Result<DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) if f.data_type().is_integer() || f.data_type() == &DataType::Null => Ok(sketch_type()),
        DataType::Null => Ok(sketch_type()),
        other => plan_err!("containment: argument '{argument}' must be a shingle sketch (a list of UInt32 hashes, from shingle_sketch), got {other}"),
    }
}

impl ScalarUDFImpl for Containment {
    fn name(&self) -> &str {
        "containment"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [a, b] => Ok(vec![coerce_sketch("a", a)?, coerce_sketch("b", b)?]),
            _ => plan_err!("containment takes 2 arguments (a, b), got {}", arg_types.len()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let (a, b) = (cast(&arrays[0], &sketch_type())?, cast(&arrays[1], &sketch_type())?);
        let (a, b) = (a.as_list::<i32>(), b.as_list::<i32>());
        let (av, bv) = (a.values().as_primitive::<UInt32Type>(), b.values().as_primitive::<UInt32Type>());
        let mut out = Float64Builder::with_capacity(a.len());
        for i in 0..a.len() {
            match (sketch(a, av, i)?, sketch(b, bv, i)?) {
                (Some(x), Some(y)) => out.append_option(containment(x, y)),
                _ => out.append_null(),
            }
        }
        finish(Arc::new(out.finish()), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The share of document a's text found in document b, from their shingle sketches: \
                 the share of a's five-token shingles that b has too. Exact when both have fewer \
                 than 256 shingles, estimated from the sketches' common range otherwise. NULL when \
                 either is NULL, or a has no shingle in that range (an empty text).",
                "containment(a, b)",
                "```sql\n> SELECT containment(shingle_sketch('一二三四五六七'), shingle_sketch('〇一二三四五六七八九'));\n1.0\n```",
                &[("a", "The sketch of the document measured."), ("b", "The sketch of the document it is looked for in.")],
            )
        }))
    }
}

/// Row `i` of a sketch column, checked sorted.
fn sketch<'a>(sketches: &ListArray, values: &'a UInt32Array, i: usize) -> Result<Option<&'a [u32]>> {
    let row = list_values(sketches, values, i, "containment", "a sketch")?;
    if row.is_some_and(|r| !r.is_sorted()) {
        return exec_err!("containment: sketches must be sorted: build them with shingle_sketch");
    }
    Ok(row)
}
