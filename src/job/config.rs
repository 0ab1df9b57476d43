//! What a run does: the job spec, shared by the command line and job files.
//!
//! `neardup dedup` flags and a `neardup run JOB.toml` file fill the same
//! [`JobSpec`], so the two can never disagree about a setting or its default.
//! Unknown keys in a job file are errors (with their line), not silently
//! ignored.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::join::MAX_HAMMING;
use crate::session::EngineOptions;
use crate::minhash::MinHashPlan;
use crate::sets::{MinShared, SharePolicy, Verify};
use crate::storage::InputSpec;
use crate::text::{Analyzer, AnalyzerOptions, Mode};
use crate::weight::{IdfFormula, Weighting};

/// The defaults of a job's settings, each defined once: the command line
/// (src/cli.rs) and the job file (serde, here) both use these. Settings
/// whose type has a `Default` (the weighting, IDF formula, candidates,
/// MinHash plan) take it from there.
pub mod defaults {
    use crate::sets::{MinShared, Verify};

    pub const ID_COLUMN: &str = "id";
    pub const TEXT_COLUMN: &str = "text";
    pub const TOKENIZER: &str = "precise";
    pub const MAX_HAMMING: u32 = 3;
    /// The check of candidate pairs (chosen in docs/quality.md).
    pub const VERIFY: Verify = Verify::Jaccard(0.5);
    /// The duplication policy with a check: 70 % of the shorter document's
    /// text found in the other (chosen in docs/quality.md).
    pub const MIN_SHARED: MinShared = MinShared::SEVENTY_PERCENT;
    pub const KEEP: &str = "smallest-id";
    /// Lines found in this many documents are boilerplate (docs/quality.md,
    /// "Boilerplate lines by default").
    pub const BOILERPLATE_LINES: u32 = 10;
}

fn default_id() -> String {
    defaults::ID_COLUMN.into()
}
fn default_text() -> String {
    defaults::TEXT_COLUMN.into()
}
fn default_verify() -> Verify {
    defaults::VERIFY
}
fn default_tokenizer() -> String {
    defaults::TOKENIZER.into()
}
fn default_max_hamming() -> u32 {
    defaults::MAX_HAMMING
}

/// Which input columns hold what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Columns {
    #[serde(default = "default_id")]
    pub id: String,
    #[serde(default = "default_text")]
    pub text: String,
    /// Title column; when absent, `title` is used if the input has it; "" for none.
    pub title: Option<String>,
    /// Rows that repeat an id within an input: `error` or `keep-first`.
    #[serde(default)]
    pub duplicate_ids: DuplicateIds,
    /// An input file that cannot be read or has drifted from these columns:
    /// `error` or `skip`.
    #[serde(default)]
    pub on_bad_file: OnBadFile,
}

impl Default for Columns {
    fn default() -> Self {
        Columns { id: default_id(), text: default_text(), title: None, duplicate_ids: DuplicateIds::Error, on_bad_file: OnBadFile::Error }
    }
}

/// What to do with rows that repeat a (source, id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DuplicateIds {
    /// Refuse the input (exit code 2), naming the ids.
    #[default]
    #[serde(rename = "error")]
    Error,
    /// Keep one row per id (the smallest text, then title), drop the others
    /// and count them in the summary.
    #[serde(rename = "keep-first")]
    KeepFirst,
}

/// What to do with an input file that cannot be used: damaged, not
/// Parquet, or drifted (the id or text column missing, or of a type the run
/// cannot read as such).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnBadFile {
    /// Refuse the run (exit code 2), naming the file, column and type.
    #[default]
    #[serde(rename = "error")]
    Error,
    /// Leave the file out, name it in the summary (`skipped_files`) and the
    /// log, and exit 3: done, but partial.
    #[serde(rename = "skip")]
    Skip,
}

