//! Where data comes from and goes to: Parquet inputs (files, folders, globs)
//! checked before any work starts ([`list_parquet_files`]), the object stores
//! behind URLs ([`stores`]) and output folders that appear whole ([`output`]).
//!
//! Every location goes through DataFusion's object-store registry, so an
//! `s3://` input reads the same way a local path does.

use std::path::Path;
use std::sync::Arc;

pub mod fetch;
pub mod footer;
pub mod lease;
pub mod sorted;
mod output;
pub mod stores;

pub use output::{copy_file, local_path, write_file, OutputDir};
pub use stores::EnvStoreRegistry;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use object_store::{ObjectMeta, ObjectStoreExt};

use crate::error::{Error, Result};

/// One input dataset: a name (the `source` of its documents) and a location.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    pub name: String,
    pub url: String,
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// A default source name from a location: its file stem or folder name.
pub fn default_name(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    let last = trimmed.rsplit('/').find(|p| !p.is_empty() && !p.contains(['*', '?', '['])).unwrap_or("input");
    let stem = last.strip_suffix(".parquet").unwrap_or(last);
    if stem.is_empty() { "input".into() } else { stem.to_string() }
}

impl InputSpec {
    /// Parse `NAME=URL` or `URL`. A location that exists as written is never
    /// split, so a Hive-style folder such as `date=2024-01-01/` stays a path.
    pub fn parse(arg: &str) -> Result<InputSpec> {
        if let Some((name, url)) = arg.split_once('=') {
            if is_name(name) && !url.is_empty() && !Path::new(arg).exists() {
                return Ok(InputSpec { name: name.to_string(), url: url.to_string() });
            }
        }
        if arg.is_empty() {
            return Err(Error::input("an --input is empty: give a Parquet file, folder or glob, optionally as NAME=URL"));
        }
        Ok(InputSpec { name: default_name(arg), url: arg.to_string() })
    }
}

/// Check that names are unique and usable as `source` values.
pub fn check_input_names(inputs: &[InputSpec]) -> Result<()> {
    if inputs.is_empty() {
        return Err(Error::input("no input given: pass at least one --input [NAME=]URL"));
    }
    for (i, a) in inputs.iter().enumerate() {
        if !is_name(&a.name) {
            return Err(Error::input(format!(
                "input name '{}' may only hold letters, digits, '_', '-' and '.'",
                a.name
            )));
        }
        if let Some(b) = inputs[..i].iter().find(|b| b.name == a.name) {
            return Err(Error::input(format!(
                "inputs '{}' and '{}' are both named '{}': name them apart with NAME=URL",
                b.url, a.url, a.name
            )));
        }
    }
    Ok(())
}

fn is_hidden(location: &object_store::path::Path) -> bool {
    location.filename().is_some_and(|f| f.starts_with('.') || f.starts_with('_'))
}

/// The Parquet files of a location. A single named file is taken whatever its
/// extension; a folder or glob contributes its `*.parquet` files, skipping
/// hidden ones (`.x`, `_SUCCESS`). Every file is checked to be Parquet.
pub async fn list_parquet_files(ctx: &SessionContext, url: &str) -> Result<(ListingTableUrl, Vec<ObjectMeta>)> {
    let (table_url, files) = list_files(ctx, url).await?;
    let store = ctx.runtime_env().object_store(table_url.object_store())?;
    for f in &files {
        read_footer(store.as_ref(), f, &file_url(&table_url, f)).await?;
    }
    Ok((table_url, files))
}

/// The full URL of a listed file, as people write it (a local path for files).
fn file_url(table_url: &ListingTableUrl, f: &ObjectMeta) -> String {
    display_location(&format!("{}{}", table_url.object_store().as_str(), f.location))
}

