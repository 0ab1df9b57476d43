//! A cluster whose hosts share nothing but the object store. The scheduler,
//! two executors and the client each run in a network namespace of their
//! own (their own address on a bridge, their own loopback) and a mount
//! namespace of their own, where /tmp is a private tmpfs: their work and
//! temp folders, which no other process can see. Every input, output and
//! store lives in the S3-compatible server. A `dedup` and two store nights
//! must give the embedded run's bytes, and a `dedup` on the same hosts with
//! mutual TLS too.
//!
//! Needs root (network namespaces); skipped with a message otherwise.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::cluster::{wait_for, Cluster};
use common::s3::{object_md5s, start_s3_on, S3};
use common::tls::Certs;
use common::*;

/// Network namespaces joined by a bridge: host `i` is `NS-i` at `PREFIX.(10+i)`,
/// and this process reaches them all at `PREFIX.1`.
#[derive(Clone)]
struct Hosts {
    tag: String,
    prefix: String,
    count: usize,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    match o.status.success() {
        true => Ok(()),
        false => Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim())),
    }
}

impl Hosts {
    fn new(count: usize) -> Result<Hosts, String> {
        let n = std::process::id() % 200 + 20;
        let hosts = Hosts { tag: format!("nd{n}"), prefix: format!("10.251.{n}"), count };
        // What a killed run with the same tag may have left.
        drop(hosts.clone());
        let bridge = hosts.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{}.1/24", hosts.prefix), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..count {
            let (ns, outside, inside) = (hosts.namespace(i), format!("{}h{i}", hosts.tag), format!("{}n{i}", hosts.tag));
            ip(&["netns", "add", &ns])?;
            ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside])?;
            ip(&["link", "set", &inside, "netns", &ns])?;
            ip(&["link", "set", &outside, "master", &bridge])?;
            ip(&["link", "set", &outside, "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", hosts.address(i)), "dev", &inside])?;
            ip(&["-n", &ns, "link", "set", &inside, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    fn namespace(&self, i: usize) -> String {
        format!("{}-host{i}", self.tag)
    }

    fn address(&self, i: usize) -> String {
        format!("{}.{}", self.prefix, 10 + i)
    }

    /// `neardup ARGS` on host `i`: in its network namespace, with a private
    /// /tmp (the only folder it writes) as its working folder.
    fn neardup(&self, i: usize, args: &[&str], env: &[(&'static str, String)]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.namespace(i), "unshare", "--mount", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tmpfs tmpfs /tmp && cd /tmp && exec \"$@\"")
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .envs(env.iter().cloned())
            .env("TMPDIR", "/tmp");
        c
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 0..self.count {
            let _ = ip(&["netns", "del", &self.namespace(i)]);
            let _ = ip(&["link", "del", &format!("{}h{i}", self.tag)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

const SCHEDULER: usize = 0;
const CLIENT: usize = 3;

/// The scheduler on host 0 and executors on hosts 1 and 2, with mutual TLS
/// when `tls` gives the certificate flags.
fn start_cluster(hosts: &Hosts, env: &[(&'static str, String)], tls: &[String]) -> Cluster {
    let logs = tempfile::tempdir().unwrap();
    let spawn = |mut c: Command, name: &str| {
        let log = std::fs::File::create(logs.path().join(format!("{name}.log"))).unwrap();
        c.env("NEARDUP_LOG", "info").stdout(Stdio::null()).stderr(log).spawn().unwrap()
    };
    let scheduler = format!("{}:50050", hosts.address(SCHEDULER));
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let bind = hosts.address(SCHEDULER);
    let args = [&["scheduler", "--bind", &bind, "--port", "50050"][..], &tls].concat();
    let mut processes = vec![spawn(hosts.neardup(SCHEDULER, &args, env), "scheduler")];
    wait_for(&scheduler);
    for i in [1, 2] {
        let me = hosts.address(i);
        let args = [
            "executor", "--scheduler", &scheduler, "--bind", &me, "--external-host", &me, "--port", "50051", "--grpc-port", "50052",
            "--concurrency", "2", "--work-dir", "/tmp/work",
        ];
        processes.push(spawn(hosts.neardup(i, &[&args[..], &tls].concat(), env), &format!("executor-{i}")));
        wait_for(&format!("{me}:50051"));
    }
    // Executors register with their first heartbeat.
    std::thread::sleep(Duration::from_secs(2));
    Cluster::of(processes, format!("df://{scheduler}"), vec![], logs)
}

/// Run `command` to its end, or fail the test after `LIMIT` (a client
/// waiting on a cluster that cannot reach it would otherwise wait forever).
fn finished(mut command: Command) -> Output {
    const LIMIT: Duration = Duration::from_secs(180);
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    rx.recv_timeout(LIMIT).unwrap_or_else(|_| {
        let _ = Command::new("kill").arg(id.to_string()).status();
        panic!("a client on the cluster did not finish within {LIMIT:?}")
    })
}

fn succeeded(o: Output) -> Output {
    assert!(o.status.success(), "exit {:?}\n{}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    o
}

/// The objects of two outputs are the same bytes (report.html and
/// summary.json aside: they hold timings).
fn same_objects(s3: &S3, a: &str, b: &str, at_least: usize) {
    let keep = |m: std::collections::BTreeMap<String, String>| -> Vec<(String, String)> {
        m.into_iter().filter(|(k, _)| k.ends_with(".parquet")).collect()
    };
    let (left, right) = (keep(object_md5s(s3, a)), keep(object_md5s(s3, b)));
    assert!(left.len() >= at_least, "{a}: {left:?}");
    assert_eq!(left, right, "{a} and {b} differ");
}

#[test]
fn hosts_that_share_only_the_object_store_give_the_embedded_bytes() {
    let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !is_root || !Path::new("/usr/bin/unshare").exists() {
        eprintln!("SKIPPED: network namespaces need root and unshare (util-linux)");
        return;
    }
    let hosts = match Hosts::new(4) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("SKIPPED: cannot make network namespaces here: {e}");
            return;
        }
    };
    let Some(s3) = start_s3_on(&format!("{}.1", hosts.prefix)) else { return };
    s3.upload_sample();
    for (night, file) in [("2026-11-01", "news"), ("2026-11-02", "reprints")] {
        s3.sql_csv(&[&format!("t={}", sample(&format!("{file}.parquet")))], &format!(
            "COPY (SELECT id, text FROM t) TO 's3://archive/drops/{night}/p.parquet' STORED AS PARQUET"
        ));
    }
    let env = s3.env();
    let cluster = start_cluster(&hosts, &env, &[]);
    let url = cluster.url.clone();

    // A one-shot dedup, from the client's host, and embedded here.
    fn dedup<'a>(out: &'a str, cluster: &[&'a str]) -> Vec<&'a str> {
        let inputs = ["-i", "news=s3://archive/crawl/news.parquet", "-i", "reprints=s3://archive/crawl/reprints.parquet"];
        [&["dedup", "-q"][..], &inputs, &["-o", out], cluster].concat()
    }
    succeeded(finished(hosts.neardup(CLIENT, &dedup("s3://archive/out/cluster", &["--cluster", &url]), &env)));
    succeeded(s3.neardup(&dedup("s3://archive/out/embedded", &[])));
    same_objects(&s3, "out/cluster/", "out/embedded/", 3);

    // Two store nights each way.
    for night in ["2026-11-01", "2026-11-02"] {
        let night_args = |store: &str, reports: &str| {
            let output = format!("s3://archive/{reports}/{{run_id}}");
            ["dedup", "-q", "-i", "crawl=s3://archive/drops/{run_id}/", "--store", store, "--run-id", night, "-o", &output].map(String::from).to_vec()
        };
        let mut on_cluster = night_args("s3://archive/store-cluster", "reports-cluster");
        on_cluster.extend(["--cluster".to_string(), url.clone()]);
        let args: Vec<&str> = on_cluster.iter().map(String::as_str).collect();
        succeeded(finished(hosts.neardup(CLIENT, &args, &env)));
        let embedded = night_args("s3://archive/store-embedded", "reports-embedded");
        succeeded(s3.neardup(&embedded.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    same_objects(&s3, "reports-cluster/2026-11-02/", "reports-embedded/2026-11-02/", 3);
    same_objects(&s3, "store-cluster/runs/", "store-embedded/runs/", 2);

    // The same hosts with certificates: mutual TLS between them, the same bytes.
    drop(cluster);
    let addresses: Vec<String> = (0..hosts.count).map(|i| format!("IP:{}", hosts.address(i))).collect();
    let Some(certs) = Certs::make(&addresses.join(",")) else { return };
    let secured = start_cluster(&hosts, &env, &certs.flags("node"));
    let client = certs.flags("client");
    let on_cluster: Vec<&str> = ["--cluster", secured.url.as_str()].into_iter().chain(client.iter().map(String::as_str)).collect();
    succeeded(finished(hosts.neardup(CLIENT, &dedup("s3://archive/out/secured", &on_cluster), &env)));
    same_objects(&s3, "out/secured/", "out/embedded/", 3);
}
