//! The job against Google Cloud Storage on loopback: fake-gcs-server behind
//! the XML-API front of tests/gcs_server.py, service-account JWTs checked.
//! Inputs read from a bucket, outputs written to it and read back byte for
//! byte, reruns, nights into a store in a bucket, the IDF model saved there
//! and used again, a large object written in parts, a wrong credential, and
//! two nights racing for the lease.

mod common;
use common::gcs::{parquet_files, start_gcs, Gcs};
use common::*;

const NIGHTS: [&str; 2] = ["2026-11-01", "2026-11-02"];

fn args<'a>(list: &'a [String]) -> Vec<&'a str> {
    list.iter().map(String::as_str).collect()
}

/// The sample corpus deduplicated locally into `out`, with `extra` options.
fn local_dedup(out: &std::path::Path, extra: &[&str]) {
    let (news, reprints) = (format!("news={}", sample("news.parquet")), format!("reprints={}", sample("reprints.parquet")));
    let mut a = vec!["dedup", "-q", "-i", &news, "-i", &reprints, "-o", out.to_str().unwrap()];
    a.extend_from_slice(extra);
    ok(&neardup(&a));
}

/// Every Parquet file of `prefix` in the bucket, as [`parquet_files`] gives them.
fn remote_parquet(gcs: &Gcs, prefix: &str, dir: &std::path::Path) -> std::collections::BTreeMap<String, (usize, u64)> {
    gcs.download(prefix, dir);
    parquet_files(dir)
}

#[test]
fn dedup_reads_and_writes_a_gcs_bucket() {
    let Some(gcs) = start_gcs() else { return };
    gcs.upload_sample();
    let run = |extra: &[&str]| {
        let mut a = vec!["dedup", "-q", "-i", "news=gs://archive/crawl/news.parquet", "-i", "reprints=gs://archive/crawl/reprints.parquet", "-o", "gs://archive/runs/first"];
        a.extend_from_slice(extra);
        gcs.neardup(&a)
    };
    let o = run(&[]);
    ok(&o);
    let secret = gcs.secret();
    assert!(!stdout(&o).contains(&secret) && !stderr(&o).contains(&secret));

    // The same job on local files writes the same Parquet files, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    local_dedup(&local, &[]);
    let expected = parquet_files(&local);
    assert!(["fingerprints/part-00000.parquet", "pairs/part-00000.parquet", "clusters/part-00000.parquet"]
        .iter()
        .all(|f| expected.contains_key(*f)), "{expected:?}");
    let first = dir.path().join("first");
    assert_eq!(remote_parquet(&gcs, "runs/first", &first), expected);
    assert!(clusters(&first).len() > 40);

    // The output is complete: _SUCCESS, summary, and no staging or work objects.
    let objects = gcs.list("runs/");
    assert!(objects.contains(&"runs/first/_SUCCESS".to_string()), "{objects:?}");
    assert!(objects.contains(&"runs/first/summary.json".to_string()), "{objects:?}");
    assert!(objects.iter().all(|o| !o.contains("staging") && !o.contains("_work")), "{objects:?}");
    assert!(!String::from_utf8_lossy(&gcs.get("runs/first/summary.json")).contains(&secret));

    // A rerun into the same output refuses; with --overwrite it replaces it
    // with the same bytes and one _SUCCESS.
    let again = run(&[]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("already exists") && stderr(&again).contains("gs://archive/runs/first"), "{}", stderr(&again));
    ok(&run(&["--overwrite"]));
    assert_eq!(remote_parquet(&gcs, "runs/first", &dir.path().join("second")), expected);
    assert_eq!(gcs.list("runs/"), objects, "the same objects, and nothing staged left");
}

