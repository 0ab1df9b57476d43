//! Same input, same settings, same output: fingerprints, pairs and clusters
//! do not depend on the number of partitions, the batch size or the run.

mod common;
use common::*;

fn run(out: &std::path::Path, engine: &[&str]) {
    let news = format!("news={}", sample("news.parquet"));
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    let mut args = vec!["dedup", "-q", "-i", &news, "-i", &reprints, "-o", out.to_str().unwrap()];
    args.extend_from_slice(engine);
    ok(&neardup(&args));
}

fn table(out: &std::path::Path, name: &str, columns: &[&str]) -> Vec<Vec<String>> {
    let batches = read_dir(&out.join(name));
    columns.iter().map(|c| strings(&batches, c)).collect()
}

#[test]
fn output_does_not_depend_on_partitions_or_batches() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    let many = dir.path().join("many");
    let again = dir.path().join("again");
    run(&one, &["--target-partitions", "1"]);
    run(&many, &["--target-partitions", "7", "--batch-size", "13"]);
    run(&again, &["--target-partitions", "1"]);
    for (name, cols) in [
        ("fingerprints", &["source", "id", "simhash", "n_terms", "n_chars"][..]),
        ("pairs", &["source_a", "id_a", "source_b", "id_b", "hamming"][..]),
        ("clusters", &["source", "id", "cluster_id", "is_representative", "cluster_size", "simhash"][..]),
    ] {
        let a = table(&one, name, cols);
        assert!(!a[0].is_empty(), "{name} is empty");
        assert_eq!(a, table(&many, name, cols), "{name} differs between 1 and 7 partitions");
        // A repeated run writes the very same bytes.
        let file = format!("{name}/part-00000.parquet");
        assert_eq!(std::fs::read(one.join(&file)).unwrap(), std::fs::read(again.join(&file)).unwrap(), "{file} differs between runs");
    }
}

