//! End-to-end runs of the real binary on sample_data: the pairs and clusters
//! `dedup` finds, the output layout, job files, IDF models, keep rules,
//! candidate sources and checks, memory limits and `eval`.

use std::collections::BTreeSet;
use std::path::Path;

mod common;
use common::*;

fn dedup(out: &Path, extra: &[&str]) -> std::process::Output {
    let news = format!("news={}", sample("news.parquet"));
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    let out = out.display().to_string();
    let mut args = vec!["dedup", "-q", "--input", &news, "--input", &reprints, "--output", &out];
    args.extend_from_slice(extra);
    neardup(&args)
}

fn truth() -> Vec<(String, String, String)> {
    std::fs::read_to_string(sample("truth.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (format!("{}/{}", f[0], f[1]), format!("{}/{}", f[2], f[3]), f[4].to_string())
        })
        .collect()
}

fn same_cluster(clusters: &BTreeSet<BTreeSet<String>>, a: &str, b: &str) -> bool {
    clusters.iter().any(|c| c.contains(a) && c.contains(b))
}

#[test]
fn a_dry_run_plans_the_steps_the_run_takes() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [&[&str]; 4] = [
        &[],
        &["--boilerplate-lines", "3", "--survivors"],
        &["--weighting", "tf", "--verify", "none", "--candidates", "simhash"],
        &["--weighting", "tf", "--save-idf-model", "MODEL"],
    ];
    for (i, extra) in cases.iter().enumerate() {
        let out = dir.path().join(format!("out{i}"));
        let model = dir.path().join(format!("df{i}.parquet")).display().to_string();
        let extra: Vec<&str> = extra.iter().map(|a| if *a == "MODEL" { model.as_str() } else { a }).collect();
        let plan = ok(&dedup(&out, &[&extra[..], &["--dry-run", "--json"]].concat()));
        assert!(!out.exists(), "a dry run writes nothing");
        ok(&dedup(&out, &extra));
        assert_eq!(planned_steps(&plan), timed_steps(&out), "{extra:?}");
    }
    // The plan says which statements each stage runs.
    let plan = ok(&dedup(&dir.path().join("plan"), &["--dry-run", "--json"]));
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(plan["plan"]["stages"][0], "boilerplate (15_boilerplate_lines.sql)");
    assert_eq!(plan["plan"]["stages"][1], "segment (12_documents_in_memory.sql, 20_terms.sql, 30_corpus_size.sql)");
}

#[test]
fn dedup_finds_the_planted_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(&dedup(&out, &[]));
    for f in ["_SUCCESS", "summary.json", "fingerprints/part-00000.parquet", "pairs/part-00000.parquet", "clusters/part-00000.parquet"] {
        assert!(out.join(f).exists(), "missing {f}");
    }
    assert!(!out.join("_work").exists(), "intermediate tables are removed");

    let clusters = clusters(&out);
    let truth = truth();
    // Edits that keep every term: always found at k = 3.
    for (a, b, edit) in &truth {
        if ["exact_copy", "same_source_copy", "width_and_punctuation", "spacing"].contains(&edit.as_str()) {
            assert!(same_cluster(&clusters, a, b), "{edit} pair {a} ~ {b} not found");
        }
    }
    // At the defaults (SimHash and MinHash candidates, Jaccard-checked) every planted pair.
    let found = truth.iter().filter(|(a, b, _)| same_cluster(&clusters, a, b)).count();
    assert_eq!(found, truth.len(), "found only {found} of {} planted pairs", truth.len());
    // Unrelated paragraphs (reprints/u*) are nobody's duplicates.
    for c in &clusters {
        assert!(c.iter().all(|d| !d.starts_with("reprints/u")), "false positive cluster {c:?}");
        assert!(c.len() >= 2);
    }
    // Every member of a cluster is explained by a planted pair.
    let planted: BTreeSet<&String> = truth.iter().flat_map(|(a, b, _)| [a, b]).collect();
    for c in &clusters {
        for d in c {
            assert!(planted.contains(d), "{d} is in cluster {c:?} but was not planted");
        }
    }

    // Pairs: a < b; beyond k = 3 only MinHash pairs, whose term sets passed
    // the check; exact copies at distance 0.
    let pairs = pairs(&out);
    let similarity = strings(&read_dir(&out.join("pairs")), "similarity");
    for ((a, b, h), sim) in pairs.iter().zip(&similarity) {
        assert!(a < b);
        if sim.is_empty() || sim == "NULL" {
            assert_eq!(h, "0", "only identical fingerprints go unchecked: {a} ~ {b}");
        } else {
            assert!(sim.parse::<f64>().unwrap() >= 0.5, "{a} ~ {b} at similarity {sim}");
        }
    }
    assert!(pairs.iter().any(|(_, _, h)| h.parse::<u32>().unwrap() > 3), "MinHash adds pairs beyond k");
    assert!(pairs.contains(&("news/pd1998-00018".into(), "news/pd1998-00018-dup".into(), "0".into())), "{pairs:?}");

    // Fingerprints: every document, NULL where there is no text.
    let fp = read_dir(&out.join("fingerprints"));
    let ids = strings(&fp, "id");
    let simhash = u64s(&fp, "simhash");
    assert_eq!(ids.len(), 507);
    for missing in ["pd-empty", "pd-null"] {
        let i = ids.iter().position(|x| x == missing).unwrap();
        assert_eq!(simhash[i], None, "{missing} must have a NULL fingerprint");
    }

    let s = summary(&out);
    assert_eq!(s["documents"], 507);
    assert_eq!(s["documents_without_terms"], 2);
    assert_eq!(s["clusters"].as_u64().unwrap(), clusters.len() as u64);
    assert_eq!(s["pairs"].as_u64().unwrap(), pairs.len() as u64);
    assert_eq!(s["settings"]["tokenizer"], "precise");
    assert_eq!(s["settings"]["weighting"], "improved");
    assert_eq!(s["band_plan"]["k"], 3);
    for stage in ["segment", "corpus_df", "fingerprints", "join", "clusters", "pairs"] {
        assert!(s["timings_ms"][stage].is_u64(), "no timing for {stage}");
    }

    // The same output read back by an independent reader, when one is set up.
    if let Ok(python) = std::env::var("NEARDUP_PYTHON") {
        let check = std::process::Command::new(python)
            .arg(root().join("tests/readback.py"))
            .arg(&out)
            .output()
            .unwrap();
        assert!(check.status.success(), "pyarrow readback failed:\n{}", String::from_utf8_lossy(&check.stderr));
        let counts: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
        assert_eq!(counts["fingerprints"], 507);
        assert_eq!(counts["pairs"].as_u64().unwrap(), pairs.len() as u64);
        assert_eq!(counts["clusters"].as_u64().unwrap(), clusters.iter().map(|c| c.len() as u64).sum::<u64>());
    } else {
        eprintln!("SKIPPED: pyarrow readback (set NEARDUP_PYTHON to a python with pyarrow; tests/run does)");
    }

    // `pairs` over the fingerprints gives the same clusters and pairs.
    let out2 = dir.path().join("out2");
    let fps = format!("{}", out.join("fingerprints").display());
    ok(&neardup(&["pairs", "-q", "--fingerprints", &fps, "--output", out2.to_str().unwrap()]));
    assert_eq!(common::clusters(&out2), clusters);
    assert_eq!(common::pairs(&out2), pairs);
    assert!(out2.join("_SUCCESS").exists());
    assert_eq!(summary(&out2)["settings"]["weighting"], "improved");
    assert_eq!((summary(&out2)["documents"].as_u64(), summary(&out2)["documents_without_terms"].as_u64()), (Some(507), Some(2)));

    // `fingerprint` writes the same fingerprints and nothing else.
    let news = format!("news={}", sample("news.parquet"));
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    let out3 = dir.path().join("out3");
    let line = ok(&neardup(&["fingerprint", "-q", "--input", &news, "--input", &reprints, "--output", out3.to_str().unwrap()]));
    assert!(line.starts_with("507 documents (2 without terms): ") && line.contains(" distinct fingerprints; wrote "), "{line}");
    let both = |dir: &Path| {
        let batches = read_dir(&dir.join("fingerprints"));
        let sets: Vec<String> = batches.iter().map(|b| format!("{:?}", b.column_by_name("term_set").unwrap())).collect();
        (strings(&batches, "id"), u64s(&batches, "simhash"), sets)
    };
    assert_eq!(both(&out3), both(&out));
    assert!(!out3.join("pairs").exists() && !out3.join("clusters").exists() && out3.join("_SUCCESS").exists());
    let s = summary(&out3);
    assert_eq!((s["command"].as_str(), s["documents"].as_u64()), (Some("fingerprint"), Some(507)));
    assert_eq!(s["distinct_fingerprints"], summary(&out)["distinct_fingerprints"]);
}