/// How fingerprints are made. Every field changes every fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FingerprintOptions {
    #[serde(default = "default_tokenizer")]
    pub tokenizer: String,
    #[serde(default)]
    pub weighting: Weighting,
    #[serde(default)]
    pub idf: IdfFormula,
    /// jieba user dictionary (`word [freq] [tag]` per line).
    pub user_dict: Option<String>,
    /// Stop-word list replacing the built-in one (one word per line).
    pub stopwords: Option<String>,
    /// Signal-word list replacing the built-in one (one word per line).
    pub signal_words: Option<String>,
    /// Load document frequencies from this saved IDF model instead of computing them.
    pub idf_model: Option<String>,
    /// Save the corpus document frequencies as an IDF model here.
    pub save_idf_model: Option<String>,
    /// Let only the K heaviest terms of each document vote in its SimHash
    /// (all terms when absent).
    pub top_k: Option<u32>,
    /// Drop lines found in at least this many documents (boilerplate)
    /// before segmentation: [`defaults::BOILERPLATE_LINES`] when absent
    /// (a store's own rule, for a night), off at 0.
    pub boilerplate_lines: Option<u32>,
    /// Drop the lines of this frozen set (Parquet, a `line_hash` column: a
    /// store's `idf/boilerplate.parquet`) instead of counting them over
    /// this run's documents; `boilerplate_lines` names the rule it was
    /// counted under.
    pub boilerplate_set: Option<String>,
}

impl Default for FingerprintOptions {
    fn default() -> Self {
        FingerprintOptions {
            tokenizer: default_tokenizer(),
            weighting: Weighting::default(),
            idf: IdfFormula::default(),
            user_dict: None,
            stopwords: None,
            signal_words: None,
            idf_model: None,
            save_idf_model: None,
            top_k: None,
            boilerplate_lines: None,
            boilerplate_set: None,
        }
    }
}

impl FingerprintOptions {
    /// The documents a line must be found in to be boilerplate; none: off.
    pub fn boilerplate_min_docs(&self) -> Option<u32> {
        match self.boilerplate_lines.unwrap_or(defaults::BOILERPLATE_LINES) {
            0 => None,
            n => Some(n),
        }
    }

    pub fn mode(&self) -> Result<Mode> {
        self.tokenizer.parse().map_err(Error::input)
    }

    pub fn analyzer_options(&self) -> AnalyzerOptions {
        AnalyzerOptions {
            user_dict: self.user_dict.clone(),
            stopwords: self.stopwords.clone(),
            signal_words: self.signal_words.clone(),
        }
    }
}

/// How pairs are found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinOptions {
    /// Largest Hamming distance reported as a near duplicate.
    #[serde(default = "default_max_hamming")]
    pub max_hamming: u32,
    /// Blocks the 64 bits are cut into for the banded join (more than
    /// max_hamming); chosen from the corpus size when absent.
    pub blocks: Option<u32>,
    /// Where candidate pairs come from.
    #[serde(default)]
    pub candidates: Candidates,
    /// MinHash bands × rows, when candidates include MinHash.
    #[serde(default)]
    pub minhash: MinHashPlan,
    /// How candidates are checked: `none`, `jaccard:T` or `overlap:T` on
    /// their term sets, `cosine:T` on their SimHash vectors (MinHash
    /// candidates need a check).
    #[serde(default = "default_verify")]
    pub verify: Verify,
    /// The duplication policy asked for: the share of the shorter
    /// document's text that must be found in the other, none, or the default
    /// ([`JoinOptions::min_shared`] resolves it).
    #[serde(default, skip_serializing_if = "is_default_policy")]
    pub min_shared: SharePolicy,
}

fn is_default_policy(p: &SharePolicy) -> bool {
    *p == SharePolicy::Default
}

/// Where candidate pairs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Candidates {
    /// Fingerprints within Hamming distance k (the banded self-join).
    #[serde(rename = "simhash")]
    Simhash,
    /// Term sets sharing a MinHash LSH band.
    #[serde(rename = "minhash")]
    Minhash,
    /// Both: fingerprints within k, and term sets sharing a MinHash band.
    #[default]
    #[serde(rename = "simhash+minhash")]
    Both,
}

impl Candidates {
    pub fn simhash(self) -> bool {
        matches!(self, Candidates::Simhash | Candidates::Both)
    }
    pub fn minhash(self) -> bool {
        matches!(self, Candidates::Minhash | Candidates::Both)
    }
}

impl Default for JoinOptions {
    fn default() -> Self {
        JoinOptions {
            max_hamming: default_max_hamming(),
            blocks: None,
            candidates: Candidates::default(),
            minhash: MinHashPlan::default(),
            verify: default_verify(),
            min_shared: SharePolicy::Default,
        }
    }
}

impl JoinOptions {
    /// The MinHash plan, when MinHash finds candidates.
    pub fn minhash_plan(&self) -> Option<MinHashPlan> {
        self.candidates.minhash().then_some(self.minhash)
    }