#[test]
fn work_tables_in_memory_or_on_disk_give_the_same_bytes() {
    // Without a memory limit the work tables stay in memory, and the client
    // finds the MinHash candidates and checks the candidates itself
    // (src/job/in_memory.rs); under one they are Parquet files in the work
    // folder, and statements do it. The outputs are byte-identical, for each
    // measure of the check and each kind of keep rule (the client's
    // `eligible` carries the columns it orders by; the news have dates, the
    // reprints none).
    let dir = tempfile::tempdir().unwrap();
    // (The sample's SimHash vectors give no near miss below 0.9.)
    for (verify, keep, near_misses) in [("jaccard:0.5", "earliest:date", true), ("overlap:0.6", "longest", true), ("cosine:0.9", "smallest-id", false)] {
        let (memory, disk) = (dir.path().join(format!("memory-{verify}")), dir.path().join(format!("disk-{verify}")));
        run(&memory, &["--verify", verify, "--keep", keep]);
        run(&disk, &["--verify", verify, "--keep", keep, "--memory-limit", "1G", "--work-tables", "files"]);
        for name in ["fingerprints", "pairs", "clusters"] {
            let file = format!("{name}/part-00000.parquet");
            let bytes = std::fs::read(memory.join(&file)).unwrap();
            assert!(bytes.len() > 1000, "{file} is nearly empty");
            assert_eq!(bytes, std::fs::read(disk.join(&file)).unwrap(), "{file} differs between work tables in memory and on disk ({verify})");
        }
        assert!(!table(&memory, "pairs", &["id_a"])[0].is_empty(), "the sample has pairs ({verify})");
        let summary = |out: &std::path::Path| {
            let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
            (json["candidate_pairs"].clone(), json["checked_pairs"].clone(), json["near_misses"].clone())
        };
        // The near misses of the report: counted by the check in memory, by
        // sql/97_near_misses.sql on disk.
        assert_eq!(summary(&memory), summary(&disk), "the counts of candidates, checked pairs and near misses ({verify})");
        assert!(summary(&memory).0.as_u64().unwrap() > 0);
        let missed = summary(&memory).2["counts"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum::<u64>();
        assert_eq!(missed > 0, near_misses, "the sample's near misses ({verify}: {missed})");
    }
}

#[test]
fn under_a_memory_limit_the_work_stays_in_memory_when_the_inputs_fit() {
    // `--work-tables auto` (the default) under a limit estimates, from the
    // inputs' footers, the run's peak with its work in memory: the sample
    // (507 documents) needs about 262 MiB. Under 1G its work stays in
    // memory; under 200M it goes to files; either way, and whatever is
    // asked for, the outputs are the same bytes, and the summary says where
    // the work was.
    let dir = tempfile::tempdir().unwrap();
    let runs = [
        ("free", &[][..], "memory"),
        ("roomy", &["--memory-limit", "1G"][..], "memory"),
        ("tight", &["--memory-limit", "200M"][..], "files"),
        ("asked-files", &["--memory-limit", "1G", "--work-tables", "files"][..], "files"),
        ("asked-memory", &["--memory-limit", "200M", "--work-tables", "memory"][..], "memory"),
        ("files-without-limit", &["--work-tables", "files"][..], "files"),
    ];
    let first = dir.path().join(runs[0].0);
    for (name, engine, expected) in runs {
        let out = dir.path().join(name);
        run(&out, engine);
        assert_eq!(summary(&out)["work_tables"], expected, "{name}: {engine:?}");
        for table in ["fingerprints", "pairs", "clusters"] {
            let file = format!("{table}/part-00000.parquet");
            assert_eq!(std::fs::read(first.join(&file)).unwrap(), std::fs::read(out.join(&file)).unwrap(), "{file} differs ({name}: {engine:?})");
        }
    }
    // The progress line says what was chosen and why.
    let news = format!("news={}", sample("news.parquet"));
    let out = dir.path().join("said");
    let o = neardup(&["fingerprint", "-i", &news, "-o", out.to_str().unwrap(), "--memory-limit", "150M"]);
    ok(&o);
    let err = stderr(&o);
    assert!(err.contains("work tables in files: the inputs (407 rows,") && err.contains("over the 150 MiB limit"), "{err}");
    assert_eq!(summary(&out)["work_tables"], "files");
    // A cluster's work tables are files its executors read.
    let o = neardup(&["dedup", "-q", "-i", &news, "-o", out.to_str().unwrap(), "--overwrite", "--work-tables", "memory", "--cluster", "df://127.0.0.1:9"]);
    exits_with(&o, 2, &["--work-tables memory", "on a cluster"]);
}

#[test]
fn copies_left_out_in_memory_or_on_disk_are_the_same() {
    // The check of each shared fingerprint's copies, and the table of term
    // sets that stand for the fingerprints: made by the client from one
    // read of the fingerprints when the work stays in memory
    // (src/job/copies.rs), by sql/56_unconfirmed_copies.sql and
    // sql/57_term_sets_one_shot.sql under a memory limit. Real posts whose
    // shared fingerprints hold copies the check leaves out, under three
    // checks of copies: term sets, term sets and shared text, vectors.
    let Some(posts) = shared_data("weibo_original.parquet") else { return };
    let posts = posts.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (settings, left_out) in [(&["--verify", "jaccard:0.5"][..], 2), (&["--min-shared", "0.5"][..], 1), (&["--verify", "cosine:0.9"][..], 2)] {
        let run = |name: &str, limit: &[&str]| {
            let out = dir.path().join(format!("{name}{}", settings.join("")));
            let mut args = vec!["dedup", "-q", "-i", posts, "-o", out.to_str().unwrap()];
            args.extend_from_slice(settings);
            args.extend_from_slice(limit);
            ok(&neardup(&args));
            out
        };
        let (memory, disk) = (run("memory", &[]), run("disk", &["--memory-limit", "1G", "--work-tables", "files"]));
        for out in [&memory, &disk] {
            assert_eq!(summary(out)["unconfirmed_copies"], left_out, "copies left out ({settings:?})");
        }
        for name in ["fingerprints", "pairs", "clusters"] {
            let file = format!("{name}/part-00000.parquet");
            let bytes = std::fs::read(memory.join(&file)).unwrap();
            assert_eq!(bytes, std::fs::read(disk.join(&file)).unwrap(), "{file} differs between the check in memory and on disk ({settings:?})");
        }
        assert_eq!(summary(&memory)["candidate_pairs"], summary(&disk)["candidate_pairs"]);
    }
}

/// One partition writes the bytes of two. The Parquet writer cuts pages
/// between the pieces of each batch it is given; over one partition the
/// fingerprints' sink read the work table's batches as segmentation made
/// them, over two a merge's batches of the session's size, and the same
/// rows came out in other pages (19,484 articles: `fingerprints/` differed).
/// Every sink now reads batches of the session's size
/// (src/job/whole_batches.rs).
#[test]
fn one_partition_writes_the_bytes_of_two() {
    let Some(articles) = shared_data("peoples_daily_1998.parquet") else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = |partitions: &str| {
        let out = dir.path().join(partitions);
        ok(&neardup(&["dedup", "-q", "-i", articles.to_str().unwrap(), "-o", out.to_str().unwrap(), "--target-partitions", partitions]));
        out
    };
    let (one, two) = (run("1"), run("2"));
    assert_eq!(summary(&one)["documents"], 19_484);
    for name in ["fingerprints", "pairs", "clusters"] {
        let file = format!("{name}/part-00000.parquet");
        let bytes = std::fs::read(one.join(&file)).unwrap();
        assert!(bytes.len() > 1000, "{file} is nearly empty");
        assert!(bytes == std::fs::read(two.join(&file)).unwrap(), "{file} differs between 1 and 2 partitions");
    }
}