#[test]
fn job_file_runs_the_same_job() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.toml");
    let text = std::fs::read_to_string(root().join("jobs/example.toml"))
        .unwrap()
        .replace("../target/neardup-example", "out")
        .replace("../sample_data/", &format!("{}/", root().join("sample_data").display()));
    std::fs::write(&job, text).unwrap();
    let stdout = ok(&neardup(&["run", "-q", job.to_str().unwrap()]));
    assert!(stdout.contains("duplicates in"), "{stdout}");
    assert!(stdout.ends_with(" s\n"), "the summary line ends with a newline: {stdout:?}");
    let out = dir.path().join("out");
    let direct = dir.path().join("direct");
    ok(&dedup(&direct, &["--keep", "earliest:date"]));
    assert_eq!(clusters(&out), clusters(&direct));
    assert_eq!(summary(&out)["keep"], "earliest:date");
    // The survivors: every input row but the non-representative members.
    let news = read_dir(&out.join("survivors/news"));
    let reprints = read_dir(&out.join("survivors/reprints"));
    let kept = news.iter().map(|b| b.num_rows()).sum::<usize>() + reprints.iter().map(|b| b.num_rows()).sum::<usize>();
    assert_eq!(kept as u64, 507 - summary(&out)["duplicates"].as_u64().unwrap());
    assert_eq!(news[0].schema().fields().len(), 3, "survivors keep every input column");
    // Rerunning with overwrite = true replaces the output cleanly.
    ok(&neardup(&["run", "-q", job.to_str().unwrap()]));
    assert_eq!(clusters(&out), clusters(&direct));
}

