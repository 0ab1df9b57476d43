//! neardup: find near-duplicate documents in Parquet text archives.
//!
//! The pipeline is SQL (`sql/`, run by [`job`]) over functions registered by
//! [`udf`]; the algorithms behind those functions are plain Rust:
//!
//! - [`text`]: normalisation, segmentation (jieba, Unicode words, n-grams)
//!   and per-document term statistics;
//! - [`weight`]: IDF formulas and weighting schemes;
//! - [`fingerprint`]: the stable feature hash and 64-bit SimHash;
//! - [`join`]: band plans of the exact banded self-join;
//! - [`sets`]: term-set similarity (verification);
//! - [`minhash`]: one-permutation MinHash signatures and LSH band keys;
//! - [`setjoin`] and [`buckets`]: a hot bucket's exact Jaccard join, and
//!   the pairs of every bucket in one pass over term sets held in memory;
//! - [`cluster`]: connected components over near pairs;
//! - [`report`]: the run's report page (`report.html`).
//!
//! [`session`] builds the one DataFusion session every run uses (embedded, or
//! on a Ballista cluster run by [`distributed`]), [`storage`] reads inputs
//! and commits outputs, [`statement`] plans statements alike for both,
//! [`cli`] and [`shell`] serve the binary.

pub mod buckets;
pub mod cli;
pub mod cluster;
pub mod distributed;
pub mod error;
pub mod eval;
pub mod fingerprint;
pub mod job;
pub mod logging;
pub mod minhash;
pub mod parallel;
pub mod probe;
pub mod join;
pub mod progress;
pub mod report;
pub mod session;
pub mod sets;
pub mod setjoin;
pub mod shell;
pub mod statement;
pub mod storage;
pub mod text;
pub mod tls;
pub mod udf;
pub mod weight;
