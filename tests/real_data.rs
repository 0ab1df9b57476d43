//! Runs on real text from ../shared/data (skipped, with a message, when that
//! folder is absent).

use std::collections::BTreeMap;

mod common;
use common::*;

/// Weibo original posts hold natural exact repeats: every group of identical
/// texts must end up in one cluster, and the exact-copy pairs at distance 0.
#[test]
fn weibo_exact_repeats_are_clustered() {
    let Some(path) = shared_data("weibo_original.parquet") else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(&neardup(&["dedup", "-q", "-i", path.to_str().unwrap(), "-o", out.to_str().unwrap()]));
    let s = summary(&out);
    assert_eq!(s["documents"], 3387);

    // Brute-force truth: identical texts, read with the engine itself.
    let table = format!("w={}", path.display());
    let csv = ok(&neardup(&["sql", "--table", &table, "--format", "csv", "-c",
        "SELECT id, text FROM w WHERE text IN (SELECT text FROM w WHERE length(trim(text)) > 0 GROUP BY text HAVING count(*) > 1) ORDER BY id"]));
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Texts may hold commas and newlines: read them with a tiny CSV parser.
    let rows = parse_csv(&csv);
    for row in rows.iter().skip(1) {
        groups.entry(row[1].clone()).or_default().push(format!("weibo_original/{}", row[0]));
    }
    assert!(groups.len() >= 30, "expected the natural repeats, found {} groups", groups.len());
    let clusters = clusters(&out);
    for ids in groups.values() {
        let c = clusters.iter().find(|c| c.contains(&ids[0])).unwrap_or_else(|| panic!("{} is in no cluster", ids[0]));
        for id in ids {
            assert!(c.contains(id), "{id} is not with its identical copies");
        }
    }
}

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