    /// The duplication policy the run applies: the one asked for, or by
    /// default [`defaults::MIN_SHARED`] when candidates are checked (the
    /// policy is part of the check, and there is none without one).
    pub fn min_shared(&self) -> Option<MinShared> {
        match self.min_shared {
            SharePolicy::Default => self.verify.measure().map(|_| defaults::MIN_SHARED),
            SharePolicy::Off => None,
            SharePolicy::At(s) => Some(s),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.max_hamming > MAX_HAMMING {
            return Err(Error::input(format!(
                "max Hamming distance {} is too large: use 0 to {MAX_HAMMING} (3 is the default)",
                self.max_hamming
            )));
        }
        if let Some(m) = self.blocks {
            crate::join::BandPlan::new(self.max_hamming, m).map_err(Error::input)?;
        }
        if self.candidates.minhash() && self.verify == Verify::None {
            return Err(Error::input(
                "MinHash candidates must be checked: give --verify jaccard:T, overlap:T or cosine:T \
                 (the default is jaccard:0.5), or use --candidates simhash",
            ));
        }
        if matches!(self.min_shared, SharePolicy::At(_)) && self.verify == Verify::None {
            return Err(Error::input(
                "--min-shared is applied with the check of candidates: give --verify jaccard:T, overlap:T or cosine:T \
                 (the default is jaccard:0.5) beside it",
            ));
        }
        Ok(())
    }
}

/// Which document of a cluster is kept as its representative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepRule {
    /// The smallest (source, id).
    SmallestId,
    /// The longest text (in characters); ties by smallest (source, id).
    Longest,
    /// The smallest value of a column (e.g. the earliest date); ties by (source, id).
    Earliest(String),
    /// The largest value of a column (e.g. the latest date); ties by (source, id).
    Latest(String),
}

impl KeepRule {
    pub fn parse(s: &str) -> Result<KeepRule> {
        let s = s.trim();
        match s {
            "smallest-id" | "" => Ok(KeepRule::SmallestId),
            "longest" => Ok(KeepRule::Longest),
            _ => match s.split_once(':') {
                Some(("earliest", col)) if !col.is_empty() => Ok(KeepRule::Earliest(col.to_string())),
                Some(("latest", col)) if !col.is_empty() => Ok(KeepRule::Latest(col.to_string())),
                _ => Err(Error::input(format!(
                    "unknown keep rule '{s}': use smallest-id, longest, earliest:COLUMN or latest:COLUMN"
                ))),
            },
        }
    }

    /// The input column the rule reads, if any.
    pub fn column(&self) -> Option<&str> {
        match self {
            KeepRule::Earliest(c) | KeepRule::Latest(c) => Some(c),
            _ => None,
        }
    }

    /// The fingerprints' columns the rule orders by besides (source, id).
    pub fn columns(&self) -> &'static [&'static str] {
        match self {
            KeepRule::SmallestId => &[],
            KeepRule::Longest => &["n_chars"],
            KeepRule::Earliest(_) | KeepRule::Latest(_) => &["keep_key"],
        }
    }

    /// [`KeepRule::columns`] as the tail of a column list (`, n_chars`).
    pub fn column_list(&self) -> String {
        self.columns().iter().map(|c| format!(", {c}")).collect()
    }

    /// ORDER BY of a cluster's members, best first (over the fingerprints table).
    pub fn order_by(&self) -> &'static str {
        match self {
            KeepRule::SmallestId => "source, id",
            KeepRule::Longest => "n_chars DESC, source, id",
            KeepRule::Earliest(_) => "keep_key ASC NULLS LAST, source, id",
            KeepRule::Latest(_) => "keep_key DESC NULLS LAST, source, id",
        }
    }
}

impl std::fmt::Display for KeepRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeepRule::SmallestId => f.write_str("smallest-id"),
            KeepRule::Longest => f.write_str("longest"),
            KeepRule::Earliest(c) => write!(f, "earliest:{c}"),
            KeepRule::Latest(c) => write!(f, "latest:{c}"),
        }
    }
}

fn default_keep() -> String {
    defaults::KEEP.into()
}

