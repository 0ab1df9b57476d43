//! The job against a real S3-compatible server on loopback (moto, started by
//! tests/s3_server.py with request signing enforced): Parquet read from a
//! bucket, outputs written to a bucket and read back, reruns, and the errors
//! a wrong credential or a missing bucket give.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

mod common;
use common::*;

struct S3 {
    child: Child,
    endpoint: String,
    access_key: String,
    secret_key: String,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_s3() -> Option<S3> {
    let Ok(python) = std::env::var("NEARDUP_PYTHON") else {
        eprintln!("SKIPPED: no S3 server (set NEARDUP_PYTHON to a python with moto and boto3; tests/run.sh does)");
        return None;
    };
    let mut child = Command::new(python)
        .arg(root().join("tests/s3_server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tests/s3_server.py");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let info: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("S3 server did not start ({e}): {line:?}"));
    Some(S3 {
        child,
        endpoint: info["endpoint"].as_str().unwrap().into(),
        access_key: info["access_key"].as_str().unwrap().into(),
        secret_key: info["secret_key"].as_str().unwrap().into(),
    })
}

impl S3 {
    fn neardup_with(&self, secret: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &self.access_key)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT", &self.endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .output()
            .unwrap()
    }

    fn neardup(&self, args: &[&str]) -> Output {
        self.neardup_with(&self.secret_key.clone(), args)
    }

    fn sql_csv(&self, tables: &[&str], query: &str) -> String {
        let mut args = vec!["sql", "--format", "csv", "-c", query];
        for t in tables {
            args.extend(["--table", t]);
        }
        ok(&self.neardup(&args))
    }
}

#[test]
fn dedup_reads_and_writes_a_bucket() {
    let Some(s3) = start_s3() else { return };
    // Upload the sample corpus with neardup itself.
    for name in ["news", "reprints"] {
        let table = format!("t={}", sample(&format!("{name}.parquet")));
        s3.sql_csv(&[&table], &format!("COPY (SELECT * FROM t) TO 's3://archive/crawl/{name}.parquet' STORED AS PARQUET"));
    }
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

fn list_objects(s3: &S3, prefix: &str) -> Vec<String> {
    let out = Command::new(std::env::var("NEARDUP_PYTHON").unwrap())
        .args(["-c", &format!(
            "import boto3,sys; c=boto3.client('s3',endpoint_url='{}',region_name='us-east-1',aws_access_key_id='{}',aws_secret_access_key='{}'); \
             print('\\n'.join(o['Key'] for o in c.list_objects_v2(Bucket='archive',Prefix='{prefix}').get('Contents',[])))",
            s3.endpoint, s3.access_key, s3.secret_key
        )])
        .output()
        .unwrap();
    ok(&out).lines().map(str::to_string).collect()
}

fn get_object(s3: &S3, key: &str) -> String {
    let out = Command::new(std::env::var("NEARDUP_PYTHON").unwrap())
        .args(["-c", &format!(
            "import boto3; c=boto3.client('s3',endpoint_url='{}',region_name='us-east-1',aws_access_key_id='{}',aws_secret_access_key='{}'); \
             print(c.get_object(Bucket='archive',Key='{key}')['Body'].read().decode())",
            s3.endpoint, s3.access_key, s3.secret_key
        )])
        .output()
        .unwrap();
    ok(&out)
}
