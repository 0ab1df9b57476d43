//! `banded_pairs(fingerprints, tonight, k, m[, max_pairs])`: every pair of a
//! list of fingerprints within Hamming distance `k`, at least one of them
//! tonight's (a fingerprint listed twice is tonight's when either is), found
//! in memory by [`crate::join::banded_pairs`] (the bands of `m` blocks, each
//! sorted). A run finds its SimHash candidates with it
//! (sql/50_near_pairs_by_sort.sql) when its work stays in memory, or when a
//! memory limit has room for it; the join of sql/50_near_pairs.sql finds the
//! same pairs in bounded memory and on a cluster. With `max_pairs`, finding
//! more pairs is an error whose source is [`crate::join::TooManyPairs`]: the
//! caller set memory aside for so many, and joins instead.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int32Array, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, UInt64Type};
use datafusion::common::{exec_err, plan_err, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use itertools::{merge_join_by, EitherOrBoth};

use super::args::{doc, finish, list_of, scalar_u32, struct_lists, to_arrays};
use crate::join::{band_threads, banded_pairs_within, BandPlan};
use crate::parallel::{merge_distinct, on_threads};

/// A pair as the join's rows have it: nullable, as `least`, `greatest` and
/// `hamming` give them, so that both statements write one schema.
fn pair_fields() -> Fields {
    Fields::from(vec![Field::new("a", DataType::UInt64, true), Field::new("b", DataType::UInt64, true), Field::new("hamming", DataType::Int32, true)])
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct BandedPairs {
    signature: Signature,
}

impl Default for BandedPairs {
    fn default() -> Self {
        BandedPairs { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for BandedPairs {
    fn name(&self) -> &str {
        "banded_pairs"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [DataType::List(f), DataType::List(b), k, m, rest @ ..]
                if f.data_type().is_integer() && b.data_type() == &DataType::Boolean && k.is_integer() && m.is_integer()
                    && matches!(rest, [] | [DataType::Null] | [DataType::Int64 | DataType::UInt64 | DataType::Int32]) =>
            {
                let mut types = vec![list_of(DataType::UInt64), list_of(DataType::Boolean), DataType::Int64, DataType::Int64];
                types.extend(rest.iter().map(|_| DataType::Int64));
                Ok(types)
            }
            _ => plan_err!(
                "banded_pairs takes fingerprints and tonight flags (two lists, as array_agg makes them), k, m \
                 and optionally the most pairs to find, got {arg_types:?}"
            ),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(list_of(DataType::Struct(pair_fields())))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        let plan = match BandPlan::new(scalar_u32(&args.args, 2, name, "k")?, scalar_u32(&args.args, 3, name, "m")?) {
            Ok(plan) => plan,
            Err(e) => return exec_err!("{name}: {e}"),
        };
        let max_pairs = match args.args.get(4) {
            None => usize::MAX,
            Some(ColumnarValue::Scalar(v)) => match v.clone().cast_to(&DataType::Int64)? {
                ScalarValue::Int64(None) => usize::MAX,
                ScalarValue::Int64(Some(n)) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                other => return exec_err!("{name}: 'max_pairs' must be a non-negative integer constant or NULL, got {other}"),
            },
            Some(ColumnarValue::Array(_)) => return exec_err!("{name}: 'max_pairs' must be a constant, not a column"),
        };
        let (arrays, all_scalar) = to_arrays(&args.args[..2], args.number_rows)?;
        let (fingerprints, flags) = (arrays[0].as_list::<i32>(), arrays[1].as_list::<i32>());
        let (mut a, mut b, mut d) = (Vec::new(), Vec::new(), Vec::new());
        let mut offsets = vec![0i32];
        for row in 0..fingerprints.len() {
            if fingerprints.is_valid(row) && flags.is_valid(row) {
                for (x, y, distance) in group_pairs(&plan, &fingerprints.value(row), &flags.value(row), max_pairs)? {
                    a.push(x);
                    b.push(y);
                    d.push(distance as i32);
                }
            }
            let Ok(end) = i32::try_from(a.len()) else {
                return exec_err!("{name}: too many pairs in one batch");
            };
            offsets.push(end);
        }
        let columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(a)), Arc::new(UInt64Array::from(b)), Arc::new(Int32Array::from(d))];
        finish(Arc::new(struct_lists(pair_fields(), columns, offsets)), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Every pair of distinct fingerprints of a list (gathered with array_agg) within Hamming \
                 distance k, at least one of them tonight's (a fingerprint listed more than once is \
                 tonight's when any of its entries is), as {a, b, hamming} with a < b, in order: the \
                 banded self-join with m blocks, done in memory (each band's keys sorted) instead of \
                 joined.",
                "banded_pairs(fingerprints, tonight, k, m[, max_pairs])",
                "```sql\n> SELECT unnest(banded_pairs([0, 7, 255], [true, true, false], 3, 4)) AS p;\n\
                 +--------------------------+\n| p                        |\n+--------------------------+\n\
                 | {a: 0, b: 7, hamming: 3} |\n+--------------------------+\n```",
                &[
                    ("fingerprints", "Fingerprints (a list of UInt64; repeats are one fingerprint)."),
                    ("tonight", "Whether each is tonight's, in the same order; pairs of two others are left out."),
                    ("k", "Largest Hamming distance, a constant."),
                    ("m", "Blocks of the band plan (k < m <= 64), a constant."),
                    ("max_pairs", "Optional: the most pairs to find, a constant; more is an error. NULL or absent: no bound."),
                ],
            )
        }))
    }
}