/// A whole `dedup` run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Input datasets, read as one corpus.
    #[serde(rename = "input", default)]
    pub inputs: Vec<InputSpec>,
    /// Output folder.
    pub output: String,
    /// Replace an existing output folder.
    #[serde(default)]
    pub overwrite: bool,
    #[serde(default)]
    pub columns: Columns,
    #[serde(default)]
    pub fingerprint: FingerprintOptions,
    #[serde(default)]
    pub join: JoinOptions,
    /// Keep rule: smallest-id, longest, earliest:COLUMN or latest:COLUMN.
    #[serde(default = "default_keep")]
    pub keep: String,
    /// Also write the surviving input rows, all columns, under survivors/SOURCE/.
    #[serde(default)]
    pub survivors: bool,
    #[serde(default)]
    pub engine: EngineOptions,
    /// Nightly runs: dedup the inputs against a fingerprint store and append them to it.
    pub store: Option<StoreOptions>,
}

/// The fingerprint store of nightly (incremental) runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreOptions {
    /// The store's folder (a path or an object-store URL).
    pub url: String,
    /// This night's id: letters, digits, '.', '_' and '-' (e.g. the date).
    /// Usually given with --run-id or NEARDUP_RUN_ID.
    pub run_id: Option<String>,
}

/// Whether `id` may name a run: it becomes a folder name and sorts the runs.
pub fn check_run_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::input(format!(
            "run id '{id}' is not valid: use up to 128 letters, digits, '.', '_' and '-' (e.g. the date, 2026-11-22), \
             not starting with '.'"
        )))
    }
}

