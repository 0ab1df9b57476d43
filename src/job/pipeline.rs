//! The pipeline: the list of stages a run takes ([`stages`]), which a run
//! executes ([`run_stages`], over the context of [`Run`]) and a dry run
//! shows (`plan.rs`): the one list serves both.

use std::sync::Arc;

use datafusion::catalog::TableProvider;

use super::context::{Job, Run};
use super::query::scalar_u64;
use super::sql::{self, Statement};
use super::stages::{boilerplate_stage, corpus_df_stage, fingerprint_stage, hold_documents, release_documents, segment_stage, survivors_stage, Idf};
use super::summary::{RunCommand, Summary};
use crate::error::Result;

/// A stage of the pipeline: what a run executes, in order, and what its
/// dry run lists. Each reports one or more progress steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Boilerplate,
    Segment,
    CorpusDf,
    Fingerprints,
    /// A one-shot run's candidates, check, clusters and pairs.
    Pairs,
    /// A store night's probe, candidates, check, representatives and commit.
    Night,
    Survivors,
    /// report.html: drawn as the run is committed (`runner::finish`), since
    /// it shows the run's own timings; listed here for the plan.
    Report,
}

impl Stage {
    /// The progress steps the stage reports (the keys of the summary's
    /// `timings_ms`), in order.
    pub fn steps(self, job: &Job) -> Vec<&'static str> {
        let verify = job.spec.join.verify.measure().is_some();
        let steps: &[&'static str] = match self {
            Stage::Boilerplate => &["boilerplate"],
            Stage::Segment => &["segment"],
            Stage::CorpusDf => &["corpus_df"],
            Stage::Fingerprints => &["fingerprints"],
            Stage::Pairs => &["join", "verify", "clusters", "pairs"],
            Stage::Night => &["join", "verify", "representatives", "store"],
            Stage::Survivors => &["survivors"],
            Stage::Report => &["report"],
        };
        // Without a check the candidates are the pairs: no step `verify`.
        steps.iter().copied().filter(|s| verify || *s != "verify").collect()
    }

    /// The statements of `sql/` the stage runs.
    pub fn statements(self) -> &'static [Statement] {
        match self {
            Stage::Boilerplate => &[sql::BOILERPLATE_LINES],
            Stage::Segment => &[sql::DOCUMENTS_IN_MEMORY, sql::TERMS, sql::CORPUS_SIZE],
            Stage::CorpusDf => &[sql::CORPUS_DF],
            Stage::Fingerprints => &[sql::FINGERPRINTS],
            Stage::Pairs => &[
                sql::UNCONFIRMED_COPIES,
                sql::COPIES_IN_MEMORY,
                sql::TERM_SETS_ONE_SHOT,
                sql::NEAR_PAIRS,
                sql::NEAR_PAIRS_BY_SORT,
                sql::SHARED_KEYS_BY_SORT,
                sql::SHARED_KEYS_BY_GROUP,
                sql::MINHASH_BUCKETS,
                sql::MINHASH_CANDIDATES,
                sql::VERIFIED_PAIRS,
                sql::KEPT_PAIRS,
                sql::IN_CLUSTERS,
                sql::CLUSTERS,
                sql::ANCHORS,
                sql::PAIRS,
            ],
            Stage::Night => &[
                sql::STORE_PROBE,
                sql::TERM_SETS,
                sql::STORE_UNCONFIRMED,
                sql::NEAR_PAIRS,
                sql::NEAR_PAIRS_BY_SORT,
                sql::SHARED_KEYS_BY_SORT,
                sql::SHARED_KEYS_BY_GROUP,
                sql::MINHASH_BUCKETS,
                sql::MINHASH_CANDIDATES,
                sql::VERIFIED_PAIRS,
                sql::KEPT_PAIRS,
                sql::STORE_RUN,
                sql::STORE_CLUSTERS,
                sql::ANCHORS,
                sql::PAIRS,
            ],
            Stage::Survivors => &[sql::SURVIVORS],
            Stage::Report => &[sql::NEAR_MISSES],
        }
    }

    /// The stage as a dry run lists it: its steps and its files.
    pub fn describe(self, job: &Job) -> String {
        let files: Vec<&str> = self.statements().iter().map(|s| s.file).collect();
        format!("{} ({})", self.steps(job).join(", "), files.join(", "))
    }
}