/// `fingerprint --save-idf-model gs://…` writes the model (the bytes a local
/// run writes), and `--idf-model gs://…` uses it: the outputs equal a local
/// run's with the local model.
#[test]
fn an_idf_model_is_saved_to_a_gcs_bucket_and_used_again() {
    let Some(gcs) = start_gcs() else { return };
    gcs.upload_sample();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("idf.parquet");
    let (news, reprints) = (format!("news={}", sample("news.parquet")), format!("reprints={}", sample("reprints.parquet")));
    ok(&neardup(&["fingerprint", "-q", "-i", &news, "-i", &reprints, "-o", dir.path().join("fp").to_str().unwrap(), "--save-idf-model", model.to_str().unwrap()]));
    ok(&gcs.neardup(&[
        "fingerprint", "-q", "-i", "news=gs://archive/crawl/news.parquet", "-i", "reprints=gs://archive/crawl/reprints.parquet",
        "-o", "gs://archive/fp", "--save-idf-model", "gs://archive/models/idf.parquet",
    ]));
    assert_eq!(gcs.get("models/idf.parquet"), std::fs::read(&model).unwrap(), "the saved model");
    assert_eq!(remote_parquet(&gcs, "fp", &dir.path().join("remote-fp")), parquet_files(&dir.path().join("fp")));

    // Used again, on the news alone: the same outputs as with the local model.
    let local = dir.path().join("news");
    ok(&neardup(&["dedup", "-q", "-i", &news, "-o", local.to_str().unwrap(), "--idf-model", model.to_str().unwrap()]));
    ok(&gcs.neardup(&["dedup", "-q", "-i", "news=gs://archive/crawl/news.parquet", "-o", "gs://archive/runs/news", "--idf-model", "gs://archive/models/idf.parquet"]));
    let expected = parquet_files(&local);
    assert!(!expected.is_empty());
    assert_eq!(remote_parquet(&gcs, "runs/news", &dir.path().join("remote-news")), expected);
    // A model that is not there is a clear input error.
    let o = gcs.neardup(&["dedup", "-q", "-i", "news=gs://archive/crawl/news.parquet", "-o", "gs://archive/runs/none", "--idf-model", "gs://archive/models/none.parquet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gs://archive/models/none.parquet"), "{}", stderr(&o));
}

/// An object larger than the writer's 10 MiB buffer goes up as an XML
/// multipart upload (POST ?uploads, PUT ?partNumber&uploadId, POST
/// ?uploadId): the bytes a local write gives, read back whole.
#[test]
fn a_large_object_is_written_to_gcs_in_parts() {
    let Some(gcs) = start_gcs() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("big.parquet");
    let query = "SELECT value AS id, sha256(CAST(value AS VARCHAR)) AS h FROM generate_series(1, 400000)";
    ok(&neardup(&["sql", "-c", &format!("COPY ({query}) TO '{}' STORED AS PARQUET", local.display())]));
    gcs.sql_csv(&[], &format!("COPY ({query}) TO 'gs://archive/big/h.parquet' STORED AS PARQUET"));
    let expected = std::fs::read(&local).unwrap();
    assert!(expected.len() > 10 << 20, "{} bytes: not enough for a multipart upload", expected.len());
    assert!(gcs.get("big/h.parquet") == expected, "the object differs from the local file");
    assert_eq!(gcs.sql_csv(&["b=gs://archive/big/h.parquet"], "SELECT count(DISTINCT h) AS n FROM b"), "n\n400000\n");
}

/// The sample's news split into two nightly drops, gs://archive/drops/NIGHT/p.parquet.
fn drops(gcs: &Gcs) {
    let news = format!("news={}", sample("news.parquet"));
    for (k, night) in NIGHTS.iter().enumerate() {
        gcs.sql_csv(&[&news], &format!(
            "COPY (SELECT id, text FROM news WHERE hash64(id) % 2 = {k} ORDER BY id) TO 'gs://archive/drops/{night}/p.parquet' STORED AS PARQUET"
        ));
    }
}

