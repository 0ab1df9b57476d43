//! The job: the pipeline's stages run as SQL over one session, from inputs to
//! committed outputs and a summary.

mod config;
mod nightly;
mod runner;
pub mod sql;
pub mod store;
mod summary;

pub use config::{check_run_id, Candidates, DuplicateIds, Columns, FingerprintOptions, JobSpec, JoinOptions, KeepRule, StoreOptions};
pub use runner::{run_dedup, run_fingerprint, run_pairs, LogFormat, PairsSpec, RunOptions};
pub use summary::{FingerprintSettings, StoreReads, StoreSummary, Summary};
