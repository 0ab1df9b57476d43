//! The labelled benchmark (bench/quality/make_benchmark.py) at its quick
//! scale: the generator is deterministic, and detection quality at the
//! default settings stays above floors set from measured values, so a change
//! that loses duplicates or adds false ones fails here.

use std::path::Path;
use std::process::Command;

mod common;
use common::*;

fn generate(out: &Path) -> bool {
    let Ok(python) = std::env::var("NEARDUP_PYTHON") else {
        eprintln!("SKIPPED: no Python with pyarrow (set NEARDUP_PYTHON; tests/run.sh does)");
        return false;
    };
    let o = Command::new(python)
        .arg(root().join("bench/quality/make_benchmark.py"))
        .args(["--scale", "quick", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "make_benchmark.py failed:\n{}", stderr(&o));
    true
}

#[test]
fn quick_benchmark_is_deterministic_and_quality_stays_above_its_floor() {
    if shared_data("heybox_articles.parquet").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a"), dir.path().join("b"));
    if !generate(&first) {
        return;
    }
    generate(&second);
    // Measured at the defaults (SimHash k = 3 + MinHash 32x4 candidates,
    // Jaccard >= 0.5, improved weighting, precise tokenizer), 2026-11-22:
    // pairs P / R 1.0 / 1.0 (long_zh), 1.0 / 0.93 (news_zh), 0.86 / 0.84 (short_zh), 1.0 / 1.0 (en);
    // with the duplication policy (70 % of the shorter text shared), 2026-11-25: the same,
    // but short_zh 0.90 / 0.85; with boilerplate lines dropped by default, 2026-11-26:
    // short_zh 0.94 / 0.87, the others the same. With sentences inserted from
    // outside the benchmark, deleted or inserted sentences a small edit and
    // natural duplicates labelled by containment (2026-11-26): 1.0 / 1.0,
    // 1.0 / 0.96, 1.0 / 0.92, 1.0 / 1.0.
    // And SimHash alone at k = 6 (paper 000's claim: improved beats TF):
    // recall 0.88 vs 0.79 (long_zh), 0.87 vs 0.82 (en), precision 1.0; with the
    // small edits of 2026-11-26, 0.89 vs 0.87 and 0.88 vs 0.82.
    for (slice, precision_floor, recall_floor) in [("long_zh", 0.99, 0.99), ("news_zh", 0.99, 0.94), ("short_zh", 0.99, 0.90), ("en", 0.99, 0.99)] {
        for file in ["documents.parquet", "truth.parquet"] {
            let (a, b) = (first.join(slice).join(file), second.join(slice).join(file));
            assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "{slice}/{file} differs between two runs");
        }
        let input = format!("{slice}={}", first.join(slice).join("documents.parquet").display());
        let truth = first.join(slice).join("truth.parquet");
        let score = |name: &str, flags: &[&str]| {
            let out = dir.path().join(format!("run-{slice}-{name}"));
            let mut args = vec!["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap()];
            args.extend_from_slice(flags);
            ok(&neardup(&args));
            let report: serde_json::Value = serde_json::from_str(&ok(&neardup(&[
                "eval", "--truth", truth.to_str().unwrap(), "--predicted", out.to_str().unwrap(), "--json",
            ])))
            .unwrap();
            let (p, r) = (report["pairs"]["precision"].as_f64().unwrap(), report["pairs"]["recall"].as_f64().unwrap());
            eprintln!("{slice} {name}: pair precision {p:.4}, recall {r:.4}");
            assert!(report["truth_pairs"].as_u64().unwrap() >= 80, "{slice}: the benchmark lost its pairs");
            (p, r)
        };
        let (precision, recall) = score("default", &[]);
        assert!(precision >= precision_floor, "{slice}: pair precision {precision} fell below {precision_floor}");
        assert!(recall >= recall_floor, "{slice}: pair recall {recall} fell below {recall_floor}");
        // SimHash-cosine, measured 2026-11-26 (P / R): cosine:0.8 1.0 / 1.0 (long_zh),
        // 1.0 / 0.92 (news_zh), 1.0 / 0.91 (short_zh), 1.0 / 0.99 (en). At cosine:0.9
        // improved weights recall 0.96 / 0.74 / 0.74 / 0.96 against TF's 0.95 / 0.76 /
        // 0.77 / 0.93: the paper's claim holds on articles, not on paragraphs and
        // posts (docs/quality.md, "Small edits and labels by containment").
        let (cosine_floor_p, cosine_floor_r) = match slice {
            "long_zh" => (0.99, 0.99),
            "news_zh" => (0.99, 0.88),
            "short_zh" => (0.99, 0.87),
            _ => (0.99, 0.97),
        };
        let (p_cos, r_cos) = score("cosine", &["--verify", "cosine:0.8"]);
        assert!(p_cos >= cosine_floor_p && r_cos >= cosine_floor_r, "{slice}: cosine:0.8 at {p_cos} / {r_cos}");
        if slice == "long_zh" || slice == "en" {
            let (_, r_imp) = score("cosine-improved", &["--verify", "cosine:0.9"]);
            let (_, r_tf) = score("cosine-tf", &["--verify", "cosine:0.9", "--weighting", "tf"]);
            assert!(r_imp >= r_tf + 0.01, "{slice}: under cosine:0.9 improved weighting ({r_imp}) no longer beats TF ({r_tf})");
            let simhash_only = ["--candidates", "simhash", "--verify", "none", "-k", "6"];
            let (p_tf, r_tf) = score("tf", &[&simhash_only[..], &["--weighting", "tf"]].concat());
            let (p_imp, r_imp) = score("improved", &simhash_only);
            assert!(p_tf >= 0.99 && p_imp >= 0.99, "{slice}: SimHash k = 6 lost precision ({p_tf}, {p_imp})");
            assert!(r_imp > r_tf, "{slice}: improved weighting ({r_imp}) no longer beats TF ({r_tf}) at k = 6");
        }
    }
}

/// One run over all four slices at the defaults (bench/quality/mixed_run.py):
/// a mixed crawl gets, for each kind of text, the quality of a run over that
/// kind alone, and no document is paired with one of another kind. Measured
/// 2026-11-26 (pair P / R): 1.0 / 1.0 (long_zh), 1.0 / 0.99 (news_zh), 1.0 /
/// 0.97 (short_zh), 1.0 / 1.0 (en). The mixed run finds more than the slices
/// alone at this scale: the site templates of the Chinese slices reach the
/// boilerplate threshold (10 documents) only together.
#[test]
fn one_run_over_every_kind_of_text_keeps_each_kinds_quality() {
    if shared_data("heybox_articles.parquet").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    if !generate(&bench) {
        return;
    }
    let python = std::env::var("NEARDUP_PYTHON").unwrap();
    let o = Command::new(python)
        .arg(root().join("bench/quality/mixed_run.py"))
        .args(["--json", "--bench", bench.to_str().unwrap(), "--neardup", env!("CARGO_BIN_EXE_neardup")])
        .output()
        .unwrap();
    assert!(o.status.success(), "mixed_run.py failed:\n{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["pairs_across_slices"], 0, "documents of different kinds paired: {report}");
    for (slice, recall_floor) in [("long_zh", 0.99), ("news_zh", 0.97), ("short_zh", 0.95), ("en", 0.99)] {
        let r = &report["slices"][slice];
        let (p, recall) = (r["pair_precision"].as_f64().unwrap(), r["pair_recall"].as_f64().unwrap());
        eprintln!("{slice} in one run: pair precision {p:.4}, recall {recall:.4}");
        assert!(r["truth_pairs"].as_u64().unwrap() >= 80, "{slice}: the benchmark lost its pairs");
        assert!(p >= 0.99 && recall >= recall_floor, "{slice} in one run: {p} / {recall}, floors 0.99 / {recall_floor}");
    }
}

/// The candidate stage against brute force (bench/quality/candidate_misses.sql)
/// on real short posts: at the defaults it misses at most 1 % of the pairs
/// whose term sets reach Jaccard 0.55, and none at 0.70. Measured
/// 2026-11-25: 3 of 1,232 at 0.55 and above, 0 of 752 at 0.70 and above
/// (1,129 and 651 with SimHash candidates alone). The duplication policy,
/// which comes after the candidates and the check, is left out: what it
/// drops is not missed.
#[test]
fn candidates_miss_almost_nothing_above_the_threshold_on_weibo_original() {
    let Some(input) = shared_data("weibo_original.parquet") else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(&neardup(&["dedup", "-q", "-i", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--min-shared", "none"]));
    let sql = root().join("bench/quality/candidate_misses.sql");
    let (fp, pairs) = (format!("fp={}", out.join("fingerprints").display()), format!("pairs={}", out.join("pairs").display()));
    let csv = ok(&neardup(&["sql", "--format", "csv", "-t", &fp, "-t", &pairs, "-f", sql.to_str().unwrap()]));
    let bands: Vec<(String, u64, u64)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    let names: Vec<&str> = bands.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(names, ["0.50-0.55", "0.55-0.70", "0.70-1.00"], "{csv}");
    let (above, missed_above) = (bands[1].1 + bands[2].1, bands[1].2 + bands[2].2);
    assert!(above >= 1000, "the brute force found too few pairs: {csv}");
    assert!(missed_above * 100 <= above, "candidates missed {missed_above} of {above} pairs at Jaccard 0.55 and above");
    assert_eq!(bands[2].2, 0, "candidates missed pairs at Jaccard 0.70 and above: {csv}");
}

/// Floors of the partial-copy benchmark, set from measured values
/// (docs/quality.md, "Graded partial copies at the defaults": at 80
/// originals per corpus, mean errors 0.019 and 0.014; every pair sorted as
/// its planted share says at each knob, 159, 158 and 154 pairs, and at the
/// defaults, 154 pairs). The defaults' floor is issue 16's target.
const MEAN_ERROR_FLOOR: f64 = 0.03;
const AGREEMENT_FLOOR: f64 = 0.98;
const DEFAULTS_AGREEMENT_FLOOR: f64 = 0.99;

/// Graded partial copies of real articles (bench/quality/partial_copies.py):
/// the shares of shared text neardup measures are close to the planted
/// ones, and `--min-shared` keeps a partial copy with its original exactly
/// when the planted share reaches the knob, on almost every pair.
#[test]
fn graded_partial_copies_are_measured_and_sorted_by_the_policy() {
    let Ok(python) = std::env::var("NEARDUP_PYTHON") else {
        eprintln!("SKIPPED: no Python with pyarrow (set NEARDUP_PYTHON; tests/run.sh does)");
        return;
    };
    if shared_data("heybox_articles.parquet").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(python)
        .arg(root().join("bench/quality/partial_copies.py"))
        .args(["--n", "80", "--out", dir.path().to_str().unwrap(), "--neardup", env!("CARGO_BIN_EXE_neardup")])
        .output()
        .unwrap();
    assert!(o.status.success(), "partial_copies.py failed:\n{}", stderr(&o));
    let results: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
    for corpus in ["long_zh", "en"] {
        let measure = &results["measure"][corpus];
        assert!(measure["pairs"].as_u64().unwrap() >= 60, "{results}");
        assert!(measure["mean_abs_error"].as_f64().unwrap() < MEAN_ERROR_FLOOR, "{corpus}: {results}");
    }
    for knob in ["0.3", "0.5", "0.7"] {
        let agree = results["policy"][knob]["share"].as_f64().unwrap();
        assert!(agree >= AGREEMENT_FLOOR, "--min-shared {knob}: {results}");
    }
    let defaults = &results["policy"]["defaults"];
    assert!(defaults["pairs"].as_u64().unwrap() >= 140, "{results}");
    assert!(defaults["share"].as_f64().unwrap() >= DEFAULTS_AGREEMENT_FLOOR, "defaults: {results}");
}