/// The files [`list_parquet_files`] lists, in path order, their footers not yet read.
async fn list_files(ctx: &SessionContext, url: &str) -> Result<(ListingTableUrl, Vec<ObjectMeta>)> {
    let table_url = ListingTableUrl::parse(url)
        .map_err(|e| Error::input(format!("'{url}' is not a path or URL: {e}")))?;
    let state = ctx.state();
    let store = ctx
        .runtime_env()
        .object_store(table_url.object_store())
        .map_err(|e| Error::input(format!("cannot read '{url}': {e}")))?;
    let listed: Vec<ObjectMeta> = table_url
        .list_all_files(&state, store.as_ref(), "")
        .await
        .map_err(|e| store_failure(format!("cannot list '{url}'"), &e))?
        .try_collect()
        .await
        .map_err(|e| store_failure(format!("cannot list '{url}'"), &e))?;
    let is_data = |m: &ObjectMeta| !is_hidden(&m.location) && m.location.as_ref().ends_with(".parquet");
    let mut single = !table_url.is_collection() && table_url.get_glob().is_none();
    let mut files: Vec<ObjectMeta> = if single {
        let prefix = table_url.prefix().as_ref();
        let (exact, under): (Vec<ObjectMeta>, Vec<ObjectMeta>) =
            listed.into_iter().partition(|m| m.location.as_ref() == prefix);
        if exact.is_empty() {
            // An object-store URL without a trailing slash may name a folder.
            single = false;
            let folder = format!("{prefix}/");
            under.into_iter().filter(|m| m.location.as_ref().starts_with(&folder) && is_data(m)).collect()
        } else {
            exact
        }
    } else {
        listed.into_iter().filter(is_data).collect()
    };
    if files.is_empty() {
        return Err(Error::input(if !single && table_url.get_glob().is_none() && !table_url.is_collection() {
            format!("input '{url}' does not exist")
        } else {
            format!("no Parquet files (*.parquet) found at '{url}'")
        }));
    }
    files.sort_by(|a, b| a.location.cmp(&b.location));
    Ok((table_url, files))
}

/// One Parquet file of an input: its URL, its size, its schema as the engine
/// reads it (or why it cannot be read: the file is then the input's problem
/// to name or skip, not the whole run's), and the Hive-style partition values
/// of the folders between the input's location and the file
/// (`date=2026-11-21/part-0.parquet` gives `date` = `2026-11-21`).
#[derive(Debug)]
pub struct InputFile {
    pub url: String,
    pub size: u64,
    pub schema: Result<SchemaRef>,
    pub partitions: Vec<(String, String)>,
    /// What its footer says of its contents (zero for a file whose footer
    /// cannot be read).
    pub contents: FileContents,
}

/// A Parquet file's rows and, per top-level column, its bytes before
/// compression, as its footer records them: what a run that reads it will
/// hold, known before it reads a page.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileContents {
    pub rows: u64,
    pub column_bytes: Vec<(String, u64)>,
}

impl FileContents {
    fn of(meta: &ParquetMetaData) -> FileContents {
        let mut column_bytes: Vec<(String, u64)> = Vec::new();
        for group in meta.row_groups() {
            for chunk in group.columns() {
                let Some(name) = chunk.column_path().parts().first() else { continue };
                let bytes = u64::try_from(chunk.uncompressed_size()).unwrap_or(0);
                match column_bytes.iter_mut().find(|(n, _)| n == name) {
                    Some((_, total)) => *total += bytes,
                    None => column_bytes.push((name.clone(), bytes)),
                }
            }
        }
        FileContents { rows: u64::try_from(meta.file_metadata().num_rows()).unwrap_or(0), column_bytes }
    }

    /// The bytes of column `name` before compression (0 if it has none).
    pub fn bytes_of(&self, name: &str) -> u64 {
        self.column_bytes.iter().find(|(n, _)| n == name).map_or(0, |(_, b)| *b)
    }
}

