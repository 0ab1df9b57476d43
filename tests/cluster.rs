//! The same job on a real Ballista cluster: a `neardup scheduler` and two
//! `neardup executor` processes on loopback. Its outputs must equal the
//! embedded run's, row for row.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

mod common;
use common::cluster::*;
use common::*;

#[test]
fn cluster_runs_equal_embedded_runs() {
    // With an S3-compatible server when there is one: every process gets its credentials.
    let s3 = common::s3::start_s3();
    let cluster = start_cluster(2, None, &s3.as_ref().map(|s| s.env()).unwrap_or_default());
    let dir = tempfile::tempdir().unwrap();
    let news = format!("news={}", sample("news.parquet"));
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    let run = |out: &Path, extra: &[&str], inputs: &[&str]| {
        let mut args = vec!["dedup", "-q", "-o", out.to_str().unwrap()];
        for i in inputs {
            args.extend(["-i", i]);
        }
        args.extend_from_slice(extra);
        ok(&neardup(&args));
    };
    let (embedded, distributed) = (dir.path().join("embedded"), dir.path().join("cluster"));
    run(&embedded, &[], &[&news, &reprints]);
    let model = dir.path().join("idf.parquet");
    run(&distributed, &["--cluster", &cluster.url, "--save-idf-model", model.to_str().unwrap()], &[&news, &reprints]);
    assert_same_outputs(&embedded, &distributed);
    // The IDF model a cluster saved is a complete model: an embedded run loads it.
    let with_model = dir.path().join("with-model");
    run(&with_model, &["--idf-model", model.to_str().unwrap()], &[&news, &reprints]);
    assert_same_outputs(&embedded, &with_model);

    // The scheduler serves no REST API (it would show session settings): an
    // HTTP/1 request for the job list is not found, and its answer holds
    // nothing of the cluster.
    {
        use std::io::{Read, Write};
        let port = cluster.url.rsplit(':').next().unwrap().parse::<u16>().unwrap();
        let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        conn.write_all(b"GET /api/jobs HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let _ = conn.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 404") && !body.contains("job") && !body.contains("datafusion."), "{answer}");
    }

    // `pairs` over the embedded run's fingerprints, on the cluster.
    let fingerprints = format!("fp={}", embedded.join("fingerprints").display());
    let (pairs_e, pairs_c) = (dir.path().join("pairs-embedded"), dir.path().join("pairs-cluster"));
    ok(&neardup(&["pairs", "-q", "--fingerprints", &fingerprints, "-o", pairs_e.to_str().unwrap()]));
    ok(&neardup(&["pairs", "-q", "--fingerprints", &fingerprints, "-o", pairs_c.to_str().unwrap(), "--cluster", &cluster.url]));
    assert_eq!(pairs(&pairs_c), pairs(&pairs_e));
    assert_eq!(clusters(&pairs_c), clusters(&embedded));
    assert!(!pairs(&pairs_c).is_empty());

    // SimHash-cosine: the vectors the executors build check the same pairs.
    let cosine = ["--verify", "cosine:0.8"];
    let (cosine_e, cosine_c) = (dir.path().join("cosine-embedded"), dir.path().join("cosine-cluster"));
    run(&cosine_e, &cosine, &[&news, &reprints]);
    run(&cosine_c, &[&cosine[..], &["--cluster", &cluster.url]].concat(), &[&news, &reprints]);
    assert_same_outputs(&cosine_e, &cosine_c);
    assert_eq!(summary(&cosine_c)["verify"], "cosine:0.8");

    // SQL with a neardup function, on the cluster.
    let out = ok(&neardup(&["sql", "--cluster", &cluster.url, "--format", "csv", "--table", &news, "-c",
        "SELECT count(*) AS n, sum(hamming(simhash(tokenize(text)), 0)) > 0 AS any FROM news WHERE text <> ''"]));
    assert_eq!(out, "n,any\n405,true\n");

    // A COPY's OPTIONS reach the executors (DataFusion's plan codec alone
    // drops them): the cluster writes the embedded run's bytes, in the
    // row groups the statement asked for.
    let copy = |out: &Path, extra: &[&str]| {
        let sql = format!(
            "COPY (SELECT id, text FROM news ORDER BY id) TO '{}' STORED AS PARQUET \
             OPTIONS ('format.max_row_group_size' '100', 'format.compression' 'snappy')",
            out.display()
        );
        let mut args = vec!["sql", "--table", &news, "-c", &sql];
        args.extend_from_slice(extra);
        ok(&neardup(&args));
        std::fs::read(out).unwrap()
    };
    let (copy_e, copy_c) = (dir.path().join("copy-embedded.parquet"), dir.path().join("copy-cluster.parquet"));
    assert!(copy(&copy_e, &[]) == copy(&copy_c, &["--cluster", &cluster.url]), "the cluster wrote other bytes");
    let reader = SerializedFileReader::new(std::fs::File::open(&copy_c).unwrap()).unwrap();
    let groups = reader.metadata().row_groups();
    assert_eq!(groups.iter().map(|g| g.num_rows()).collect::<Vec<_>>(), [100, 100, 100, 100, 7]);
    assert_eq!(groups[0].column(0).compression(), datafusion::parquet::basic::Compression::SNAPPY);

    // Inputs and outputs in a bucket: read and written by the executors.
    if let Some(s3) = &s3 {
        s3.upload_sample();
        let o = s3.neardup(&[
            "dedup", "-q", "--cluster", &cluster.url, "-i", "news=s3://archive/crawl/news.parquet",
            "-i", "reprints=s3://archive/crawl/reprints.parquet", "-o", "s3://archive/runs/cluster",
        ]);
        ok(&o);
        assert!(!stderr(&o).contains(&s3.secret_key));
        let query = "SELECT source, id, cluster_id, is_representative FROM c ORDER BY source, id";
        let remote = s3.sql_csv(&["c=s3://archive/runs/cluster/clusters"], query);
        assert_eq!(remote, s3.sql_csv(&[&format!("c={}", embedded.join("clusters").display())], query));
        let query = "SELECT * FROM p ORDER BY source_a, id_a, source_b, id_b";
        let remote = s3.sql_csv(&["p=s3://archive/runs/cluster/pairs"], query);
        assert_eq!(remote, s3.sql_csv(&[&format!("p={}", embedded.join("pairs").display())], query));
        assert!(common::s3::list_objects(s3, "runs/cluster/").contains(&"runs/cluster/_SUCCESS".to_string()));
        let logs = cluster.logs();
        assert!(logs.contains("INFO"), "the cluster logs at info level");
        assert!(!logs.contains(&s3.secret_key), "a secret in the cluster's logs");
    }

    // A few thousand real documents.
    if let Some(weibo) = shared_data("weibo_original.parquet") {
        let (e, c) = (dir.path().join("weibo-embedded"), dir.path().join("weibo-cluster"));
        run(&e, &[], &[weibo.to_str().unwrap()]);
        run(&c, &["--cluster", &cluster.url], &[weibo.to_str().unwrap()]);
        assert_same_outputs(&e, &c);
    }
}

