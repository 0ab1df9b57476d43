//! `neardup pairs`: the join and clustering over an existing fingerprint
//! table, with the stages a `dedup` run ends with.

use datafusion::arrow::datatypes::Schema;
use datafusion::prelude::SessionContext;

use super::config::{JoinOptions, KeepRule};
use super::inputs::{check_id, field};
use super::progress::{Progress, RunOptions};
use super::query::{collect, column_u64};
use super::candidates::minhash_expression;
use super::oneshot::join_stages;
use super::runner::finish;
use super::summary::{FingerprintSettings, InputSummary, RunCommand, Summary};
use super::sql::table;
use super::tables::{create_view, FileMetadata, METADATA_KEY};
use crate::error::{Error, Result};
use crate::session::{context, EngineOptions};
use crate::sets::{SharePolicy, Verify};
use crate::storage::{ident, literal, parquet_key_values, register_parquet, InputSpec, OutputDir};

/// A `pairs` run: the join and clustering over an existing fingerprint table.
#[derive(Debug, Clone)]
pub struct PairsSpec {
    pub fingerprints: InputSpec,
    pub output: String,
    pub overwrite: bool,
    pub join: JoinOptions,
    pub keep: String,
    pub engine: EngineOptions,
}

/// Run `neardup pairs`: the join and clustering over existing fingerprints.
pub async fn run_pairs(spec: &PairsSpec, options: &RunOptions) -> Result<Summary> {
    let keep = KeepRule::parse(&spec.keep)?;
    spec.join.validate()?;
    crate::storage::check_input_names(std::slice::from_ref(&spec.fingerprints))?;
    let ctx = context(&spec.engine).await?;
    let mut progress = Progress::new(options);
    let input = &spec.fingerprints;
    // Every file's footer, read once: the settings, MinHash plan and vectors
    // they record.
    let footers = parquet_key_values(&ctx, &input.url).await?;
    let settings = check_fingerprint_settings(&footers)?;
    let sketches = fingerprints_view(&ctx, spec, &keep, &footers).await?;
    // Fingerprints made before documents kept sketches cannot be held to a
    // policy: the default leaves it out, one asked for is refused (above).
    let mut join = spec.join.clone();
    if !sketches {
        join.min_shared = SharePolicy::Off;
    }
    let spec = &PairsSpec { join, ..spec.clone() };
    progress.done("inputs", format!("fingerprints from '{}'", input.url));
    let out = OutputDir::prepare(&ctx, &spec.output, spec.overwrite).await?;
    let result = async {
        let meta = settings.clone().map(|settings| FileMetadata { settings, idf_n_docs: None, idf_model: None, minhash: None, shingles: None, vectors: None, min_shared: spec.join.min_shared(), boilerplate_set: None });
        let mut summary = join_stages(&ctx, &spec.join, &keep, &out, (meta.as_ref(), None), &mut progress).await?;
        summary.command = RunCommand::Pairs;
        summary.output = out.url().to_string();
        summary.settings = settings;
        // The table's documents, whatever sources they carry.
        let batches = collect(&ctx, "SELECT count(*), count(*) - count(simhash) FROM fingerprints").await?;
        let (documents, documents_without_terms) = (column_u64(&batches[0], 0)?.value(0), column_u64(&batches[0], 1)?.value(0));
        summary.inputs =
            vec![InputSummary { name: input.name.clone(), url: input.url.clone(), documents, documents_without_terms }];
        summary.documents = documents;
        summary.documents_without_terms = documents_without_terms;
        Ok(summary)
    }
    .await;
    finish(out, result, progress, Some((&ctx, &spec.join))).await
}