/// Every Parquet file of an input location, with its own schema: inputs
/// whose files drift (a renamed or retyped column) are checked file by file
/// before any work, not discovered as nulls or casts in the results.
pub async fn input_files(ctx: &SessionContext, url: &str) -> Result<Vec<InputFile>> {
    let (table_url, files) = list_files(ctx, url).await?;
    let store = ctx.runtime_env().object_store(table_url.object_store())?;
    let state = ctx.state();
    let format = ParquetFormat::default();
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let name = file_url(&table_url, &f);
        let (schema, contents) = match read_footer(store.as_ref(), &f, &name).await {
            // The engine's own reading of the file's schema (string views,
            // no metadata), so a table of agreeing files is typed as before.
            Ok(meta) => (
                format
                    .infer_schema(&state, &store, std::slice::from_ref(&f))
                    .await
                    .map_err(|e| Error::input(format!("'{name}': its schema cannot be read: {e}"))),
                FileContents::of(&meta),
            ),
            Err(e) if e.kind() == crate::error::Kind::Input => (Err(e), FileContents::default()),
            Err(e) => return Err(e),
        };
        let below = f.location.as_ref().strip_prefix(table_url.prefix().as_ref()).unwrap_or_default();
        out.push(InputFile { url: name, size: f.size, schema, partitions: hive_partitions(below), contents });
    }
    Ok(out)
}

/// The `key=value` folder names of a path below an input's location, in
/// order (percent-encoded values decoded, as object stores write them).
fn hive_partitions(below: &str) -> Vec<(String, String)> {
    let folders = below.trim_start_matches('/').rsplit_once('/').map_or("", |(folders, _file)| folders);
    folders
        .split('/')
        .filter_map(|segment| segment.split_once('='))
        .filter(|(key, _)| !key.is_empty())
        .map(|(key, value)| (key.to_string(), percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned()))
        .collect()
}

