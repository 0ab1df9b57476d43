//! `sort_key(a, b, …)`: one byte string a row whose byte order is the order
//! of `ORDER BY a, b, …` (each ascending, NULLs last), in Arrow's row format.
//!
//! DataFusion sorts a batch by several columns through one comparator a
//! column, called through a pointer for every comparison; for rows whose
//! leading strings are equal (every pair of `weibo_reposts` has the same
//! 13-byte source, one byte longer than a string view holds inline) each
//! comparison reads every column's bytes from scattered buffers. A sort by
//! one binary column compares two byte slices, and the merge after it reads
//! one column too (docs/performance.md).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{plan_err, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, to_arrays};

/// `ORDER BY`'s default: ascending, NULLs last.
const ASCENDING: SortOptions = SortOptions { descending: false, nulls_first: false };

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SortKey {
    signature: Signature,
}

impl Default for SortKey {
    fn default() -> Self {
        SortKey { signature: Signature::variadic_any(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for SortKey {
    fn name(&self) -> &str {
        "sort_key"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        if arg_types.is_empty() {
            return plan_err!("sort_key takes at least one column");
        }
        Ok(DataType::Binary)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, all_scalar) = to_arrays(&args.args, args.number_rows)?;
        let fields = arrays.iter().map(|a| SortField::new_with_options(a.data_type().clone(), ASCENDING)).collect();
        let rows = RowConverter::new(fields)?.convert_columns(&arrays)?;
        finish(Arc::new(rows.try_into_binary()?), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "A byte string whose order is the order of its arguments, compared as ORDER BY \
                 compares them (each ascending, NULLs last), in Arrow's row format: ORDER BY \
                 sort_key(a, b) sorts as ORDER BY a, b, comparing one value a row. The bytes \
                 are a sort key only; they are not meant to be stored.",
                "sort_key(expression[, ...])",
                "```sql\n> SELECT x FROM (VALUES ('b', 1), ('a', 2), ('a', 1)) AS t(x, y) ORDER BY sort_key(x, y);\n```",
                &[("expression", "Columns of any type the row format orders (strings, numbers, lists, ...).")],
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::logical_expr::ScalarUDF;
    use datafusion::prelude::SessionContext;

    /// Rows ordered by the key come out as ORDER BY the columns orders
    /// them, strings past a view's inline 12 bytes, equal prefixes, empty
    /// strings and NULLs included.
    #[tokio::test]
    async fn orders_as_the_columns_do() {
        let ctx = SessionContext::new();
        ctx.register_udf(ScalarUDF::from(super::SortKey::default()));
        let rows = "(1, 'weibo_reposts', '10', 3), (2, 'weibo_reposts', '9', 3), (3, 'weibo_repost', '9', NULL), \
                    (4, 'weibo_reposts', '10', NULL), (5, '', 'x', 1), (6, NULL, 'x', 1), (7, 'weibo_reposts', '10', -2), \
                    (8, 'weibo_reposts_and_more', '', 0), (9, 'weibo_reposts', '', 0)";
        let order = |by: &str| {
            let sql = format!("SELECT n FROM (VALUES {rows}) AS t(n, s, i, v) ORDER BY {by}");
            let ctx = ctx.clone();
            async move {
                let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
                batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect::<Vec<i64>>()
            }
        };
        let by_key = order("sort_key(s, i, v)").await;
        assert_eq!(by_key, order("s, i, v").await);
        assert_eq!(by_key, vec![5, 3, 9, 7, 1, 4, 2, 8, 6]);
    }
}
