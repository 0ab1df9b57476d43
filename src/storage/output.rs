//! Output folders that appear whole.
//!
//! Everything is written under a staging prefix beside the target
//! (`.NAME.neardup-staging`) and committed at the end:
//!
//! - **Local folders** are committed by renaming the staging folder into
//!   place, `_SUCCESS` inside: a reader sees the old result or the new one.
//! - **Object stores** have no rename of folders. The commit first removes
//!   the target's `_SUCCESS` (when replacing), then the old objects, copies
//!   the staged objects into place and writes `_SUCCESS` last. A reader that
//!   waits for `_SUCCESS` — the convention of Spark, Hive and Airflow
//!   sensors — never reads a partial result.
//!
//! An existing non-empty target is an error unless `overwrite` is set. A run
//! that fails removes its staging objects; a run that is killed leaves them,
//! and the next run into the same target removes them first.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::datasource::listing::ListingTableUrl;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::error::{Error, Result};

#[derive(Debug)]
enum Target {
    Local { target: PathBuf, staging: PathBuf },
    Remote { base: String, store: Arc<dyn ObjectStore>, target: ObjectPath, staging: ObjectPath },
}

/// An output folder written through a staging location and committed whole.
#[derive(Debug)]
pub struct OutputDir {
    url: String,
    target: Target,
}

/// The local path a location names (a plain path or `file://`), or None for other URLs.
pub fn local_path(url: &str) -> Option<PathBuf> {
    match url.strip_prefix("file://") {
        Some(p) => Some(PathBuf::from(p)),
        None if url.contains("://") => None,
        None => Some(PathBuf::from(url)),
    }
}

async fn list(store: &dyn ObjectStore, prefix: &ObjectPath) -> Result<Vec<ObjectPath>> {
    store
        .list(Some(prefix))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .map_err(|e| super::store_failure(format!("cannot list '{prefix}'"), &e))
}

async fn delete_all(store: &dyn ObjectStore, prefix: &ObjectPath) -> Result<()> {
    for object in list(store, prefix).await? {
        store.delete(&object).await.map_err(|e| Error::runtime(format!("cannot delete '{object}': {e}")))?;
    }
    Ok(())
}

fn sibling(path: &ObjectPath, suffix: &str) -> ObjectPath {
    let parts: Vec<_> = path.parts().collect();
    let (name, parent) = parts.split_last().map(|(n, p)| (n.as_ref().to_string(), p.to_vec())).unwrap_or_default();
    let out: ObjectPath = parent.into_iter().collect();
    out.join(format!(".{name}.{suffix}"))
}

impl OutputDir {
    /// Prepare to write `url`. It must not exist (or be empty) unless
    /// `overwrite` is set, in which case it is replaced on commit.
    pub async fn prepare(ctx: &SessionContext, url: &str, overwrite: bool) -> Result<OutputDir> {
        if url.trim().is_empty() {
            return Err(Error::input("the output path is empty"));
        }
        match local_path(url) {
            Some(path) => Self::prepare_local(url, std::path::absolute(path)?, overwrite),
            None => Self::prepare_remote(ctx, url, overwrite).await,
        }
    }

