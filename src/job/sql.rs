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
    /// The tables (of [`table`]) it reads: registered by the job before it
    /// runs, and checked against its text by a test.
    pub reads: &'static [&'static str],
}

/// The tables the job registers for its statements to read, by the names
/// the files of `sql/` use. Each is registered with its constant only.
pub mod table {
    /// Every input's documents (10_documents.sql), less those already stored.
    pub const DOCUMENTS: &str = "documents";
    /// A store run's input documents, before those already stored are left out.
    pub const DOCUMENTS_INPUT: &str = "documents_input";
    pub const TERMS: &str = "terms";
    pub const CORPUS_DF: &str = "corpus_df";
    pub const FINGERPRINTS: &str = "fingerprints";
    /// The fingerprints that take part in the join (56_unconfirmed_copies.sql).
    pub const ELIGIBLE: &str = "eligible";
    /// The stored rows a night touches (empty in a one-shot run).
    pub const STORED: &str = "stored";
    pub const STORED_TERM_SETS: &str = "stored_term_sets";
    /// Every earlier run's compact columns (simhash and MinHash keys).
    pub const STORED_RUNS: &str = "stored_runs";
    pub const TERM_SETS: &str = "term_sets";
    /// Each shared fingerprint's first document that passed the check of
    /// its copies (a one-shot run's, 57_term_sets_one_shot.sql).
    pub const FIRST_COPIES: &str = "first_copies";
    /// The MinHash keys that can give a pair, with their members' count.
    pub const SHARED_MINHASH_KEYS: &str = "shared_minhash_keys";
    pub const MINHASH_BUCKETS: &str = "minhash_buckets";
    pub const CANDIDATES: &str = "candidates";
    /// Candidates that passed the check, before the duplication policy.
    pub const CHECKED_PAIRS: &str = "checked_pairs";
    pub const NEAR_PAIRS: &str = "near_pairs";
    /// Connected components of the near pairs, computed in Rust.
    pub const COMPONENTS: &str = "components";
    /// The eligible documents a cluster holds, with their cluster
    /// (59_in_clusters.sql; a night's view of tonight's).
    pub const IN_CLUSTERS: &str = "in_clusters";
    pub const CLUSTERS: &str = "clusters";
    /// The document each fingerprint of a pair is anchored at (69_anchors.sql).
    pub const ANCHORS: &str = "anchors";
    pub const PAIRS: &str = "pairs";
    /// The run a night adds to the store (94_store_run.sql).
    pub const NIGHT: &str = "night";

    pub const ALL: &[&str] = &[
        DOCUMENTS,
        DOCUMENTS_INPUT,
        TERMS,
        CORPUS_DF,
        FINGERPRINTS,
        ELIGIBLE,
        STORED,
        STORED_TERM_SETS,
        STORED_RUNS,
        TERM_SETS,
        FIRST_COPIES,
        SHARED_MINHASH_KEYS,
        MINHASH_BUCKETS,
        CANDIDATES,
        CHECKED_PAIRS,
        NEAR_PAIRS,
        COMPONENTS,
        IN_CLUSTERS,
        CLUSTERS,
        ANCHORS,
        PAIRS,
        NIGHT,
    ];
}

macro_rules! statement {
    ($name:ident, $file:literal, [$($param:literal),*], reads [$($table:expr),*]) => {
        pub const $name: Statement = Statement {
            file: $file,
            sql: include_str!(concat!("../../sql/", $file)),
            params: &[$($param),*],
            reads: &[$($table),*],
        };
    };
}

