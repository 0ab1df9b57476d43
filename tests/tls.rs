//! A cluster that lets no one else in: the scheduler and two executors with
//! certificates of a CA made here, every connection mutual TLS. A client
//! with a certificate of that CA gets the embedded run's bytes; a client
//! without one, or with one of another CA, is refused, and so is a bare TLS
//! connection without a certificate to any port of the cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::cluster::*;
use common::*;

/// A CA, and certificates for 127.0.0.1 made with openssl.
struct Certs {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(o.status.success(), "openssl {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr));
}

impl Certs {
    fn make() -> Option<Certs> {
        if Command::new("openssl").arg("version").output().is_err() {
            eprintln!("SKIPPED: no openssl to make the test's CA");
            return None;
        }
        let certs = Certs { dir: tempfile::tempdir().unwrap() };
        let d = certs.dir.path();
        // Leaf certificates serve as server and client, for the loopback address.
        std::fs::write(d.join("leaf.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n").unwrap();
        for ca in ["ca", "other-ca"] {
            openssl(d, &[
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", &format!("{ca}.key"),
                "-out", &format!("{ca}.pem"), "-days", "2", "-subj", &format!("/CN=neardup test {ca}"),
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ]);
        }
        for (leaf, ca) in [("node", "ca"), ("client", "ca"), ("stranger", "other-ca")] {
            openssl(d, &[
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", &format!("{leaf}.key"),
                "-out", &format!("{leaf}.csr"), "-subj", "/CN=127.0.0.1",
            ]);
            openssl(d, &[
                "x509", "-req", "-in", &format!("{leaf}.csr"), "-CA", &format!("{ca}.pem"), "-CAkey", &format!("{ca}.key"),
                "-CAcreateserial", "-out", &format!("{leaf}.pem"), "-days", "2", "-extfile", "leaf.ext",
            ]);
        }
        Some(certs)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The flags of a process showing certificate `leaf`, trusting the CA.
    fn flags(&self, leaf: &str) -> Vec<String> {
        let p = |n: String| self.path(&n).display().to_string();
        vec!["--tls-ca".into(), p("ca.pem".into()), "--tls-cert".into(), p(format!("{leaf}.pem")), "--tls-key".into(), p(format!("{leaf}.key"))]
    }
}

/// A TLS handshake to `port` without a client certificate, then a read:
/// "refused" when the server demands a certificate, "accepted" otherwise.
fn bare_tls(certs: &Certs, port: u16) -> String {
    let script = "import socket, ssl, sys\n\
        ctx = ssl.create_default_context(cafile=sys.argv[1])\n\
        ctx.set_alpn_protocols(['h2'])\n\
        s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[2])), timeout=10), server_hostname='127.0.0.1')\n\
        try:\n    s.sendall(b'PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n'); s.recv(64); print('accepted')\n\
        except ssl.SSLError as e:\n    print('refused', e.reason)\n";
    let o = Command::new("python3").args(["-c", script, certs.path("ca.pem").to_str().unwrap(), &port.to_string()]).output().unwrap();
    format!("{}{}", stdout(&o), stderr(&o))
}

/// A run the cluster refused: the exit code and message, and no output.
fn refused(o: &Output, out: &Path, code: i32, says: &str) {
    exits_with(o, code, &["the scheduler at 127.0.0.1:", says]);
    assert!(!out.exists(), "a refused run left output");
}

#[test]
fn a_cluster_with_certificates_lets_no_one_else_in() {
    let Some(certs) = Certs::make() else { return };
    let cluster = start_cluster_with(2, None, &[], Some(&certs.flags("node")));
    let dir = tempfile::tempdir().unwrap();
    let news = format!("news={}", sample("news.parquet"));
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    let dedup = |out: &Path, extra: &[String]| {
        let mut args = vec!["dedup".to_string(), "-q".into(), "-i".into(), news.clone(), "-i".into(), reprints.clone(), "-o".into(), out.display().to_string()];
        args.extend_from_slice(extra);
        neardup(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let on_cluster = |leaf: Option<&str>| -> Vec<String> {
        let mut args = vec!["--cluster".to_string(), cluster.url.clone()];
        args.extend(leaf.map(|l| certs.flags(l)).unwrap_or_default());
        args
    };

    // With a certificate of the CA: the embedded run's bytes.
    let (embedded, secured) = (dir.path().join("embedded"), dir.path().join("secured"));
    ok(&dedup(&embedded, &[]));
    ok(&dedup(&secured, &on_cluster(Some("client"))));
    assert_same_outputs(&embedded, &secured);

    // Without a certificate, or with another CA's: refused.
    let plain = dir.path().join("plain");
    refused(&dedup(&plain, &on_cluster(None)), &plain, 1, "A cluster with TLS needs --tls-ca");
    let stranger = dir.path().join("stranger");
    // (It trusts the cluster's CA, but its own certificate is of another.)
    refused(&dedup(&stranger, &on_cluster(Some("stranger"))), &stranger, 2, "the TLS handshake failed");

    // No port of the cluster completes a request without a certificate.
    let scheduler_port: u16 = cluster.url.rsplit(':').next().unwrap().parse().unwrap();
    for port in std::iter::once(scheduler_port).chain(cluster.flight_ports.iter().copied()) {
        let answer = bare_tls(&certs, port);
        assert!(answer.starts_with("refused"), "port {port}: {answer}");
    }
}

#[test]
fn half_a_certificate_is_a_usage_error() {
    let o = neardup(&["scheduler", "--tls-ca", "ca.pem"]);
    exits_with(&o, 2, &["--tls-cert", "--tls-key"]);
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("cert.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let j = junk.to_str().unwrap();
    let o = neardup(&["executor", "--tls-ca", j, "--tls-cert", j, "--tls-key", j, "--external-host", "127.0.0.1"]);
    exits_with(&o, 2, &["cert.pem' holds no CA certificate"]);
}
