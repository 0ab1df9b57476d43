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
mod first_common_band;
mod hamming;
mod hash64;
mod idf;
mod numeric;
mod simhash;
mod simhash_agg;
mod simhash_similarity;
mod term_stats;
mod tokenize;
mod tokenize_tagged;

pub use term_stats::term_fields;

/// Every scalar function of neardup.
pub fn scalar_functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Arc::new(ScalarUDF::from(tokenize::Tokenize::default())),
        Arc::new(ScalarUDF::from(tokenize_tagged::TokenizeTagged::default())),
        Arc::new(ScalarUDF::from(term_stats::TermStats::default())),
        Arc::new(ScalarUDF::from(idf::Idf::default())),
        Arc::new(ScalarUDF::from(hash64::Hash64::default())),
        Arc::new(ScalarUDF::from(simhash::Simhash::default())),
        Arc::new(ScalarUDF::from(hamming::Hamming::default())),
        Arc::new(ScalarUDF::from(simhash_similarity::SimhashSimilarity::default())),
        Arc::new(ScalarUDF::from(band_keys::BandKeys::default())),
        Arc::new(ScalarUDF::from(first_common_band::FirstCommonBand::default())),
    ]
}

/// Every aggregate function of neardup.
pub fn aggregate_functions() -> Vec<Arc<AggregateUDF>> {
    vec![Arc::new(AggregateUDF::from(simhash_agg::SimhashAgg::default()))]
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
