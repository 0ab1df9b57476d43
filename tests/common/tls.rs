//! Certificates for the tests of a cluster with mutual TLS.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA and another CA made with openssl, and certificates for the same
/// hosts: `node` and `client` signed by the CA, `stranger` by the other.
pub struct Certs {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(o.status.success(), "openssl {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr));
}

impl Certs {
    /// `sans`: the hosts, as openssl's subjectAltName value
    /// ("IP:127.0.0.1,DNS:localhost"). The files are in the build's temp
    /// folder, not under /tmp, which processes in their own mount namespace
    /// may not see.
    pub fn make(sans: &str) -> Option<Certs> {
        if Command::new("openssl").arg("version").output().is_err() {
            eprintln!("SKIPPED: no openssl to make the test's CA");
            return None;
        }
        let certs = Certs { dir: tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap() };
        let d = certs.dir.path();
        // Leaf certificates serve as server and client, for every host in `sans`.
        std::fs::write(d.join("leaf.ext"), format!("subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n")).unwrap();
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

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The flags of a process showing certificate `leaf`, trusting the CA.
    pub fn flags(&self, leaf: &str) -> Vec<String> {
        let p = |n: String| self.path(&n).display().to_string();
        vec!["--tls-ca".into(), p("ca.pem".into()), "--tls-cert".into(), p(format!("{leaf}.pem")), "--tls-key".into(), p(format!("{leaf}.key"))]
    }
}

