//! The job: the pipeline's stages run as SQL over one session, from inputs to
//! committed outputs and a summary.

mod candidates;
mod config;
mod nightly;
mod progress;
mod query;
mod runner;
pub mod sql;
pub mod store;
mod summary;
mod tables;

pub use config::{check_run_id, Candidates, DuplicateIds, Columns, FingerprintOptions, JobSpec, JoinOptions, KeepRule, StoreOptions};
pub use progress::{LogFormat, RunOptions};
pub use runner::{run_dedup, run_fingerprint, run_pairs, PairsSpec};
pub use summary::{FingerprintSettings, RunCommand, StoreReads, StoreSummary, Summary};
