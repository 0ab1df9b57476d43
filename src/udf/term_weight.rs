//! `term_weight(t, df, n [, weighting [, formula]])`: the weight of one term
//! of a document, from its `term_stats` entry and its corpus frequency.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, Float64Builder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::cast::{as_float64_array, as_struct_array};
use datafusion::common::{exec_err, plan_err, DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::args::{doc, finish, is_string, scalar_str, to_arrays};
use super::term_stats::FactorColumns;
use crate::weight::{IdfFormula, Weighting};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TermWeight {
    signature: Signature,
}

impl Default for TermWeight {
    fn default() -> Self {
        TermWeight { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TermWeight {
    fn name(&self) -> &str {
        "term_weight"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(3..=5).contains(&arg_types.len()) {
            return plan_err!("term_weight takes 3 to 5 arguments (t, df, n [, weighting [, formula]]), got {}", arg_types.len());
        }
        let mut out = Vec::with_capacity(arg_types.len());
        match &arg_types[0] {
            t @ DataType::Struct(_) => out.push(t.clone()),
            other => return plan_err!("term_weight: argument 't' must be an element of term_stats, got {other}"),
        }
        for (name, t) in ["df", "n"].iter().zip(&arg_types[1..3]) {
            if !(t.is_numeric() || t == &DataType::Null) {
                return plan_err!("term_weight: argument '{name}' must be a number, got {t}");
            }
            out.push(DataType::Float64);
        }
        for t in &arg_types[3..] {
            if !is_string(t) {
                return plan_err!("term_weight: weighting and formula must be text, got {t}");
            }
            out.push(DataType::Utf8);
        }
        Ok(out)
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let weighting: Weighting = match scalar_str(&args.args, 3, self.name(), "weighting")? {
            Some(w) => w.parse().map_err(|e: String| DataFusionError::Execution(format!("term_weight: {e}")))?,
            None => Weighting::default(),
        };
        let formula: IdfFormula = match scalar_str(&args.args, 4, self.name(), "formula")? {
            Some(f) => f.parse().map_err(|e: String| DataFusionError::Execution(format!("term_weight: {e}")))?,
            None => IdfFormula::default(),
        };
        let (arrays, all_scalar) = to_arrays(&args.args[..3], args.number_rows)?;
        let stats = as_struct_array(&arrays[0])?;
        let (df, n) = (as_float64_array(&arrays[1])?, as_float64_array(&arrays[2])?);
        let factors = FactorColumns::of(stats, |name| {
            format!("term_weight: the term statistics have no field '{name}' (pass an element of term_stats)")
        })?;
        if weighting.needs_idf() && n.null_count() == n.len() {
            return exec_err!("term_weight: weighting '{weighting}' needs the corpus size n");
        }
        let mut out = Float64Builder::with_capacity(stats.len());
        for i in 0..stats.len() {
            // A row whose corpus size is unknown has no weight (as one
            // without statistics), rather than the weight of an idf of 0.
            if stats.is_null(i) || (weighting.needs_idf() && n.is_null(i)) {
                out.append_null();
                continue;
            }
            let factors = factors.get(i);
            // A term missing from the document frequencies counts as df = 1.
            let df = if df.is_valid(i) { df.value(i) } else { 1.0 };
            let idf = match weighting.needs_idf() {
                true if !(n.value(i).is_finite() && n.value(i) > 0.0) => {
                    return exec_err!("term_weight: 'n' must be a positive number of documents, got {}", n.value(i))
                }
                true => formula.idf(df, n.value(i)),
                false => 1.0,
            };
            out.append_value(weighting.weight(&factors, idf));
        }
        finish(Arc::new(out.finish()), all_scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            doc(
                "The weight of a term in a document's SimHash. Weighting 'improved' (default, \
                 paper 000): tf · idf · (1 + cx + len + logo + title); 'tfidf': tf · idf; 'tf': \
                 the raw count; 'none': 1. idf comes from df and n with the formula 'standard' \
                 (ln(n/df + 0.01), default) or 'df-plus-one' (ln(n/(df+1)), clamped at 0); a NULL \
                 df (a term unknown to the corpus statistics) counts as 1.",
                "term_weight(t, df, n [, weighting [, formula]])",
                "```sql\n> SELECT term_weight(t, 1, 10, 'tf') FROM (SELECT unnest(term_stats('北京 北京', NULL)) AS t);\n2.0\n```",
                &[
                    ("t", "An element of term_stats(...)."),
                    ("df", "Documents of the corpus containing the term (NULL: 1)."),
                    ("n", "Documents of the corpus with at least one term, positive (NULL: a NULL weight)."),
                    ("weighting", "none, tf, tfidf, improved (default), or improved:F+F… with only the factors named (pos, length, signal, title)."),
                    ("formula", "standard (default) or df-plus-one."),
                ],
            )
        }))
    }
}