/// An object store's failure, classified by what failed. What the user
/// must change (a missing object or bucket, a refused credential, a path the
/// store cannot hold, a local folder that cannot be written) is bad input
/// (exit 2); a store that failed or did not answer (a server error, a lost
/// connection, a timeout) may do better when the run is retried (exit 1),
/// and so may a full disk.
pub fn store_failure(what: String, e: &(dyn std::error::Error + 'static)) -> Error {
    use object_store::Error as Store;
    use std::io::ErrorKind;
    let text = e.to_string();
    let chain = || crate::error::chain(e);
    let io = chain().find_map(|c| c.downcast_ref::<std::io::Error>()).map(std::io::Error::kind);
    let unanswered = || Error::runtime(format!("{what}: {text} (the store failed or did not answer: retry the run later)"));
    let input = || Error::input(format!("{what}: {text}"));
    match chain().find_map(|c| c.downcast_ref::<Store>()) {
        Some(Store::Generic { store: "LocalFileSystem", .. }) => match io {
            Some(ErrorKind::StorageFull) => Error::runtime(crate::error::disk_full(&format!("{what}: {text}"))),
            Some(ErrorKind::PermissionDenied | ErrorKind::IsADirectory | ErrorKind::NotADirectory | ErrorKind::ReadOnlyFilesystem) => input(),
            _ => Error::runtime(format!("{what}: {text}")),
        },
        // No answer at all: the request could not be sent, or timed out.
        _ if chain().any(|c| c.is::<object_store::client::HttpError>()) => unanswered(),
        Some(Store::Generic { .. }) => match server_status(&text) {
            Some(status) if status >= 500 && status != 501 || status == 429 || status == 408 => unanswered(),
            // An answer without a status: a misconfigured endpoint or region.
            Some(_) | None => input(),
        },
        Some(Store::JoinError { .. }) | None => unanswered(),
        Some(_) => input(),
    }
}

/// The HTTP status a store answered with, for an error the client gives as
/// `Generic`: object_store 0.13 keeps the status in a private type (its
/// `RetryError`) and shows it only as `status code: NNN` in the message, so
/// this one field is read from there.
fn server_status(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("status code: ")?;
    rest.get(..3)?.parse().ok()
}

/// A file's URL as people write it: a local path for `file://` URLs.
pub fn display_location(url: &str) -> String {
    match url.strip_prefix("file://") {
        Some(path) => path.to_string(),
        None => url.to_string(),
    }
}

/// The decoded footer of one Parquet file, its magic bytes checked: a file
/// that is not Parquet, or whose footer is damaged, is named here (as
/// `name`), not by a query later.
async fn read_footer(store: &dyn object_store::ObjectStore, meta: &ObjectMeta, name: &str) -> Result<ParquetMetaData> {
    let not_parquet = || Error::input(format!(
        "'{name}' is not a Parquet file (no PAR1 magic bytes): remove it from the input or convert it to Parquet"
    ));
    let damaged = |why: String| {
        Error::input(format!("'{name}' is damaged: its Parquet footer cannot be read ({why}); restore the file or remove it from the input"))
    };
    let read = |range: std::ops::Range<u64>| async move {
        store.get_range(&meta.location, range).await.map_err(|e| Error::runtime(format!("cannot read '{}': {e}", meta.location)))
    };
    if meta.size < 12 {
        return Err(not_parquet());
    }
    let (head, tail) = (read(0..4).await?, read(meta.size - 8..meta.size).await?);
    if head.as_ref() != b"PAR1" || &tail[4..] != b"PAR1" {
        return Err(not_parquet());
    }
    let len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if len + 12 > meta.size {
        return Err(damaged(format!("footer length {len} exceeds the file size {}", meta.size)));
    }
    let footer = read(meta.size - 8 - len..meta.size - 8).await?;
    ParquetMetaDataReader::decode_metadata(&footer).map_err(|e| damaged(e.to_string()))
}

/// The store and path of the one object a path or URL names.
pub fn locate(ctx: &SessionContext, url: &str) -> Result<(Arc<dyn object_store::ObjectStore>, object_store::path::Path)> {
    let parsed = ListingTableUrl::parse(url).map_err(|e| Error::input(format!("'{url}' is not a path or URL: {e}")))?;
    let store = ctx.runtime_env().object_store(parsed.object_store()).map_err(|e| Error::input(e.to_string()))?;
    Ok((store, parsed.prefix().clone()))
}

/// The whole object at `url`.
pub async fn read_object(ctx: &SessionContext, url: &str) -> Result<bytes::Bytes> {
    let (store, path) = locate(ctx, url)?;
    let read_error = |e: object_store::Error| Error::runtime(format!("cannot read '{url}': {e}"));
    store.get(&path).await.map_err(read_error)?.bytes().await.map_err(read_error)
}

/// Register the Parquet files at `url` as table `name`; returns its schema.
pub async fn register_parquet(ctx: &SessionContext, name: &str, url: &str) -> Result<SchemaRef> {
    register_parquet_files(ctx, name, std::slice::from_ref(&url.to_string())).await
}

/// Register the Parquet files at every one of `urls` as one table `name`.
pub async fn register_parquet_files(ctx: &SessionContext, name: &str, locations: &[String]) -> Result<SchemaRef> {
    let mut urls = Vec::new();
    for location in locations {
        let (table_url, files) = list_parquet_files(ctx, location).await?;
        let base = table_url.object_store();
        for f in &files {
            urls.push(ListingTableUrl::parse(format!("{}{}", base.as_str(), f.location))?);
        }
    }
    let url = locations.join(", ");
    let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension("");
    let state = ctx.state();
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .infer_schema(&state)
        .await
        .map_err(|e| Error::input(format!("cannot read the schema of '{url}': {e}")))?;
    let table = ListingTable::try_new(config)?;
    let schema = table.schema();
    ctx.register_table(name, Arc::new(table))?;
    Ok(schema)
}

/// Register Parquet files (full URLs, already listed and checked) as one
/// table `name` read with `schema`: each file's columns are matched to it by
/// name, missing ones read as nulls, other encodings cast.
pub async fn register_files(ctx: &SessionContext, name: &str, files: &[String], schema: SchemaRef) -> Result<()> {
    let urls = files.iter().map(ListingTableUrl::parse).collect::<std::result::Result<Vec<_>, _>>()?;
    let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension("");
    let config = ListingTableConfig::new_with_multi_paths(urls).with_listing_options(options).with_schema(schema);
    ctx.register_table(name, Arc::new(ListingTable::try_new(config)?))?;
    Ok(())
}

/// The key-value metadata of every Parquet file at `url`, by file.
pub async fn parquet_key_values(ctx: &SessionContext, url: &str) -> Result<Vec<(String, std::collections::HashMap<String, String>)>> {
    let (table_url, files) = list_parquet_files(ctx, url).await?;
    let store = ctx.runtime_env().object_store(table_url.object_store())?;
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let metadata = read_footer(store.as_ref(), &f, f.location.as_ref()).await?;
        let kv = metadata
            .file_metadata()
            .key_value_metadata()
            .map(|kvs| kvs.iter().filter_map(|kv| Some((kv.key.clone(), kv.value.clone()?))).collect())
            .unwrap_or_default();
        out.push((f.location.to_string(), kv));
    }
    Ok(out)
}

