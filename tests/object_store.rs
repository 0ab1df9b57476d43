//! The job against a real S3-compatible server on loopback (moto, started by
//! tests/s3_server.py with request signing enforced): Parquet read from a
//! bucket, outputs written to a bucket and read back, reruns, and the errors
//! a wrong credential or a missing bucket give; HTTP and file:// inputs.

mod common;
use common::s3::{get_object, list_objects, start_s3};
use common::*;

#[test]
fn dedup_reads_and_writes_a_bucket() {
    let Some(s3) = start_s3() else { return };
    s3.upload_sample();
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec!["dedup", "-q", "-i", "news=s3://archive/crawl/news.parquet", "-i", "reprints=s3://archive/crawl/reprints.parquet", "-o", out];
        args.extend_from_slice(extra);
        s3.neardup(&args)
    };
    let o = run("s3://archive/runs/first", &["--save-idf-model", "s3://archive/models/idf.parquet"]);
    let stdout = ok(&o);
    assert!(!stdout.contains(&s3.secret_key) && !stderr(&o).contains(&s3.secret_key));

    // The same job on local files gives the same clusters.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    ok(&neardup(&["dedup", "-q", "-i", &format!("news={}", sample("news.parquet")), "-i", &format!("reprints={}", sample("reprints.parquet")), "-o", local.to_str().unwrap()]));
    let query = "SELECT source, id, cluster_id, is_representative FROM c ORDER BY source, id";
    let remote_clusters = s3.sql_csv(&["c=s3://archive/runs/first/clusters"], query);
    let local_clusters = s3.sql_csv(&[&format!("c={}", local.join("clusters").display())], query);
    assert_eq!(remote_clusters, local_clusters);
    assert!(remote_clusters.lines().count() > 50);

    // The output is complete: _SUCCESS, summary, and no staging or work objects.
    let listing = s3.sql_csv(&["f=s3://archive/runs/first/fingerprints"], "SELECT count(*) AS n FROM f");
    assert_eq!(listing, "n\n507\n");
    let objects = list_objects(&s3, "runs/");
    assert!(objects.contains(&"runs/first/_SUCCESS".to_string()), "{objects:?}");
    assert!(objects.contains(&"runs/first/summary.json".to_string()), "{objects:?}");
    assert!(objects.iter().all(|o| !o.contains("staging") && !o.contains("_work")), "{objects:?}");
    let summary = get_object(&s3, "runs/first/summary.json");
    assert!(!summary.contains(&s3.secret_key) && !summary.contains(&s3.access_key));
    assert!(list_objects(&s3, "models/").contains(&"models/idf.parquet".to_string()));

    // A rerun into the same output refuses, or replaces cleanly with --overwrite.
    let again = run("s3://archive/runs/first", &[]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("already exists"), "{}", stderr(&again));
    ok(&run("s3://archive/runs/first", &["--overwrite", "--idf-model", "s3://archive/models/idf.parquet"]));
    assert_eq!(s3.sql_csv(&["c=s3://archive/runs/first/clusters"], query), local_clusters);
    let objects = list_objects(&s3, "runs/");
    assert_eq!(objects.iter().filter(|o| o.ends_with("_SUCCESS")).count(), 1);

    // A wrong secret and a missing bucket: exit 2 and a message naming the location.
    let bad = s3.neardup_with("not-the-secret", &["dedup", "-q", "-i", "s3://archive/crawl/news.parquet", "-o", "s3://archive/runs/bad"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("s3://archive/crawl/news.parquet"), "{}", stderr(&bad));
    assert!(!stderr(&bad).contains("not-the-secret"));
    let missing = s3.neardup(&["dedup", "-q", "-i", "s3://no-such-bucket/x.parquet", "-o", "s3://archive/runs/missing"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("no-such-bucket"), "{}", stderr(&missing));
    let nowrite = s3.neardup(&["dedup", "-q", "-i", &sample("news.parquet"), "-o", "s3://no-such-bucket/out"]);
    assert_eq!(nowrite.status.code(), Some(2), "{}", stderr(&nowrite));
    assert!(stderr(&nowrite).contains("s3://no-such-bucket/out"), "{}", stderr(&nowrite));
}

/// `jobs/s3.toml` as shipped: read the sample corpus from a bucket, write
/// the outputs and the IDF model to it, and rerun over the old output.
#[test]
fn the_s3_job_example_runs() {
    let Some(s3) = start_s3() else { return };
    s3.upload_sample();
    let job = root().join("jobs/s3.toml");
    let o = s3.neardup(&["run", "-q", "--json", job.to_str().unwrap()]);
    let summary: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(summary["documents"], 507);
    assert_eq!(summary["output"], "s3://archive/dedup/sample");
    let objects = list_objects(&s3, "dedup/sample/");
    assert_eq!(objects.last().map(String::as_str), Some("dedup/sample/survivors/reprints/part-00000.parquet"), "{objects:?}");
    assert!(objects.contains(&"dedup/sample/_SUCCESS".to_string()), "{objects:?}");
    assert!(list_objects(&s3, "models/").contains(&"models/idf.parquet".to_string()));
    // The job replaces its own output (overwrite = true), ending with the same rows.
    let clusters = s3.sql_csv(&["c=s3://archive/dedup/sample/clusters"], "SELECT count(*) AS n, count(DISTINCT cluster_id) AS c FROM c");
    ok(&s3.neardup(&["run", "-q", job.to_str().unwrap()]));
    assert_eq!(s3.sql_csv(&["c=s3://archive/dedup/sample/clusters"], "SELECT count(*) AS n, count(DISTINCT cluster_id) AS c FROM c"), clusters);
    assert!(!stderr(&o).contains(&s3.secret_key));
}

/// Inputs over plain HTTP (a range-serving file server on loopback) and as
/// file:// URLs give the same clusters as plain paths; a missing HTTP object
/// is a clear input error.
#[test]
fn http_and_file_urls_are_inputs() {
    let python = std::env::var("NEARDUP_PYTHON").unwrap_or_else(|_| "python3".into());
    let sample_dir = root().join("sample_data");
    let (mut server, info) = start_server(&python, "tests/http_server.py", &[sample_dir.to_str().unwrap()]);
    let base = info["url"].as_str().unwrap().to_string();

    let dir = tempfile::tempdir().unwrap();
    let (plain, over_http, file_urls) = (dir.path().join("plain"), dir.path().join("http"), dir.path().join("file"));
    let local = |name: &str| format!("{name}={}", sample(&format!("{name}.parquet")));
    ok(&neardup(&["dedup", "-q", "-i", &local("news"), "-i", &local("reprints"), "-o", plain.to_str().unwrap()]));
    let remote = |name: &str| format!("{name}={base}/{name}.parquet");
    let o = neardup(&["dedup", "-q", "-i", &remote("news"), "-i", &remote("reprints"), "-o", over_http.to_str().unwrap()]);
    let file_url = |name: &str| format!("{name}=file://{}", sample(&format!("{name}.parquet")));
    let f = neardup(&[
        "dedup", "-q", "-i", &file_url("news"), "-i", &file_url("reprints"),
        "-o", &format!("file://{}", file_urls.display()),
    ]);
    let missing = neardup(&["dedup", "-q", "-i", &format!("{base}/no-such.parquet"), "-o", dir.path().join("m").to_str().unwrap()]);
    drop(server.stdin.take());
    let _ = server.wait();

    ok(&o);
    ok(&f);
    assert_eq!(clusters(&over_http), clusters(&plain));
    assert_eq!(clusters(&file_urls), clusters(&plain));
    assert!(clusters(&plain).len() > 40);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("no-such.parquet"), "{}", stderr(&missing));
}

