//! Text: boilerplate lines, normalisation, segmentation, per-document
//! term statistics and shingle sketches.
//!
//! Plain Rust over `&str`, with no DataFusion in sight: the SQL functions in
//! [`crate::udf`] are thin Arrow adapters over what lives here.

mod learned_tags;
mod lines;
mod normalize;
pub mod shingles;
mod stats;
mod tokenize;
mod words;

pub use lines::{format_set, line_hashes, line_hashes_into, parse_set, strip_lines};
pub use normalize::{normalize, normalize_at_most, normalize_into};
pub use stats::{DocStats, StatsScratch, TermStat};
pub use words::{HashKeyed, IdentityHasher, WordSet};
pub use tokenize::{is_han, is_letter_or_digit, recycle, Analyzer, AnalyzerOptions, Mode, Token, MAX_CHAR_NGRAM};