    /// What [`OutputDir::prepare`] would do, without doing it (for dry runs):
    /// `create` or `replace`, or the error `prepare` would give. A local
    /// target's nearest existing folder is checked to be writable with a
    /// probe file that is removed at once; on object stores the target is
    /// listed, and the right to write is first tried by the real run.
    pub async fn check(ctx: &SessionContext, url: &str, overwrite: bool) -> Result<&'static str> {
        if url.trim().is_empty() {
            return Err(Error::input("the output path is empty"));
        }
        let exists = match local_path(url) {
            Some(path) => {
                let target = std::path::absolute(path)?;
                let exists = target.exists() && std::fs::read_dir(&target).map(|mut d| d.next().is_some()).unwrap_or(true);
                if target.exists() && !target.is_dir() {
                    return Err(Error::input(format!("output '{}' exists and is not a folder", target.display())));
                }
                let mut folder = target.parent().map(PathBuf::from);
                while let Some(f) = folder.clone().filter(|f| !f.exists()) {
                    folder = f.parent().map(PathBuf::from);
                }
                let folder = folder.ok_or_else(|| Error::input(format!("output '{}' has no parent folder", target.display())))?;
                let probe = folder.join(format!(".neardup-probe-{}", std::process::id()));
                std::fs::write(&probe, b"")
                    .map_err(|e| Error::input(format!("cannot write the output '{}': '{}' is not writable ({e})", target.display(), folder.display())))?;
                let _ = std::fs::remove_file(&probe);
                exists
            }
            None => {
                let parsed = ListingTableUrl::parse(url).map_err(|e| Error::input(format!("output '{url}' is not a URL: {e}")))?;
                let store = ctx.runtime_env().object_store(parsed.object_store()).map_err(|e| Error::input(e.to_string()))?;
                !list(store.as_ref(), parsed.prefix()).await.map_err(|e| e.context(format!("output '{url}'")))?.is_empty()
            }
        };
        match (exists, overwrite) {
            (false, _) => Ok("create"),
            (true, true) => Ok("replace"),
            (true, false) => Err(Error::input(format!(
                "output '{url}' already exists: choose a new path, or pass --overwrite to replace it"
            ))),
        }
    }

    fn prepare_local(url: &str, target: PathBuf, overwrite: bool) -> Result<OutputDir> {
        if target.exists() {
            if !target.is_dir() {
                return Err(Error::input(format!("output '{}' exists and is not a folder", target.display())));
            }
            let empty = std::fs::read_dir(&target)?.next().is_none();
            if !empty && !overwrite {
                return Err(Error::input(format!(
                    "output '{}' already exists: choose a new path, or pass --overwrite to replace it",
                    target.display()
                )));
            }
        }
        let parent = target.parent().ok_or_else(|| Error::input(format!("output '{}' has no parent folder", target.display())))?;
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::input(format!("cannot write the output '{}': cannot create its folder '{}' ({e})", target.display(), parent.display())))?;
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let staging = parent.join(format!(".{name}.neardup-staging"));
        if staging.exists() {
            std::fs::remove_dir_all(&staging)?;
        }
        std::fs::create_dir_all(&staging).map_err(|e| Error::input(format!("cannot write to '{}': {e}", parent.display())))?;
        Ok(OutputDir { url: url.to_string(), target: Target::Local { target, staging } })
    }

    async fn prepare_remote(ctx: &SessionContext, url: &str, overwrite: bool) -> Result<OutputDir> {
        let parsed = ListingTableUrl::parse(url).map_err(|e| Error::input(format!("output '{url}' is not a URL: {e}")))?;
        let store = ctx.runtime_env().object_store(parsed.object_store()).map_err(|e| Error::input(e.to_string()))?;
        let target = parsed.prefix().clone();
        if target.parts().count() == 0 {
            return Err(Error::input(format!("output '{url}' is a whole bucket: name a folder in it")));
        }
        let context = |e: Error| e.context(format!("output '{url}'"));
        let existing = list(store.as_ref(), &target).await.map_err(context)?;
        if !existing.is_empty() && !overwrite {
            return Err(Error::input(format!(
                "output '{url}' already exists ({} objects): choose a new path, or pass --overwrite to replace it",
                existing.len()
            )));
        }
        let staging = sibling(&target, "neardup-staging");
        delete_all(store.as_ref(), &staging).await.map_err(context)?;
        // Fail now, not after an hour of work, if the location is not writable.
        let probe = staging.clone().join("_probe");
        store
            .put(&probe, PutPayload::from_static(b""))
            .await
            .map_err(|e| Error::input(format!("cannot write to '{url}': {e}")))?;
        store.delete(&probe).await.map_err(|e| Error::runtime(e.to_string()))?;
        let base = parsed.object_store().as_str().trim_end_matches('/').to_string();
        Ok(OutputDir { url: url.to_string(), target: Target::Remote { base, store, target, staging } })
    }

    /// The output as the user named it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Location of `relative` inside the staging area, as SQL `COPY` takes it.
    pub fn staged(&self, relative: &str) -> String {
        match &self.target {
            Target::Local { staging, .. } => staging.join(relative).display().to_string(),
            Target::Remote { base, staging, .. } => format!("{base}/{staging}/{relative}"),
        }
    }

    /// Write `bytes` to `relative` inside the staging area.
    pub async fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<()> {
        match &self.target {
            Target::Local { staging, .. } => {
                let path = staging.join(relative);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(path, bytes)?;
            }
            Target::Remote { store, staging, .. } => {
                let path = relative.split('/').fold(staging.clone(), |p, part| p.join(part));
                store.put(&path, bytes.into()).await.map_err(|e| Error::runtime(format!("cannot write '{path}': {e}")))?;
            }
        }
        Ok(())
    }

    /// Remove the intermediate tables (`_work/`) before committing.
    pub async fn remove_work(&self) -> Result<()> {
        match &self.target {
            Target::Local { staging, .. } => {
                let work = staging.join("_work");
                if work.exists() {
                    std::fs::remove_dir_all(work)?;
                }
            }
            Target::Remote { store, staging, .. } => delete_all(store.as_ref(), &staging.clone().join("_work")).await?,
        }
        Ok(())
    }

    /// Write `summary.json`, then make the output visible with `_SUCCESS`.
    pub async fn commit(self, summary_json: &str) -> Result<()> {
        self.put("summary.json", summary_json.as_bytes().to_vec()).await?;
        match &self.target {
            Target::Local { target, staging } => {
                std::fs::write(staging.join("_SUCCESS"), b"")?;
                let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let old = staging.with_file_name(format!(".{name}.neardup-old"));
                if old.exists() {
                    std::fs::remove_dir_all(&old)?;
                }
                if target.exists() {
                    std::fs::rename(target, &old)?;
                }
                std::fs::rename(staging, target)?;
                if old.exists() {
                    std::fs::remove_dir_all(&old)?;
                }
            }
            Target::Remote { store, target, staging, .. } => {
                let store = store.as_ref();
                let fail = |what: &str, p: &ObjectPath, e: object_store::Error| Error::runtime(format!("cannot {what} '{p}': {e}"));
                // Readers must stop trusting the old output before it changes.
                let success = target.clone().join("_SUCCESS");
                match store.delete(&success).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(fail("delete", &success, e)),
                }
                delete_all(store, target).await?;
                let staged = list(store, staging).await?;
                let staging_parts = staging.parts().count();
                for object in &staged {
                    let to = object.parts().skip(staging_parts).fold(target.clone(), |p, part| p.join(part));
                    store.copy(object, &to).await.map_err(|e| fail("copy", object, e))?;
                }
                store.put(&success, PutPayload::from_static(b"")).await.map_err(|e| fail("write", &success, e))?;
                for object in &staged {
                    store.delete(object).await.map_err(|e| fail("delete", object, e))?;
                }
            }
        }
        Ok(())
    }

    /// Remove everything staged (after a failure). Best effort.
    pub async fn abort(self) {
        match &self.target {
            Target::Local { staging, .. } => {
                let _ = std::fs::remove_dir_all(staging);
            }
            Target::Remote { store, staging, .. } => {
                let _ = delete_all(store.as_ref(), staging).await;
            }
        }
    }
}

