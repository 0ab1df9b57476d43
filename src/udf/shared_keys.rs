//! `shared_keys(minhash, tonight)`: the MinHash buckets that can give a pair
//! ([`crate::minhash::shared_keys`]), as an aggregate over rows of band keys:
//! a list of `{key, members}`, in key order.
//!
//! Each partition collects its keys, tagged with the row's `tonight`, and
//! sorts them (on its own core); the final aggregate merges the sorted runs
//! where they lie. The result does not depend on row order or partitioning.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, StructArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, UInt64Type};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility};

use super::args::doc;
use super::term_set::{as_sets, coerce_set};
use crate::minhash::{shared_keys_of_runs, sort_tagged, tagged, KEY_BITS};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SharedKeys {
    signature: Signature,
}

impl Default for SharedKeys {
    fn default() -> Self {
        SharedKeys { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

fn bucket_fields() -> Fields {
    Fields::from(vec![Field::new("key", DataType::UInt64, false), Field::new("members", DataType::UInt64, false)])
}

fn tagged_list() -> DataType {
    DataType::new_list(DataType::UInt64, true)
}

impl AggregateUDFImpl for SharedKeys {
    fn name(&self) -> &str {
        "shared_keys"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [keys, tonight] if matches!(tonight, DataType::Boolean | DataType::Null) => Ok(vec![coerce_set(self.name(), "minhash", keys)?, DataType::Boolean]),
            _ => plan_err!("shared_keys takes (minhash, tonight): a list of band keys and a boolean, got {arg_types:?}"),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::new_list(DataType::Struct(bucket_fields()), true))
    }
    fn state_fields(&self, _: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new("tagged", tagged_list(), true))])
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(SharedKeysAccumulator::default()))
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The MinHash band keys held by more than one row, at least one of them tonight's, with \
                 how many rows hold each: a list of {key, members} in key order. NULL lists hold \
                 nothing; keys are compared on their low 48 bits, as the store keeps them.",
                "shared_keys(minhash, tonight)",
                "```sql\n> SELECT unnest(shared_keys(minhash, tonight)) FROM term_sets;\n```",
                &[("minhash", "A row's band keys (see minhash_keys)."), ("tonight", "Whether the row is tonight's.")],
            )
        }))
    }
}

/// The tagged keys of one partition, and the sorted runs of the others
/// merged into it (their arrays, held as they came: nothing is copied).
#[derive(Debug, Default)]
struct SharedKeysAccumulator {
    tagged: Vec<u64>,
    runs: Vec<ArrayRef>,
}

impl Accumulator for SharedKeysAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let sets = as_sets(&values[0])?;
        let tonight = values[1].as_boolean();
        let keys = sets.values().as_primitive::<UInt64Type>();
        let offsets = sets.value_offsets();
        for row in (0..sets.len()).filter(|&r| sets.is_valid(r)) {
            let this = tonight.is_valid(row) && tonight.value(row);
            for j in offsets[row] as usize..offsets[row + 1] as usize {
                if keys.is_null(j) {
                    return exec_err!("shared_keys: a NULL band key in row {row}");
                }
                let key = keys.value(j);
                if key >> KEY_BITS != 0 {
                    return exec_err!("shared_keys: band key {key:#x} is wider than {KEY_BITS} bits (see minhash_keys)");
                }
                self.tagged.push(tagged(key, this));
            }
        }
        Ok(())
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states[0].as_list::<i32>();
        // Each is a partition's keys, sorted by `state`.
        self.runs.extend((0..lists.len()).filter(|&r| lists.is_valid(r)).map(|r| lists.value(r)));
        Ok(())
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        // (A state of merged states, should a plan ask for one, is one run again.)
        for run in std::mem::take(&mut self.runs) {
            self.tagged.extend_from_slice(run.as_primitive::<UInt64Type>().values());
        }
        sort_tagged(&mut self.tagged);
        let tagged = UInt64Array::from(std::mem::take(&mut self.tagged));
        let list = ListArray::new(Arc::new(Field::new("item", DataType::UInt64, true)), OffsetBuffer::from_lengths([tagged.len()]), Arc::new(tagged), None);
        Ok(vec![ScalarValue::List(Arc::new(list))])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        sort_tagged(&mut self.tagged);
        let mut runs: Vec<&[u64]> = vec![&self.tagged];
        runs.extend(self.runs.iter().map(|r| r.as_primitive::<UInt64Type>().values().as_ref()));
        let buckets = shared_keys_of_runs(&runs);
        (self.tagged, self.runs) = (Vec::new(), Vec::new());
        let (keys, members): (Vec<u64>, Vec<u64>) = buckets.into_iter().unzip();
        let rows = keys.len();
        let columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(keys)), Arc::new(UInt64Array::from(members))];
        let structs = StructArray::new(bucket_fields(), columns, None);
        let field = Arc::new(Field::new("item", DataType::Struct(bucket_fields()), true));
        Ok(ScalarValue::List(Arc::new(ListArray::new(field, OffsetBuffer::from_lengths([rows]), Arc::new(structs), None))))
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.tagged.capacity() * 8 + self.runs.iter().map(|r| r.get_array_memory_size()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::UInt64Type;
    use datafusion::logical_expr::AggregateUDF;
    use datafusion::prelude::{SessionConfig, SessionContext};

    #[tokio::test]
    async fn shared_keys_do_not_depend_on_partitions() {
        // Rows of keys over three partitions or one: the same buckets.
        let rows = "VALUES (arrow_cast([1, 2, 3], 'List(UInt64)'), true), (arrow_cast([2, 3], 'List(UInt64)'), false), \
                    (arrow_cast([3, 4], 'List(UInt64)'), false), (arrow_cast([4, 5], 'List(UInt64)'), false), (NULL, true)";
        let mut results = Vec::new();
        for partitions in [1, 3] {
            let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions).with_batch_size(1));
            ctx.register_udaf(AggregateUDF::from(super::SharedKeys::default()));
            let sql = format!("SELECT b['key'] AS key, b['members'] AS members FROM (SELECT unnest(shared_keys(k, t)) AS b FROM ({rows}) AS r(k, t))");
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            let mut got = Vec::new();
            for b in &batches {
                let (k, m) = (b.column(0).as_primitive::<UInt64Type>(), b.column(1).as_primitive::<UInt64Type>());
                got.extend((0..b.num_rows()).map(|i| (k.value(i), m.value(i))));
            }
            results.push(got);
        }
        // Key 2: two rows, one tonight's; 3: three; 4: two, none tonight's.
        assert_eq!(results[0], vec![(2, 2), (3, 3)]);
        assert_eq!(results[0], results[1]);
    }
}