/// The stages of a run of `command`, against a store or not.
pub(super) fn stages(job: &Job, command: RunCommand, store: bool) -> Vec<Stage> {
    let fp = &job.spec.fingerprint;
    let mut stages = Vec::new();
    if fp.boilerplate_min_docs().is_some() {
        stages.push(Stage::Boilerplate);
    }
    stages.push(Stage::Segment);
    if fp.weighting.needs_idf() || fp.save_idf_model.is_some() {
        stages.push(Stage::CorpusDf);
    }
    stages.push(Stage::Fingerprints);
    match (command, store) {
        (RunCommand::Fingerprint, _) => {}
        (_, true) => stages.push(Stage::Night),
        (_, false) => {
            stages.push(Stage::Pairs);
            if job.spec.survivors {
                stages.push(Stage::Survivors);
            }
        }
    }
    if command != RunCommand::Fingerprint {
        stages.push(Stage::Report);
    }
    stages
}

/// What one stage hands to the next.
#[derive(Default)]
struct Carried {
    boilerplate: Option<super::line_set::LineSet>,
    corpus_n: u64,
    idf: Idf,
    summary: Option<Summary>,
    /// The fingerprints as written, held for the copies' check of a
    /// one-shot join (stages.rs, `fingerprint_stage`).
    fingerprints: Option<Arc<dyn TableProvider>>,
}