/// Copy one object (a saved IDF model) to `to`, which may be on any store.
/// A single put is atomic on local disks and object stores alike.
pub async fn copy_file(ctx: &SessionContext, from: &str, to: &str) -> Result<()> {
    let bytes = super::read_object(ctx, from).await?;
    write_file(ctx, to, bytes).await
}

/// Write one object (a saved IDF model, a report drawn again) to `to`, on
/// any store, creating a local file's folder. A single put is atomic.
pub async fn write_file(ctx: &SessionContext, to: &str, bytes: bytes::Bytes) -> Result<()> {
    if let Some(parent) = local_path(to).and_then(|p| std::path::absolute(p).ok()).and_then(|p| p.parent().map(|p| p.to_path_buf())) {
        std::fs::create_dir_all(&parent).map_err(|e| Error::input(format!("cannot create folder '{}': {e}", parent.display())))?;
    }
    let (to_store, to_path) = super::locate(ctx, to)?;
    to_store.put(&to_path, bytes.into()).await.map_err(|e| super::store_failure(format!("cannot write '{to}'"), &e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_commit_replaces_only_when_asked() {
        let ctx = SessionContext::new();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let t = target.to_str().unwrap();
        let out = OutputDir::prepare(&ctx, t, false).await.unwrap();
        out.put("a/x.txt", b"1".to_vec()).await.unwrap();
        assert!(!target.exists(), "nothing is visible before commit");
        out.commit("{}").await.unwrap();
        assert!(target.join("_SUCCESS").exists() && target.join("a/x.txt").exists() && target.join("summary.json").exists());
        let err = OutputDir::prepare(&ctx, t, false).await.unwrap_err();
        assert!(err.to_string().contains("--overwrite"), "{err}");
        let out = OutputDir::prepare(&ctx, t, true).await.unwrap();
        out.put("b.txt", b"2".to_vec()).await.unwrap();
        out.commit("{}").await.unwrap();
        assert!(target.join("b.txt").exists() && !target.join("a").exists());
        let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(entries, ["out"], "no staging or old folders are left behind");
    }

    #[test]
    fn staging_is_a_hidden_sibling() {
        let p = ObjectPath::from("data/runs/out");
        assert_eq!(sibling(&p, "neardup-staging").as_ref(), "data/runs/.out.neardup-staging");
    }
}