/// One night: the night's drop in the bucket against `store`, its report to `reports/{run_id}`.
fn night(gcs: &Gcs, store: &str, reports: &str, id: &str) -> std::process::Output {
    gcs.neardup(&["dedup", "-q", "-i", "crawl=gs://archive/drops/{run_id}/", "--store", store, "--run-id", id, "-o", &format!("{reports}/{{run_id}}")])
}

/// Two nights into a store in the bucket give the very files two nights
/// into a local store give: the store's runs and IDF model, the reports;
/// a rerun of a night replaces it with the same files, and a compaction in
/// the bucket gives the local compaction's segment.
#[test]
fn nights_into_a_gcs_store_equal_nights_into_a_local_store() {
    let Some(gcs) = start_gcs() else { return };
    drops(&gcs);
    let dir = tempfile::tempdir().unwrap();
    let (local_store, local_reports) = (dir.path().join("store"), dir.path().join("reports"));
    for id in NIGHTS {
        ok(&night(&gcs, local_store.to_str().unwrap(), local_reports.to_str().unwrap(), id));
        ok(&night(&gcs, "gs://archive/store", "gs://archive/reports", id));
    }
    let store_files = parquet_files(&local_store);
    for f in ["idf/model.parquet", "runs/run=2026-11-01/part-00000.parquet", "runs/run=2026-11-02/part-00000.parquet"] {
        assert!(store_files.contains_key(f), "{f}: {store_files:?}");
    }
    let report_files = parquet_files(&local_reports);
    assert!(report_files.contains_key("2026-11-02/pairs/part-00000.parquet"), "{report_files:?}");
    assert_eq!(remote_parquet(&gcs, "store", &dir.path().join("remote-store")), store_files);
    let remote_reports = dir.path().join("remote-reports");
    assert_eq!(remote_parquet(&gcs, "reports", &remote_reports), report_files);
    assert!(!pairs(&remote_reports.join("2026-11-02")).is_empty(), "the second night finds pairs");
    let info: serde_json::Value = serde_json::from_str(&ok(&gcs.neardup(&["store", "info", "--store", "gs://archive/store", "--json"]))).unwrap();
    assert_eq!(info["runs"].as_array().unwrap().len(), 2, "{info}");
    assert!(info["lease"].is_null(), "{info}");

    // A rerun of the second night (an orchestrator's retry) replaces it: the same files, nothing staged left.
    let objects = gcs.list("");
    ok(&night(&gcs, "gs://archive/store", "gs://archive/reports", NIGHTS[1]));
    assert_eq!(gcs.list(""), objects);
    assert_eq!(remote_parquet(&gcs, "store", &dir.path().join("rerun-store")), store_files);
    assert_eq!(remote_parquet(&gcs, "reports", &dir.path().join("rerun-reports")), report_files);

    // Compaction in the bucket and on the local disk: the same segment.
    ok(&neardup(&["store", "compact", "--store", local_store.to_str().unwrap(), "--all"]));
    ok(&gcs.neardup(&["store", "compact", "--store", "gs://archive/store", "--all"]));
    let compacted = parquet_files(&local_store);
    assert!(compacted.contains_key("segments/seg=2026-11-02/part-00000.parquet"), "{compacted:?}");
    assert_eq!(remote_parquet(&gcs, "store", &dir.path().join("compacted-store")), compacted);
    assert!(!gcs.list("store/").iter().any(|o| o.starts_with("store/runs/")), "the merged runs are gone");
}

