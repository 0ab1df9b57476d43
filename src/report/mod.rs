//! `report.html`: what a run found, drawn for a person who must decide
//! whether to delete documents on neardup's word.
//!
//! Plain Rust, no DataFusion: a [`Report`] (gathered from a run's tables by
//! `job::report`) goes in, one self-contained HTML page comes out. Charts are
//! inline SVG drawn by plotters ([`charts`]), word-level differences come from
//! `similar` ([`diff`]), the page itself is [`html`]. Nothing is loaded from
//! the network, and every piece of document text is escaped.
//!
//! The page is a function of the report alone: drawing it twice from the
//! same output gives the same bytes (`neardup report` relies on it).

mod charts;
mod diff;
mod html;

pub use diff::unicode_words;
pub use html::render;

/// Longest text shown for one document, in characters: a cluster of long
/// articles stays readable and the page stays small (`weibo_reposts`' report
/// is well under the 5 MB bound).
pub const MAX_TEXT_CHARS: usize = 1_200;
/// Members shown per cluster (the representative first).
pub const MAX_MEMBERS: usize = 6;

/// Everything the page shows.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// `dedup`, `pairs` or `dedup` of a store night.
    pub command: String,
    pub output: String,
    pub version: String,
    /// Settings and options, as label and value.
    pub settings: Vec<(String, String)>,
    pub inputs: Vec<Input>,
    /// Headline counts, as label and value.
    pub counts: Vec<(String, u64)>,
    /// Stage and milliseconds, in the order the run took them.
    pub timings: Vec<(String, u64)>,
    pub total_ms: u64,
    /// Pairs by Hamming distance (index = distance).
    pub hamming: Vec<u64>,
    /// The candidates' largest distance (k), drawn as the threshold.
    pub max_hamming: u32,
    pub similarity: Option<Similarity>,
    /// Pairs by the share of their shorter document's text found in the
    /// other, in ten bins, and the duplication policy's share.
    pub shared: Option<Shared>,
    /// (cluster size, clusters of that size), sizes ascending.
    pub cluster_sizes: Vec<(u64, u64)>,
    /// Pairs between each two inputs (with two inputs or more).
    pub matrix: Option<SourceMatrix>,
    pub largest: Vec<Cluster>,
    pub sampled: Vec<Cluster>,
    /// Store runs: the store's nights up to this one.
    pub nights: Vec<Night>,
    /// What the page could not show, and why.
    pub notes: Vec<String>,
}

/// One input dataset.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub name: String,
    pub url: String,
    pub documents: u64,
    pub without_terms: u64,
}

/// The check's similarity over the pairs, and the near misses below it.
#[derive(Debug, Clone, Default)]
pub struct Similarity {
    /// `jaccard` or `overlap`.
    pub measure: String,
    pub threshold: f64,
    /// Width of every bin; bin i covers [i·width, (i+1)·width).
    pub bin_width: f64,
    /// Kept pairs of distinct fingerprints by bin, over [0, 1].
    pub kept: Vec<u64>,
    /// Candidates the check rejected, by the same bins (only those within
    /// reach of the threshold are counted).
    pub near_misses: Vec<u64>,
    /// Near misses were counted on one candidate in `sample_stride` (1: all).
    pub sample_stride: u64,
    /// Pairs without a similarity (identical fingerprints, or no check).
    pub unchecked: u64,
}

/// How much text the pairs share (from the summary's `shared_text`).
#[derive(Debug, Clone, Default)]
pub struct Shared {
    /// Pairs by share of the shorter document, bins `[0, 0.1)` … `[0.9, 1]`.
    pub pairs_by_share: Vec<u64>,
    pub unmeasured: u64,
    /// The duplication policy (`--min-shared`), when the run had one.
    pub min_shared: Option<f64>,
}

/// Pairs between each two inputs.
#[derive(Debug, Clone, Default)]
pub struct SourceMatrix {
    pub sources: Vec<String>,
    /// counts[i][j], i ≤ j: pairs between sources i and j (symmetric).
    pub counts: Vec<Vec<u64>>,
}

/// One cluster as the page shows it.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub label: String,
    pub size: u64,
    /// The representative first, then members by (source, id), at most
    /// [`MAX_MEMBERS`].
    pub members: Vec<Member>,
}

/// One document of a shown cluster.
#[derive(Debug, Clone, Default)]
pub struct Member {
    pub source: String,
    pub id: String,
    pub representative: bool,
    /// The document's text, when the inputs could be read.
    pub text: Option<String>,
    /// Where a stored representative lives (store runs), when it is not tonight's.
    pub stored_run: Option<String>,
    /// Why it joined: the pair that links it, as `(partner, hamming, similarity)`.
    pub link: Option<Link>,
}

/// A pair that links a member to its cluster.
#[derive(Debug, Clone, Default)]
pub struct Link {
    pub partner: String,
    pub hamming: i64,
    pub similarity: Option<f64>,
    /// The share of the member's text found in the partner, and of the
    /// partner's found in the member (NULL when not measured).
    pub shared: Option<f64>,
    pub partner_shared: Option<f64>,
}

/// One night of a store.
#[derive(Debug, Clone, Default)]
pub struct Night {
    /// `run=ID`, or `seg=ID (N runs)` for a compacted segment.
    pub label: String,
    /// Documents the night (or segment) holds.
    pub documents: u64,
    /// Of those, duplicates of documents stored before (unknown for segments).
    pub duplicates_of_stored: Option<u64>,
    /// Documents in the store after it.
    pub store_documents: u64,
}

/// Escape text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The first `max` characters of `text`, and whether it was cut.
pub fn cut(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(escape(r#"<script>alert("x")</script> & 'y'"#), "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;");
    }

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("新闻报道", 2), ("新闻", true));
        assert_eq!(cut("新闻", 2), ("新闻", false));
        assert_eq!(cut("", 2), ("", false));
    }
}
