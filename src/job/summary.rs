//! `summary.json`: what a run read, found and wrote, with which settings and
//! how long each stage took. Written with the outputs and printed at the end.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fingerprint::HASH_NAME;
use crate::job::config::FingerprintOptions;
use crate::join::BandPlan;

/// Everything that determines a fingerprint. Stored in the Parquet
/// key-value metadata of fingerprints and IDF models (key `neardup`, field
/// `settings`); tables
/// made with different settings are never compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FingerprintSettings {
    pub hash: String,
    pub normalization: String,
    pub tokenizer: String,
    pub weighting: String,
    pub idf: String,
    /// `builtin`, or `xxh3:<digest of the file's bytes>`.
    pub stopwords: String,
    pub signal_words: String,
    pub user_dict: String,
    /// Terms voting per document: `all`, or the K heaviest.
    #[serde(default = "all_terms")]
    pub top_k: String,
    /// `none`, or `lines-in>=N-docs`: lines dropped as boilerplate.
    #[serde(default = "no_boilerplate")]
    pub boilerplate: String,
}

/// The boilerplate setting of lines found in `min_docs` documents (none: off).
pub fn boilerplate_rule(min_docs: Option<u32>) -> String {
    min_docs.map_or_else(no_boilerplate, |n| format!("lines-in>={n}-docs"))
}

/// The documents of a boilerplate setting ([`boilerplate_rule`]): 0 for off, none for a rule this version does not know.
pub fn parse_boilerplate_rule(rule: &str) -> Option<u32> {
    match rule {
        "none" => Some(0),
        _ => rule.strip_prefix("lines-in>=")?.strip_suffix("-docs")?.parse().ok(),
    }
}

fn no_boilerplate() -> String {
    "none".into()
}

fn all_terms() -> String {
    "all".into()
}

/// How much text the reported pairs share: the share of each pair's
/// shorter document found in the other (the larger of `shared_a` and
/// `shared_b`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharedText {
    /// How shares are measured ([`crate::text::shingles::SKETCH_SCHEME`]).
    pub measure: String,
    /// Pairs by share, in ten bins: `[0, 0.1)`, `[0.1, 0.2)` … `[0.9, 1]`.
    pub pairs_by_share: Vec<u64>,
    /// Pairs whose share could not be measured (a side without a sketch).
    pub unmeasured: u64,
}

/// `xxh3:<digest>` of some bytes: the identity of a word list or an IDF model by content.
pub fn content_identity(bytes: &[u8]) -> String {
    format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

/// Identify a word-list file by its content, so the same list on two
/// machines (at different paths) is recognised as the same.
pub fn file_identity(path: &Option<String>) -> String {
    match path {
        None => "builtin".into(),
        Some(p) => match std::fs::read(p) {
            Ok(bytes) => content_identity(&bytes),
            Err(_) => format!("unreadable:{p}"),
        },
    }
}

impl FingerprintSettings {
    pub fn of(options: &FingerprintOptions) -> FingerprintSettings {
        FingerprintSettings {
            hash: HASH_NAME.into(),
            normalization: "nfkc,lowercase,collapse-whitespace,no-space-between-han".into(),
            tokenizer: options.tokenizer.clone(),
            weighting: options.weighting.to_string(),
            idf: options.idf.to_string(),
            stopwords: file_identity(&options.stopwords),
            signal_words: file_identity(&options.signal_words),
            user_dict: match &options.user_dict {
                None => "none".into(),
                some => file_identity(some),
            },
            top_k: options.top_k.map_or_else(all_terms, |k| k.to_string()),
            boilerplate: boilerplate_rule(options.boilerplate_min_docs()),
        }
    }

    /// The settings that determine an IDF model's terms (not its use).
    pub fn for_idf_model(&self) -> FingerprintSettings {
        FingerprintSettings {
            weighting: "-".into(),
            idf: "-".into(),
            signal_words: "-".into(),
            top_k: "-".into(),
            ..self.clone()
        }
    }
}

/// Counts of one input.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InputSummary {
    pub name: String,
    pub url: String,
    pub documents: u64,
    pub documents_without_terms: u64,
}

/// An input file a run left out (`--on-bad-file skip`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFile {
    /// The input's name.
    pub input: String,
    /// The file's path or URL.
    pub file: String,
    /// Why it could not be used, and what to do about it.
    pub reason: String,
}

/// The command a summary reports on, as `summary.json` names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunCommand {
    #[default]
    Dedup,
    Fingerprint,
    Pairs,
}

impl std::fmt::Display for RunCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunCommand::Dedup => "dedup",
            RunCommand::Fingerprint => "fingerprint",
            RunCommand::Pairs => "pairs",
        })
    }
}

