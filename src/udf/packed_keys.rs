//! `pack_keys(keys)` and `unpack_keys(packed)`: MinHash band keys as the
//! store keeps them, one binary value of six bytes a key per row (see
//! [`crate::minhash::pack_keys`]), and back to a list of keys.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, ListArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::common::{exec_datafusion_err, exec_err, plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};
use super::minhash_keys::keys_type;
use super::term_set::{as_sets, coerce_set, set_values};
use crate::minhash::{pack_keys, unpack_keys, PACKED_KEY_BYTES};

/// Whether `t` can hold packed keys.
pub(crate) fn is_packed(t: &DataType) -> bool {
    matches!(t, DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_))
}

/// Call `f` with each row of a column of packed keys (`None`: NULL).
fn each_row(array: &ArrayRef, mut f: impl FnMut(Option<&[u8]>) -> Result<()>) -> Result<()> {
    fn rows<'a>(array: &'a ArrayRef, value: impl Fn(usize) -> &'a [u8], f: &mut impl FnMut(Option<&[u8]>) -> Result<()>) -> Result<()> {
        (0..array.len()).try_for_each(|i| f(array.is_valid(i).then(|| value(i))))
    }
    match array.data_type() {
        DataType::Binary => {
            let binary = array.as_binary::<i32>();
            rows(array, |i| binary.value(i), &mut f)
        }
        DataType::LargeBinary => {
            let binary = array.as_binary::<i64>();
            rows(array, |i| binary.value(i), &mut f)
        }
        DataType::BinaryView => {
            let view = array.as_binary_view();
            rows(array, |i| view.value(i), &mut f)
        }
        DataType::FixedSizeBinary(_) => {
            let fixed = array.as_fixed_size_binary();
            rows(array, |i| fixed.value(i), &mut f)
        }
        DataType::Null => (0..array.len()).try_for_each(|_| f(None)),
        other => exec_err!("packed MinHash keys must be binary, got {other}"),
    }
}

/// Each row's keys of a column of packed keys, as bounds into one flat
/// list (a NULL row has none); `function` names the caller in the error
/// for a value that is not a whole number of keys.
pub(crate) fn unpacked_rows(array: &ArrayRef, function: &str) -> Result<(Vec<usize>, Vec<u64>)> {
    let mut bounds = Vec::with_capacity(array.len() + 1);
    bounds.push(0);
    let mut flat = Vec::new();
    each_row(array, |row| {
        if let Some(packed) = row {
            if unpack_keys(packed, &mut flat).is_none() {
                return exec_err!(
                    "{function}: a packed 'minhash' value of {} bytes is not a whole number of {PACKED_KEY_BYTES}-byte keys \
                     (the store file is damaged or was not written by neardup)",
                    packed.len()
                );
            }
        }
        bounds.push(flat.len());
        Ok(())
    })?;
    Ok((bounds, flat))
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PackKeys {
    signature: Signature,
}

impl Default for PackKeys {
    fn default() -> Self {
        PackKeys { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for PackKeys {
    fn name(&self) -> &str {
        "pack_keys"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [keys] => Ok(vec![coerce_set(self.name(), "keys", keys)?]),
            _ => plan_err!("pack_keys takes one list of MinHash keys, got {arg_types:?}"),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let lists = as_sets(&arrays[0])?;
        let values = lists.values().as_primitive::<UInt64Type>();
        let mut out = BinaryBuilder::with_capacity(lists.len(), values.len() * PACKED_KEY_BYTES);
        let mut packed = Vec::new();
        for i in 0..lists.len() {
            match set_values(&lists, values, i, self.name())? {
                Some(keys) => {
                    packed.clear();
                    pack_keys(keys, &mut packed);
                    out.append_value(&packed);
                }
                None => out.append_null(),
            }
        }
        finish(Arc::new(out.finish()), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "MinHash band keys (see minhash_keys) packed as the store keeps them: one binary value, \
                 six little-endian bytes a key (keys have 48 bits). A night reads every stored row's \
                 keys, and one binary value decodes far faster than a list of integers.",
                "pack_keys(keys)",
                "```sql\n> SELECT pack_keys([1, 258]);\n010000000000020100000000\n```",
                &[("keys", "A list of MinHash band keys.")],
            )
        }))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct UnpackKeys {
    signature: Signature,
}

impl Default for UnpackKeys {
    fn default() -> Self {
        UnpackKeys { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for UnpackKeys {
    fn name(&self) -> &str {
        "unpack_keys"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] if is_packed(t) || t == &DataType::Null => Ok(vec![t.clone()]),
            _ => plan_err!("unpack_keys takes one binary value of packed MinHash keys (a store's 'minhash'), got {arg_types:?}"),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(keys_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        // The bounds are the list's offsets and the keys its values, as they are.
        let (bounds, flat) = unpacked_rows(&arrays[0], self.name())?;
        let offsets = bounds.into_iter().map(|b| i32::try_from(b).map_err(|_| exec_datafusion_err!("unpack_keys: too many keys in one batch")));
        let offsets = OffsetBuffer::new(offsets.collect::<Result<Vec<i32>>>()?.into());
        let DataType::List(field) = keys_type() else { unreachable!("keys are a list") };
        let list = ListArray::new(field, offsets, Arc::new(UInt64Array::from(flat)), arrays[0].logical_nulls());
        finish(Arc::new(list), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The MinHash band keys of a store's packed 'minhash' value (see pack_keys), as the list \
                 minhash_keys gives.",
                "unpack_keys(packed)",
                "```sql\n> SELECT unpack_keys(pack_keys([1, 2, 3]));\n[1, 2, 3]\n```",
                &[("packed", "Keys packed by pack_keys (a store's 'minhash' column).")],
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{BinaryArray, BinaryViewArray};

    use super::*;

    #[test]
    fn packed_rows_of_every_binary_layout_unpack_alike() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        pack_keys(&[1, 2], &mut a);
        pack_keys(&[3], &mut b);
        let rows = [Some(&a[..]), None, Some(&b[..]), Some(&[][..])];
        let expected = (vec![0, 2, 2, 3, 3], vec![1, 2, 3]);
        let binary: ArrayRef = Arc::new(BinaryArray::from(rows.to_vec()));
        let view: ArrayRef = Arc::new(BinaryViewArray::from(rows.to_vec()));
        assert_eq!(unpacked_rows(&binary, "t").unwrap(), expected);
        assert_eq!(unpacked_rows(&view, "t").unwrap(), expected);
        // A slice starts at its own first row.
        assert_eq!(unpacked_rows(&binary.slice(2, 2), "t").unwrap(), (vec![0, 1, 1], vec![3]));
        let torn: ArrayRef = Arc::new(BinaryArray::from(vec![&a[..5]]));
        let e = unpacked_rows(&torn, "night_touched").unwrap_err().to_string();
        assert!(e.contains("night_touched") && e.contains("5 bytes") && e.contains("damaged"), "{e}");
    }
}
