//! `night_partners(simhash, minhash, index, version, k, m)`: tonight's
//! fingerprints that a stored fingerprint may pair with (see
//! [`crate::probe`]); `night_touched(…)` with the same arguments: whether it
//! has any, which is what a night's probe asks of every stored row.
//!
//! `index` is a Parquet file of tonight's documents (`simhash`, `minhash`),
//! read once per process and kept in memory, keyed by its location,
//! version and plan, as `idf_simhash` keeps its model: a store's scan then
//! streams through its compact columns on every node, each row probing the
//! same in-memory tables.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, BooleanArray, ListArray, UInt64Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, UInt64Type};
use datafusion::common::{exec_err, plan_err, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::args::{doc, is_string, scalar_str, scalar_u32, to_arrays, ProcessCache};
use super::idf_simhash::fetch;
use super::packed_keys::{is_packed, unpacked_rows};
use super::term_set::{as_sets, coerce_set, set_values};
use crate::join::BandPlan;
use crate::minhash::{all_narrow, narrow};
use crate::probe::{NightIndex, ProbeScratch};

/// Indexes kept per process (the latest ones used).
const CACHED_INDEXES: usize = 2;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NightPartners {
    signature: Signature,
    /// `night_touched`: whether a row has partners, not which.
    touched: bool,
}

impl Default for NightPartners {
    fn default() -> Self {
        NightPartners { signature: Signature::user_defined(Volatility::Immutable), touched: false }
    }
}

impl NightPartners {
    /// `night_touched`.
    pub fn touched() -> Self {
        NightPartners { touched: true, ..Self::default() }
    }
}

fn execution(e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("night_partners: {e}"))
}

fn list_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::UInt64, true)))
}

