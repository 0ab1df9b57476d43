//! `simhash_cosine(a, b)`: SimHash-cosine, the cosine of two documents'
//! SimHash vectors (the votes before their sign step, `idf_simhash`'s
//! `vector`; src/fingerprint.rs).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, FixedSizeBinaryArray, Float64Builder, Int8Array, ListArray};
use datafusion::arrow::datatypes::{DataType, Field, Int8Type};
use datafusion::common::{exec_err, plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};
use super::term_set::list_values;
use crate::fingerprint::cosine;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SimhashCosine {
    signature: Signature,
}

impl Default for SimhashCosine {
    fn default() -> Self {
        SimhashCosine { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// A list of 8-bit integers: how SQL writes a vector by hand.
fn list_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Int8, true)))
}

/// Coerce an argument to a vector, naming it: the 64 bytes neardup keeps
/// stay as they are, a list of integers becomes a list of `Int8`.
fn coerce_vector(argument: &str, t: &DataType) -> Result<DataType> {
    match t {
        DataType::FixedSizeBinary(_) => Ok(t.clone()),
        DataType::List(f) | DataType::LargeList(f) if f.data_type().is_integer() || f.data_type() == &DataType::Null => Ok(list_type()),
        DataType::Null => Ok(list_type()),
        other => plan_err!(
            "simhash_cosine: argument '{argument}' must be a SimHash vector (the column 'vector' of fingerprints, \
             or a list of 8-bit integers), got {other}"
        ),
    }
}

/// One argument's vectors, row by row.
enum Vectors<'a> {
    Kept(&'a FixedSizeBinaryArray),
    Listed(&'a ListArray, &'a Int8Array),
}

impl<'a> Vectors<'a> {
    fn of(array: &'a ArrayRef) -> Result<Vectors<'a>> {
        match array.data_type() {
            DataType::FixedSizeBinary(_) => Ok(Vectors::Kept(array.as_fixed_size_binary())),
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                Ok(Vectors::Listed(list, list.values().as_primitive::<Int8Type>()))
            }
            other => exec_err!("simhash_cosine: a vector of type {other}"),
        }
    }

    /// Row `i` (`None` for NULL), into `buf` when kept as bytes.
    fn get<'b>(&'b self, i: usize, buf: &'b mut Vec<i8>) -> Result<Option<&'b [i8]>> {
        match self {
            Vectors::Kept(a) if a.is_null(i) => Ok(None),
            Vectors::Kept(a) => {
                buf.clear();
                buf.extend(a.value(i).iter().map(|&b| b as i8));
                Ok(Some(buf))
            }
            Vectors::Listed(lists, values) => list_values(lists, values, i, "simhash_cosine", "a vector"),
        }
    }
}

impl ScalarUDFImpl for SimhashCosine {
    fn name(&self) -> &str {
        "simhash_cosine"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [a, b] => Ok(vec![coerce_vector("a", a)?, coerce_vector("b", b)?]),
            _ => plan_err!("simhash_cosine takes 2 arguments (a, b), got {}", arg_types.len()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let (a, b) = (Vectors::of(&arrays[0])?, Vectors::of(&arrays[1])?);
        let (mut x, mut y) = (Vec::with_capacity(64), Vec::with_capacity(64));
        let mut out = Float64Builder::with_capacity(arrays[0].len());
        for i in 0..arrays[0].len() {
            match (a.get(i, &mut x)?, b.get(i, &mut y)?) {
                (Some(x), Some(y)) => out.append_option(cosine(x, y)),
                _ => out.append_null(),
            }
        }
        finish(Arc::new(out.finish()), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "SimHash-cosine: the cosine of two documents' SimHash vectors, the 64 weighted votes \
                 before the sign step that makes the fingerprint (the column vector of fingerprints, \
                 64 bytes of 8-bit votes; a list of integers works too). NULL when either is NULL, \
                 all zeros, or the two differ in length.",
                "simhash_cosine(a, b)",
                "```sql\n> SELECT simhash_cosine([3, 4, 0], [6, 8, 0]), simhash_cosine([3, 4, 0], [4, -3, 5]);\n1.0 0.0\n```",
                &[("a", "A document's SimHash vector."), ("b", "The other document's.")],
            )
        }))
    }
}