#[test]
fn saved_idf_model_reproduces_the_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("models/idf.parquet");
    let model_s = model.to_str().unwrap();
    let first = dir.path().join("first");
    ok(&dedup(&first, &["--save-idf-model", model_s]));
    let s = summary(&first);
    assert_eq!(s["idf"]["source"], "corpus");
    assert_eq!(s["idf"]["saved_to"], model_s);

    // The model: one row per term, with N in its metadata.
    let m = read_dir(model.parent().unwrap());
    let rows: usize = m.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, s["idf"]["terms"].as_u64().unwrap());
    assert!(strings(&m, "term").iter().any(|t| t == "北京"));
    // Hashes and terms are distinct: written without a dictionary, which
    // the writer would build only to give up. Document frequencies repeat
    // and keep theirs.
    {
        use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
        let reader = SerializedFileReader::new(std::fs::File::open(&model).unwrap()).unwrap();
        for group in reader.metadata().row_groups() {
            for column in group.columns() {
                let name = column.column_path().string();
                let has_dictionary = column.dictionary_page_offset().is_some();
                assert_eq!(has_dictionary, name == "df", "column {name}: dictionary {has_dictionary}");
            }
        }
    }

    // Loading it gives the same fingerprints as computing it.
    let second = dir.path().join("second");
    ok(&dedup(&second, &["--idf-model", model_s]));
    let cols = |out: &Path| {
        let b = read_dir(&out.join("fingerprints"));
        (strings(&b, "id"), u64s(&b, "simhash"))
    };
    assert_eq!(cols(&first), cols(&second));
    assert_eq!(summary(&second)["idf"]["source"], model_s);

    // A smaller corpus keeps the model's N.
    let third = dir.path().join("third");
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    ok(&neardup(&["dedup", "-q", "-i", &reprints, "-o", third.to_str().unwrap(), "--idf-model", model_s]));
    assert_eq!(summary(&third)["idf"]["n_docs"], s["idf"]["n_docs"]);

    // A model made with another tokenizer is refused.
    let err = dedup(&dir.path().join("fourth"), &["--idf-model", model_s, "--tokenizer", "full"]);
    exits_with(&err, 2, &["other settings", "full"]);
    let err = dedup(&dir.path().join("fifth"), &["--idf-model", &sample("news.parquet")]);
    exits_with(&err, 2, &["not a neardup IDF model"]);
    // So is one made with another boilerplate rule (before lines were
    // dropped by default: none), naming the option that matches it.
    let err = dedup(&dir.path().join("fourth"), &["--idf-model", model_s, "--boilerplate-lines", "0"]);
    exits_with(&err, 2, &["other settings", "run with --boilerplate-lines 10 as it was built"]);

    // A weighting without idf still saves the corpus model when asked to.
    let tf_model = dir.path().join("tf-idf.parquet");
    ok(&dedup(&dir.path().join("sixth"), &["--weighting", "tf", "--save-idf-model", tf_model.to_str().unwrap()]));
    assert_eq!(std::fs::read(&tf_model).unwrap(), std::fs::read(&model).unwrap(), "the model does not depend on the weighting");
}

#[test]
fn keep_longest_picks_the_longest_text() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(&dedup(&out, &["--keep", "longest"]));
    let fp = read_dir(&out.join("fingerprints"));
    let chars: std::collections::HashMap<String, u64> = strings(&fp, "source")
        .iter()
        .zip(strings(&fp, "id"))
        .zip(u64s(&fp, "n_chars"))
        .map(|((s, i), n)| (format!("{s}/{i}"), n.unwrap_or(0)))
        .collect();
    let c = read_dir(&out.join("clusters"));
    let (s, i, cid, rep) = (strings(&c, "source"), strings(&c, "id"), strings(&c, "cluster_id"), strings(&c, "is_representative"));
    let mut best: std::collections::BTreeMap<&str, (u64, String)> = Default::default();
    let mut reps: std::collections::BTreeMap<&str, String> = Default::default();
    for n in 0..s.len() {
        let doc = format!("{}/{}", s[n], i[n]);
        let len = chars[&doc];
        let e = best.entry(&cid[n]).or_insert((0, String::new()));
        if len > e.0 || (len == e.0 && doc < e.1) {
            *e = (len, doc.clone());
        }
        if rep[n] == "true" {
            assert!(reps.insert(&cid[n], doc).is_none(), "two representatives in cluster {}", cid[n]);
        }
    }
    for (cluster, (_, doc)) in &best {
        assert_eq!(&reps[cluster], doc, "cluster {cluster}");
    }
    // With boilerplate copies, the longest is not always the smallest id.
    let smallest: BTreeSet<String> = clusters(&out).iter().map(|c| c.iter().next().unwrap().clone()).collect();
    assert!(reps.values().any(|r| !smallest.contains(r)), "the keep rule made no difference");
}

/// `neardup eval` on the sample's planted pairs: the figures the README
/// reports (all 65 pairs at the defaults; 52 with plain SimHash at k = 3,
/// no false positive), per slice, as JSON and as a table; bad truth tables
/// are input errors.
#[test]
fn eval_scores_a_run_against_the_planted_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let default = dir.path().join("default");
    ok(&dedup(&default, &[]));
    let json: serde_json::Value = serde_json::from_str(&ok(&neardup(&[
        "eval", "--truth", &sample("truth.csv"), "--predicted", default.to_str().unwrap(), "--json",
    ])))
    .unwrap();
    assert_eq!((json["truth_pairs"].as_u64(), json["reported_pairs"].as_u64()), (Some(65), Some(65)));
    assert_eq!((json["pairs"]["precision"].as_f64(), json["pairs"]["recall"].as_f64()), (Some(1.0), Some(1.0)));

    let out = dir.path().join("out");
    ok(&dedup(&out, &["--candidates", "simhash", "--verify", "none"]));
    let truth = sample("truth.csv");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&neardup(&["eval", "--truth", &truth, "--predicted", out.to_str().unwrap(), "--json"]))).unwrap();
    assert_eq!(json["documents"], 507);
    assert_eq!((json["truth_pairs"].as_u64(), json["reported_pairs"].as_u64()), (Some(65), Some(52)));
    assert_eq!(json["pairs"]["precision"], 1.0);
    assert_eq!(json["pairs"]["recall"], 0.8);
    assert_eq!(json["clusters"]["recall"], 0.8);
    let ari = json["adjusted_rand_index"].as_f64().unwrap();
    assert!((0.88..0.89).contains(&ari), "{ari}");
    let slice = |name: &str| json["slices"].as_array().unwrap().iter().find(|s| s["slice"] == name).unwrap().clone();
    for exact in ["exact_copy", "same_source_copy", "spacing", "width_and_punctuation"] {
        assert_eq!(slice(exact)["recall"], 1.0, "{exact}");
    }
    assert_eq!((slice("boilerplate")["pairs"].as_u64(), slice("boilerplate")["found"].as_u64()), (Some(11), Some(6)));

    let table = ok(&neardup(&["eval", "--truth", &truth, "--predicted", out.to_str().unwrap()]));
    assert!(table.contains("| pairs | 1.0000 | 0.8000 | 0.8889 |"), "{table}");

    // A truth table without the needed columns, and a corpus that does not hold the truth's documents.
    let bad = neardup(&["eval", "--truth", &sample("news.parquet"), "--predicted", out.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("source_a, id_a"), "{}", stderr(&bad));
    let other = dir.path().join("news-only");
    ok(&neardup(&["dedup", "-q", "-i", &format!("news={}", sample("news.parquet")), "-o", other.to_str().unwrap()]));
    let mismatch = neardup(&["eval", "--truth", &truth, "--predicted", other.to_str().unwrap()]);
    assert_eq!(mismatch.status.code(), Some(2), "{}", stderr(&mismatch));
    assert!(stderr(&mismatch).contains("not among the 407 documents"), "{}", stderr(&mismatch));
}