/// The run's summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub neardup_version: String,
    pub command: RunCommand,
    pub output: String,
    pub inputs: Vec<InputSummary>,
    pub documents: u64,
    pub documents_without_terms: u64,
    /// Input rows dropped because they repeat an id (`--duplicate-ids keep-first`).
    #[serde(default)]
    pub duplicate_ids_dropped: u64,
    /// Input files left out by `--on-bad-file skip`, each with why: a run
    /// that skipped any is partial (exit code 3).
    #[serde(default)]
    pub skipped_files: Vec<SkippedFile>,
    pub distinct_fingerprints: u64,
    /// Distinct lines dropped as boilerplate (with boilerplate_lines set).
    #[serde(default)]
    pub boilerplate_lines: u64,
    /// Near pairs of distinct fingerprints: candidates that passed the
    /// check and the duplication policy.
    pub near_fingerprint_pairs: u64,
    /// Candidate pairs that passed the check, before the duplication policy
    /// (`candidate_pairs` without a check).
    #[serde(default)]
    pub checked_pairs: u64,
    /// Rows of pairs/.
    pub pairs: u64,
    pub clusters: u64,
    pub documents_in_clusters: u64,
    /// Documents that are not their cluster's representative.
    pub duplicates: u64,
    pub settings: Option<FingerprintSettings>,
    pub max_hamming: u32,
    pub band_plan: Option<BandPlanSummary>,
    /// `simhash` (banded join within max_hamming) or `minhash:BxR`.
    #[serde(default)]
    pub candidates: String,
    /// Candidate pairs before verification.
    #[serde(default)]
    pub candidate_pairs: u64,
    /// `none`, `jaccard:T` or `overlap:T`.
    #[serde(default)]
    pub verify: String,
    /// The duplication policy: the share of the shorter document's text a
    /// pair must share (`--min-shared`; null: the check alone decides).
    #[serde(default)]
    pub min_shared: Option<crate::sets::MinShared>,
    /// How much text the pairs share (`shared_a`, `shared_b` of pairs/).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_text: Option<SharedText>,
    /// Documents with another's fingerprint whose term set failed the
    /// check against their group's first document (left unclustered).
    #[serde(default)]
    pub unconfirmed_copies: u64,
    pub keep: String,
    pub idf: Option<IdfSummary>,
    /// Store runs: the store, the run and what it added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreSummary>,
    /// Dry runs: what the run would read, do and write (nothing was written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Candidates the check rejected a little below its threshold (for
    /// report.html; they are in no output table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_misses: Option<super::report::NearMisses>,
    /// The inputs' id and text columns (for drawing the report again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<super::config::Columns>,
    /// Where a one-shot run kept its work tables: `memory` or `files`
    /// (`--work-tables`; chosen by the inputs' size under `auto` and a
    /// memory limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_tables: Option<crate::session::WorkTables>,
    pub timings_ms: BTreeMap<String, u64>,
    pub total_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BandPlanSummary {
    pub k: u32,
    pub m: u32,
    pub bands: usize,
    pub min_key_bits: u32,
    pub chosen: String,
}

impl BandPlanSummary {
    pub fn of(plan: &BandPlan, auto: bool) -> BandPlanSummary {
        BandPlanSummary {
            k: plan.k,
            m: plan.m,
            bands: plan.bands(),
            min_key_bits: plan.min_key_bits,
            chosen: if auto { "auto".into() } else { "given".into() },
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdfSummary {
    /// `corpus` (computed in this run) or the path of the loaded model.
    pub source: String,
    pub n_docs: u64,
    pub terms: u64,
    pub saved_to: Option<String>,
}

/// What a store run adds to the summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoreSummary {
    pub url: String,
    pub run_id: String,
    /// Committed runs before this one that it was compared with.
    pub earlier_runs: u64,
    /// Documents of those runs.
    pub stored_documents: u64,
    /// Input documents whose (source, id) an earlier run already holds: skipped.
    pub already_stored: u64,
    /// Documents this run added to the store.
    pub added: u64,
    /// Of those, the duplicates whose representative is in an earlier run.
    pub duplicates_of_stored: u64,
    /// The frozen IDF model (`xxh3:<digest>`), and whether this run created the store.
    pub idf_model: String,
    pub created: bool,
    /// What this run read of the earlier runs, and how long each store stage took.
    #[serde(default)]
    pub read: StoreReads,
}

/// What a night read of its store: the compact columns of every stored row
/// (the probe), then whole rows of the fingerprints it touches only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreReads {
    /// Bytes of the earlier runs' files, all columns.
    pub store_bytes: u64,
    /// Bytes the probe scanned (the compact columns simhash, minhash, doc_key).
    pub probe_bytes: u64,
    /// Bytes fetched for touched fingerprints and already stored documents
    /// (pages, footers and page indexes), and the objects they came from.
    pub fetch_bytes: u64,
    pub fetch_objects: u64,
    /// Stored fingerprints tonight touches, and the stored rows fetched for them.
    pub touched_fingerprints: u64,
    pub fetched_rows: u64,
    /// Milliseconds of each store stage: finding already stored documents,
    /// the probe, the fetch.
    pub already_stored_ms: u64,
    pub probe_ms: u64,
    pub fetch_ms: u64,
}

/// A dry run's plan.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Plan {
    pub inputs: Vec<PlanInput>,
    pub output: String,
    /// `create` or `replace`.
    pub output_action: String,
    /// Where document frequencies come from.
    pub idf: String,
    pub stages: Vec<String>,
}

/// One input of a dry run's plan.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PlanInput {
    pub name: String,
    pub url: String,
    pub files: u64,
    pub bytes: u64,
    pub rows: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boilerplate_rule_reads_back() {
        for n in [None, Some(2), Some(10)] {
            assert_eq!(parse_boilerplate_rule(&boilerplate_rule(n)), Some(n.unwrap_or(0)));
        }
        assert_eq!(parse_boilerplate_rule("lines-in>=x-docs"), None);
        assert_eq!(parse_boilerplate_rule("paragraphs"), None);
    }
}
