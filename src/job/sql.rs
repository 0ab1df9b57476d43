//! The pipeline's SQL statements (the files in `sql/`), compiled into the
//! binary and rendered with the run's settings.
//!
//! Placeholders are `{{name}}`. Each statement declares its parameters, and
//! each value says what it is ([`Param`]): names and text are quoted in one
//! place, here.

/// A statement of `sql/`: its file, its text, and the placeholders it takes
/// (checked against the text by a test, and against the values given by
/// [`render`]).
#[derive(Debug, Clone, Copy)]
pub struct Statement {
    pub file: &'static str,
    pub sql: &'static str,
    pub params: &'static [&'static str],
}

macro_rules! statement {
    ($name:ident, $file:literal, [$($param:literal),*]) => {
        pub const $name: Statement = Statement { file: $file, sql: include_str!(concat!("../../sql/", $file)), params: &[$($param),*] };
    };
}

statement!(DOCUMENTS, "10_documents.sql", ["source", "id", "text", "title", "keep_key", "table"]);
statement!(BOILERPLATE_LINES, "15_boilerplate_lines.sql", ["min_docs"]);
statement!(TERMS, "20_terms.sql", ["tokenizer", "analyzer_options", "with_pos", "boilerplate", "keep_key", "path"]);
statement!(CORPUS_SIZE, "30_corpus_size.sql", []);
statement!(CORPUS_DF, "31_corpus_df.sql", ["path"]);
statement!(FINGERPRINTS, "40_fingerprints.sql", ["model", "model_version", "n_docs", "weighting", "formula", "top_k", "minhash", "keep_key", "path"]);
statement!(NEAR_PAIRS, "50_near_pairs.sql", ["k", "m", "path"]);
statement!(MINHASH_BUCKETS, "51_minhash_buckets.sql", ["path"]);
statement!(MINHASH_CANDIDATES, "52_minhash_candidates.sql", ["hot", "threshold", "path"]);
statement!(VERIFIED_PAIRS, "55_verified_pairs.sql", ["measure", "threshold", "path"]);
statement!(UNCONFIRMED_COPIES, "56_unconfirmed_copies.sql", []);
statement!(TERM_SETS, "57_term_sets.sql", ["tonight", "path"]);
statement!(CLUSTERS, "60_clusters.sql", ["keep_order", "path"]);
statement!(PAIRS, "70_pairs.sql", ["path"]);
statement!(SURVIVORS, "80_survivors.sql", ["source", "id", "table", "path"]);
statement!(STORE_PROBE, "89_store_probe.sql", ["index", "version", "k", "m"]);
statement!(STORE_UNCONFIRMED, "93_store_unconfirmed.sql", ["measure", "threshold"]);
statement!(STORE_RUN, "94_store_run.sql", ["keep_key", "keep_key_f", "keep_order", "run"]);
statement!(STORE_CLUSTERS, "95_store_clusters.sql", ["path"]);

/// Every pipeline statement, in file order (for tests).
pub const ALL: &[Statement] = &[
    DOCUMENTS,
    BOILERPLATE_LINES,
    TERMS,
    CORPUS_SIZE,
    CORPUS_DF,
    FINGERPRINTS,
    NEAR_PAIRS,
    MINHASH_BUCKETS,
    MINHASH_CANDIDATES,
    VERIFIED_PAIRS,
    UNCONFIRMED_COPIES,
    TERM_SETS,
    CLUSTERS,
    PAIRS,
    SURVIVORS,
    STORE_PROBE,
    STORE_UNCONFIRMED,
    STORE_RUN,
    STORE_CLUSTERS,
];

/// A value for a placeholder, quoted here and nowhere else.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    /// A table or column name: double-quoted.
    Ident(&'a str),
    /// A text value (a path, a name, a setting): single-quoted.
    Text(&'a str),
    /// A whole number.
    Int(u64),
    /// A whole number, or NULL.
    IntOrNull(Option<u64>),
    /// A text value, or NULL.
    TextOrNull(Option<&'a str>),
    Bool(bool),
    /// A fraction, written so that it reads back as the same `f64`.
    Float(f64),
    /// A piece of SQL the pipeline itself builds (a column list, an ORDER BY
    /// key, an expression), never text from the user.
    Sql(&'a str),
}

impl Param<'_> {
    fn sql(&self) -> String {
        match *self {
            Param::Ident(name) => crate::storage::ident(name),
            Param::Text(text) => crate::storage::literal(text),
            Param::Int(n) => n.to_string(),
            Param::IntOrNull(n) => n.map_or("NULL".into(), |n| n.to_string()),
            Param::TextOrNull(text) => text.map_or("NULL".into(), crate::storage::literal),
            Param::Bool(b) => b.to_string(),
            Param::Float(x) => format!("{x:?}"),
            Param::Sql(sql) => sql.to_string(),
        }
    }
}

/// `statement` with its placeholders filled by `values`: one for each of its
/// parameters, no more, no fewer (anything else is a bug, and panics).
pub fn render(statement: Statement, values: &[(&str, Param)]) -> String {
    let mut given: Vec<&str> = values.iter().map(|(k, _)| *k).collect();
    given.sort_unstable();
    let mut wanted = statement.params.to_vec();
    wanted.sort_unstable();
    assert_eq!(given, wanted, "the values given for {} are not its parameters", statement.file);
    let mut out = statement.sql.to_string();
    for (key, value) in values {
        out = out.replace(&format!("{{{{{key}}}}}"), &value.sql());
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
    fn every_statement_declares_exactly_its_placeholders() {
        for s in ALL {
            let mut found = placeholders(s.sql);
            found.sort_unstable();
            let mut declared: Vec<String> = s.params.iter().map(|p| p.to_string()).collect();
            declared.sort_unstable();
            assert_eq!(found, declared, "{}", s.file);
        }
        let files: Vec<&str> = ALL.iter().map(|s| s.file).collect();
        let mut on_disk: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.ends_with(".sql"))
            .collect();
        on_disk.sort();
        assert_eq!(files, on_disk, "every file of sql/ is a statement");
    }

    #[test]
    fn values_are_quoted_by_kind() {
        let sql = render(NEAR_PAIRS, &[("k", Param::Int(3)), ("m", Param::Int(4)), ("path", Param::Text("it's.parquet"))]);
        assert!(sql.contains("'it''s.parquet'") && sql.contains("<= 3"), "{sql}");
        assert_eq!(Param::Ident("a\"b").sql(), "\"a\"\"b\"");
        assert_eq!((Param::Float(0.5).sql(), Param::IntOrNull(None).sql()), ("0.5".to_string(), "NULL".to_string()));
    }

    #[test]
    #[should_panic(expected = "not its parameters")]
    fn a_missing_value_is_a_bug() {
        render(NEAR_PAIRS, &[("k", Param::Int(3))]);
    }
}
