//! A real Ballista cluster for the tests: a `neardup scheduler` and
//! `neardup executor` processes on loopback, and the comparison of its
//! outputs with an embedded run's.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

pub struct Cluster {
    pub processes: Vec<Child>,
    pub url: String,
    /// Each executor's Arrow Flight port.
    pub flight_ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// A cluster of `processes`, whose logs (`NAME.log`) are in `dir`.
    pub fn of(processes: Vec<Child>, url: String, flight_ports: Vec<u16>, dir: tempfile::TempDir) -> Cluster {
        Cluster { processes, url, flight_ports, _dir: dir }
    }

    /// Everything the scheduler and executors logged so far.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for entry in std::fs::read_dir(self._dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                all.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
        all
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in &mut self.processes {
            let _ = p.kill();
            let _ = p.wait();
        }
        // A failed test shows what the cluster said.
        if std::thread::panicking() {
            let mut logs: Vec<_> = std::fs::read_dir(self._dir.path()).unwrap().flatten().map(|e| e.path()).collect();
            logs.sort();
            for log in logs.iter().filter(|p| p.extension().is_some_and(|e| e == "log")) {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("--- last lines of {} ---", log.display());
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Wait until something listens on `address` (HOST:PORT), at most 30 s.
pub fn wait_for(address: &str) {
    listens(address, || true);
}

/// Whether something listens on `address` while `alive` holds; at most 30 s.
fn listens(address: &str, mut alive: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if TcpStream::connect(address).is_ok() {
            return true;
        }
        if !alive() {
            return false;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "nothing listens on {address}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A process `start`ed on `count` free ports, once something listens on
/// the first `listening` of them. A port is free only when asked: another
/// process (another test's server, an executor's outgoing connection) may
/// take it before the child binds it, and the child then exits. It is
/// started again on new ports, three times at most.
fn spawn_on_free_ports(count: usize, listening: usize, start: impl Fn(&[u16]) -> Child) -> (Child, Vec<u16>) {
    for _ in 0..3 {
        let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
        let mut child = start(&ports);
        let mut alive = || child.try_wait().ok().flatten().is_none();
        if ports[..listening].iter().all(|port| listens(&format!("127.0.0.1:{port}"), &mut alive)) {
            return (child, ports);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("a cluster process exited at start three times: its ports were taken, or it fails (see its log)");
}

/// Start `neardup ARGS` with its standard error in `log`.
pub fn spawn(args: &[&str], env: &[(&'static str, String)], log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .envs(env.iter().cloned())
        .env("NEARDUP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// A scheduler and `executors` executors on loopback. `executor_timeout`:
/// seconds after which a silent executor is declared lost (executors then
/// send a heartbeat every second).
/// `env`: extra environment of every process (storage credentials).
pub fn start_cluster(executors: usize, executor_timeout: Option<u64>, env: &[(&'static str, String)]) -> Cluster {
    start_cluster_with(executors, executor_timeout, env, None)
}

/// [`start_cluster`], secured with mutual TLS when `tls` gives the
/// processes' certificate flags: executors then name their host (the one
/// in the certificate) and have no gRPC port to wait for (they pull work).
pub fn start_cluster_with(executors: usize, executor_timeout: Option<u64>, env: &[(&'static str, String)], tls: Option<&[String]>) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let mut scheduler_args: Vec<String> = Vec::new();
    let mut executor_args: Vec<String> = Vec::new();
    if let Some(t) = executor_timeout {
        scheduler_args.extend(["--executor-timeout".into(), t.to_string()]);
        executor_args.extend(["--heartbeat-interval".into(), "1".into()]);
    }
    if let Some(tls) = tls {
        scheduler_args.extend_from_slice(tls);
        executor_args.extend_from_slice(tls);
        executor_args.extend(["--external-host".into(), "127.0.0.1".into()]);
    }
    let (scheduler_process, ports) = spawn_on_free_ports(1, 1, |ports| {
        let port = ports[0].to_string();
        let mut args = vec!["scheduler", "--port", &port];
        args.extend(scheduler_args.iter().map(String::as_str));
        spawn(&args, env, &dir.path().join("scheduler.log"))
    });
    let mut processes = vec![scheduler_process];
    let scheduler = format!("127.0.0.1:{}", ports[0]);
    let mut flight_ports = Vec::new();
    for i in 0..executors {
        let work = dir.path().join(format!("executor-{i}"));
        // With TLS an executor has no gRPC port to wait for (it pulls work).
        let listening = if tls.is_none() { 2 } else { 1 };
        let (executor, ports) = spawn_on_free_ports(2, listening, |ports| {
            let (flight_port, grpc_port) = (ports[0].to_string(), ports[1].to_string());
            let mut args = vec![
                "executor", "--scheduler", &scheduler, "--port", &flight_port, "--grpc-port", &grpc_port,
                "--concurrency", "2", "--work-dir", work.to_str().unwrap(),
            ];
            args.extend(executor_args.iter().map(String::as_str));
            spawn(&args, env, &dir.path().join(format!("executor-{i}.log")))
        });
        processes.push(executor);
        flight_ports.push(ports[0]);
    }
    // Executors register with their first heartbeat (or poll).
    std::thread::sleep(Duration::from_secs(2));
    let mut cluster = Cluster::of(processes, format!("df://{scheduler}"), flight_ports, dir);
    for (i, p) in cluster.processes.iter_mut().enumerate() {
        assert!(p.try_wait().unwrap().is_none(), "cluster process {i} exited at start (a port taken meanwhile?)");
    }
    cluster
}

pub fn table(out: &Path, name: &str, columns: &[&str]) -> Vec<Vec<String>> {
    let batches = read_dir(&out.join(name));
    columns.iter().map(|c| strings(&batches, c)).collect()
}

pub fn assert_same_outputs(a: &Path, b: &Path) {
    for (name, cols) in [
        ("fingerprints", &["source", "id", "simhash", "n_terms", "n_chars"][..]),
        ("pairs", &["source_a", "id_a", "source_b", "id_b", "hamming"][..]),
        ("clusters", &["source", "id", "cluster_id", "is_representative", "cluster_size"][..]),
    ] {
        let left = table(a, name, cols);
        assert!(!left[0].is_empty(), "{name} is empty");
        assert_eq!(left, table(b, name, cols), "{name} differs between the embedded and the cluster run");
        // Byte for byte, footer (with neardup's metadata) included.
        let file = |dir: &Path| std::fs::read(dir.join(name).join("part-00000.parquet")).unwrap();
        assert!(file(a) == file(b), "{name}: the files differ between the embedded and the cluster run");
    }
    let (sa, sb) = (summary(a), summary(b));
    for key in ["documents", "distinct_fingerprints", "near_fingerprint_pairs", "pairs", "clusters", "duplicates"] {
        assert_eq!(sa[key], sb[key], "summary {key}");
    }
    for key in ["n_docs", "terms"] {
        assert_eq!(sa["idf"][key], sb["idf"][key], "summary idf.{key}");
    }
}