/// Nights against a fingerprint store on the cluster: the same store
/// partitions and reports, byte for byte, as the same nights embedded, and
/// a compaction in between changes nothing either.
#[test]
fn store_nights_on_a_cluster_equal_embedded_nights() {
    let cluster = start_cluster(2, None, &[]);
    let dir = tempfile::tempdir().unwrap();
    let nights = [("2026-11-01", "news.parquet"), ("2026-11-02", "reprints.parquet"), ("2026-11-03", "reprints.parquet")];
    for (night, file) in nights {
        let folder = dir.path().join("drops").join(night);
        std::fs::create_dir_all(&folder).unwrap();
        // The third night repeats half of the second's documents under new ids.
        let sql = if night == "2026-11-03" {
            format!("COPY (SELECT id || '-again' AS id, text FROM t WHERE hash64(id) % 2 = 0) TO '{}' STORED AS PARQUET", folder.join("p.parquet").display())
        } else {
            format!("COPY (SELECT id, text FROM t) TO '{}' STORED AS PARQUET", folder.join("p.parquet").display())
        };
        ok(&neardup(&["sql", "-t", &format!("t={}", sample(file)), "-c", &sql]));
    }
    let input = format!("crawl={}/drops/{{run_id}}/", dir.path().display());
    let run = |base: &Path, night: &str, extra: &[&str]| {
        let (store, reports) = (base.join("store"), base.join("reports"));
        let output = format!("{}/{{run_id}}", reports.display());
        let mut args = vec!["dedup", "-q", "-i", &input, "--store", store.to_str().unwrap(), "--run-id", night, "-o", &output];
        args.extend_from_slice(extra);
        ok(&neardup(&args));
    };
    let (embedded, distributed) = (dir.path().join("embedded"), dir.path().join("cluster"));
    for (i, (night, _)) in nights.iter().enumerate() {
        run(&embedded, night, &[]);
        run(&distributed, night, &["--cluster", &cluster.url]);
        if i == 1 {
            // Compaction on the cluster too, of the cluster's store only.
            let store = distributed.join("store");
            ok(&neardup(&["store", "compact", "--store", store.to_str().unwrap(), "--all", "--cluster", &cluster.url]));
        }
    }
    let night3 = |base: &Path| {
        let report = base.join("reports").join("2026-11-03");
        [base.join("store/runs/run=2026-11-03/part-00000.parquet"), report.join("pairs/part-00000.parquet"), report.join("clusters/part-00000.parquet")]
            .iter()
            .map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
            .collect::<Vec<_>>()
    };
    assert!(night3(&embedded) == night3(&distributed), "the cluster's night differs from the embedded one");
    let (se, sc) = (summary(&embedded.join("reports/2026-11-03")), summary(&distributed.join("reports/2026-11-03")));
    for key in ["added", "duplicates_of_stored", "stored_documents"] {
        assert_eq!(se["store"][key], sc["store"][key], "store.{key}");
    }
    assert!(sc["store"]["duplicates_of_stored"].as_u64().unwrap() > 0, "the third night repeats stored documents");
    assert!(sc["store"]["read"]["fetch_bytes"].as_u64().unwrap() > 0);
}

