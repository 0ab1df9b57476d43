//! `text_features(text, title [, mode [, options [, with_pos [, boilerplate]]]])`:
//! `term_stats` and `shingle_sketch` of a document in one pass over its
//! text, as `{terms, shingles}`: the text is stripped of boilerplate lines
//! and normalised once for both (sql/20_terms.sql).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ArrayRef, StructArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::Result;
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish};
use super::shingle_sketch::sketch_type;
use super::term_stats::{analyze, item_field, TermStats};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TextFeatures {
    signature: Signature,
}

impl Default for TextFeatures {
    fn default() -> Self {
        TextFeatures { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

fn feature_fields() -> Fields {
    Fields::from(vec![Field::new("terms", DataType::List(item_field()), true), Field::new("shingles", sketch_type(), true)])
}

impl ScalarUDFImpl for TextFeatures {
    fn name(&self) -> &str {
        "text_features"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        TermStats::default().coerce_types(arg_types)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(feature_fields()))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (terms, shingles, all_scalar) = analyze(&args, self.name(), true)?;
        let shingles = shingles.expect("sketches were asked for");
        let columns: Vec<ArrayRef> = vec![Arc::new(terms), Arc::new(shingles)];
        finish(Arc::new(StructArray::new(feature_fields(), columns, None)), all_scalar)
    }
    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "A document's term statistics and shingle sketch in one pass: {terms, shingles}, equal \
                 to term_stats and shingle_sketch of the same arguments, with the text stripped of \
                 boilerplate lines and normalised once for both. NULL text gives NULL lists.",
                "text_features(text, title [, mode [, options [, with_pos [, boilerplate]]]])",
                "```sql\n> SELECT list_length(f['terms']), list_length(f['shingles'])\n  FROM (SELECT text_features('北京 北京 天安门', NULL) AS f);\n2 1\n```",
                &[
                    ("text", "The document text."),
                    ("title", "The document title, or NULL."),
                    ("mode", "As for term_stats."),
                    ("options", "As for term_stats."),
                    ("with_pos", "As for term_stats."),
                    ("boilerplate", "As for term_stats and shingle_sketch."),
                ],
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn text_features_are_term_stats_and_the_shingle_sketch() {
        let mut state = SessionContext::new().state();
        crate::udf::register_all(&mut state).unwrap();
        let ctx = SessionContext::new_with_state(state);
        // Real sentences, one with a boilerplate line dropped by its hash, a
        // NULL text and a text of stop words only.
        let line = crate::text::line_hashes("点击关注，获取更多资讯", &mut String::new());
        let boilerplate = crate::text::format_set(&line);
        let same = |f: &str, g: &str| format!("coalesce(f['{f}'] = {g}, f['{f}'] IS NULL AND {g} IS NULL)");
        let sql = format!(
            "WITH docs(text, title) AS (VALUES \
               ('国家统计局今天发布了十月份的居民消费价格数据，同比上涨百分之二。\n点击关注，获取更多资讯', '居民消费价格'), \
               ('据新华社报道，国家统计局今天发布了十月份的居民消费价格数据。', NULL), (NULL, '标题'), ('的 了 是', NULL)) \
             SELECT {} AND {}, CAST(list_length(f['terms']) AS BIGINT), CAST(list_length(shingle_sketch(text)) - list_length(f['shingles']) AS BIGINT) \
             FROM (SELECT text, title, text_features(text, title, 'precise', '', true, '{boilerplate}') AS f FROM docs)",
            same("terms", &format!("term_stats(text, title, 'precise', '', true, '{boilerplate}')")),
            same("shingles", &format!("shingle_sketch(text, '{boilerplate}')")),
        );
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let batch = datafusion::arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        let equal: Vec<Option<bool>> = batch.column(0).as_boolean().iter().collect();
        assert_eq!(equal, vec![Some(true); 4]);
        let terms: Vec<Option<i64>> = batch.column(1).as_primitive::<datafusion::arrow::datatypes::Int64Type>().iter().collect();
        assert!(terms[0].unwrap() > 5 && terms[1].unwrap() > 5, "{terms:?}");
        assert_eq!((terms[2], terms[3]), (None, Some(0)));
        // The boilerplate line's shingles are left out of the first text's sketch.
        let dropped = batch.column(2).as_primitive::<datafusion::arrow::datatypes::Int64Type>().value(0);
        assert!(dropped > 0, "{dropped}");
    }

    #[tokio::test]
    async fn a_batch_gives_what_its_rows_give_one_at_a_time() {
        use std::sync::Arc;
        use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
        use datafusion::datasource::MemTable;
        use datafusion::prelude::SessionConfig;
        // 600 rows, over two of the chunks `analyze` normalises at once,
        // with NULL texts and titles among them. Every fourth text repeats
        // one of three, under no title or one of two: a batch copies those
        // from their first row, one row at a time cuts each.
        let sentences = ["国家统计局今天发布了十月份的居民消费价格数据。", "据新华社报道，市政府召开新闻发布会。", "The council met on Monday."];
        let text = |i: usize| if i % 4 == 0 { sentences[i % 3].to_string() } else { format!("{}第{i}次会议。", sentences[i % 3]) };
        let texts: Vec<Option<String>> = (0..600).map(|i| (i % 7 != 3).then(|| text(i))).collect();
        let titles: Vec<Option<String>> = (0..600).map(|i| (i % 5 == 0).then(|| format!("会议{}", i % 2))).collect();
        let batch = RecordBatch::try_from_iter([
            ("text", Arc::new(StringArray::from(texts)) as ArrayRef),
            ("title", Arc::new(StringArray::from(titles)) as ArrayRef),
        ])
        .unwrap();
        let mut results = Vec::new();
        for rows in [8192, 1] {
            let mut state = SessionContext::new_with_config(SessionConfig::new().with_batch_size(rows).with_target_partitions(1)).state();
            crate::udf::register_all(&mut state).unwrap();
            let ctx = SessionContext::new_with_state(state);
            ctx.register_table("docs", Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch.clone()]]).unwrap())).unwrap();
            let out = ctx.sql("SELECT text_features(text, title, 'precise', '', true) AS f FROM docs").await.unwrap().collect().await.unwrap();
            assert_eq!(out.len(), if rows == 1 { 600 } else { 1 });
            results.push(datafusion::arrow::compute::concat_batches(&out[0].schema(), &out).unwrap());
        }
        assert_eq!(results[0].column(0).as_struct().column_by_name("terms").unwrap().as_list::<i32>().value(1).len(), 11);
        assert_eq!(results[0], results[1]);
    }
}
