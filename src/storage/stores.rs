//! Object stores for every URL scheme neardup reads and writes, built on
//! first use from the URL and the environment.
//!
//! Each process builds its stores from its own environment, so no credential
//! travels in a plan, a session setting or a log line; the same registry is
//! meant to serve a cluster's client, scheduler and executors alike.
//!
//! | scheme | store | configured by |
//! |---|---|---|
//! | `s3://bucket/…` | Amazon S3 or S3-compatible | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT` (S3-compatible servers), `AWS_ALLOW_HTTP=true` (plain HTTP), `AWS_VIRTUAL_HOSTED_STYLE_REQUEST` (default: path style), or the usual credential chain |
//! | `gs://bucket/…` | Google Cloud Storage | `GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_APPLICATION_CREDENTIALS`, … |
//! | `az://container/…`, `abfs[s]://…` | Azure Blob Storage / ADLS | `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, … |
//! | `http[s]://host/…` | HTTP (read; WebDAV for writes) | — |
//! | plain paths, `file://` | local files | — |

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use object_store::ObjectStore;
use url::Url;

/// The registry: stores registered explicitly, else made from the environment.
#[derive(Debug, Default)]
pub struct EnvStoreRegistry {
    inner: DefaultObjectStoreRegistry,
}

impl EnvStoreRegistry {
    pub fn new() -> Self {
        Self::default()
    }
}

fn store_error(url: &Url, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Configuration(format!("cannot set up object storage for '{}': {e}", redact(url)))
}

/// A URL as it may be shown: no user, password or query.
pub fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.to_string()
}

/// Retries of failed object-store requests (errors 5xx, timeouts, broken
/// connections), with exponential backoff: at most NEARDUP_STORE_RETRIES
/// (default 10) within NEARDUP_STORE_RETRY_SECS seconds (default 180); then
/// the run fails with the store's error (exit code 1: retry the run later).
fn retry_config() -> Result<object_store::RetryConfig> {
    let number = |name: &str, default: u64| -> Result<u64> {
        match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse().map_err(|_| {
                DataFusionError::Configuration(format!("{name}='{v}' is not a whole number"))
            }),
            _ => Ok(default),
        }
    };
    Ok(object_store::RetryConfig {
        max_retries: number("NEARDUP_STORE_RETRIES", 10)? as usize,
        retry_timeout: std::time::Duration::from_secs(number("NEARDUP_STORE_RETRY_SECS", 180)?),
        backoff: object_store::BackoffConfig::default(),
    })
}

/// Build the store for a URL's scheme and host from the environment.
pub fn store_from_env(url: &Url) -> Result<Arc<dyn ObjectStore>> {
    let host = url.host_str().unwrap_or_default();
    let retry = retry_config()?;
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(host)
                .with_retry(retry)
                .build()
                .map_err(|e| store_error(url, e))?,
        ),
        "gs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(host)
                .with_retry(retry)
                .build()
                .map_err(|e| store_error(url, e))?,
        ),
        "az" | "azure" | "abfs" | "abfss" | "adl" => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry)
                .build()
                .map_err(|e| store_error(url, e))?,
        ),
        "http" | "https" => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_url(&url[..url::Position::BeforePath])
                .with_retry(retry)
                // The URL says http:// (no TLS) explicitly; object_store refuses it by default.
                .with_client_options(object_store::ClientOptions::new().with_allow_http(url.scheme() == "http"))
                .build()
                .map_err(|e| store_error(url, e))?,
        ),
        other => {
            return Err(DataFusionError::Configuration(format!(
                "'{}': unsupported scheme '{other}' (use a local path, file://, s3://, gs://, az://, abfs://, http:// or https://)",
                redact(url)
            )))
        }
    };
    Ok(store)
}

impl ObjectStoreRegistry for EnvStoreRegistry {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.inner.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        self.inner.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.inner.get_store(url) {
            return Ok(store);
        }
        let store = store_from_env(url)?;
        self.inner.register_store(url, Arc::clone(&store));
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schemes_are_named() {
        let err = EnvStoreRegistry::new().get_store(&Url::parse("ftp://host/x").unwrap()).unwrap_err();
        assert!(err.to_string().contains("unsupported scheme 'ftp'"), "{err}");
    }

    #[test]
    fn secrets_in_urls_are_never_shown() {
        let url = Url::parse("https://user:secret@host/path?sig=abc").unwrap();
        assert_eq!(redact(&url), "https://host/path");
    }

    #[test]
    fn local_files_need_no_configuration() {
        assert!(EnvStoreRegistry::new().get_store(&Url::parse("file:///").unwrap()).is_ok());
    }
}
