//! Runs on real text from ../shared/data (skipped, with a message, when that
//! folder is absent): natural exact repeats must all be found.

use std::collections::BTreeMap;

mod common;
use common::*;

/// Run dedup on a real file and check that every group of identical
/// documents (the brute-force truth, found with plain SQL over `key`, the
/// columns that make up a document) lands in one cluster.
fn exact_repeats_are_clustered(file: &str, documents: u64, min_groups: usize, key: &str, extra: &[&str]) {
    let Some(path) = shared_data(file) else { return };
    let source = file.trim_end_matches(".parquet");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut args = vec!["dedup", "-q", "-i", path.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(&neardup(&args));
    assert_eq!(summary(&out)["documents"], documents);

    let table = format!("w={}", path.display());
    let query = format!(
        "SELECT id, {key} AS k FROM w WHERE length(trim(text)) > 0 AND {key} IN \
         (SELECT {key} FROM w GROUP BY {key} HAVING count(*) > 1) ORDER BY id"
    );
    let csv = ok(&neardup(&["sql", "--table", &table, "--format", "csv", "-c", &query]));
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in parse_csv(&csv).iter().skip(1) {
        groups.entry(row[1].clone()).or_default().push(format!("{source}/{}", row[0]));
    }
    assert!(groups.len() >= min_groups, "expected natural repeats in {file}, found {} groups", groups.len());
    let clusters = clusters(&out);
    for ids in groups.values() {
        let c = clusters.iter().find(|c| c.contains(&ids[0])).unwrap_or_else(|| panic!("{} is in no cluster", ids[0]));
        for id in ids {
            assert!(c.contains(id), "{id} is not with its identical copies");
        }
    }
}

#[test]
fn weibo_original_repeats_are_clustered() {
    exact_repeats_are_clustered("weibo_original.parquet", 3387, 30, "text", &[]);
}

/// English (Unicode word boundaries instead of jieba). BBC articles have
/// titles, which weigh in by default: a document is its text and title.
/// 35 of the 133 repeated texts carry different headlines; without the title
/// factor those are found too.
#[test]
fn bbc_news_repeats_are_clustered() {
    exact_repeats_are_clustered("bbc_news.parquet", 2225, 90, "concat(title, '\n', text)", &[]);
    exact_repeats_are_clustered("bbc_news.parquet", 2225, 130, "text", &["--title-col", ""]);
}

/// A CSV reader for the engine's own output (quoted fields may hold commas and newlines).
fn parse_csv(s: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', q) => quoted = !q,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (c, _) => field.push(c),
        }
    }
    rows
}
