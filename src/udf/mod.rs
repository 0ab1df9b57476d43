//! neardup's SQL functions, one per file: thin Arrow adapters over the plain
//! Rust in [`crate::text`], [`crate::weight`], [`crate::fingerprint`] and
//! [`crate::join`].
//!
//! Every function is stateless: settings (tokenizer mode, analyzer files,
//! k and m) arrive as constant SQL arguments. So a function needs no codec to
//! travel to another node, and the list below is all a client, scheduler or
//! executor registers.

use std::sync::Arc;

use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

mod args;
mod band_keys;
mod banded_pairs;
mod containment;
mod doc_frequencies;
mod first_common_band;
mod hamming;
mod hash64;
mod idf;
mod idf_simhash;
mod jaccard_pairs;
mod line_hashes;
mod list_length;
pub(crate) mod minhash_keys;
pub(crate) mod night_partners;
mod numeric;
pub(crate) mod packed_keys;
mod simhash;
mod simhash_agg;
mod simhash_cosine;
mod set_similarity;
mod shared_keys;
mod shingle_sketch;
mod simhash_similarity;
mod sort_key;
pub(crate) mod term_set;
mod term_stats;
mod text_features;
mod term_weight;
mod tokenize;
mod tokenize_tagged;

pub use idf_simhash::{vector_type, HeldDf};
pub use shingle_sketch::sketch_type;
pub use term_stats::term_fields;

/// Every scalar function of neardup.
pub fn scalar_functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Arc::new(ScalarUDF::from(tokenize::Tokenize::default())),
        Arc::new(ScalarUDF::from(tokenize_tagged::TokenizeTagged::default())),
        Arc::new(ScalarUDF::from(term_stats::TermStats::default())),
        Arc::new(ScalarUDF::from(term_weight::TermWeight::default())),
        Arc::new(ScalarUDF::from(idf::Idf::default())),
        Arc::new(ScalarUDF::from(idf_simhash::IdfSimhash::default())),
        Arc::new(ScalarUDF::from(hash64::Hash64::default())),
        Arc::new(ScalarUDF::from(simhash::Simhash::default())),
        Arc::new(ScalarUDF::from(hamming::Hamming::default())),
        Arc::new(ScalarUDF::from(simhash_similarity::SimhashSimilarity::default())),
        Arc::new(ScalarUDF::from(simhash_cosine::SimhashCosine::default())),
        Arc::new(ScalarUDF::from(band_keys::BandKeys::default())),
        Arc::new(ScalarUDF::from(first_common_band::FirstCommonBand::default())),
        Arc::new(ScalarUDF::from(term_set::TermSet::default())),
        Arc::new(ScalarUDF::from(set_similarity::SetSimilarity::default())),
        Arc::new(ScalarUDF::from(shingle_sketch::ShingleSketch::default())),
        Arc::new(ScalarUDF::from(text_features::TextFeatures::default())),
        Arc::new(ScalarUDF::from(containment::Containment::default())),
        Arc::new(ScalarUDF::from(minhash_keys::MinhashKeys::default())),
        Arc::new(ScalarUDF::from(packed_keys::PackKeys::default())),
        Arc::new(ScalarUDF::from(packed_keys::UnpackKeys::default())),
        Arc::new(ScalarUDF::from(jaccard_pairs::JaccardPairs::default())),
        Arc::new(ScalarUDF::from(banded_pairs::BandedPairs::default())),
        Arc::new(ScalarUDF::from(night_partners::NightPartners::default())),
        Arc::new(ScalarUDF::from(night_partners::NightPartners::touched())),
        Arc::new(ScalarUDF::from(line_hashes::LineHashes::default())),
        Arc::new(ScalarUDF::from(list_length::ListLength::default())),
        Arc::new(ScalarUDF::from(sort_key::SortKey::default())),
    ]
}

/// Every aggregate function of neardup.
pub fn aggregate_functions() -> Vec<Arc<AggregateUDF>> {
    vec![
        Arc::new(AggregateUDF::from(simhash_agg::SimhashAgg::default())),
        Arc::new(AggregateUDF::from(shared_keys::SharedKeys::default())),
        Arc::new(AggregateUDF::from(doc_frequencies::DocFrequencies::default())),
    ]
}

