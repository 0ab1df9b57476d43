//! Coercion helpers for functions over fingerprints and counts.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{plan_err, Result};

/// Whether a value of type `t` may be cast to an integer or float argument.
fn is_numeric_like(t: &DataType) -> bool {
    t.is_numeric() || matches!(t, DataType::Null)
}

/// Coerce every argument to the matching `targets` type, naming the function
/// and argument when a type does not fit.
pub(crate) fn coerce_numeric(function: &str, names: &[&str], arg_types: &[DataType], targets: &[DataType]) -> Result<Vec<DataType>> {
    if arg_types.len() != targets.len() {
        return plan_err!("{function} takes {} arguments ({}), got {}", targets.len(), names.join(", "), arg_types.len());
    }
    arg_types
        .iter()
        .zip(targets)
        .zip(names)
        .map(|((t, target), name)| {
            if is_numeric_like(t) {
                Ok(target.clone())
            } else {
                plan_err!("{function}: argument '{name}' must be a number, got {t}")
            }
        })
        .collect()
}