/// Quote an SQL identifier.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quote an SQL string literal.
pub fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_failures_are_classified_by_what_failed() {
        let missing = object_store::Error::NotFound { path: "x".into(), source: "gone".into() };
        assert_eq!(store_failure("cannot read 'x'".into(), &missing).exit_code(), 2);
        let server = |status: &str| object_store::Error::Generic { store: "S3", source: format!("Server returned non-2xx status code: {status}: body").into() };
        assert_eq!(store_failure("list".into(), &server("503 Service Unavailable")).exit_code(), 1);
        assert_eq!(store_failure("list".into(), &server("404 Not Found")).exit_code(), 2);
        let e = store_failure("list".into(), &server("500 Internal Server Error"));
        assert!(e.to_string().contains("retry the run later"), "{e}");
        assert_eq!((server_status("x status code: 429 Too Many"), server_status("no status")), (Some(429), None));
    }

    #[test]
    fn input_names() {
        assert_eq!(InputSpec::parse("news=data/a.parquet").unwrap(), InputSpec { name: "news".into(), url: "data/a.parquet".into() });
        assert_eq!(InputSpec::parse("data/a.parquet").unwrap().name, "a");
        assert_eq!(InputSpec::parse("/x/crawl/").unwrap().name, "crawl");
        assert_eq!(InputSpec::parse("/x/crawl/*.parquet").unwrap().name, "crawl");
        assert_eq!(InputSpec::parse("s3://bucket/k=v/x.parquet").unwrap().name, "x");
        let dup = [InputSpec::parse("a=x").unwrap(), InputSpec::parse("a=y").unwrap()];
        assert!(check_input_names(&dup).unwrap_err().to_string().contains("both named 'a'"));
    }

    #[test]
    fn hive_partition_values_come_from_folder_names() {
        let kv = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(hive_partitions("/date=2026-11-21/site=a%20b/part-0.parquet"), kv(&[("date", "2026-11-21"), ("site", "a b")]));
        assert_eq!(hive_partitions("misc/part=x.parquet"), kv(&[]), "a file name is no partition");
        assert_eq!(hive_partitions("part-0.parquet"), kv(&[]));
        assert_eq!(hive_partitions("=x/y=/p.parquet"), kv(&[("y", "")]));
    }

    #[test]
    fn quoting() {
        assert_eq!(ident("we\"ird"), "\"we\"\"ird\"");
        assert_eq!(literal("it's"), "'it''s'");
    }
}