impl ScalarUDFImpl for NightPartners {
    fn name(&self) -> &str {
        if self.touched {
            "night_touched"
        } else {
            "night_partners"
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [s, keys, index, version, k, m]
                if (s.is_integer() || s == &DataType::Null)
                    && is_string(index)
                    && is_string(version)
                    && (k.is_integer() || k == &DataType::Null)
                    && (m.is_integer() || m == &DataType::Null) =>
            {
                // A store's keys are packed (pack_keys); tonight's and
                // older stores' are lists.
                let keys = if is_packed(keys) { keys.clone() } else { coerce_set(self.name(), "minhash", keys)? };
                Ok(vec![
                    DataType::UInt64,
                    keys,
                    DataType::Utf8,
                    DataType::Utf8,
                    DataType::Int64,
                    DataType::Int64,
                ])
            }
            _ => plan_err!("{} takes (simhash, minhash, index, version, k, m), got {arg_types:?}", self.name()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(if self.touched { DataType::Boolean } else { list_type() })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        let Some(url) = scalar_str(&args.args, 2, name, "index")? else {
            return exec_err!("{name}: 'index' must be the location of tonight's index");
        };
        let version = scalar_str(&args.args, 3, name, "version")?.unwrap_or_default();
        let k = scalar_u32(&args.args, 4, name, "k")?;
        let m = match &args.args[5] {
            ColumnarValue::Scalar(ScalarValue::Int64(None) | ScalarValue::Null) => None,
            _ => Some(scalar_u32(&args.args, 5, name, "m")?),
        };
        let index = index(&url, &version, k, m)?;
        let (arrays, _) = to_arrays(&args.args[..2], args.number_rows)?;
        let fingerprints = cast(&arrays[0], &DataType::UInt64)?;
        let fingerprints = fingerprints.as_primitive::<UInt64Type>();
        let rows: Vec<Option<u64>> = (0..fingerprints.len()).map(|i| fingerprints.is_valid(i).then(|| fingerprints.value(i))).collect();
        let (sets, keys);
        let (bounds, flat) = if is_packed(arrays[1].data_type()) {
            let (bounds, flat) = unpacked_rows(&arrays[1], name)?;
            (bounds, Cow::Owned(flat))
        } else {
            sets = as_sets(&arrays[1])?;
            keys = sets.values().as_primitive::<UInt64Type>().clone();
            row_keys(&rows, &sets, &keys, name)?
        };
        let mut scratch = ProbeScratch::default();
        if self.touched {
            let mut touched = Vec::with_capacity(rows.len());
            index.touched_batch(&rows, &bounds, &flat, &mut scratch, &mut touched);
            return Ok(ColumnarValue::Array(Arc::new(BooleanArray::from(touched))));
        }
        let (mut partners, mut ends) = (Vec::new(), Vec::with_capacity(rows.len()));
        index.partners_batch(&rows, &bounds, &flat, &mut scratch, &mut partners, &mut ends);
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        offsets.push(0i32);
        for end in ends {
            offsets.push(i32::try_from(end).map_err(|_| execution("too many partners in one batch"))?);
        }
        let list = ListArray::new(
            Arc::new(Field::new("item", DataType::UInt64, true)),
            OffsetBuffer::new(offsets.into()),
            Arc::new(UInt64Array::from(partners)),
            None,
        );
        Ok(ColumnarValue::Array(Arc::new(list)))
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        static TOUCHED: OnceLock<Documentation> = OnceLock::new();
        if self.touched {
            return Some(TOUCHED.get_or_init(|| {
                doc(
                    "Whether a stored fingerprint has any partner tonight (see night_partners), without \
                     listing them: what a night's probe asks of every stored row.",
                    "night_touched(simhash, minhash, index, version, k, m)",
                    "```sql\n> SELECT simhash FROM stored WHERE night_touched(simhash, minhash, 'night.parquet', 'v1', 3, 4);\n```",
                    &ARGUMENTS,
                )
            }));
        }
        Some(DOC.get_or_init(|| {
            doc(
                "Tonight's fingerprints that a stored fingerprint may pair with: equal ones, those within \
                 Hamming distance k (exactly, through the bands of m blocks), and those of tonight's \
                 documents sharing one of its MinHash band keys. Tonight's documents are read from the \
                 Parquet file `index` (columns simhash, minhash) once per process.",
                "night_partners(simhash, minhash, index, version, k, m)",
                "```sql\n> SELECT simhash, unnest(night_partners(simhash, minhash, 'night.parquet', 'v1', 3, 4)) \
                 FROM stored;\n```",
                &ARGUMENTS,
            )
        }))
    }
}

const ARGUMENTS: [(&str, &str); 6] = [
    ("simhash", "A stored fingerprint."),
    ("minhash", "Its MinHash band keys: a list (see minhash_keys), packed (see pack_keys), or NULL."),
    ("index", "Location of tonight's documents (simhash, minhash)."),
    ("version", "Any text that changes when the index does: part of the cache key."),
    ("k", "Largest Hamming distance of SimHash partners."),
    ("m", "Blocks of the band plan, or NULL for MinHash partners only."),
];

/// Each row's MinHash keys as bounds into one flat slice: the list's own
/// values, unless a NULL list covers values of its own (Arrow allows it), a
/// key is NULL or a key is wider than today's (a store written before keys
/// were cut to 48 bits, see [`crate::minhash::narrow`]). Then the keys of the
/// rows with a fingerprint are copied (narrowed), and a NULL key among them is
/// refused, as in every term-set function.
fn row_keys<'a>(rows: &[Option<u64>], sets: &ListArray, keys: &'a UInt64Array, name: &str) -> Result<(Vec<usize>, Cow<'a, [u64]>)> {
    let offsets = sets.value_offsets();
    let hidden = (0..sets.len()).any(|i| sets.is_null(i) && offsets[i] != offsets[i + 1]);
    if keys.null_count() == 0 && !hidden {
        let bounds = offsets.iter().map(|&o| o as usize).collect();
        if all_narrow(keys.values()) {
            return Ok((bounds, Cow::Borrowed(keys.values())));
        }
        return Ok((bounds, Cow::Owned(keys.values().iter().map(|&k| narrow(k)).collect())));
    }
    let (mut bounds, mut flat) = (vec![0], Vec::new());
    for (i, row) in rows.iter().enumerate() {
        if row.is_some() {
            flat.extend_from_slice(set_values(sets, keys, i, name)?.unwrap_or(&[]));
        }
        bounds.push(flat.len());
    }
    flat.iter_mut().for_each(|k| *k = narrow(*k));
    Ok((bounds, Cow::Owned(flat)))
}

/// Tonight's index at `url`, from the process's cache or read now.
pub(crate) fn index(url: &str, version: &str, k: u32, m: Option<u32>) -> Result<Arc<NightIndex>> {
    static CACHE: ProcessCache<NightIndex> = ProcessCache::new(CACHED_INDEXES);
    CACHE.get_or_load(format!("{url}\n{version}\n{k}\n{m:?}"), || {
        let plan = m.map(|m| BandPlan::new(k, m)).transpose().map_err(execution)?;
        read_index(url, plan)
    })
}

fn read_index(url: &str, plan: Option<BandPlan>) -> Result<NightIndex> {
    let bytes = fetch(url).map_err(|e| execution(format!("cannot read tonight's index '{url}': {e}")))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| execution(format!("tonight's index '{url}' is not Parquet: {e}")))?;
    let schema = builder.schema().clone();
    let (Ok(s), Ok(m)) = (schema.index_of("simhash"), schema.index_of("minhash")) else {
        return exec_err!("night_partners: index '{url}' lacks the columns simhash and minhash");
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [s, m]);
    let mut rows: Vec<(u64, Vec<u64>)> = Vec::new();
    for batch in builder.with_projection(mask).build()? {
        let batch = batch?;
        let fingerprints = cast(batch.column(0), &DataType::UInt64)?;
        let fingerprints = fingerprints.as_primitive::<UInt64Type>();
        let sets = as_sets(batch.column(1))?;
        let keys = sets.values().as_primitive::<UInt64Type>().clone();
        for i in 0..batch.num_rows() {
            if fingerprints.is_valid(i) {
                let row_keys = set_values(&sets, &keys, i, "night_partners")?.unwrap_or(&[]);
                rows.push((fingerprints.value(i), row_keys.to_vec()));
            }
        }
    }
    Ok(NightIndex::new(plan, rows.iter().map(|(s, k)| (*s, k.as_slice()))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::ListBuilder;
    use datafusion::arrow::array::UInt64Builder;

    fn lists(rows: &[Option<&[u64]>]) -> ListArray {
        let mut b = ListBuilder::new(UInt64Builder::new());
        for row in rows {
            match row {
                Some(keys) => {
                    b.values().append_slice(keys);
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        b.finish()
    }

    #[test]
    fn row_keys_of_a_sliced_list_point_into_its_values() {
        let all = lists(&[Some(&[1, 2]), Some(&[3]), None, Some(&[4, 5, 6])]);
        let sets = all.slice(1, 3);
        let keys = sets.values().as_primitive::<UInt64Type>().clone();
        let (bounds, flat) = row_keys(&[Some(9), Some(9), Some(9)], &sets, &keys, "t").unwrap();
        assert!(matches!(flat, Cow::Borrowed(_)));
        let rows: Vec<&[u64]> = bounds.windows(2).map(|w| &flat[w[0]..w[1]]).collect();
        assert_eq!(rows, vec![&[3][..], &[][..], &[4, 5, 6][..]]);
    }

    #[test]
    fn wide_keys_of_an_older_store_are_narrowed() {
        let wide = 0xabcd_0000_0000_0000;
        for sets in [lists(&[Some(&[1, wide | 2])]), lists(&[None, Some(&[wide | 3])])] {
            let keys = sets.values().as_primitive::<UInt64Type>().clone();
            let rows = vec![Some(9); sets.len()];
            let (_, flat) = row_keys(&rows, &sets, &keys, "t").unwrap();
            assert!(flat.iter().all(|&k| k == narrow(k)) && flat.iter().any(|&k| k > 1), "{flat:?}");
        }
    }

    #[test]
    fn a_null_key_is_refused_only_in_a_row_with_a_fingerprint() {
        let values = UInt64Array::from(vec![Some(1), None, Some(3)]);
        let field = Arc::new(Field::new("item", DataType::UInt64, true));
        let sets = ListArray::new(field, OffsetBuffer::new(vec![0, 2, 3].into()), Arc::new(values), None);
        let keys = sets.values().as_primitive::<UInt64Type>().clone();
        let (bounds, flat) = row_keys(&[None, Some(9)], &sets, &keys, "t").unwrap();
        assert_eq!((bounds, flat.to_vec()), (vec![0, 0, 1], vec![3]));
        let refused = row_keys(&[Some(9), Some(9)], &sets, &keys, "t").unwrap_err();
        assert!(refused.to_string().contains("NULL hash"), "{refused}");
    }
}