impl JobSpec {
    /// Read a job file. Relative paths in it are relative to the file's folder.
    pub fn from_file(path: &Path) -> Result<JobSpec> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::input(format!("cannot read job file '{}': {e}", path.display())))?;
        let mut spec: JobSpec = toml::from_str(&text)
            .map_err(|e| Error::input(format!("job file '{}' is invalid: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new(""));
        let resolve = |p: &mut String| {
            if !p.contains("://") && Path::new(p.as_str()).is_relative() {
                *p = base.join(p.as_str()).display().to_string();
            }
        };
        for input in &mut spec.inputs {
            resolve(&mut input.url);
        }
        resolve(&mut spec.output);
        if let Some(store) = &mut spec.store {
            resolve(&mut store.url);
        }
        let f = &mut spec.fingerprint;
        for p in [&mut f.user_dict, &mut f.stopwords, &mut f.signal_words, &mut f.idf_model, &mut f.save_idf_model, &mut f.boilerplate_set]
            .into_iter()
            .flatten()
        {
            resolve(p);
        }
        if let Some(tls) = &mut spec.engine.tls {
            for p in [&mut tls.ca, &mut tls.cert, &mut tls.key] {
                if p.is_relative() {
                    *p = base.join(&*p);
                }
            }
        }
        Ok(spec)
    }

    /// Set the run id of a store run (from --run-id or NEARDUP_RUN_ID, which
    /// win over the job file) and put it in place of `{run_id}` in the input
    /// locations and the output folder.
    pub fn apply_run_id(&mut self, run_id: Option<String>) -> Result<()> {
        if let (Some(store), Some(id)) = (&mut self.store, run_id.filter(|id| !id.is_empty())) {
            store.run_id = Some(id);
        }
        let id = match &self.store {
            Some(StoreOptions { run_id: Some(id), .. }) => id.clone(),
            Some(StoreOptions { run_id: None, .. }) => {
                return Err(Error::input(
                    "a store run needs a run id: pass --run-id ID (or set NEARDUP_RUN_ID), e.g. the date of the crawl",
                ))
            }
            None => {
                if self.output.contains("{run_id}") || self.inputs.iter().any(|i| i.url.contains("{run_id}")) {
                    return Err(Error::input("'{run_id}' appears in a path, but there is no [store] section to give it"));
                }
                return Ok(());
            }
        };
        check_run_id(&id)?;
        self.output = self.output.replace("{run_id}", &id);
        for input in &mut self.inputs {
            input.url = input.url.replace("{run_id}", &id);
        }
        Ok(())
    }

    /// Check every setting that can be checked before reading data, and
    /// return those it parsed ([`crate::job::Job`] holds them).
    pub fn validate(&self) -> Result<Checked> {
        crate::storage::check_input_names(&self.inputs)?;
        let tokenizer = self.fingerprint.mode()?;
        if self.fingerprint.boilerplate_lines == Some(1) {
            return Err(Error::input("boilerplate_lines must be at least 2 (or 0: off): a line in one document is no boilerplate"));
        }
        if let (Some(set), None) = (&self.fingerprint.boilerplate_set, self.fingerprint.boilerplate_min_docs()) {
            return Err(Error::input(format!(
                "boilerplate_set ('{set}') needs boilerplate lines: they are off (boilerplate_lines = 0); give the N \
                 the set was counted with (a store's settings name it, e.g. lines-in>=10-docs)"
            )));
        }
        if self.fingerprint.top_k == Some(0) {
            return Err(Error::input("top_k = 0 would leave every fingerprint empty: give a positive K, or none for all terms"));
        }
        self.join.validate()?;
        let keep = KeepRule::parse(&self.keep)?;
        // Building the analyzer reads the dictionary and word lists (about
        // 0.1 s). It starts now, beside the checks of the inputs and the
        // stages before segmentation, which waits for it
        // (Job::analyzer_ready): a bad path is reported there, not from deep
        // inside a query.
        let tags = self.fingerprint.weighting.needs_pos() && tokenizer == Mode::Precise;
        Analyzer::build_in_background(&self.fingerprint.analyzer_options().to_options_string(), tags);
        if let (Some(a), Some(b)) = (&self.fingerprint.idf_model, &self.fingerprint.save_idf_model) {
            return Err(Error::input(format!(
                "both idf_model ('{a}') and save_idf_model ('{b}') are set: load a model or save one, not both"
            )));
        }
        if let Some(store) = &self.store {
            check_run_id(store.run_id.as_deref().unwrap_or_default())?;
            if let Some(set) = &self.fingerprint.boilerplate_set {
                return Err(Error::input(format!(
                    "boilerplate_set ('{set}') cannot be used with a store: the store freezes the line set of its \
                     first night in idf/boilerplate.parquet, and every night uses that"
                )));
            }
            if self.fingerprint.save_idf_model.is_some() {
                return Err(Error::input(
                    "save_idf_model cannot be used with a store: the store keeps its frozen IDF model in idf/",
                ));
            }
            if self.survivors {
                return Err(Error::input("survivors cannot be used with a store yet: use the report's clusters/"));
            }
        }
        if self.fingerprint.idf_model.is_some() && !self.fingerprint.weighting.needs_idf() {
            return Err(Error::input(format!(
                "an IDF model is given but weighting '{}' uses no IDF: drop the model or use tfidf/improved",
                self.fingerprint.weighting
            )));
        }
        Ok(Checked { keep, tokenizer })
    }
}

/// The settings [`JobSpec::validate`] parses from their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub keep: KeepRule,
    pub tokenizer: Mode,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_file_defaults_and_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        let text = "output = \"out\"\n[[input]]\nname = \"a\"\nurl = \"data/a.parquet\"\n\
                    [fingerprint]\nuser_dict = \"words.txt\"\nboilerplate_set = \"lines.parquet\"\nidf_model = \"s3://b/idf.parquet\"\n";
        std::fs::write(&path, text).unwrap();
        let spec = JobSpec::from_file(&path).unwrap();
        assert_eq!(spec.inputs[0].url, dir.path().join("data/a.parquet").display().to_string());
        assert_eq!(spec.output, dir.path().join("out").display().to_string());
        // Every path in the file, relative to its folder; URLs as they are.
        let f = &spec.fingerprint;
        assert_eq!(f.user_dict.as_deref(), Some(dir.path().join("words.txt").display().to_string().as_str()));
        assert_eq!(f.boilerplate_set.as_deref(), Some(dir.path().join("lines.parquet").display().to_string().as_str()));
        assert_eq!(f.idf_model.as_deref(), Some("s3://b/idf.parquet"));
        assert_eq!(spec.join.max_hamming, 3);
        assert_eq!(spec.fingerprint.weighting, Weighting::IMPROVED);
        assert_eq!(spec.validate().unwrap(), Checked { keep: KeepRule::SmallestId, tokenizer: Mode::Precise });
    }

    #[test]
    fn unknown_keys_are_reported_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(&path, "output = \"out\"\n\n[join]\nmax_haming = 4\n").unwrap();
        let err = JobSpec::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("max_haming") && err.contains("line 4"), "{err}");
    }

    #[test]
    fn wrong_types_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(&path, "output = \"out\"\n[join]\nmax_hamming = \"three\"\n").unwrap();
        let err = JobSpec::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("max_hamming"), "{err}");
    }

    #[test]
    fn keep_rules() {
        assert_eq!(KeepRule::parse("latest:date").unwrap(), KeepRule::Latest("date".into()));
        assert_eq!(KeepRule::parse("longest").unwrap().to_string(), "longest");
        assert!(KeepRule::parse("newest").is_err());
    }
}