/// Azure Blob Storage (`az://`) through Azurite, the Azure emulator, on
/// loopback: inputs read from a container, outputs written to it.
#[test]
fn dedup_reads_and_writes_azure_blob_storage() {
    use std::process::{Command, Stdio};
    let (Ok(azurite), Ok(python)) = (std::env::var("NEARDUP_AZURITE"), std::env::var("NEARDUP_PYTHON")) else {
        eprintln!("SKIPPED: no Azurite (tests/run.sh installs it with npm and sets NEARDUP_AZURITE)");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Command::new(azurite)
        .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string(), "--inMemoryPersistence", "--silent", "--skipApiVersionCheck"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start azurite-blob");
    let endpoint = format!("http://127.0.0.1:{port}");
    // Create the container with Azure's own client (the emulator's well-known development account).
    let create = format!(
        "import time\nfrom azure.storage.blob import BlobServiceClient\n\
         c = BlobServiceClient.from_connection_string('DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;\
         AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;\
         BlobEndpoint={endpoint}/devstoreaccount1;')\n\
         for attempt in range(100):\n    try:\n        c.create_container('archive'); break\n    except Exception:\n        time.sleep(0.2)\n\
         else:\n    raise SystemExit('Azurite did not start')\n"
    );
    let created = Command::new(python).args(["-c", &create]).output().unwrap();
    let az = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .env("AZURE_STORAGE_USE_EMULATOR", "true")
            .env("AZURITE_BLOB_STORAGE_URL", &endpoint)
            .output()
            .unwrap()
    };
    let result = (|| {
        ok(&created);
        for name in ["news", "reprints"] {
            let table = format!("t={}", sample(&format!("{name}.parquet")));
            ok(&az(&["sql", "-c", &format!("COPY (SELECT * FROM t) TO 'az://archive/crawl/{name}.parquet' STORED AS PARQUET"), "--table", &table]));
        }
        ok(&az(&["dedup", "-q", "-i", "news=az://archive/crawl/news.parquet", "-i", "reprints=az://archive/crawl/reprints.parquet", "-o", "az://archive/runs/one"]));
        let query = "SELECT source, id, cluster_id, is_representative FROM c ORDER BY source, id";
        let remote = ok(&az(&["sql", "--format", "csv", "--table", "c=az://archive/runs/one/clusters", "-c", query]));
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("local");
        ok(&neardup(&["dedup", "-q", "-i", &format!("news={}", sample("news.parquet")), "-i", &format!("reprints={}", sample("reprints.parquet")), "-o", local.to_str().unwrap()]));
        let expected = ok(&neardup(&["sql", "--format", "csv", "--table", &format!("c={}", local.join("clusters").display()), "-c", query]));
        assert_eq!(remote, expected);
        assert!(remote.lines().count() > 50);
        // A rerun without --overwrite refuses: the first output is complete and committed.
        let again = az(&["dedup", "-q", "-i", "az://archive/crawl/news.parquet", "-o", "az://archive/runs/one"]);
        assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
        assert!(stderr(&again).contains("already exists"), "{}", stderr(&again));
    })();
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// The sample's news split into two nightly drops, `DIR/drops/2026-11-0{1,2}/`.
fn two_drops(dir: &std::path::Path) -> std::path::PathBuf {
    let drops = dir.join("drops");
    for (k, night) in ["2026-11-01", "2026-11-02"].iter().enumerate() {
        std::fs::create_dir_all(drops.join(night)).unwrap();
        let news = format!("news={}", sample("news.parquet"));
        ok(&neardup(&["sql", "-t", &news, "-c", &format!(
            "COPY (SELECT id, text FROM news WHERE hash64(id) % 2 = {k}) TO '{}' STORED AS PARQUET",
            drops.join(night).join("p.parquet").display()
        )]));
    }
    drops
}

/// A faulty network between neardup and the store (tests/faulty_proxy.py):
/// every third request answered with 503 and every request delayed, during
/// two nightly runs into a store in the bucket. The client retries with
/// backoff and the nights equal the same nights on a local store. A store
/// that answers only errors fails the run with exit code 1 (retryable) and
/// a message saying so, after the configured retries.
#[test]
fn a_faulty_store_is_retried_then_fails_clearly() {
    let Some(s3) = start_s3() else { return };
    let python = std::env::var("NEARDUP_PYTHON").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let drops = two_drops(dir.path());
    let night = |env: &[(&str, String)], store: &str, reports: &str, id: &str| {
        let input = format!("crawl={}/{{run_id}}/", drops.display());
        let output = format!("{reports}/{{run_id}}");
        std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["dedup", "-q", "-i", &input, "--store", store, "--run-id", id, "-o", &output])
            .envs(env.iter().map(|(k, v)| (*k, v.clone())))
            .output()
            .unwrap()
    };
    let local = dir.path().join("local");
    let (local_store, local_reports) = (local.join("store"), local.join("reports"));
    for id in ["2026-11-01", "2026-11-02"] {
        ok(&night(&[], local_store.to_str().unwrap(), local_reports.to_str().unwrap(), id));
    }

    let (proxy, info) = start_server(&python, "tests/faulty_proxy.py", &[&s3.endpoint, "--fail-every", "3", "--delay-ms", "5"]);
    let mut env = s3.env();
    env.retain(|(k, _)| *k != "AWS_ENDPOINT");
    env.push(("AWS_ENDPOINT", info["endpoint"].as_str().unwrap().to_string()));
    // The proxy closes every connection after one answer: keep none idle.
    env.push(("AWS_POOL_MAX_IDLE_PER_HOST", "0".to_string()));
    let remote_reports = dir.path().join("reports");
    for id in ["2026-11-01", "2026-11-02"] {
        ok(&night(&env, "s3://archive/store", remote_reports.to_str().unwrap(), id));
    }
    let counts: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(info["requests_file"].as_str().unwrap()).unwrap()).unwrap();
    assert!(counts["failed"].as_u64().unwrap() >= 5, "faults were injected: {counts}");
    for id in ["2026-11-01", "2026-11-02"] {
        assert_eq!(pairs(&remote_reports.join(id)), pairs(&local_reports.join(id)), "night {id}");
    }
    let query = "SELECT source, id, simhash, representative_id, run FROM s ORDER BY source, id";
    assert_eq!(
        s3.sql_csv(&["s=s3://archive/store/runs/"], query),
        s3.sql_csv(&[&format!("s={}/runs/", local_store.display())], query)
    );
    drop(proxy);

    let (_down, info) = start_server(&python, "tests/faulty_proxy.py", &[&s3.endpoint, "--fail-all"]);
    let mut env = s3.env();
    env.retain(|(k, _)| *k != "AWS_ENDPOINT");
    env.extend([
        ("AWS_ENDPOINT", info["endpoint"].as_str().unwrap().to_string()),
        ("NEARDUP_STORE_RETRIES", "2".to_string()),
        ("NEARDUP_STORE_RETRY_SECS", "10".to_string()),
    ]);
    let o = night(&env, "s3://archive/store", remote_reports.to_str().unwrap(), "2026-11-03");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("503") && err.contains("after 2 retries") && err.contains("retry the run later"), "{err}");
    assert!(!err.contains(&s3.secret_key));
}

