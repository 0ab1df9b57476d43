//! What a run's stages share: the job with its settings parsed once
//! ([`Job`]) and the run's session, output and progress ([`Run`]).

use datafusion::prelude::SessionContext;

use super::config::{JobSpec, KeepRule};
use super::progress::Progress;
use super::summary::FingerprintSettings;
use crate::error::Result;
use crate::minhash::MinHashPlan;
use crate::storage::OutputDir;
use crate::text::Mode;

/// A job whose settings are parsed and checked once, before any data is
/// read: later code never parses a setting again.
#[derive(Debug, Clone)]
pub struct Job {
    pub spec: JobSpec,
    pub keep: KeepRule,
    pub tokenizer: Mode,
    /// The settings fingerprints are comparable under (hashes the word lists).
    pub settings: FingerprintSettings,
    /// Whether documents keep their SimHash vectors: when the check compares
    /// them (`--verify cosine:T`), or the store keeps them. Elsewhere the
    /// column is NULL: writing and carrying 64 bytes a document cost a
    /// Weibo run 9 % for a check it does not make.
    pub vectors: bool,
}

impl Job {
    /// The job with its duplication policy settled (a store's own, for one).
    pub fn with_min_shared(&self, policy: Option<crate::sets::MinShared>) -> Job {
        let mut job = self.clone();
        job.spec.join.min_shared = policy.map_or(crate::sets::SharePolicy::Off, crate::sets::SharePolicy::At);
        job
    }

    /// The job dropping the boilerplate lines of `min_docs` documents (0:
    /// none), as its store does.
    pub fn with_boilerplate_lines(&self, min_docs: u32) -> Job {
        let mut job = self.clone();
        job.spec.fingerprint.boilerplate_lines = Some(min_docs);
        job.settings.boilerplate = super::summary::boilerplate_rule(job.spec.fingerprint.boilerplate_min_docs());
        job
    }

    /// The job keeping SimHash vectors or not (as its store does).
    pub fn with_vectors(&self, vectors: bool) -> Job {
        Job { vectors, ..self.clone() }
    }

    /// The scheme of the documents' SimHash vectors, when they keep them.
    pub fn vector_scheme(&self) -> Option<String> {
        self.vectors.then(|| crate::fingerprint::VECTOR_SCHEME.to_string())
    }

    /// `spec` checked ([`JobSpec::validate`]) and parsed.
    pub fn new(spec: &JobSpec) -> Result<Job> {
        let checked = spec.validate()?;
        Ok(Job {
            keep: checked.keep,
            tokenizer: checked.tokenizer,
            settings: FingerprintSettings::of(&spec.fingerprint),
            vectors: spec.join.verify.reads_vectors(),
            spec: spec.clone(),
        })
    }

    /// Wait for the analyzer whose build [`JobSpec::validate`] started:
    /// a missing or malformed dictionary or word list is an input error,
    /// reported by a dry run's plan and before segmentation (its first user;
    /// the stages before it run beside the build).
    pub fn analyzer_ready(&self) -> Result<()> {
        crate::text::Analyzer::get(&self.spec.fingerprint.analyzer_options().to_options_string())
            .map(drop)
            .map_err(crate::error::Error::input)
    }

    /// The same job with another spec (a store night's, which uses the
    /// store's frozen IDF model); its settings stay those checked.
    pub fn with_spec(&self, spec: JobSpec) -> Job {
        Job { spec, ..self.clone() }
    }

    /// The column list's tail for the keep rule's column (`--keep earliest:COL`).
    pub fn keep_key(&self) -> &'static str {
        if self.keep.column().is_some() { ", keep_key" } else { "" }
    }

    /// The MinHash plan of the `minhash` column, when MinHash finds candidates.
    pub fn minhash(&self) -> Option<MinHashPlan> {
        self.spec.join.minhash_plan()
    }

    /// The MinHash plan of the keys the fingerprints keep (their `minhash`
    /// column): a store's runs keep them, so that no later night hashes a
    /// stored term set again. A one-shot run computes them for its distinct
    /// fingerprints when it makes `term_sets` (copies.rs,
    /// 57_term_sets_one_shot.sql), and never reads the column: there it is
    /// NULL. Writing 32 keys a document took about half of Weibo's
    /// fingerprint stage (docs/performance.md).
    pub fn kept_minhash(&self) -> Option<MinHashPlan> {
        self.minhash().filter(|_| self.spec.store.is_some())
    }
}

/// What every stage of one run shares.
pub(super) struct Run<'a> {
    pub ctx: &'a SessionContext,
    pub job: &'a Job,
    pub out: &'a OutputDir,
    pub progress: &'a mut Progress,
}
