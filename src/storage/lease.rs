//! A lease on a store: at most one writer (a night or a compaction) at a time.
//!
//! The lease is one object, `STORE/_lease.json`, created with the object
//! store's conditional create (`PutMode::Create`: `If-None-Match: *` on S3
//! and Azure, generation 0 on GCS, a hard link on a local disk), so two
//! processes that race for it cannot both win, on any of them. It names its
//! holder and carries an expiry, which the holder pushes forward while it
//! works; a process that is killed stops doing so, and its lease expires
//! (at once, for a process of the same host that no longer runs). A process
//! that finds a stale lease deletes it (only if it is still the same lease)
//! and tries once more to create its own.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use datafusion::prelude::SessionContext;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use super::{locate, store_failure};
use crate::error::{Error, Result};

/// Seconds a lease lasts without renewal, unless `NEARDUP_LEASE_SECS` says otherwise.
pub const DEFAULT_LEASE_SECS: u64 = 600;

/// What the lease object holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaseInfo {
    /// What holds the store, e.g. `run 2026-11-22` or `compaction`.
    pub holder: String,
    pub host: String,
    pub pid: u32,
    /// Unique to this acquisition: a lease is only renewed or released by its holder.
    pub nonce: String,
    /// Unix seconds.
    pub acquired: i64,
    pub expires: i64,
}

impl LeaseInfo {
    /// Whether the lease no longer protects anything: past its expiry, or
    /// held by a process of this host that no longer runs (killed before it
    /// could give the lease back; checked where `/proc` exists).
    fn is_stale(&self) -> bool {
        let gone = self.host == host()
            && std::path::Path::new("/proc/self").exists()
            && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists();
        gone || self.expires <= Utc::now().timestamp()
    }

    fn describe(&self) -> String {
        let at = |t: i64| chrono::DateTime::from_timestamp(t, 0).map_or(t.to_string(), |d| d.to_rfc3339());
        format!("{} (host {}, pid {}, since {}, lease until {})", self.holder, self.host, self.pid, at(self.acquired), at(self.expires))
    }
}

/// A held lease; renewed in the background until [`Lease::release`].
pub struct Lease {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    info: LeaseInfo,
    renewal: tokio::task::JoinHandle<()>,
}

fn lease_secs() -> u64 {
    std::env::var("NEARDUP_LEASE_SECS").ok().and_then(|v| v.parse().ok()).filter(|&s| s > 0).unwrap_or(DEFAULT_LEASE_SECS)
}

fn host() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

