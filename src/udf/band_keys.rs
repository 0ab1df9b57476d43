//! `band_keys(simhash, k, m)`: the `(band, key)` rows of the banded self-join.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayBuilder, ArrayRef, ListArray, StructArray, UInt32Builder, UInt64Builder};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::cast::as_uint64_array;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, scalar_u32, to_arrays};
use super::numeric::coerce_numeric;
use crate::join::BandPlan;

pub(crate) fn key_fields() -> Fields {
    Fields::from(vec![
        Field::new("band", DataType::UInt32, false),
        Field::new("key", DataType::UInt64, false),
        Field::new("bucket", DataType::UInt64, false),
    ])
}

/// The band plan named by constant `k` and `m` arguments at `index` and `index + 1`.
pub(crate) fn plan_from_args(args: &[ColumnarValue], index: usize, function: &str) -> Result<BandPlan> {
    let k = scalar_u32(args, index, function, "k")?;
    let m = scalar_u32(args, index + 1, function, "m")?;
    BandPlan::new(k, m).map_err(|e| DataFusionError::Execution(format!("{function}: {e}")))
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct BandKeys {
    signature: Signature,
}

impl Default for BandKeys {
    fn default() -> Self {
        BandKeys { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for BandKeys {
    fn name(&self) -> &str {
        "band_keys"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coerce_numeric(self.name(), &["simhash", "k", "m"], arg_types, &[DataType::UInt64, DataType::Int64, DataType::Int64])
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new("item", DataType::Struct(key_fields()), true))))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let plan = plan_from_args(&args.args, 1, self.name())?;
        let (arrays, all_scalar) = to_arrays(&args.args[..1], args.number_rows)?;
        let fps = as_uint64_array(&arrays[0])?;
        let bands = plan.bands();
        let (mut band, mut key) = (UInt32Builder::with_capacity(fps.len() * bands), UInt64Builder::with_capacity(fps.len() * bands));
        let mut bucket = UInt64Builder::with_capacity(fps.len() * bands);
        let mut offsets = Vec::with_capacity(fps.len() + 1);
        offsets.push(0i32);
        for i in 0..fps.len() {
            if fps.is_valid(i) {
                for (b, k) in plan.keys(fps.value(i)) {
                    band.append_value(b);
                    key.append_value(k);
                    bucket.append_value(BandPlan::bucket(b, k));
                }
            }
            offsets.push(band.len() as i32);
        }
        let items = StructArray::new(key_fields(), vec![Arc::new(band.finish()) as ArrayRef, Arc::new(key.finish()), Arc::new(bucket.finish())], None);
        let field = Arc::new(Field::new("item", DataType::Struct(key_fields()), true));
        let nulls = fps.nulls().cloned().map(|n| NullBuffer::new(n.inner().clone()));
        let list = ListArray::new(field, OffsetBuffer::new(offsets.into()), Arc::new(items), nulls);
        finish(Arc::new(list), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The keys of a fingerprint in each of the C(m, k) bands of the banded self-join: \
                 the 64 bits are cut into m blocks and every band keeps m − k of them. Fingerprints \
                 within Hamming distance k share the key of at least one band, so an equi-join on \
                 (band, key) finds every such pair. `bucket` mixes band and key into one value, for \
                 an equi-join on one column (check the band apart: two pairs may share a bucket).",
                "band_keys(simhash, k, m)",
                "```sql\n> SELECT b['band'], b['key'] FROM (SELECT unnest(band_keys(CAST(65535 AS BIGINT UNSIGNED), 1, 2)) AS b);\n0 65535\n1 0\n```",
                &[
                    ("simhash", "A UInt64 fingerprint."),
                    ("k", "The largest Hamming distance to find."),
                    ("m", "Number of blocks, more than k (C(m, k) bands at most 4096)."),
                ],
            )
        }))
    }
}