statement!(DOCUMENTS, "10_documents.sql", ["source", "id", "text", "title", "keep_key", "table"], reads []);
statement!(DOCUMENTS_IN_MEMORY, "12_documents_in_memory.sql", [], reads [table::DOCUMENTS]);
statement!(BOILERPLATE_LINES, "15_boilerplate_lines.sql", ["min_docs"], reads [table::DOCUMENTS]);
statement!(TERMS, "20_terms.sql", ["tokenizer", "analyzer_options", "with_pos", "boilerplate", "keep_key", "path"], reads [table::DOCUMENTS]);
statement!(CORPUS_SIZE, "30_corpus_size.sql", [], reads [table::TERMS]);
statement!(CORPUS_DF, "31_corpus_df.sql", ["path"], reads [table::TERMS]);
statement!(FINGERPRINTS, "40_fingerprints.sql", ["model", "model_version", "n_docs", "weighting", "formula", "top_k", "with_vector", "minhash", "keep_key", "row_group_rows", "path"], reads [table::TERMS]);
statement!(NEAR_PAIRS, "50_near_pairs.sql", ["k", "m", "path"], reads [table::FINGERPRINTS, table::STORED]);
statement!(NEAR_PAIRS_BY_SORT, "50_near_pairs_by_sort.sql", ["k", "m", "max_pairs", "path"], reads [table::FINGERPRINTS, table::STORED]);
statement!(MINHASH_BUCKETS, "51_minhash_buckets.sql", ["path"], reads [table::SHARED_MINHASH_KEYS, table::TERM_SETS]);
statement!(SHARED_KEYS_BY_GROUP, "51_shared_keys_by_group.sql", ["path"], reads [table::TERM_SETS]);
statement!(SHARED_KEYS_BY_SORT, "51_shared_keys_by_sort.sql", ["path"], reads [table::TERM_SETS]);
statement!(MINHASH_CANDIDATES, "52_minhash_candidates.sql", ["hot", "threshold", "path"], reads [table::MINHASH_BUCKETS, table::TERM_SETS]);
statement!(VERIFIED_PAIRS, "55_verified_pairs.sql", ["measure", "threshold", "path"], reads [table::CANDIDATES, table::TERM_SETS]);
statement!(UNCONFIRMED_COPIES, "56_unconfirmed_copies.sql", [], reads [table::FINGERPRINTS]);
statement!(COPIES_IN_MEMORY, "56_copies_in_memory.sql", ["keep_columns"], reads [table::FINGERPRINTS]);
statement!(TERM_SETS, "57_term_sets.sql", ["tonight", "path"], reads [table::FINGERPRINTS, table::STORED_TERM_SETS]);
statement!(TERM_SETS_ONE_SHOT, "57_term_sets_one_shot.sql", ["minhash", "path"], reads [table::FINGERPRINTS, table::FIRST_COPIES]);
statement!(KEPT_PAIRS, "58_kept_pairs.sql", ["min_shared"], reads [table::CHECKED_PAIRS]);
statement!(IN_CLUSTERS, "59_in_clusters.sql", ["keep_columns", "path"], reads [table::COMPONENTS, table::ELIGIBLE]);
statement!(CLUSTERS, "60_clusters.sql", ["keep_order", "path"], reads [table::IN_CLUSTERS]);
statement!(ANCHORS, "69_anchors.sql", ["path"], reads [table::CLUSTERS, table::IN_CLUSTERS, table::NEAR_PAIRS, table::STORED, table::STORED_TERM_SETS]);
statement!(PAIRS, "70_pairs.sql", ["path"], reads [table::ANCHORS, table::IN_CLUSTERS, table::NEAR_PAIRS]);
statement!(SURVIVORS, "80_survivors.sql", ["source", "id", "table", "rows", "path"], reads [table::CLUSTERS]);
statement!(STORE_PROBE, "89_store_probe.sql", ["index", "version", "k", "m"], reads [table::STORED_RUNS]);
statement!(STORE_UNCONFIRMED, "93_store_unconfirmed.sql", ["measure", "threshold", "min_shared"], reads [table::FINGERPRINTS, table::TERM_SETS]);
statement!(STORE_RUN, "94_store_run.sql", ["keep_key", "keep_key_f", "keep_order", "run"], reads [table::COMPONENTS, table::ELIGIBLE, table::FINGERPRINTS, table::STORED]);
statement!(STORE_CLUSTERS, "95_store_clusters.sql", ["path"], reads [table::NIGHT]);
statement!(NEAR_MISSES, "97_near_misses.sql", ["stride", "bin_width", "measure", "threshold", "low"], reads [table::CANDIDATES, table::TERM_SETS]);

/// The `OPTIONS` of a work file written by `COPY` (see runner.rs); the
/// pipeline's statements spell it out, and a test holds them to it.
pub const WORK_FILE: &str = "OPTIONS ('format.compression' 'uncompressed', 'format.dictionary_enabled' 'false')";