/// Register every neardup function with a registry (a session state or context).
pub fn register_all(registry: &mut dyn FunctionRegistry) -> datafusion::error::Result<()> {
    for f in scalar_functions() {
        registry.register_udf(f)?;
    }
    for f in aggregate_functions() {
        registry.register_udaf(f)?;
    }
    Ok(())
}

/// Every function's name, syntax, description and example, as text.
pub fn describe_all() -> String {
    let mut out = String::new();
    let scalars = scalar_functions();
    let aggregates = aggregate_functions();
    let docs = scalars
        .iter()
        .map(|f| (f.name().to_string(), f.documentation().cloned()))
        .chain(aggregates.iter().map(|f| (f.name().to_string(), f.documentation().cloned())));
    for (name, doc) in docs {
        let Some(doc) = doc else { continue };
        out.push_str(&format!("{name}\n  {}\n\n", doc.syntax_example));
        out.push_str(&format!("  {}\n", doc.description));
        if let Some(args) = &doc.arguments {
            for (arg, text) in args {
                out.push_str(&format!("    {arg}: {text}\n"));
            }
        }
        if let Some(example) = &doc.sql_example {
            let body: Vec<&str> = example.lines().filter(|l| !l.starts_with("```")).collect();
            out.push_str(&format!("  Example:\n    {}\n", body.join("\n    ")));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    //! The adapters called directly on Arrow arrays, as the engine calls them:
    //! every string layout, NULLs, scalars, and aggregate states merged.
    use std::sync::Arc;

    use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, StringViewArray, UInt64Array};
    use datafusion::arrow::datatypes::{DataType, Field, UInt64Type};
    use datafusion::config::ConfigOptions;
    use datafusion::logical_expr::{ColumnarValue, EmitTo, ScalarFunctionArgs, ScalarUDFImpl};
    use datafusion::scalar::ScalarValue;

    use super::*;
    use crate::fingerprint::{hash64, simhash};

    fn call(f: &dyn ScalarUDFImpl, args: Vec<ColumnarValue>, rows: usize) -> ColumnarValue {
        let arg_fields = args.iter().map(|a| Arc::new(Field::new("a", a.data_type(), true))).collect();
        let return_type = f.return_type(&args.iter().map(|a| a.data_type()).collect::<Vec<_>>()).unwrap();
        f.invoke_with_args(ScalarFunctionArgs {
            args,
            arg_fields,
            number_rows: rows,
            return_field: Arc::new(Field::new("r", return_type, true)),
            config_options: Arc::new(ConfigOptions::default()),
        })
        .unwrap()
    }

    #[test]
    fn every_function_is_documented_with_an_example() {
        let names: Vec<String> = scalar_functions().iter().map(|f| f.name().to_string()).collect();
        assert_eq!(names.len(), 28);
        for f in scalar_functions() {
            let doc = f.documentation().unwrap_or_else(|| panic!("{} has no documentation", f.name()));
            assert!(doc.sql_example.as_deref().is_some_and(|e| e.contains(f.name())), "{} has no example", f.name());
        }
        for f in aggregate_functions() {
            assert!(f.documentation().and_then(|d| d.sql_example.as_deref()).is_some_and(|e| e.contains(f.name())));
        }
    }

    #[test]
    fn tokenize_reads_string_views_and_keeps_nulls() {
        let texts: ArrayRef = Arc::new(StringViewArray::from(vec![Some("北京天安门"), None, Some("")]));
        let out = call(&tokenize::Tokenize::default(), vec![ColumnarValue::Array(texts)], 3).into_array(3).unwrap();
        let list = out.as_list::<i32>();
        assert_eq!(list.value(0).as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["北京", "天安门"]);
        assert!(list.is_null(1));
        assert!(!list.is_null(2) && list.value(2).is_empty());
    }

    #[test]
    fn term_stats_of_a_batch_are_each_document_s_own() {
        // Documents of about 40 words, so that a chunk of 256 rows is cut in
        // several groups (term_stats.rs, GROUP_WORDS), with NULLs, titles and
        // rows that repeat an earlier one: each row's statistics are those of
        // its document alone.
        let sentences = [
            "小明硕士毕业于中国科学院计算所，后在日本京都大学深造。",
            "韩冰冰和李易峰在2024年的Steam夏促买了《艾尔登法环》DLC，花了199.5元！",
            "国家统计局今天发布了数据，国家统计局说数据是真实的。",
            "我来到北京清华大学，他来到了网易杭研大厦。",
            "工信处女干事每月经过下属科室都要亲口交代24口交换机等技术性器件的安装工作。",
        ];
        let rows = 700;
        let text = |i: usize| match i % 97 {
            13 => None,
            50 => Some(format!("{}{}{}", sentences[0], 49, sentences[4])),
            // Each ends with a word of its own.
            _ => Some(format!("{}{}{}第{i}", sentences[i % 5], i, sentences[(i * 3 + 1) % 5])),
        };
        let title = |i: usize| (i % 3 == 0).then(|| sentences[(i + 2) % 5].to_string());
        let texts: Vec<Option<String>> = (0..rows).map(text).collect();
        let titles: Vec<Option<String>> = (0..rows).map(title).collect();
        let stats = |texts: &[Option<String>], titles: &[Option<String>]| {
            let n = texts.len();
            let args = vec![
                ColumnarValue::Array(Arc::new(StringViewArray::from(texts.to_vec()))),
                ColumnarValue::Array(Arc::new(StringViewArray::from(titles.to_vec()))),
            ];
            call(&term_stats::TermStats::default(), args, n).into_array(n).unwrap()
        };
        let batch = stats(&texts, &titles);
        let batch = batch.as_list::<i32>();
        assert_eq!(batch.len(), rows);
        // Distinct terms, fewer than the words cut: more than a group's
        // words in each of the three chunks.
        let terms: usize = (0..rows).filter(|&i| !batch.is_null(i)).map(|i| batch.value(i).len()).sum();
        assert!(terms > 3 * 4096, "{terms} terms");
        for i in 0..rows {
            let alone = stats(&texts[i..=i], &titles[i..=i]);
            let alone = alone.as_list::<i32>();
            assert_eq!(batch.is_null(i), texts[i].is_none(), "row {i}");
            if !batch.is_null(i) {
                assert_eq!(&batch.value(i), &alone.value(0), "row {i}");
            }
        }
    }

    #[test]
    fn scalar_arguments_give_a_scalar() {
        let out = call(
            &hamming::Hamming::default(),
            vec![ColumnarValue::Scalar(ScalarValue::UInt64(Some(11))), ColumnarValue::Scalar(ScalarValue::UInt64(Some(1)))],
            1,
        );
        assert!(matches!(out, ColumnarValue::Scalar(ScalarValue::Int32(Some(2)))), "{out:?}");
    }

    #[test]
    fn band_keys_are_null_for_a_null_fingerprint() {
        let fps: ArrayRef = Arc::new(UInt64Array::from(vec![Some(u64::MAX), None]));
        let k = ColumnarValue::Scalar(ScalarValue::Int64(Some(3)));
        let m = ColumnarValue::Scalar(ScalarValue::Int64(Some(4)));
        let out = call(&band_keys::BandKeys::default(), vec![ColumnarValue::Array(fps), k, m], 2).into_array(2).unwrap();
        let list = out.as_list::<i32>();
        assert_eq!(list.value(0).len(), 4);
        assert!(list.is_null(1));
    }

    #[test]
    fn simhash_groups_merge_partial_states_exactly() {
        use datafusion::logical_expr::GroupsAccumulator;
        let hashes: Vec<u64> = (0..50u64).map(|i| hash64(&i.to_le_bytes())).collect();
        let weights: Vec<f64> = (0..50).map(|i| 0.5 + f64::from(i % 5)).collect();
        let expected = simhash(hashes.iter().copied().zip(weights.iter().copied()));
        // Two partial accumulators over halves, merged by a third.
        let mut parts = Vec::new();
        for range in [0..20, 20..50] {
            let mut acc = simhash_agg::SimhashGroups::default();
            let values: Vec<ArrayRef> = vec![
                Arc::new(UInt64Array::from(hashes[range.clone()].to_vec())),
                Arc::new(Float64Array::from(weights[range.clone()].to_vec())),
            ];
            acc.update_batch(&values, &vec![0; range.len()], None, 1).unwrap();
            parts.push(acc.state(EmitTo::All).unwrap().remove(0));
        }
        let mut merged = simhash_agg::SimhashGroups::default();
        for state in &parts {
            merged.merge_batch(std::slice::from_ref(state), &[0], 1).unwrap();
        }
        let out = merged.evaluate(EmitTo::All).unwrap();
        assert_eq!(out.as_primitive::<UInt64Type>().value(0), expected);
        assert_eq!(out.data_type(), &DataType::UInt64);
    }
}
