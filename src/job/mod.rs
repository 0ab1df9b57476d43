//! The job: the pipeline's stages run as SQL over one session, from inputs to
//! committed outputs and a summary.

mod config;
mod runner;
pub mod sql;
mod summary;

pub use config::{Candidates, Columns, FingerprintOptions, JobSpec, JoinOptions, KeepRule};
pub use runner::{run_dedup, run_fingerprint, run_pairs, PairsSpec, RunOptions};
pub use summary::{FingerprintSettings, Summary};
