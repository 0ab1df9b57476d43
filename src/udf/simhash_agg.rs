//! `simhash_agg(hash, weight)`: SimHash as an aggregate over weighted features.
//!
//! The pipeline computes fingerprints with it after joining each term with
//! its corpus document frequency. The state is the 64 fixed-point votes
//! (512 bytes), so partial aggregates from any partitioning merge to exactly
//! the same fingerprint.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, BinaryArray, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::cast::{as_binary_array, as_float64_array, as_uint64_array};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator, Signature, Volatility};

use super::args::doc;
use super::numeric::coerce_numeric;
use crate::fingerprint::{fixed_weight, SimHasher};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SimhashAgg {
    signature: Signature,
}

impl Default for SimhashAgg {
    fn default() -> Self {
        SimhashAgg { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl AggregateUDFImpl for SimhashAgg {
    fn name(&self) -> &str {
        "simhash_agg"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_numeric(self.name(), &["hash", "weight"], arg_types, &[DataType::UInt64, DataType::Float64])
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }
    fn state_fields(&self, _: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new("votes", DataType::Binary, true))])
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(SimhashAccumulator::default()))
    }
    fn groups_accumulator_supported(&self, _: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(SimhashGroups::default()))
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "Aggregate 64-bit SimHash of weighted features: every row votes its weight for the \
                 bits set in its hash and against the others. NULL hashes are skipped; a group \
                 with none gives NULL. The result does not depend on row order or partitioning.",
                "simhash_agg(hash, weight)",
                "```sql\n> SELECT doc, simhash_agg(hash64(term), w) FROM (VALUES (1, 'a', 2.0), (1, 'b', 1.0)) AS t(doc, term, w) GROUP BY doc;\n```",
                &[("hash", "A UInt64 feature hash, e.g. hash64(term)."), ("weight", "The feature's weight; ≤ 0 votes nothing.")],
            )
        }))
    }
}

fn hashes_and_weights(values: &[ArrayRef]) -> Result<(&UInt64Array, &datafusion::arrow::array::Float64Array)> {
    Ok((as_uint64_array(&values[0])?, as_float64_array(&values[1])?))
}

fn votes_of(state: &BinaryArray, i: usize) -> Result<Option<SimHasher>> {
    if state.is_null(i) {
        return Ok(None);
    }
    match SimHasher::from_bytes(state.value(i)) {
        Some(h) => Ok(Some(h)),
        None => exec_err!("simhash_agg: corrupt partial state of {} bytes", state.value(i).len()),
    }
}

/// Accumulator for one group (used without GROUP BY and in windows).
#[derive(Debug, Default)]
struct SimhashAccumulator {
    votes: Option<SimHasher>,
}

impl Accumulator for SimhashAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (hashes, weights) = hashes_and_weights(values)?;
        for i in 0..hashes.len() {
            if hashes.is_valid(i) {
                let w = if weights.is_valid(i) { fixed_weight(weights.value(i)) } else { 0 };
                self.votes.get_or_insert_with(SimHasher::default).add_fixed(hashes.value(i), w);
            }
        }
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let state = as_binary_array(&states[0])?;
        for i in 0..state.len() {
            if let Some(h) = votes_of(state, i)? {
                self.votes.get_or_insert_with(SimHasher::default).merge(&h);
            }
        }
        Ok(())
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(self.votes.as_ref().map(SimHasher::to_bytes))])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::UInt64(self.votes.as_ref().map(SimHasher::finish)))
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// Accumulator for many groups at once (GROUP BY), one vote vector each.
#[derive(Debug, Default)]
pub(super) struct SimhashGroups {
    votes: Vec<SimHasher>,
    seen: Vec<bool>,
}

impl SimhashGroups {
    fn grow(&mut self, total: usize) {
        self.votes.resize_with(total, SimHasher::default);
        self.seen.resize(total, false);
    }
}

fn selected(filter: Option<&BooleanArray>, i: usize) -> bool {
    filter.is_none_or(|f| f.is_valid(i) && f.value(i))
}

impl GroupsAccumulator for SimhashGroups {
    fn update_batch(&mut self, values: &[ArrayRef], groups: &[usize], filter: Option<&BooleanArray>, total: usize) -> Result<()> {
        self.grow(total);
        let (hashes, weights) = hashes_and_weights(values)?;
        for (i, &g) in groups.iter().enumerate() {
            if hashes.is_valid(i) && selected(filter, i) {
                let w = if weights.is_valid(i) { fixed_weight(weights.value(i)) } else { 0 };
                self.votes[g].add_fixed(hashes.value(i), w);
                self.seen[g] = true;
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, values: &[ArrayRef], groups: &[usize], total: usize) -> Result<()> {
        self.grow(total);
        let state = as_binary_array(&values[0])?;
        for (i, &g) in groups.iter().enumerate() {
            if let Some(h) = votes_of(state, i)? {
                self.votes[g].merge(&h);
                self.seen[g] = true;
            }
        }
        Ok(())
    }

    fn convert_to_state(&self, values: &[ArrayRef], filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let (hashes, weights) = hashes_and_weights(values)?;
        let state: BinaryArray = (0..hashes.len())
            .map(|i| {
                (hashes.is_valid(i) && selected(filter, i)).then(|| {
                    let mut h = SimHasher::default();
                    h.add_fixed(hashes.value(i), if weights.is_valid(i) { fixed_weight(weights.value(i)) } else { 0 });
                    h.to_bytes()
                })
            })
            .collect::<Vec<_>>()
            .iter()
            .map(|b| b.as_deref())
            .collect();
        Ok(vec![Arc::new(state)])
    }


    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let votes = emit_to.take_needed(&mut self.votes);
        let seen = emit_to.take_needed(&mut self.seen);
        let out: UInt64Array = votes.iter().zip(seen).map(|(v, s)| s.then(|| v.finish())).collect();
        Ok(Arc::new(out))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let votes = emit_to.take_needed(&mut self.votes);
        let seen = emit_to.take_needed(&mut self.seen);
        let bytes: Vec<Option<Vec<u8>>> = votes.iter().zip(seen).map(|(v, s)| s.then(|| v.to_bytes())).collect();
        let out: BinaryArray = bytes.iter().map(|b| b.as_deref()).collect();
        Ok(vec![Arc::new(out)])
    }

    fn size(&self) -> usize {
        self.votes.capacity() * std::mem::size_of::<SimHasher>() + self.seen.capacity()
    }
}