/// Every pipeline statement, in file order (for tests).
pub const ALL: &[Statement] = &[
    DOCUMENTS,
    DOCUMENTS_IN_MEMORY,
    BOILERPLATE_LINES,
    TERMS,
    CORPUS_SIZE,
    CORPUS_DF,
    FINGERPRINTS,
    NEAR_PAIRS,
    NEAR_PAIRS_BY_SORT,
    MINHASH_BUCKETS,
    SHARED_KEYS_BY_GROUP,
    SHARED_KEYS_BY_SORT,
    MINHASH_CANDIDATES,
    VERIFIED_PAIRS,
    COPIES_IN_MEMORY,
    UNCONFIRMED_COPIES,
    TERM_SETS,
    TERM_SETS_ONE_SHOT,
    KEPT_PAIRS,
    IN_CLUSTERS,
    CLUSTERS,
    ANCHORS,
    PAIRS,
    SURVIVORS,
    STORE_PROBE,
    STORE_UNCONFIRMED,
    STORE_RUN,
    STORE_CLUSTERS,
    NEAR_MISSES,
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
    /// A fraction, or NULL.
    FloatOrNull(Option<f64>),
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
            Param::FloatOrNull(x) => x.map_or("NULL".into(), |x| format!("{x:?}")),
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
    fn work_files_are_uncompressed_and_outputs_are_not() {
        let options = |s: &Statement| s.sql.contains("'format.compression' 'uncompressed', 'format.dictionary_enabled' 'false'");
        let work = [TERMS, NEAR_PAIRS, NEAR_PAIRS_BY_SORT, MINHASH_BUCKETS, SHARED_KEYS_BY_GROUP, SHARED_KEYS_BY_SORT, MINHASH_CANDIDATES, VERIFIED_PAIRS, TERM_SETS, TERM_SETS_ONE_SHOT, IN_CLUSTERS, ANCHORS];
        for s in &work {
            assert!(options(s), "{} writes a work file", s.file);
        }
        assert!(WORK_FILE.contains("'format.compression' 'uncompressed', 'format.dictionary_enabled' 'false'"));
        // An output keeps the session's codec as a whole; a column of hashes
        // may be written uncompressed on its own ('format.compression::simhash'
        // in 40_fingerprints.sql).
        for s in [CORPUS_DF, FINGERPRINTS, CLUSTERS, PAIRS, SURVIVORS, STORE_CLUSTERS] {
            assert!(!s.sql.contains("'format.compression' "), "{} writes an output (or the IDF model)", s.file);
        }
    }

    /// The tables a statement reads: the names after FROM and JOIN, less
    /// its own common table expressions, subqueries and placeholders.
    fn tables_read(sql: &str) -> Vec<String> {
        let code: String = sql.lines().map(|l| l.split("--").next().unwrap_or("")).collect::<Vec<_>>().join(" ");
        let words: Vec<&str> = code.split(|c: char| c.is_whitespace() || c == ',' || c == ')').filter(|w| !w.is_empty()).collect();
        let named_here: Vec<&str> = words.windows(3).filter(|w| w[1].eq_ignore_ascii_case("AS") && w[2].starts_with('(')).map(|w| w[0]).collect();
        let mut read: Vec<String> = words
            .windows(2)
            .filter(|w| w[0].eq_ignore_ascii_case("FROM") || w[0].eq_ignore_ascii_case("JOIN"))
            .map(|w| w[1])
            .filter(|t| !t.starts_with('(') && !t.starts_with("{{") && !named_here.contains(t))
            .map(String::from)
            .collect();
        read.sort();
        read.dedup();
        read
    }

    #[test]
    fn every_statement_declares_the_tables_it_reads() {
        for s in ALL {
            let mut declared: Vec<String> = s.reads.iter().map(|t| t.to_string()).collect();
            declared.sort();
            assert_eq!(tables_read(s.sql), declared, "{}", s.file);
            assert!(s.reads.iter().all(|t| table::ALL.contains(t)), "{}", s.file);
        }
        assert_eq!(tables_read("WITH a AS (SELECT 1 FROM x) SELECT * FROM a JOIN y ON true, (SELECT 2 FROM z)"), ["x", "y", "z"]);
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
