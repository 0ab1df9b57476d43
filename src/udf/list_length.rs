//! `list_length(list)`: how many entries each list has, read from the list's
//! offsets. DataFusion's `cardinality` and `array_length` slice every row's
//! entries to count them, which for the 768,035 lists of structs of
//! `weibo_reposts`' terms cost 436 ms of compute (docs/performance.md).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, UInt64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ListLength {
    signature: Signature,
}

impl Default for ListLength {
    fn default() -> Self {
        ListLength { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for ListLength {
    fn name(&self) -> &str {
        "list_length"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t @ (DataType::List(_) | DataType::LargeList(_))] => Ok(vec![t.clone()]),
            [DataType::Null] => Ok(vec![DataType::new_list(DataType::Null, true)]),
            [t] => plan_err!("list_length takes a list, got {t}"),
            _ => plan_err!("list_length takes one argument, got {}", arg_types.len()),
        }
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let lengths: UInt64Array = match arrays[0].data_type() {
            DataType::LargeList(_) => lengths(arrays[0].as_list::<i64>().value_offsets(), arrays[0].nulls()),
            _ => lengths(arrays[0].as_list::<i32>().value_offsets(), arrays[0].nulls()),
        };
        finish(Arc::new(lengths), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The number of entries of a list (NULL for NULL), as cardinality gives it for a \
                 one-dimensional list, read from the list's offsets instead of its entries.",
                "list_length(list)",
                "```sql\n> SELECT list_length([1, 2, 3]), list_length(term_stats('', NULL));\n3 0\n```",
                &[("list", "Any list.")],
            )
        }))
    }
}

/// Each row's length from consecutive offsets; NULL where the list is.
fn lengths<O: Copy + Into<i64>>(offsets: &[O], nulls: Option<&datafusion::arrow::buffer::NullBuffer>) -> UInt64Array {
    let counts = offsets.windows(2).map(|w| (w[1].into() - w[0].into()) as u64);
    UInt64Array::new(counts.collect(), nulls.cloned())
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{AsArray, UInt64Array};
    use datafusion::arrow::datatypes::UInt64Type;
    use datafusion::logical_expr::ScalarUDF;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn lengths_equal_cardinality() {
        let ctx = SessionContext::new();
        ctx.register_udf(ScalarUDF::from(super::ListLength::default()));
        let sql = "SELECT list_length(l) AS n, cardinality(l) AS c FROM (VALUES ([1, 2, 3]), ([]), (NULL), ([4])) AS t(l)";
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let column = |i: usize| -> UInt64Array { batches.iter().flat_map(|b| b.column(i).as_primitive::<UInt64Type>().iter()).collect() };
        assert_eq!(column(0), column(1));
        assert_eq!(column(0), UInt64Array::from(vec![Some(3), Some(0), None, Some(1)]));
    }
}
