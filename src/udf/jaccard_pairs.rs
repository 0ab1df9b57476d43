//! `jaccard_pairs(fingerprints, sets, tonight, t)`: the pairs of one group of
//! term sets (a hot MinHash bucket) whose Jaccard similarity reaches `t`,
//! found by [`crate::setjoin::jaccard_pairs`] instead of listing every pair.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayBuilder, ArrayRef, AsArray, UInt64Builder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, UInt64Type};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, list_of, struct_lists, to_arrays};
use super::term_set::{as_sets, set_type, set_values};
use crate::setjoin::jaccard_pairs;

fn pair_fields() -> Fields {
    Fields::from(vec![Field::new("a", DataType::UInt64, false), Field::new("b", DataType::UInt64, false)])
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct JaccardPairs {
    signature: Signature,
}

impl Default for JaccardPairs {
    fn default() -> Self {
        JaccardPairs { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// The constant threshold argument, in (0, 1].
fn threshold(args: &[ColumnarValue]) -> Result<f64> {
    let t = match args.get(3) {
        Some(ColumnarValue::Scalar(v)) => v.cast_to(&DataType::Float64)?,
        _ => return exec_err!("jaccard_pairs: 't' must be a constant"),
    };
    match t {
        ScalarValue::Float64(Some(t)) if t > 0.0 && t <= 1.0 => Ok(t),
        other => exec_err!("jaccard_pairs: 't' must be a number in (0, 1], got {other}"),
    }
}

impl ScalarUDFImpl for JaccardPairs {
    fn name(&self) -> &str {
        "jaccard_pairs"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [DataType::List(f), DataType::List(s), DataType::List(b), t]
                if f.data_type().is_integer() && matches!(s.data_type(), DataType::List(_)) && b.data_type() == &DataType::Boolean && t.is_numeric() =>
            {
                Ok(vec![list_of(DataType::UInt64), list_of(set_type()), list_of(DataType::Boolean), DataType::Float64])
            }
            _ => plan_err!(
                "jaccard_pairs takes a group's fingerprints, term sets and tonight flags (three lists, as array_agg \
                 makes them) and a threshold, got {arg_types:?}"
            ),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(list_of(DataType::Struct(pair_fields())))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let t = threshold(&args.args)?;
        let (arrays, all_scalar) = to_arrays(&args.args[..3], args.number_rows)?;
        let (fingerprints, groups, flags) = (arrays[0].as_list::<i32>(), arrays[1].as_list::<i32>(), arrays[2].as_list::<i32>());
        let (mut a, mut b) = (UInt64Builder::new(), UInt64Builder::new());
        let mut offsets = vec![0i32];
        for row in 0..groups.len() {
            if !(fingerprints.is_null(row) || groups.is_null(row) || flags.is_null(row)) {
                let found = group_pairs(&fingerprints.value(row), &groups.value(row), &flags.value(row), t)?;
                for (x, y) in found {
                    a.append_value(x);
                    b.append_value(y);
                }
            }
            let Ok(end) = i32::try_from(a.len()) else {
                return exec_err!("jaccard_pairs: too many pairs in one batch");
            };
            offsets.push(end);
        }
        let columns = vec![Arc::new(a.finish()) as ArrayRef, Arc::new(b.finish())];
        finish(Arc::new(struct_lists(pair_fields(), columns, offsets)), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The pairs of one group of documents (the members of a MinHash bucket, gathered with \
                 array_agg) whose term sets reach Jaccard similarity t, each with at least one of \
                 tonight's documents and two different fingerprints: an exact set-similarity join \
                 (prefix, size and positional filters) instead of every pair of the group.",
                "jaccard_pairs(fingerprints, sets, tonight, t)",
                "```sql\n> SELECT unnest(jaccard_pairs([1, 2, 3], [[10, 11], [10, 11, 12], [13]], [true, true, true], 0.5)) AS p;\n\
                 +--------------+\n| p            |\n+--------------+\n| {a: 1, b: 2} |\n+--------------+\n```",
                &[
                    ("fingerprints", "The group's fingerprints (a list of UInt64)."),
                    ("sets", "Their term sets, in the same order (a list of term sets)."),
                    ("tonight", "Whether each is one of tonight's documents; pairs of two others are left out."),
                    ("t", "The Jaccard threshold, a constant in (0, 1]."),
                ],
            )
        }))
    }
}

/// The pairs of fingerprints of one group.
fn group_pairs(fingerprints: &ArrayRef, sets: &ArrayRef, flags: &ArrayRef, t: f64) -> Result<Vec<(u64, u64)>> {
    let fingerprints = cast(fingerprints, &DataType::UInt64)?;
    let fingerprints = fingerprints.as_primitive::<UInt64Type>();
    let sets = as_sets(sets)?;
    let flags = flags.as_boolean();
    if fingerprints.len() != sets.len() || flags.len() != sets.len() || fingerprints.null_count() > 0 {
        return exec_err!("jaccard_pairs: fingerprints, sets and tonight must be lists of one length, without NULL fingerprints");
    }
    let values = sets.values().as_primitive::<UInt64Type>().clone();
    let views = (0..sets.len()).map(|i| Ok(set_values(&sets, &values, i, "jaccard_pairs")?.unwrap_or(&[]))).collect::<Result<Vec<_>>>()?;
    // The join's filters read each set in order: an unsorted one would
    // lose its pairs without a word.
    if let Some(i) = views.iter().position(|v| !v.windows(2).all(|w| w[0] < w[1])) {
        return exec_err!("jaccard_pairs: term set {} of the group is not sorted and distinct: build term sets with term_set", i + 1);
    }
    let (f, tonight) = (fingerprints.values(), |i: usize| flags.is_valid(i) && flags.value(i));
    let wanted = |i: usize, j: usize| f[i] != f[j];
    Ok(jaccard_pairs(&views, t, tonight, wanted).into_iter().map(|(i, j)| (f[i], f[j])).collect())
}