/// Candidate sources and checks: boilerplate lines found and dropped on the
/// sample (its boilerplate copies share site templates); MinHash alone finds
/// the copies SimHash misses; a MinHash run without a check, and a check on
/// fingerprints without term sets, are input errors that say what to do.
#[test]
fn candidates_checks_and_boilerplate_lines() {
    let dir = tempfile::tempdir().unwrap();
    let truth = sample("truth.csv");
    let score = |out: &Path| -> serde_json::Value {
        serde_json::from_str(&ok(&neardup(&["eval", "--truth", &truth, "--predicted", out.to_str().unwrap(), "--json"]))).unwrap()
    };

    // 40 news articles reprinted inside one site template (its lines on their own).
    let wrapped = dir.path().join("wrapped.parquet");
    let wrap = format!(
        "COPY (SELECT id, '首页 > 新闻中心 > 正文' || chr(10) || text || chr(10) || '版权所有 某某网 京ICP备12345678号' AS text \
         FROM news WHERE length(text) > 200 ORDER BY id LIMIT 40) TO '{}' STORED AS PARQUET",
        wrapped.display()
    );
    ok(&neardup(&["sql", "--table", &format!("news={}", sample("news.parquet")), "-c", &wrap]));
    let boiler = dir.path().join("boiler");
    let (news, wrapped) = (format!("news={}", sample("news.parquet")), format!("wrapped={}", wrapped.display()));
    ok(&neardup(&["dedup", "-q", "-i", &news, "-i", &wrapped, "-o", boiler.to_str().unwrap(), "--boilerplate-lines", "5"]));
    let s = summary(&boiler);
    assert_eq!(s["boilerplate_lines"], 2, "the template's two lines: {s}");
    assert_eq!(s["settings"]["boilerplate"], "lines-in>=5-docs");
    let clusters = clusters(&boiler);
    for c in &clusters {
        for d in c.iter().filter(|d| d.starts_with("wrapped/")) {
            let original = d.replacen("wrapped/", "news/", 1);
            assert!(c.contains(&original), "{d} is not with {original}: {c:?}");
        }
    }
    let reprints: usize = clusters.iter().map(|c| c.iter().filter(|d| d.starts_with("wrapped/")).count()).sum();
    assert_eq!(reprints, 40, "every reprint is found");
    // By default lines in 10 documents are boilerplate: the template's too;
    // 0 turns it off.
    let (default, off) = (dir.path().join("default"), dir.path().join("off"));
    ok(&neardup(&["dedup", "-q", "-i", &news, "-i", &wrapped, "-o", default.to_str().unwrap()]));
    let s = summary(&default);
    assert_eq!((s["boilerplate_lines"].as_u64(), s["settings"]["boilerplate"].as_str()), (Some(2), Some("lines-in>=10-docs")));
    assert_eq!(self::clusters(&default), clusters);
    ok(&neardup(&["dedup", "-q", "-i", &news, "-i", &wrapped, "-o", off.to_str().unwrap(), "--boilerplate-lines", "0"]));
    let s = summary(&off);
    assert_eq!((s["boilerplate_lines"].as_u64(), s["settings"]["boilerplate"].as_str(), s["timings_ms"]["boilerplate"].is_null()), (Some(0), Some("none"), true));

    let minhash = dir.path().join("minhash");
    ok(&dedup(&minhash, &["--candidates", "minhash"]));
    let s = summary(&minhash);
    assert_eq!((s["candidates"].as_str(), s["verify"].as_str(), s["band_plan"].is_null()), (Some("minhash:32x4"), Some("jaccard:0.5"), true));
    let report = score(&minhash);
    assert_eq!(report["pairs"]["precision"], 1.0);
    assert!(report["pairs"]["recall"].as_f64().unwrap() >= 0.95, "{report}");
    // A one-shot run computes the band keys of its distinct fingerprints
    // and keeps none (a store's runs keep them: tests/nightly.rs); `pairs`
    // over its fingerprints computes them alike and finds the same pairs.
    let fingerprints = read_dir(&minhash.join("fingerprints"));
    assert_eq!(fingerprints.iter().map(|b| b.column_by_name("minhash").unwrap().null_count()).sum::<usize>(), 507);
    assert!(footer(&minhash.join("fingerprints/part-00000.parquet")).get("minhash").is_none());
    let again = dir.path().join("again");
    let f = minhash.join("fingerprints");
    ok(&neardup(&["pairs", "-q", "--fingerprints", f.to_str().unwrap(), "-o", again.to_str().unwrap(), "--candidates", "minhash"]));
    assert_eq!(pairs(&again), pairs(&minhash));
    assert!(pairs(&again).len() >= 60);

    let bad = dir.path().join("bad");
    exits_with(&dedup(&bad, &["--candidates", "minhash", "--verify", "none"]), 2, &["must be checked", "--verify"]);
    exits_with(&dedup(&bad, &["--verify", "euclid:0.5"]), 2, &["unknown verification measure 'euclid'"]);
    exits_with(&dedup(&bad, &["--boilerplate-lines", "1"]), 2, &["at least 2"]);
    exits_with(&dedup(&bad, &["--boilerplate-lines", "0", "--boilerplate-set", "lines.parquet"]), 2, &["they are off"]);
    let not_a_set = sample("news.parquet");
    exits_with(&dedup(&bad, &["--boilerplate-lines", "5", "--boilerplate-set", &not_a_set]), 2, &["news.parquet' has no column 'line_hash'"]);
    assert!(!bad.exists());

    // Fingerprints without term sets (made by another tool, or an older neardup).
    let plain = dir.path().join("plain.parquet");
    let copy = format!("COPY (SELECT source, id, simhash FROM fp) TO '{}' STORED AS PARQUET", plain.display());
    ok(&neardup(&["sql", "--table", &format!("fp={}", boiler.join("fingerprints").display()), "-c", &copy]));
    let fingerprints = plain.to_str().unwrap();
    exits_with(&neardup(&["pairs", "-q", "--fingerprints", fingerprints, "-o", bad.to_str().unwrap()]), 2, &["no term_set column"]);
    ok(&neardup(&["pairs", "-q", "--fingerprints", fingerprints, "-o", bad.to_str().unwrap(), "--candidates", "simhash", "--verify", "none"]));
}