/// Run `dedup` of `input` into `out` on `cluster`, and kill its process
/// `victim` (an executor) 3 s in, while the job is still segmenting.
fn dedup_killing(cluster: &mut Cluster, victim: usize, input: &str, out: &Path) -> std::process::Output {
    let mut job = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", "-q", "-i", input, "-o", out.to_str().unwrap(), "--cluster", &cluster.url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Segmentation of 18,060 articles takes several seconds.
    std::thread::sleep(Duration::from_secs(3));
    assert!(job.try_wait().unwrap().is_none(), "the job ended before the kill: nothing was tested");
    let victim = &mut cluster.processes[victim];
    victim.kill().unwrap();
    victim.wait().unwrap();
    job.wait_with_output().unwrap()
}

/// One executor killed in the middle of a job: the job completes on the
/// other with exactly the embedded result, or fails cleanly (non-zero exit,
/// a message, no output). It never reports success with missing rows.
#[test]
fn killing_an_executor_never_loses_pairs_silently() {
    let Some(heybox) = shared_data("heybox_articles.parquet") else { return };
    let input = heybox.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedded = dir.path().join("embedded");
    ok(&neardup(&["dedup", "-q", "-i", input, "-o", embedded.to_str().unwrap()]));

    let mut cluster = start_cluster(2, Some(10), &[]);
    let out = dir.path().join("cluster");
    let result = dedup_killing(&mut cluster, 2, input, &out);
    eprintln!("job after the kill: {:?}\n{}", result.status, stderr(&result));
    if result.status.success() {
        assert_same_outputs(&embedded, &out);
    } else {
        assert!(!stderr(&result).trim().is_empty(), "a failed run must say why");
        assert!(!out.exists(), "a failed run leaves no output");
    }
}