/// The pairs of one row's lists.
fn group_pairs(plan: &BandPlan, fingerprints: &ArrayRef, flags: &ArrayRef, max_pairs: usize) -> Result<Vec<(u64, u64, u32)>> {
    let fingerprints = cast(fingerprints, &DataType::UInt64)?;
    let fingerprints = fingerprints.as_primitive::<UInt64Type>();
    let flags = flags.as_boolean();
    if fingerprints.len() != flags.len() || fingerprints.null_count() > 0 {
        return exec_err!("banded_pairs: fingerprints and tonight must be lists of one length, without NULL fingerprints");
    }
    let (distinct, tonight) = distinct_fingerprints(fingerprints.values(), flags, band_threads(plan));
    banded_pairs_within(plan, &distinct, &tonight, max_pairs).map_err(|e| DataFusionError::External(Box::new(e)))
}

/// The distinct fingerprints of a list, sorted, each tonight's when any of
/// its entries is (as `bool_or` grouped by fingerprint gives them; a NULL
/// flag is not tonight's). Tonight's and the others are sorted apart, as
/// plain numbers (half the bytes of a fingerprint with its flag), in a run
/// on each of `threads` threads, and merged. Sorted whole with their flags
/// on one thread, Weibo's 753,912 fingerprints took about 60 ms while the
/// other core waited.
fn distinct_fingerprints(fingerprints: &[u64], flags: &BooleanArray, threads: usize) -> (Vec<u64>, Vec<bool>) {
    let (mut tonight, mut others) = (Vec::with_capacity(fingerprints.len()), Vec::new());
    for (i, &f) in fingerprints.iter().enumerate() {
        match flags.is_valid(i) && flags.value(i) {
            true => tonight.push(f),
            false => others.push(f),
        }
    }
    let (tonight, others) = (sorted_distinct(tonight, threads), sorted_distinct(others, threads));
    merge_join_by(tonight, others, u64::cmp)
        .map(|f| match f {
            EitherOrBoth::Left(f) | EitherOrBoth::Both(f, _) => (f, true),
            EitherOrBoth::Right(f) => (f, false),
        })
        .unzip()
}

/// `values` sorted, each once: cut in a run a thread, each sorted in place,
/// the runs merged.
fn sorted_distinct(mut values: Vec<u64>, threads: usize) -> Vec<u64> {
    if values.is_empty() {
        return values;
    }
    let share = values.len().div_ceil(threads.max(1));
    let runs: Vec<&mut [u64]> = values.chunks_mut(share).collect();
    on_threads(runs, |run| radsort::sort(run));
    merge_distinct(&values.chunks(share).collect::<Vec<_>>(), threads)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::BooleanArray;

    #[test]
    fn a_fingerprint_listed_twice_is_tonights_when_either_is() {
        let fingerprints = [7, 3, 7, 5, 3, 9, 1, 9];
        let flags = BooleanArray::from(vec![Some(false), Some(false), Some(true), None, Some(false), Some(true), Some(true), Some(true)]);
        let expected = (vec![1, 3, 5, 7, 9], vec![true, false, false, true, true]);
        for threads in 1..=5 {
            assert_eq!(super::distinct_fingerprints(&fingerprints, &flags, threads), expected, "{threads} threads");
        }
    }
}