/// Under --memory-limit the SimHash pairs are found by sorting in memory
/// when the limit has room for it, else by a join that sorts and spills:
/// the same bytes either way. A synthetic corpus of 303,000 fingerprints
/// (3,000 planted near copies) gives byte-identical pairs and clusters with
/// a 256 MB limit (room to sort) and without one; one of 4,096 fingerprints
/// within twelve bits of each other (610,304 pairs, more than the room set
/// aside for the sort's pairs) and 20,000 others joins under the same
/// limit, with the bytes of the run without one; a limit too small to run
/// at all is a clear runtime failure.
#[test]
fn memory_limit_spills_with_identical_results() {
    let dir = tempfile::tempdir().unwrap();
    let make = |name: &str, select: &str| {
        let path = dir.path().join(name);
        ok(&neardup(&["sql", "-c", &format!("COPY ({select}) TO '{}' STORED AS PARQUET", path.display())]));
        path
    };
    let fps = make(
        "synthetic.parquet",
        "SELECT 'syn' AS source, CAST(value AS VARCHAR) AS id, hash64(CAST(value AS VARCHAR)) AS simhash \
         FROM generate_series(1, 300000) \
         UNION ALL SELECT 'syn', 'near-' || CAST(value AS VARCHAR), hash64(CAST(value AS VARCHAR)) ^ CAST(value % 7 + 1 AS BIGINT UNSIGNED) \
         FROM generate_series(1, 3000)",
    );
    let dense = make(
        "dense.parquet",
        "SELECT 'dense' AS source, CAST(value AS VARCHAR) AS id, CAST(value AS BIGINT UNSIGNED) AS simhash FROM generate_series(0, 4095) \
         UNION ALL SELECT 'random', CAST(value AS VARCHAR), hash64(CAST(value AS VARCHAR)) FROM generate_series(1, 20000)",
    );
    let run = |fps: &Path, name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec!["pairs", "-q", "--fingerprints", fps.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend_from_slice(&["--candidates", "simhash", "--verify", "none"]);
        args.extend_from_slice(extra);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_neardup")).args(&args).env("NEARDUP_LOG", "debug").output().unwrap();
        (o, out)
    };
    let same_bytes = |a: &Path, b: &Path| {
        for table in ["pairs/part-00000.parquet", "clusters/part-00000.parquet"] {
            assert!(std::fs::read(a.join(table)).unwrap() == std::fs::read(b.join(table)).unwrap(), "{table} differs");
        }
    };
    let (o, free) = run(&fps, "free", &[]);
    ok(&o);
    let (o, limited) = run(&fps, "limited", &["--memory-limit", "256M"]);
    ok(&o);
    assert!(!stderr(&o).contains("joining"), "{}", stderr(&o));
    assert_eq!(summary(&free)["pairs"], 3000);
    same_bytes(&free, &limited);

    let (o, free) = run(&dense, "dense-free", &[]);
    ok(&o);
    let (o, joined) = run(&dense, "dense-joined", &["--memory-limit", "256M"]);
    ok(&o);
    assert!(stderr(&o).contains("SimHash pairs: more than 65536 by sorting in memory; joining instead"), "{}", stderr(&o));
    assert_eq!(summary(&joined)["pairs"], 610_304);
    same_bytes(&free, &joined);

    let (o, starved) = run(&fps, "starved", &["--memory-limit", "32M"]);
    exits_with(&o, 1, &["ran out of memory under --memory-limit", "raise the limit"]);
    assert!(!starved.exists());
}