/// Run `stages` in order; a store night's stage is `night` (given when
/// `stages` holds [`Stage::Night`]). Returns the summary's counts of what
/// the stages found.
/// With `first_per_id`, the documents held in memory keep one row per id
/// (stages.rs, `hold_documents`).
pub(super) async fn run_stages(run: &mut Run<'_>, stages: &[Stage], mut night: Option<super::nightly::NightStore<'_>>, first_per_id: bool) -> Result<Summary> {
    let mut carried = Carried::default();
    let mut meta = None;
    // Read by the boilerplate lines and segmentation, then let go.
    let mut documents = match stages.contains(&Stage::Segment) {
        true => hold_documents(run, first_per_id).await?,
        false => None,
    };
    let duplicate_ids_dropped = documents.as_ref().map_or(0, |held| held.duplicate_ids_dropped);
    let held = documents.is_some();
    for &stage in stages {
        match stage {
            Stage::Boilerplate => carried.boilerplate = boilerplate_stage(run, held).await?,
            Stage::Segment => {
                let lines = carried.boilerplate.as_ref().map(|set| crate::text::format_set(&set.hashes));
                carried.corpus_n = segment_stage(run, lines.as_deref(), held).await?;
                if let Some(held) = documents.take() {
                    release_documents(run.ctx, held)?;
                }
            }
            Stage::CorpusDf => carried.idf = corpus_df_stage(run, carried.corpus_n, night.is_none()).await?,
            Stage::Fingerprints => {
                // A one-shot join's check of copies reads the fingerprints whole, next.
                let hold = stages.contains(&Stage::Pairs) && run.job.spec.join.verify.measure().is_some();
                let (written, held) = fingerprint_stage(run, &carried.idf, carried.corpus_n, carried.boilerplate.as_ref(), hold).await?;
                (meta, carried.fingerprints) = (Some(written), held);
            }
            Stage::Pairs => {
                let (join, keep) = (&run.job.spec.join, &run.job.keep);
                let held = carried.fingerprints.take();
                carried.summary = Some(super::oneshot::join_stages(run.ctx, join, keep, run.out, (meta.as_ref(), held), run.progress).await?);
            }
            Stage::Night => {
                let store = night.take().expect("a night's stages are given its store");
                carried.summary = Some(super::nightly::store_stages(run, store, &carried.idf, carried.boilerplate.as_ref()).await?);
            }
            Stage::Survivors => survivors_stage(run).await?,
            Stage::Report => {}
        }
    }
    let mut summary = match carried.summary {
        Some(summary) => summary,
        None => Summary { distinct_fingerprints: scalar_u64(run.ctx, "SELECT count(DISTINCT simhash) FROM fingerprints").await?, ..Summary::default() },
    };
    summary.idf = carried.idf.summary;
    summary.boilerplate_lines = carried.boilerplate.map_or(0, |set| set.hashes.len() as u64);
    summary.duplicate_ids_dropped = duplicate_ids_dropped;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::config::JobSpec;
    use crate::job::config::Candidates;
    use crate::weight::Weighting;
    use crate::sets::Verify;

    fn job(edit: impl FnOnce(&mut JobSpec)) -> Job {
        let mut spec: JobSpec = toml::from_str("output = 'out'\n[[input]]\nname = 'a'\nurl = 'a.parquet'\n").unwrap();
        edit(&mut spec);
        Job::new(&spec).unwrap()
    }

    #[test]
    fn a_run_takes_the_stages_its_settings_ask_for() {
        use Stage::*;
        assert_eq!(stages(&job(|_| {}), RunCommand::Dedup, false), [Boilerplate, Segment, CorpusDf, Fingerprints, Pairs, Report]);
        let default = job(|s| s.fingerprint.boilerplate_lines = Some(0));
        assert_eq!(stages(&default, RunCommand::Dedup, false), [Segment, CorpusDf, Fingerprints, Pairs, Report]);
        assert_eq!(stages(&default, RunCommand::Fingerprint, false), [Segment, CorpusDf, Fingerprints]);
        assert_eq!(stages(&default, RunCommand::Dedup, true), [Segment, CorpusDf, Fingerprints, Night, Report]);
        let all = job(|s| {
            s.fingerprint.boilerplate_lines = Some(3);
            s.survivors = true;
        });
        assert_eq!(stages(&all, RunCommand::Dedup, false), [Boilerplate, Segment, CorpusDf, Fingerprints, Pairs, Survivors, Report]);
        // No IDF, none saved: no corpus aggregate.
        let tf = job(|s| {
            s.fingerprint.weighting = Weighting::Tf;
            s.fingerprint.boilerplate_lines = Some(0);
        });
        assert_eq!(stages(&tf, RunCommand::Dedup, false), [Segment, Fingerprints, Pairs, Report]);
        let saved = job(|s| {
            s.fingerprint.weighting = Weighting::Tf;
            s.fingerprint.boilerplate_lines = Some(0);
            s.fingerprint.save_idf_model = Some("df.parquet".into());
        });
        assert_eq!(stages(&saved, RunCommand::Fingerprint, false), [Segment, CorpusDf, Fingerprints]);
    }

    #[test]
    fn steps_and_files_are_those_the_stage_runs() {
        let checked = job(|_| {});
        assert_eq!(Stage::Pairs.steps(&checked), ["join", "verify", "clusters", "pairs"]);
        let unchecked = job(|s| {
            s.join.verify = Verify::None;
            s.join.candidates = Candidates::Simhash;
        });
        assert_eq!(Stage::Night.steps(&unchecked), ["join", "representatives", "store"]);
        assert_eq!(Stage::Segment.describe(&checked), "segment (12_documents_in_memory.sql, 20_terms.sql, 30_corpus_size.sql)");
        // Every statement belongs to a stage.
        let all = [Stage::Boilerplate, Stage::Segment, Stage::CorpusDf, Stage::Fingerprints, Stage::Pairs, Stage::Night, Stage::Survivors, Stage::Report];
        for s in sql::ALL.iter().filter(|s| s.file != sql::DOCUMENTS.file) {
            assert!(all.iter().any(|stage| stage.statements().iter().any(|t| t.file == s.file)), "{} is in no stage", s.file);
        }
    }
}
