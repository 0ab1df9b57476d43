//! Mutual TLS between the processes of a cluster.
//!
//! Ballista's endpoints have no authentication of their own: whoever reaches
//! the scheduler can submit any plan, and it runs with the executors' file
//! access and credentials. With certificates, every gRPC and Arrow Flight
//! connection of the cluster is TLS, and every server requires a client
//! certificate signed by the cluster's CA: the client and the executors
//! towards the scheduler, the client and the other executors towards an
//! executor's Flight port. Each process shows one certificate, as a server
//! and as a client, so it must name the host the others reach it by (a DNS
//! or IP subject alternative name) and allow both uses.
//!
//! Two facts of Ballista 55 shape this module. tonic only wraps a connection
//! in TLS when its URI says `https`, and Ballista writes `http://` into some
//! of the URIs it builds (an executor's towards the scheduler): the endpoint
//! hook ([`Tls::endpoint_hook`]) rebuilds those. And the executor's own
//! gRPC server (the push scheduler's way in) has no hook for TLS, so a
//! secured cluster schedules by pull: executors ask the scheduler for work.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ballista_core::extension::EndpointOverrideFn;
use ballista_core::utils::{create_grpc_client_endpoint, GrpcClientConfig};
use serde::{Deserialize, Serialize};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

use crate::error::{Error, Result};

/// Where a process finds its certificates (PEM files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The cluster's CA: peers must show a certificate it signed.
    pub ca: PathBuf,
    /// This process's certificate, for the host name others reach it by.
    pub cert: PathBuf,
    /// The certificate's private key.
    pub key: PathBuf,
}

/// A process's loaded certificates.
#[derive(Clone)]
pub struct Tls {
    ca: Certificate,
    identity: Identity,
}

fn read_pem(path: &Path, what: &str, marker: &str) -> Result<Vec<u8>> {
    let bytes = fs::read(path).map_err(|e| Error::from(e).context(format!("cannot read the {what} '{}'", path.display())))?;
    if !String::from_utf8_lossy(&bytes).contains(marker) {
        return Err(Error::input(format!("'{}' holds no {what}: expected a PEM file with a '{marker}' block", path.display())));
    }
    Ok(bytes)
}

impl Tls {
    /// Read and check the files: a file that is missing or not PEM, or a key
    /// that does not fit, is an input error naming the file.
    pub fn load(files: &TlsFiles) -> Result<Tls> {
        let ca = read_pem(&files.ca, "CA certificate", "-----BEGIN CERTIFICATE-----")?;
        let cert = read_pem(&files.cert, "certificate", "-----BEGIN CERTIFICATE-----")?;
        let key = read_pem(&files.key, "private key", "PRIVATE KEY-----")?;
        let tls = Tls { ca: Certificate::from_pem(ca), identity: Identity::from_pem(cert, key) };
        // tonic parses the PEM only when a config is installed: do it now, so
        // a bad file stops the process before it listens or connects.
        Endpoint::from_static("https://localhost").tls_config(tls.client()).map_err(|e| {
            Error::input(format!(
                "cannot use the TLS files '{}', '{}', '{}': {e} (are they PEM, and is the key the certificate's?)",
                files.ca.display(),
                files.cert.display(),
                files.key.display()
            ))
        })?;
        Ok(tls)
    }

    /// A server that requires a client certificate signed by the CA.
    pub fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(self.identity.clone()).client_ca_root(self.ca.clone())
    }

    /// A client that trusts only the CA and shows this process's certificate.
    pub fn client(&self) -> ClientTlsConfig {
        ClientTlsConfig::new().ca_certificate(self.ca.clone()).identity(self.identity.clone())
    }

    /// The hook Ballista applies to every gRPC and Flight endpoint it
    /// creates: TLS with this process's certificate, on an `https` URI.
    pub fn endpoint_hook(&self) -> EndpointOverrideFn {
        let client = self.client();
        Arc::new(move |endpoint: Endpoint| {
            let endpoint = if endpoint.uri().scheme_str() == Some("https") { endpoint } else { as_https(&endpoint)? };
            Ok(endpoint.tls_config(client.clone())?)
        })
    }
}

/// `endpoint` at the same host and port over `https`. tonic has no way to
/// change an endpoint's URI, so it is made anew with Ballista's settings for
/// client endpoints (timeouts, keep-alive, windows).
fn as_https(endpoint: &Endpoint) -> std::result::Result<Endpoint, Box<dyn std::error::Error + Send + Sync>> {
    let authority = endpoint.uri().authority().ok_or_else(|| format!("'{}' names no host", endpoint.uri()))?;
    let settings = GrpcClientConfig::default();
    Ok(create_grpc_client_endpoint(format!("https://{authority}"), Some(&settings))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_pem_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("ca.pem");
        fs::write(&junk, "not a certificate").unwrap();
        let files = TlsFiles { ca: junk, cert: dir.path().join("none.pem"), key: dir.path().join("key.pem") };
        let e = Tls::load(&files).err().unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("ca.pem' holds no CA certificate"), "{e}");
    }

    #[test]
    fn plain_uris_become_https_with_their_authority() {
        let plain = Endpoint::from_static("http://10.0.0.7:50050");
        assert_eq!(as_https(&plain).unwrap().uri().to_string(), "https://10.0.0.7:50050/");
    }
}