/// The view `fingerprints` over the table `spec.fingerprints`, its columns
/// checked: what `dedup` would have made of the same documents. Says whether
/// the table has shingle sketches.
async fn fingerprints_view(ctx: &SessionContext, spec: &PairsSpec, keep: &KeepRule, footers: &Footers) -> Result<bool> {
    let input = &spec.fingerprints;
    let schema = register_parquet(ctx, "fingerprints_input", &input.url).await?;
    let simhash = field(&schema, "simhash", input, "fingerprint", "a column named simhash")?;
    if !simhash.data_type().is_integer() {
        return Err(Error::input(format!(
            "column 'simhash' of '{}' holds {}, but fingerprints must be 64-bit unsigned integers",
            input.url,
            simhash.data_type()
        )));
    }
    check_id(field(&schema, "id", input, "document id", "a column named id")?, input)?;
    let source = match schema.field_with_name("source") {
        Ok(_) => format!("COALESCE(CAST(source AS VARCHAR), {})", literal(&input.name)),
        Err(_) => literal(&input.name),
    };
    let extra = match keep {
        KeepRule::SmallestId => String::new(),
        KeepRule::Longest => {
            field(&schema, "n_chars", input, "keep rule 'longest'", "--keep smallest-id")?;
            ", n_chars".into()
        }
        KeepRule::Earliest(c) | KeepRule::Latest(c) => {
            field(&schema, c, input, "keep rule", "--keep")?;
            format!(", {} AS keep_key", ident(c))
        }
    };
    let minhash = minhash_column(spec, &schema, footers);
    let term_set = match schema.field_with_name("term_set") {
        Ok(_) => format!(", term_set, {minhash} AS minhash"),
        Err(_) if spec.join.verify != Verify::None => {
            return Err(Error::input(format!(
                "'{}' has no term_set column, which --verify and --candidates minhash compare: \
                 recompute the fingerprints with this version of neardup dedup",
                input.url
            )))
        }
        Err(_) => String::new(),
    };
    // Fingerprints made before documents kept shingle sketches have none:
    // their pairs' shares are NULL, and no policy can be applied to them.
    let shingles = match schema.field_with_name("shingles") {
        Ok(_) => ", shingles",
        Err(_) if matches!(spec.join.min_shared, SharePolicy::At(_)) => {
            return Err(Error::input(format!(
                "'{}' has no shingles column, which --min-shared measures: recompute the fingerprints \
                 with this version of neardup dedup, or drop --min-shared",
                input.url
            )))
        }
        Err(_) => ", CAST(NULL AS INT UNSIGNED[]) AS shingles",
    };
    // Fingerprints made without SimHash vectors (by a run that checked
    // term sets, or before documents kept them) cannot be checked by
    // SimHash-cosine.
    let vector = match kept_vectors(&schema, footers) {
        true => ", vector",
        false if spec.join.verify.reads_vectors() => {
            return Err(Error::input(format!(
                "'{}' has no SimHash vectors, which --verify {} compares: make the fingerprints with \
                 neardup dedup --verify {}, or check on term sets (--verify jaccard:T)",
                input.url, spec.join.verify, spec.join.verify
            )))
        }
        false => ", arrow_cast(NULL, 'FixedSizeBinary(64)') AS vector",
    };
    let query = format!(
        "SELECT {source} AS source, CAST(id AS VARCHAR) AS id, \
         CAST(simhash AS BIGINT UNSIGNED) AS simhash{term_set}{shingles}{vector}{extra} FROM fingerprints_input"
    );
    create_view(ctx, table::FINGERPRINTS, &query).await?;
    Ok(schema.field_with_name("shingles").is_ok())
}

/// Whether every file of the table keeps SimHash vectors: it has the
/// column, and its footer names their scheme (a run that did not keep them
/// wrote NULLs).
fn kept_vectors(schema: &Schema, footers: &Footers) -> bool {
    schema.field_with_name("vector").is_ok()
        && !footers.is_empty()
        && footers.iter().all(|f| metadata(f).is_some_and(|m| m.vectors.as_deref() == Some(crate::fingerprint::VECTOR_SCHEME)))
}

/// The footers of a table's files: each file's location and key-value metadata.
type Footers = Vec<(String, std::collections::HashMap<String, String>)>;

/// neardup's metadata in one file's footer, when it has readable metadata.
fn metadata((_, kv): &(String, std::collections::HashMap<String, String>)) -> Option<FileMetadata> {
    serde_json::from_str(kv.get(METADATA_KEY)?).ok()
}

/// The MinHash band keys of the table's documents: the file's own when made
/// with this run's plan, else computed here, once per document.
fn minhash_column(spec: &PairsSpec, schema: &Schema, footers: &Footers) -> String {
    let plan = spec.join.minhash_plan();
    let stored_plan = footers.iter().filter_map(metadata).map(|m| m.minhash).reduce(|a, b| if a == b { a } else { None }).flatten();
    if plan.is_some() && plan == stored_plan && schema.field_with_name("minhash").is_ok() {
        "minhash".to_string()
    } else {
        minhash_expression(plan, "term_set")
    }
}

/// The settings all files of a fingerprint table were made with; an error
/// if they differ. `None` for tables without neardup metadata.
fn check_fingerprint_settings(footers: &Footers) -> Result<Option<FingerprintSettings>> {
    let mut found: Option<(String, FingerprintSettings)> = None;
    for (file, kv) in footers {
        let Some(meta) = kv.get(METADATA_KEY) else { continue };
        let meta: FileMetadata = serde_json::from_str(meta)
            .map_err(|e| Error::input(format!("'{file}' has unreadable neardup metadata: {e}")))?;
        match &found {
            None => found = Some((file.clone(), meta.settings)),
            Some((first, seen)) if *seen != meta.settings => {
                let json = |s: &FingerprintSettings| serde_json::to_string(s).expect("settings serialise");
                return Err(Error::input(format!(
                    "fingerprints in '{first}' and '{file}' were made with different settings ({} vs {}): \
                     they cannot be compared; recompute one of them with the other's settings",
                    json(seen),
                    json(&meta.settings)
                )));
            }
            _ => {}
        }
    }
    Ok(found.map(|(_, settings)| settings))
}