/// --top-k: only a document's K heaviest terms vote. A document with at
/// most K distinct terms keeps its fingerprint; longer ones change; the
/// setting is recorded with the fingerprints.
#[test]
fn top_k_lets_only_the_heaviest_terms_vote() {
    let dir = tempfile::tempdir().unwrap();
    let (all, top) = (dir.path().join("all"), dir.path().join("top"));
    ok(&dedup(&all, &[]));
    ok(&dedup(&top, &["--top-k", "8"]));
    assert_eq!(summary(&top)["settings"]["top_k"], "8");
    assert_eq!(summary(&all)["settings"]["top_k"], "all");
    let read = |out: &Path| {
        let b = read_dir(&out.join("fingerprints"));
        let (ids, fps) = (strings(&b, "id"), strings(&b, "simhash"));
        let sizes: Vec<usize> = {
            let sets = strings(&b, "term_set");
            sets.iter().map(|s| if s == "NULL" || s == "[]" { 0 } else { s.matches(',').count() + 1 }).collect()
        };
        ids.into_iter().zip(fps.into_iter().zip(sizes)).collect::<std::collections::BTreeMap<_, _>>()
    };
    let (a, t) = (read(&all), read(&top));
    let (mut same_short, mut changed_long) = (0, 0);
    for (id, (fp, size)) in &a {
        let (fp_top, _) = &t[id];
        if *size <= 8 {
            assert_eq!(fp, fp_top, "{id} has {size} terms: top-8 must not change it");
            same_short += 1;
        } else if fp != fp_top {
            changed_long += 1;
        }
    }
    assert!(same_short > 0 && changed_long > 100, "{same_short} short kept, {changed_long} long changed");
    exits_with(&dedup(&dir.path().join("bad"), &["--top-k", "0"]), 2, &["top_k = 0"]);
}

/// Every pair carries how much of each side's text the other holds
/// (`shared_a`, `shared_b`), and `--min-shared` keeps only the pairs whose
/// shorter document is found in the other to that share: on the sample's
/// planted copies, copies that only change spacing, width or punctuation
/// share all their text, a copy that drops a sentence or gains a site tag
/// holds all of the shorter text, and a copy with edited numbers less.
#[test]
fn pairs_carry_their_shared_text_and_a_policy_governs_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(&dedup(&out, &["--min-shared", "none"]));
    let all = shares(&out);
    let edits: std::collections::BTreeMap<(String, String), String> =
        truth().into_iter().flat_map(|(a, b, e)| [((a.clone(), b.clone()), e.clone()), ((b, a), e)]).collect();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for ((a, b), (shared_a, shared_b)) in &all {
        let Some(edit) = edits.get(&(a.clone(), b.clone())) else { continue };
        *seen.entry(edit.clone()).or_default() += 1;
        let (low, high) = (shared_a.min(*shared_b), shared_a.max(*shared_b));
        match edit.as_str() {
            "exact_copy" | "same_source_copy" | "spacing" | "width_and_punctuation" => assert_eq!((low, high), (1.0, 1.0), "{a} {b} {edit}"),
            "last_sentence_dropped" | "boilerplate" => assert!(high == 1.0 && low < 1.0, "{a} {b} {edit}: {low} {high}"),
            "number_edit" => assert!(high < 1.0 && high > 0.5, "{a} {b} {edit}: {low} {high}"),
            _ => {}
        }
    }
    for edit in ["exact_copy", "spacing", "width_and_punctuation", "last_sentence_dropped", "boilerplate", "number_edit"] {
        assert!(seen.get(edit).copied().unwrap_or(0) >= 5, "pairs of '{edit}' seen: {seen:?}");
    }
    let s = summary(&out);
    assert_eq!(s["min_shared"], serde_json::Value::Null, "--min-shared none");
    let (checked, near) = (s["checked_pairs"].as_u64().unwrap(), s["near_fingerprint_pairs"].as_u64().unwrap());
    assert!(checked == near && near > 0 && checked < s["candidate_pairs"].as_u64().unwrap(), "without a policy the checked pairs are kept: {s}");
    let by_share: u64 = s["shared_text"]["pairs_by_share"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(by_share + s["shared_text"]["unmeasured"].as_u64().unwrap(), s["pairs"].as_u64().unwrap(), "{s}");

    // The policy: the shorter text found whole in the other.
    let strict = dir.path().join("strict");
    ok(&dedup(&strict, &["--min-shared", "1.0"]));
    let kept = shares(&strict);
    assert!(kept.values().all(|(a, b)| a.max(*b) == 1.0), "every kept pair holds its shorter text whole");
    let whole = all.values().filter(|(a, b)| a.max(*b) == 1.0).count();
    assert_eq!(kept.len(), whole, "exactly the pairs that hold the shorter text whole are kept");
    assert!(kept.len() < all.len());
    let s = summary(&strict);
    assert_eq!(s["min_shared"], 1.0);
    assert_eq!(s["checked_pairs"].as_u64(), Some(checked), "the policy comes after the check");
    assert!(s["near_fingerprint_pairs"].as_u64().unwrap() < checked, "the policy leaves some checked pairs out: {s}");
    // Recorded with the outputs too: in the footer of pairs/.
    let neardup = footer(&strict.join("pairs/part-00000.parquet"));
    assert_eq!((neardup["min_shared"].as_f64(), neardup["shingles"].as_str()), (Some(1.0), Some("shingles:5-tokens,bottom-256,mix-32")));

    let bad = dir.path().join("bad");
    exits_with(&dedup(&bad, &["--min-shared", "0.5", "--verify", "none", "--candidates", "simhash"]), 2, &["--min-shared", "--verify"]);
    exits_with(&dedup(&bad, &["--min-shared", "1.5"]), 2, &["out of range"]);
    assert!(!bad.exists());

    // By default a checked run keeps a pair when 70 % of its shorter text is shared; the
    // sample's planted copies all share more, so the default finds them all.
    let default = dir.path().join("default");
    ok(&dedup(&default, &[]));
    assert_eq!(summary(&default)["min_shared"], 0.7);
    assert_eq!(shares(&default).len(), all.len());
    assert!(shares(&default).values().all(|(a, b)| a.max(*b) >= 0.7));
    // Without a check there is no policy.
    let unchecked = dir.path().join("unchecked");
    ok(&dedup(&unchecked, &["--verify", "none", "--candidates", "simhash"]));
    assert_eq!(summary(&unchecked)["min_shared"], serde_json::Value::Null);
}