async fn read(store: &dyn ObjectStore, path: &ObjectPath, url: &str) -> Result<Option<LeaseInfo>> {
    match store.get(path).await {
        Ok(got) => {
            let bytes = got.bytes().await.map_err(|e| store_failure(format!("cannot read the lease of '{url}'"), &e))?;
            Ok(Some(serde_json::from_slice(&bytes).map_err(|e| {
                Error::runtime(format!("the lease '{url}/_lease.json' is unreadable ({e}): delete it if no run holds the store"))
            })?))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(store_failure(format!("cannot read the lease of '{url}'"), &e)),
    }
}

/// The lease of the store at `url`, if one is held (expired or not).
pub async fn current(ctx: &SessionContext, url: &str) -> Result<Option<LeaseInfo>> {
    let url = url.trim_end_matches('/');
    let (store, root) = locate(ctx, url)?;
    read(store.as_ref(), &root.join("_lease.json"), url).await
}

impl Lease {
    /// Take the lease of the store at `url` for `holder`, or fail (exit 1)
    /// naming who holds it.
    pub async fn acquire(ctx: &SessionContext, url: &str, holder: &str) -> Result<Lease> {
        let url = url.trim_end_matches('/');
        let (store, root) = locate(ctx, url)?;
        if let Some(dir) = super::local_path(url) {
            std::fs::create_dir_all(&dir)?;
        }
        let path = root.join("_lease.json");
        let secs = lease_secs();
        let now = Utc::now().timestamp();
        let nonce = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(format!("{}{}{now}{holder}", std::process::id(), host()).as_bytes()) ^ rand_bits());
        let info = LeaseInfo { holder: holder.to_string(), host: host(), pid: std::process::id(), nonce, acquired: now, expires: now + secs as i64 };
        for _ in 0..2 {
            let body = PutPayload::from(serde_json::to_vec_pretty(&info).expect("lease serialises"));
            match store.put_opts(&path, body, PutOptions::from(PutMode::Create)).await {
                Ok(_) => {
                    let renewal = tokio::spawn(renew(store.clone(), path.clone(), info.clone(), secs));
                    return Ok(Lease { store, path, info, renewal });
                }
                Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(object_store::Error::NotImplemented { .. }) => {
                    return Err(Error::input(format!(
                        "store '{url}' does not support conditional writes, which its lease needs \
                         (for S3-compatible servers, set AWS_CONDITIONAL_PUT=etag on one that supports If-None-Match)"
                    )))
                }
                Err(e) => return Err(store_failure(format!("cannot take the lease of store '{url}'"), &e)),
            }
            let Some(held) = read(store.as_ref(), &path, url).await? else { continue };
            if !held.is_stale() {
                return Err(Error::runtime(format!(
                    "store '{url}' is held by {}: it runs one night or compaction at a time. Run again after \
                     it ends (or after its lease expires, if that process was killed)",
                    held.describe()
                )));
            }
            // Expired: remove it, unless someone has replaced it meanwhile.
            if read(store.as_ref(), &path, url).await?.as_ref() == Some(&held) {
                log::warn!("store '{url}': the lease of {} is stale; taking it over", held.describe());
                match store.delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(store_failure(format!("cannot remove the expired lease of '{url}'"), &e)),
                }
            }
        }
        Err(Error::runtime(format!("store '{url}': another process took the lease at the same time; run again")))
    }

    pub fn info(&self) -> &LeaseInfo {
        &self.info
    }

    /// Fail (exit 1) unless the lease is still this process's: a process
    /// that stalled past its lease must not commit over a newer holder.
    pub async fn check_held(&self) -> Result<()> {
        let url = self.path.to_string();
        match read(self.store.as_ref(), &self.path, &url).await? {
            Some(held) if held.nonce == self.info.nonce => Ok(()),
            Some(held) => Err(Error::runtime(format!(
                "this run's lease expired and {} took the store over: nothing was committed; run again",
                held.describe()
            ))),
            None => Err(Error::runtime("this run's lease on the store is gone: nothing was committed; run again")),
        }
    }

    /// Give the lease back (only if it is still this process's).
    pub async fn release(self) {
        self.renewal.abort();
        if let Ok(got) = self.store.get(&self.path).await {
            let ours = got
                .bytes()
                .await
                .ok()
                .and_then(|b| serde_json::from_slice::<LeaseInfo>(&b).ok())
                .is_some_and(|held| held.nonce == self.info.nonce);
            if ours {
                let _ = self.store.delete(&self.path).await;
            }
        }
    }
}

/// Bits that differ between two acquisitions in one process.
fn rand_bits() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// Push the expiry forward every third of the lease, while the lease is ours.
async fn renew(store: Arc<dyn ObjectStore>, path: ObjectPath, mut info: LeaseInfo, secs: u64) {
    loop {
        tokio::time::sleep(Duration::from_secs((secs / 3).max(1))).await;
        let held = match store.get(&path).await {
            Ok(got) => got.bytes().await.ok().and_then(|b| serde_json::from_slice::<LeaseInfo>(&b).ok()),
            Err(_) => None,
        };
        if held.is_none_or(|h| h.nonce != info.nonce) {
            log::warn!("the store's lease was taken over: this process no longer holds it");
            return;
        }
        info.expires = Utc::now().timestamp() + secs as i64;
        let body = PutPayload::from(serde_json::to_vec_pretty(&info).expect("lease serialises"));
        if let Err(e) = store.put(&path, body).await {
            log::warn!("cannot renew the store's lease: {e}");
        }
    }
}
