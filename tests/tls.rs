//! A cluster that lets no one else in: the scheduler and two executors with
//! certificates of a CA made here, every connection mutual TLS. A client
//! with a certificate of that CA gets the embedded run's bytes; a client
//! without one, or with one of another CA, is refused, and so is a bare TLS
//! connection without a certificate to any port of the cluster.

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::cluster::*;
use common::tls::Certs;
use common::*;

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
    let Some(certs) = Certs::make("IP:127.0.0.1,DNS:localhost") else { return };
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
    refused(&dedup(&stranger, &on_cluster(Some("stranger"))), &stranger, 2, "the TLS connection failed");

    // Nothing listening there: a scheduler that is not running, exit 1 (retry).
    let nowhere = format!("df://127.0.0.1:{}", free_port());
    let args = [&["sql".to_string(), "-c".into(), "SELECT 1".into(), "--cluster".into(), nowhere][..], &certs.flags("client")].concat();
    let o = neardup(&args.iter().map(String::as_str).collect::<Vec<_>>());
    exits_with(&o, 1, &["no answer: is the scheduler running at that address?"]);

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