/// Two nights at once on a store in a bucket: the lease is one object made
/// with a conditional create (If-None-Match), so one of them runs and the
/// other exits 1 naming it, or they run one after the other; a lease left by
/// another host that is still valid turns a night away, and one that has
/// expired is taken over.
#[test]
fn two_nights_at_once_on_a_bucket_store_take_turns() {
    let Some(s3) = start_s3() else { return };
    let python = std::env::var("NEARDUP_PYTHON").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let drops = two_drops(dir.path());
    let store = "s3://archive/lease-store";
    let reports = dir.path().join("reports");
    let args = |id: &str| -> Vec<String> {
        ["dedup", "-q", "-i", &format!("crawl={}/{{run_id}}/", drops.display()), "--store", store, "--run-id", id,
         "-o", &format!("{}/{{run_id}}", reports.display())].iter().map(|s| s.to_string()).collect()
    };
    ok(&s3.neardup(&args("2026-11-01").iter().map(String::as_str).collect::<Vec<_>>()));
    twice_at_once(&args("2026-11-02"), &s3.env(), "run '2026-11-02'");
    let objects = list_objects(&s3, "lease-store/");
    assert!(!objects.iter().any(|o| o.ends_with("_lease.json")), "the lease is given back: {objects:?}");
    assert!(objects.contains(&"lease-store/runs/run=2026-11-02/_SUCCESS".to_string()), "{objects:?}");

    // A lease of another host: valid, then expired.
    let put_lease = |expires_in: i64| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let body = serde_json::json!({"holder": "run 'elsewhere'", "host": "another-host", "pid": 7, "nonce": "n",
                                      "acquired": now - 10, "expires": now + expires_in}).to_string();
        let o = std::process::Command::new(&python)
            .args(["-c", &format!(
                "import boto3; c=boto3.client('s3',endpoint_url='{}',region_name='us-east-1',aws_access_key_id='{}',aws_secret_access_key='{}'); \
                 c.put_object(Bucket='archive',Key='lease-store/_lease.json',Body={body:?}.encode())",
                s3.endpoint, s3.access_key, s3.secret_key
            )])
            .output()
            .unwrap();
        ok(&o);
    };
    put_lease(600);
    let o = s3.neardup(&args("2026-11-02").iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is held by run 'elsewhere' (host another-host"), "{}", stderr(&o));
    let info: serde_json::Value = serde_json::from_str(&ok(&s3.neardup(&["store", "info", "--store", store, "--json"]))).unwrap();
    assert_eq!(info["lease"]["holder"], "run 'elsewhere'");
    assert_eq!(info["runs"].as_array().unwrap().len(), 2);
    put_lease(-1);
    let o = s3.neardup(&args("2026-11-02").iter().map(String::as_str).collect::<Vec<_>>());
    ok(&o);
    // The warning `twice_at_once` asserts absent, present where it belongs.
    assert!(stderr(&o).contains("the lease of run 'elsewhere' (host another-host"), "{}", stderr(&o));
    assert!(stderr(&o).contains("is stale; taking it over"), "{}", stderr(&o));
    // Compaction in the bucket: the same rows, one segment.
    ok(&s3.neardup(&["store", "compact", "--store", store, "--all"]));
    let info: serde_json::Value = serde_json::from_str(&ok(&s3.neardup(&["store", "info", "--store", store, "--json"]))).unwrap();
    assert_eq!((info["segments"].as_array().unwrap().len(), info["runs"].as_array().unwrap().len()), (1, 0), "{info}");
    assert!(info["lease"].is_null());
}
