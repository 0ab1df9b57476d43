//! The pipeline's SQL statements (the files in `sql/`), compiled into the
//! binary and rendered with the run's settings.
//!
//! Placeholders are `{{name}}`. Values are inserted as given, so callers pass
//! identifiers through [`crate::storage::ident`] and text through
//! [`crate::storage::literal`]; numbers are formatted by Rust.

pub const DOCUMENTS: &str = include_str!("../../sql/10_documents.sql");
pub const BOILERPLATE_LINES: &str = include_str!("../../sql/15_boilerplate_lines.sql");
pub const TERMS: &str = include_str!("../../sql/20_terms.sql");
pub const CORPUS_SIZE: &str = include_str!("../../sql/30_corpus_size.sql");
pub const CORPUS_DF: &str = include_str!("../../sql/31_corpus_df.sql");
pub const FINGERPRINTS: &str = include_str!("../../sql/40_fingerprints.sql");
pub const NEAR_PAIRS: &str = include_str!("../../sql/50_near_pairs.sql");
pub const MINHASH_BUCKETS: &str = include_str!("../../sql/51_minhash_buckets.sql");
pub const MINHASH_CANDIDATES: &str = include_str!("../../sql/52_minhash_candidates.sql");
pub const VERIFIED_PAIRS: &str = include_str!("../../sql/55_verified_pairs.sql");
pub const UNCONFIRMED_COPIES: &str = include_str!("../../sql/56_unconfirmed_copies.sql");
pub const TERM_SETS: &str = include_str!("../../sql/57_term_sets.sql");
pub const CLUSTERS: &str = include_str!("../../sql/60_clusters.sql");
pub const PAIRS: &str = include_str!("../../sql/70_pairs.sql");
pub const SURVIVORS: &str = include_str!("../../sql/80_survivors.sql");
pub const STORE_PROBE: &str = include_str!("../../sql/89_store_probe.sql");
pub const STORE_UNCONFIRMED: &str = include_str!("../../sql/93_store_unconfirmed.sql");
pub const STORE_RUN: &str = include_str!("../../sql/94_store_run.sql");
pub const STORE_CLUSTERS: &str = include_str!("../../sql/95_store_clusters.sql");

/// Every pipeline statement, by file name (for tests and `--explain`).
pub const ALL: &[(&str, &str)] = &[
    ("10_documents.sql", DOCUMENTS),
    ("15_boilerplate_lines.sql", BOILERPLATE_LINES),
    ("20_terms.sql", TERMS),
    ("30_corpus_size.sql", CORPUS_SIZE),
    ("31_corpus_df.sql", CORPUS_DF),
    ("40_fingerprints.sql", FINGERPRINTS),
    ("50_near_pairs.sql", NEAR_PAIRS),
    ("51_minhash_buckets.sql", MINHASH_BUCKETS),
    ("52_minhash_candidates.sql", MINHASH_CANDIDATES),
    ("55_verified_pairs.sql", VERIFIED_PAIRS),
    ("56_unconfirmed_copies.sql", UNCONFIRMED_COPIES),
    ("57_term_sets.sql", TERM_SETS),
    ("60_clusters.sql", CLUSTERS),
    ("70_pairs.sql", PAIRS),
    ("80_survivors.sql", SURVIVORS),
    ("89_store_probe.sql", STORE_PROBE),
    ("93_store_unconfirmed.sql", STORE_UNCONFIRMED),
    ("94_store_run.sql", STORE_RUN),
    ("95_store_clusters.sql", STORE_CLUSTERS),
];

/// Fill the placeholders of `template`. Every placeholder must be given.
pub fn render(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (key, value) in values {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    if let Some(start) = out.find("{{") {
        let end = out[start..].find("}}").map_or(out.len(), |e| start + e + 2);
        panic!("SQL template left placeholder {} unfilled", &out[start..end]);
    }
    out
}

/// The placeholders of a template, in order of first appearance.
pub fn placeholders(template: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest[start..].find("}}") else { break };
        let name = rest[start + 2..start + end].to_string();
        if !found.contains(&name) {
            found.push(name);
        }
        rest = &rest[start + end + 2..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_fills_every_placeholder() {
        assert_eq!(render("a {{x}} {{y}} {{x}}", &[("x", "1"), ("y", "2")]), "a 1 2 1");
        assert_eq!(placeholders(NEAR_PAIRS), ["k", "m", "path"]);
    }

    #[test]
    #[should_panic(expected = "left placeholder {{y}}")]
    fn a_missing_value_is_a_bug() {
        render("{{x}} {{y}}", &[("x", "1")]);
    }
}