/// SimHash-cosine (`--verify cosine:T`): every document keeps its SimHash
/// vector, the votes before the sign step whose signs are its fingerprint;
/// a checked pair's similarity is the cosine of the two vectors, recomputed
/// here from `fingerprints/`; a higher threshold keeps exactly the pairs at
/// or above it, in `dedup` and in `neardup pairs` over the fingerprints;
/// the planted copies are found. A run that checks term sets keeps no
/// vectors (NULL), and fingerprints without them are refused a cosine check.
#[test]
fn simhash_cosine_checks_pairs_on_their_votes() {
    let dir = tempfile::tempdir().unwrap();
    let loose = dir.path().join("loose");
    ok(&dedup(&loose, &["--verify", "cosine:0.8", "--min-shared", "none"]));
    let b = read_dir(&loose.join("fingerprints"));
    let vectors = vectors(&b);
    for ((source, id), simhash) in strings(&b, "source").iter().zip(strings(&b, "id")).zip(u64s(&b, "simhash")) {
        let Some(simhash) = simhash else {
            assert!(!vectors.contains_key(&format!("{source}/{id}")), "a document without terms has no vector");
            continue;
        };
        let v = &vectors[&format!("{source}/{id}")];
        assert_eq!(v.len(), 64);
        assert_eq!(v.iter().map(|x| x.unsigned_abs()).max(), Some(127), "scaled to its largest vote");
        for (j, &q) in v.iter().enumerate() {
            assert!(q == 0 || (q > 0) == ((simhash >> j) & 1 == 1), "{source}/{id}: vote {j} is {q}, bit {}", (simhash >> j) & 1);
        }
    }
    let similarities = |out: &Path| {
        let b = read_dir(&out.join("pairs"));
        let (sa, ia, sb, ib, s) = (strings(&b, "source_a"), strings(&b, "id_a"), strings(&b, "source_b"), strings(&b, "id_b"), strings(&b, "similarity"));
        // Copies of one fingerprint were checked as a group: NULL, here 1.
        (0..sa.len()).map(|n| ((format!("{}/{}", sa[n], ia[n]), format!("{}/{}", sb[n], ib[n])), s[n].parse::<f64>().unwrap_or(1.0))).collect::<std::collections::BTreeMap<_, _>>()
    };
    let all = similarities(&loose);
    // Every checked pair's cosine recomputed; a NULL one is a pair of
    // copies of one fingerprint, checked as a group, not by cosine.
    let p = read_dir(&loose.join("pairs"));
    let (sa, ia, sb, ib) = (strings(&p, "source_a"), strings(&p, "id_a"), strings(&p, "source_b"), strings(&p, "id_b"));
    let (checked, hamming) = (strings(&p, "similarity"), u64s(&p, "hamming"));
    let mut recomputed = 0;
    for n in 0..sa.len() {
        let (a, b) = (format!("{}/{}", sa[n], ia[n]), format!("{}/{}", sb[n], ib[n]));
        if checked[n] == "NULL" {
            assert_eq!(hamming[n], Some(0), "{a} {b}: no similarity, yet not copies of one fingerprint");
            continue;
        }
        let (s, expected) = (checked[n].parse::<f64>().unwrap(), cosine(&vectors[&a], &vectors[&b]));
        assert!((s - expected).abs() < 1e-9 && s >= 0.8, "{a} {b}: {s} against {expected}");
        recomputed += 1;
    }
    // The sample's 65 pairs: 40 copies of a shared fingerprint, 25 checked.
    assert_eq!((recomputed, sa.len()), (25, 65), "pairs checked by cosine, of all");
    let found = truth().iter().filter(|(a, b, _)| all.contains_key(&(a.clone(), b.clone())) || all.contains_key(&(b.clone(), a.clone()))).count();
    assert!(found * 10 >= truth().len() * 9, "{found} of {} planted pairs", truth().len());
    let s = summary(&loose);
    assert_eq!(s["verify"], "cosine:0.8");

    let strict = dir.path().join("strict");
    ok(&dedup(&strict, &["--verify", "cosine:0.95", "--min-shared", "none"]));
    let kept = similarities(&strict);
    let above: std::collections::BTreeMap<_, _> = all.iter().filter(|(_, s)| **s >= 0.95).map(|(k, s)| (k.clone(), *s)).collect();
    assert_eq!(kept, above, "the stricter check keeps exactly the pairs at or above it");
    assert!(kept.len() < all.len(), "{} of {}", kept.len(), all.len());

    let again = dir.path().join("again");
    let fingerprints = loose.join("fingerprints").display().to_string();
    ok(&neardup(&["pairs", "-q", "--fingerprints", &fingerprints, "-o", again.to_str().unwrap(), "--verify", "cosine:0.95", "--min-shared", "none"]));
    assert_eq!(similarities(&again), kept, "neardup pairs checks the kept vectors alike");

    // A run that checks term sets keeps no vectors, and its fingerprints
    // (like those of an older neardup, without the column) cannot be
    // checked by cosine.
    let default = dir.path().join("default");
    ok(&dedup(&default, &[]));
    assert!(common::vectors(&read_dir(&default.join("fingerprints"))).is_empty());
    let old = dir.path().join("old.parquet");
    let copy = format!("COPY (SELECT source, id, simhash, term_set FROM fp) TO '{}' STORED AS PARQUET", old.display());
    ok(&neardup(&["sql", "--table", &format!("fp={fingerprints}"), "-c", &copy]));
    let bad = dir.path().join("bad");
    for f in [default.join("fingerprints").display().to_string(), old.display().to_string()] {
        exits_with(&neardup(&["pairs", "-q", "--fingerprints", &f, "-o", bad.to_str().unwrap(), "--verify", "cosine:0.9"]), 2, &["no SimHash vectors", "--verify jaccard:T"]);
        assert!(!bad.exists());
    }
    ok(&neardup(&["pairs", "-q", "--fingerprints", old.to_str().unwrap(), "-o", bad.to_str().unwrap(), "--min-shared", "none"]));
}

