//! The job: the pipeline's stages run as SQL over one session, from inputs to
//! committed outputs and a summary.

mod candidates;
mod config;
mod context;
mod copies;
mod first_per_id;
mod footprint;
mod in_memory;
mod inputs;
mod line_set;
mod nightly;
mod oneshot;
mod pairs;
mod pass_through;
mod pipeline;
mod plan;
mod progress;
mod query;
mod report;
mod runner;
pub mod sql;
mod stages;
pub mod store;
mod store_run;
mod summary;
mod tables;
mod tap;
mod touched;
mod whole_batches;

pub use config::{check_run_id, defaults, Candidates, DuplicateIds, OnBadFile, Columns, FingerprintOptions, JobSpec, JoinOptions, KeepRule, StoreOptions};
pub use context::Job;
pub use progress::{LogFormat, RunOptions};
pub use pairs::{run_pairs, PairsSpec};
pub use report::redraw as redraw_report;
pub use runner::{run_dedup, run_fingerprint};
pub use summary::{FingerprintSettings, RunCommand, StoreReads, StoreSummary, Summary};