/// A scheduler port for jobs/local-cluster.sh with 2 executors: it and
/// PORT+11, +12, +21, +22 free, below the ephemeral range that the other
/// tests' `free_port` draws from (so parallel tests cannot take them).
fn script_port() -> u16 {
    (0..500u32)
        .map(|i| 20_000 + ((std::process::id() * 7919 + i * 131) % 10_000) as u16)
        .find(|&p| [0, 11, 12, 21, 22].iter().all(|o| TcpListener::bind(("127.0.0.1", p + o)).is_ok()))
        .expect("no free port range for the cluster script")
}

/// `jobs/local-cluster.sh` starts a working cluster and stops it on SIGTERM.
#[test]
fn the_local_cluster_script_runs_a_job() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut script = Command::new("bash")
        .arg(root().join("jobs/local-cluster.sh"))
        .arg("2")
        .env("NEARDUP", env!("CARGO_BIN_EXE_neardup"))
        .env("NEARDUP_PORT", script_port().to_string())
        .env("NEARDUP_WORK", dir.path().join("cluster"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    // Kept open until the script is stopped: a closed pipe would end it early.
    let mut script_out = BufReader::new(script.stdout.take().unwrap());
    script_out.read_line(&mut line).unwrap();
    let url = line.strip_prefix("cluster ready: ").and_then(|l| l.split_whitespace().next()).map(str::to_string);
    // The example job file, with the cluster named in its [engine] table.
    let result = url.map(|url| {
        let job = dir.path().join("job.toml");
        let text = std::fs::read_to_string(root().join("jobs/example.toml"))
            .unwrap()
            .replace("../target/neardup-example", "out")
            .replace("../sample_data/", &format!("{}/", root().join("sample_data").display()));
        std::fs::write(&job, format!("{text}cluster = \"{url}\"\n")).unwrap();
        neardup(&["run", "-q", job.to_str().unwrap()])
    });
    // SIGTERM: the script stops its scheduler and executors, then exits.
    Command::new("kill").args(["-TERM", &script.id().to_string()]).status().unwrap();
    let status = script.wait().unwrap();
    drop(script_out);
    let result = result.unwrap_or_else(|| panic!("the script did not report a ready cluster: {line:?}"));
    if !result.status.success() {
        for log in ["scheduler", "executor-1", "executor-2"] {
            let text = std::fs::read_to_string(dir.path().join("cluster").join(format!("{log}.log"))).unwrap_or_default();
            eprintln!("--- {log}.log ---\n{text}");
        }
    }
    ok(&result);
    assert_eq!(status.code(), Some(143), "the script reports that it was stopped");
    let embedded = dir.path().join("embedded");
    let (news, reprints) = (format!("news={}", sample("news.parquet")), format!("reprints={}", sample("reprints.parquet")));
    ok(&neardup(&["dedup", "-q", "-i", &news, "-i", &reprints, "--keep", "earliest:date", "-o", embedded.to_str().unwrap()]));
    assert_eq!(clusters(&dir.path().join("out")), clusters(&embedded));
    assert_eq!(summary(&dir.path().join("out"))["documents"], 507);
    // The job ran on the cluster its file names: a cluster's work tables
    // are files its executors read, where the same file run embedded
    // keeps them in memory.
    assert_eq!(summary(&dir.path().join("out"))["work_tables"], "files");
    assert_eq!(summary(&embedded)["work_tables"], "memory");
    let leftover = Command::new("pgrep").args(["-f", "--", &format!("--work-dir {}", dir.path().join("cluster").display())]).output().unwrap();
    assert!(stdout(&leftover).trim().is_empty(), "executors left running: {}", stdout(&leftover));
}

/// The only executor killed mid-job: the job fails with exit code 1 and a
/// message once the scheduler gives up waiting, and leaves no output.
#[test]
fn losing_every_executor_fails_cleanly() {
    let Some(heybox) = shared_data("heybox_articles.parquet") else { return };
    let mut cluster = start_cluster(1, Some(5), &[]);
    let dir = tempfile::tempdir().unwrap();
    let result = dedup_killing(&mut cluster, 1, heybox.to_str().unwrap(), &dir.path().join("out"));
    assert_eq!(result.status.code(), Some(1), "{}", stderr(&result));
    assert!(stderr(&result).contains("executors were lost"), "{}", stderr(&result));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "a failed run left {left:?}");
}