/// A key file the server does not trust (the same account, another key):
/// exit 2, a message naming the location, and no key material in it. A
/// missing bucket is exit 2 naming it.
#[test]
fn a_wrong_gcs_credential_is_refused_naming_the_location() {
    let Some(gcs) = start_gcs() else { return };
    gcs.upload_sample();
    let wrong = gcs.wrong_service_account.clone();
    let read = gcs.neardup_with(&wrong, &["dedup", "-q", "-i", "gs://archive/crawl/news.parquet", "-o", "gs://archive/runs/bad"]);
    let write = gcs.neardup_with(&wrong, &["dedup", "-q", "-i", &sample("news.parquet"), "-o", "gs://archive/runs/bad"]);
    let store = gcs.neardup_with(&wrong, &["dedup", "-q", "-i", &sample("news.parquet"), "--store", "gs://archive/store", "--run-id", "n1", "-o", "gs://archive/reports/n1"]);
    let key_lines = |file: &str| -> Vec<String> {
        let account: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        account["private_key"].as_str().unwrap().lines().filter(|l| !l.starts_with("-----")).map(String::from).collect()
    };
    let secrets: Vec<String> = key_lines(&wrong).into_iter().chain(key_lines(&gcs.service_account)).collect();
    for (o, location) in [(&read, "gs://archive/crawl/news.parquet"), (&write, "gs://archive/runs/bad"), (&store, "gs://archive/store")] {
        exits_with(o, 2, &[location]);
        let shown = stderr(o) + &stdout(o);
        assert!(secrets.iter().all(|s| !shown.contains(s.as_str())), "key material shown:\n{shown}");
    }
    assert!(gcs.list("runs/").is_empty() && gcs.list("store/").is_empty() && gcs.list("reports/").is_empty(), "nothing was written");

    let missing = gcs.neardup(&["dedup", "-q", "-i", "gs://no-such-bucket/x.parquet", "-o", "gs://archive/runs/missing"]);
    exits_with(&missing, 2, &["no-such-bucket"]);
    let nowrite = gcs.neardup(&["dedup", "-q", "-i", &sample("news.parquet"), "-o", "gs://no-such-bucket/out"]);
    exits_with(&nowrite, 2, &["gs://no-such-bucket/out"]);
}

/// Two nights at once on a store in the bucket: the lease is one object made
/// with a conditional create (x-goog-if-generation-match: 0), so one of them
/// runs and the other exits 1 naming it, or they run one after the other; a
/// lease left by another host that is still valid turns a night away, and
/// one that has expired is taken over.
#[test]
fn two_nights_at_once_on_a_gcs_store_take_turns() {
    let Some(gcs) = start_gcs() else { return };
    drops(&gcs);
    let store = "gs://archive/lease-store";
    let night_args = |id: &str| -> Vec<String> {
        ["dedup", "-q", "-i", "crawl=gs://archive/drops/{run_id}/", "--store", store, "--run-id", id, "-o", "gs://archive/lease-reports/{run_id}"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    ok(&gcs.neardup(&args(&night_args(NIGHTS[0]))));
    twice_at_once(&night_args(NIGHTS[1]), &gcs.env(), "run '2026-11-02'");
    let objects = gcs.list("lease-store/");
    assert!(!objects.iter().any(|o| o.ends_with("_lease.json")), "the lease is given back: {objects:?}");
    assert!(objects.contains(&"lease-store/runs/run=2026-11-02/_SUCCESS".to_string()), "{objects:?}");

    // A lease of another host: valid, then expired.
    let put_lease = |expires_in: i64| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let body = serde_json::json!({"holder": "run 'elsewhere'", "host": "another-host", "pid": 7, "nonce": "n",
                                      "acquired": now - 10, "expires": now + expires_in});
        gcs.put("lease-store/_lease.json", body.to_string().as_bytes());
    };
    put_lease(600);
    let o = gcs.neardup(&args(&night_args(NIGHTS[1])));
    exits_with(&o, 1, &["is held by run 'elsewhere' (host another-host"]);
    let info: serde_json::Value = serde_json::from_str(&ok(&gcs.neardup(&["store", "info", "--store", store, "--json"]))).unwrap();
    assert_eq!(info["lease"]["holder"], "run 'elsewhere'");
    put_lease(-1);
    ok(&gcs.neardup(&args(&night_args(NIGHTS[1]))));
    assert!(!gcs.list("lease-store/").iter().any(|o| o.ends_with("_lease.json")));
}
