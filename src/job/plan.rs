//! A dry run's plan: the inputs, the output's state and the stages a run
//! would take, with nothing written.

use datafusion::prelude::SessionContext;

use super::context::Job;
use super::inputs::CheckedInputs;
use super::pipeline::Stage;
use super::query::scalar_u64;
use super::store_run::StoreRun;
use super::summary::{Plan, PlanInput, RunCommand, Summary};
use crate::error::Result;
use crate::storage::{ident, OutputDir};

/// A dry run: the inputs are registered and checked (columns, types,
/// Parquet files), the output is checked to be writable; nothing is
/// written. The plan lists `stages`, the list a real run executes.
pub(super) async fn dry_run(
    ctx: &SessionContext,
    job: &Job,
    command: RunCommand,
    stages: &[Stage],
    store: Option<&StoreRun>,
    overwrite: bool,
    checked: &CheckedInputs,
) -> Result<Summary> {
    job.analyzer_ready()?;
    let spec = &job.spec;
    let mut inputs = Vec::new();
    for (i, (input, files)) in spec.inputs.iter().zip(&checked.inputs).enumerate() {
        let rows = scalar_u64(ctx, &format!("SELECT count(*) FROM {}", ident(&format!("input_{i}")))).await?;
        inputs.push(PlanInput { name: input.name.clone(), url: input.url.clone(), files: files.files() as u64, bytes: files.bytes(), rows });
    }
    let output_action = OutputDir::check(ctx, &spec.output, overwrite).await?.to_string();
    let fp = &spec.fingerprint;
    let idf = match (&fp.idf_model, fp.weighting.needs_idf(), store) {
        (_, false, _) => "none (weighting without IDF)".to_string(),
        (Some(model), true, Some(s)) if s.manifest.is_some() => format!("the store's frozen model {model}"),
        (Some(model), true, _) => format!("saved model {model}"),
        (None, true, Some(_)) => "this run's documents (frozen into the new store)".to_string(),
        (None, true, None) => "this run's documents (corpus document frequencies)".to_string(),
    };
    Ok(Summary {
        neardup_version: env!("CARGO_PKG_VERSION").into(),
        command,
        output: spec.output.clone(),
        settings: Some(job.settings.clone()),
        keep: spec.keep.clone(),
        plan: Some(Plan { inputs, output: spec.output.clone(), output_action, idf, stages: stages.iter().map(|s| s.describe(job)).collect() }),
        ..Summary::default()
    })
}