/// `(a, b)` → `(shared_a, shared_b)` of every pair of an output.
fn shares(out: &Path) -> std::collections::BTreeMap<(String, String), (f64, f64)> {
    let b = read_dir(&out.join("pairs"));
    let (sa, ia, sb, ib) = (strings(&b, "source_a"), strings(&b, "id_a"), strings(&b, "source_b"), strings(&b, "id_b"));
    let (x, y) = (strings(&b, "shared_a"), strings(&b, "shared_b"));
    (0..sa.len())
        .map(|n| ((format!("{}/{}", sa[n], ia[n]), format!("{}/{}", sb[n], ib[n])), (x[n].parse().unwrap(), y[n].parse().unwrap())))
        .collect()
}

/// The fingerprints file `neardup fingerprint` writes, under `dir`, for
/// documents of `ids` and `texts` (an input of one Parquet file).
fn fingerprints_of(dir: &Path, ids: Vec<String>, texts: Vec<String>) -> std::path::PathBuf {
    use datafusion::arrow::array::{RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, false), Field::new("text", DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(ids)), Arc::new(StringArray::from(texts))]).unwrap();
    let input = dir.join("input.parquet");
    let mut writer = datafusion::parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&input).unwrap(), schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let out = dir.join("out");
    ok(&neardup(&["fingerprint", "-q", "--input", input.to_str().unwrap(), "--output", out.to_str().unwrap()]));
    std::fs::read_dir(out.join("fingerprints")).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "parquet")).unwrap()
}

/// The fingerprints' term sets keep their dictionary on a vocabulary larger
/// than Parquet's default dictionary page (1 MiB, 131,072 hashes): 200,000
/// words, each in five documents, all in one row group. With the default
/// the writer gave the dictionary up past its first MiB and wrote the rest
/// of the hashes plain, eight bytes each (Heybox's 231,174 distinct terms:
/// the term sets 21.8 MB instead of 11.8). The same file's fingerprints
/// and sketches are uncompressed, its ids and term sets zstd's.
#[test]
fn term_sets_keep_their_dictionary_on_a_large_vocabulary() {
    use datafusion::parquet::basic::PageType;
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

    let dir = tempfile::tempdir().unwrap();
    let (documents, words_each, vocabulary) = (20_000usize, 50usize, 200_000usize);
    let ids: Vec<String> = (0..documents).map(|i| format!("d{i}")).collect();
    let texts: Vec<String> = (0..documents)
        .map(|i| (0..words_each).map(|j| format!("w{}", (i * words_each + j * 4_001) % vocabulary)).collect::<Vec<_>>().join(" "))
        .collect();
    let file = fingerprints_of(dir.path(), ids, texts);
    let reader = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let group = reader.metadata().row_group(0);
    assert_eq!(group.num_rows(), documents as i64);
    let at = group.columns().iter().position(|c| c.column_path().string() == "term_set.list.item").expect("a term_set column");
    // Each data page's encoding, from the pages' own headers.
    let mut encodings = std::collections::BTreeMap::new();
    for page in reader.get_row_group(0).unwrap().get_column_page_reader(at).unwrap() {
        let page = page.unwrap();
        if page.page_type() != PageType::DICTIONARY_PAGE {
            *encodings.entry(format!("{:?}", page.encoding())).or_insert(0) += 1;
        }
    }
    assert!(encodings.get("RLE_DICTIONARY").is_some_and(|&n| n > 0), "{encodings:?}");
    assert_eq!(encodings.get("PLAIN"), None, "term set hashes written plain: the dictionary was given up ({encodings:?})");
    assert_eq!(group.column(at).num_values(), (documents * words_each) as i64);
    // Hashes that do not compress are written as they are; ids and term
    // sets keep the session's zstd (sql/40_fingerprints.sql).
    use datafusion::parquet::basic::Compression;
    let codec = |name: &str| group.columns().iter().find(|c| c.column_path().string() == name).map(|c| c.compression());
    for column in ["simhash", "shingles.list.item"] {
        assert_eq!(codec(column), Some(Compression::UNCOMPRESSED), "{column}");
    }
    for column in ["id", "term_set.list.item"] {
        assert!(matches!(codec(column), Some(Compression::ZSTD(_))), "{column}: {:?}", codec(column));
    }
}

/// Fingerprints of long documents come in row groups of about 2^23
/// characters of text (sql/40_fingerprints.sql), which the writer holds one
/// at a time; in the documents' order, every document once.
#[test]
fn long_documents_make_row_groups_of_bounded_text() {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

    let dir = tempfile::tempdir().unwrap();
    // Five documents of 2,000,000 characters: 4 a row group (2^23 / 2,000,000).
    let ids: Vec<String> = (0..5).map(|i| format!("d{i}")).collect();
    let texts: Vec<String> = (0..5).map(|i| format!("doc{i} ").repeat(400_000)).collect();
    assert!(texts.iter().all(|t| t.chars().count() == 2_000_000));
    let file = fingerprints_of(dir.path(), ids.clone(), texts);
    let reader = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let rows: Vec<i64> = reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
    assert_eq!(rows, vec![4, 1]);
    assert_eq!(strings(&read_dir(file.parent().unwrap()), "id"), ids);
}
