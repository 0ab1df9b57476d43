//! A dry run's plan: the inputs, the output's state and the stages a run
//! would take, with nothing written.

use datafusion::prelude::SessionContext;

use super::config::JobSpec;
use super::query::scalar_u64;
use super::store_run::StoreRun;
use super::summary::{FingerprintSettings, Plan, PlanInput, RunCommand, Summary};
use crate::error::Result;
use crate::storage::{ident, OutputDir};

/// A dry run: the inputs are registered and checked (columns, types,
/// Parquet files), the output is checked to be writable; nothing is written.
pub(super) async fn dry_run(
    ctx: &SessionContext,
    spec: &JobSpec,
    settings: &FingerprintSettings,
    with_join: bool,
    store: Option<&StoreRun>,
    overwrite: bool,
) -> Result<Summary> {
    let mut inputs = Vec::new();
    for (i, input) in spec.inputs.iter().enumerate() {
        let (_, files) = crate::storage::list_parquet_files(ctx, &input.url).await?;
        let rows = scalar_u64(ctx, &format!("SELECT count(*) FROM {}", ident(&format!("input_{i}")))).await?;
        inputs.push(PlanInput {
            name: input.name.clone(),
            url: input.url.clone(),
            files: files.len() as u64,
            bytes: files.iter().map(|f| f.size).sum(),
            rows,
        });
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
    let mut stages: Vec<&str> = vec!["segment (20_terms.sql)"];
    if fp.weighting.needs_idf() && fp.idf_model.is_none() {
        stages.push("corpus_df (31_corpus_df.sql)");
    }
    stages.push("fingerprints (40_fingerprints.sql)");
    if store.is_some() {
        stages.extend([
            "term sets (57_term_sets.sql)",
            "candidates of tonight's fingerprints (50_near_pairs.sql, 51_minhash_buckets.sql, 52_minhash_candidates.sql)",
            "verify (55_verified_pairs.sql)",
            "representatives, the run's partition (94_store_run.sql)",
            "report (95_store_clusters.sql, 70_pairs.sql)",
        ]);
    } else if with_join {
        stages.extend(["candidates (50_near_pairs.sql, 51_minhash_buckets.sql, 52_minhash_candidates.sql)", "verify (55_verified_pairs.sql)", "clusters (60_clusters.sql)", "pairs (70_pairs.sql)"]);
    }
    Ok(Summary {
        neardup_version: env!("CARGO_PKG_VERSION").into(),
        command: if with_join { RunCommand::Dedup } else { RunCommand::Fingerprint },
        output: spec.output.clone(),
        settings: Some(settings.clone()),
        keep: spec.keep.clone(),
        plan: Some(Plan { inputs, output: spec.output.clone(), output_action, idf, stages: stages.into_iter().map(String::from).collect() }),
        ..Summary::default()
    })
}
