//! The one place a DataFusion session is built.
//!
//! Every run (the job, `neardup sql`, tests) gets its context from
//! [`context`]: embedded, or connected to a Ballista cluster when
//! `cluster` is set. A custom function must be known to the client
//! (planning), the scheduler (decoding logical plans) and every executor
//! (decoding physical plans): all four roles ([`Role`]) get their session
//! state from [`state`], built on the same function list ([`crate::udf`])
//! and the same object stores ([`runtime_env`]), so they cannot drift apart.
//! The cluster's processes themselves are started in [`crate::distributed`].

use std::num::NonZeroUsize;
use std::sync::Arc;

use datafusion::execution::disk_manager::DiskManagerBuilder;
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use ballista_core::extension::{SessionConfigExt, SessionStateExt};
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tls::{Tls, TlsFiles};

/// Engine settings of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineOptions {
    /// Parallelism: partitions per plan stage (default: the number of cores).
    pub target_partitions: Option<usize>,
    /// Memory the engine may use for joins, sorts and aggregates, e.g. "2G";
    /// beyond it they spill to disk.
    pub memory_limit: Option<String>,
    /// Rows per batch (default 8192).
    pub batch_size: Option<usize>,
    /// Run on the Ballista cluster whose scheduler is at this URL (df://HOST:PORT).
    pub cluster: Option<String>,
    /// Certificates for a cluster secured with mutual TLS.
    pub tls: Option<TlsFiles>,
    /// Where an embedded run keeps its work tables (default: auto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_tables: Option<WorkTables>,
}

/// Where an embedded run keeps its work tables (the terms, the term sets,
/// the candidates) and which of its steps the client does itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WorkTables {
    /// In memory without a memory limit. Under one, in memory when a
    /// one-shot run's inputs are estimated to fit in it
    /// (`crate::job::footprint`), else files.
    #[default]
    Auto,
    /// In memory, whatever the limit.
    Memory,
    /// Parquet files in the output's staging folder, read back by the
    /// engine in bounded memory.
    Files,
}

/// Parse a size such as `512M`, `2G`, `1.5GiB` or `1000000` (bytes).
pub fn parse_size(s: &str) -> Result<usize> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(Error::input(format!("cannot read size '{s}': use a number with K, M, G or T, e.g. 2G"))),
    };
    match num.parse::<f64>() {
        Ok(n) if n > 0.0 => Ok((n * mult) as usize),
        _ => Err(Error::input(format!("cannot read size '{s}': use a positive number with K, M, G or T, e.g. 2G"))),
    }
}

/// The runtime of every process: object stores from the environment,
/// spill files in `spill_dir` (default: the system's temporary folder) and
/// an optional memory limit, beyond which joins, sorts and aggregates spill.
pub fn runtime_env(spill_dir: Option<&str>, memory_limit: Option<usize>) -> datafusion::error::Result<Arc<RuntimeEnv>> {
    let mut builder = RuntimeEnvBuilder::new()
        .with_disk_manager_builder(DiskManagerBuilder::default())
        .with_object_store_registry(Arc::new(crate::storage::EnvStoreRegistry::new()));
    if let Some(dir) = spill_dir {
        builder = builder.with_temp_file_path(dir);
    }
    if let Some(limit) = memory_limit {
        // A fair pool: spilling operators (sorts, aggregates) share the
        // limit instead of the first one taking it all; the five largest
        // consumers are named when it is exceeded.
        let pool = TrackConsumersPool::new(FairSpillPool::new(limit), NonZeroUsize::new(5).expect("5 > 0"));
        builder = builder.with_memory_pool(Arc::new(pool));
    }
    builder.build_arc()
}

/// Who a session is for. The roles differ in their base rules and runtime,
/// never in functions or object stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A run in this process, under an optional memory limit (bytes), with
    /// its work tables in memory or not.
    Embedded { memory_limit: Option<usize>, work_in_memory: bool },
    /// A client whose queries run on a cluster.
    Client,
    /// A scheduler or an executor: Ballista's own rules and functions too.
    Cluster,
}

/// Marks a session whose work tables stay in memory ([`WorkTables`]): an
/// embedded run with no memory limit, or under one that its inputs fit in.
/// Otherwise they are Parquet files in the work folder, which the engine
/// reads back in bounded memory, and on a cluster they are files that every
/// executor can read.
#[derive(Debug)]
pub struct WorkInMemory;

/// The bytes of a partition's rows that an embedded run without a memory
/// limit sorts at once (`datafusion.execution.sort_in_place_threshold_bytes`,
/// 1 MiB by default): the fingerprints' sort by id, Weibo's 768,035 rows with
/// their term sets, keys and sketches, went from 0.7 to 0.45 s. Larger
/// partitions are sorted batch by batch and merged, as by default: one array
/// of a column then stays far below the 2 GiB that 32-bit offsets can address.
const SORT_AT_ONCE: usize = 1 << 30;

/// Whether `ctx`'s work tables stay in memory ([`WorkInMemory`]).
pub fn work_in_memory(ctx: &datafusion::prelude::SessionContext) -> bool {
    ctx.state().config().get_extension::<WorkInMemory>().is_some()
}

/// Keep `ctx`'s work tables in memory from now on (an embedded run under a
/// memory limit whose inputs fit in it), as a session made without a limit
/// keeps them. Done before the run's first statement, so no table is made
/// one way and read the other. Its sorts still merge sorted batches: a
/// partition sorted at once ([`SORT_AT_ONCE`]) asks the pool for all of it
/// in one piece, which a fair pool refuses (Weibo's fingerprints under
/// `2G`: 1 GB asked, 0.1 GB left to one of two sorts).
pub fn keep_work_in_memory(ctx: &SessionContext) {
    ctx.state_ref().write().config_mut().set_extension(Arc::new(WorkInMemory));
}

/// The session state of `role` with `config`: every role's has neardup's
/// functions and object stores.
pub fn state(role: Role, config: SessionConfig) -> datafusion::error::Result<SessionState> {
    let builder = match role {
        Role::Embedded { memory_limit, work_in_memory } => SessionStateBuilder::new()
            .with_config(match (work_in_memory, memory_limit) {
                // Without a bound on memory, each partition's rows (up to
                // SORT_AT_ONCE) are sorted at once rather than batch by batch
                // and merged: one bulk copy of the rows instead of a merge
                // that copies them row by row.
                (true, None) => config.with_extension(Arc::new(WorkInMemory)).set_usize("datafusion.execution.sort_in_place_threshold_bytes", SORT_AT_ONCE),
                (true, Some(_)) => config.with_extension(Arc::new(WorkInMemory)),
                (false, _) => config,
            })
            .with_runtime_env(runtime_env(None, memory_limit)?)
            .with_default_features(),
        Role::Client => SessionStateBuilder::new().with_default_features().with_config(config).with_runtime_env(runtime_env(None, None)?),
        Role::Cluster => SessionStateBuilder::new_from_existing(ballista_core::utils::default_session_builder(config)?)
            .with_runtime_env(runtime_env(None, None)?),
    };
    let mut state = builder.build();
    crate::udf::register_all(&mut state)?;
    Ok(state)
}

/// The session for `options`: embedded, or on the cluster it names.
pub async fn context(options: &EngineOptions) -> Result<SessionContext> {
    match &options.cluster {
        Some(url) => {
            if options.work_tables == Some(WorkTables::Memory) {
                return Err(Error::input(
                    "--work-tables memory keeps an embedded run's work in its own memory; on a cluster the work tables \
                     are files every executor reads: leave --work-tables out, or run without --cluster",
                ));
            }
            if options.memory_limit.is_some() {
                eprintln!(
                    "neardup: note: the memory limit applies to embedded runs only; on a cluster, \
                     each executor's --memory-limit bounds its tasks"
                );
            }
            let tls = options.tls.as_ref().map(Tls::load).transpose()?;
            connect(url, session_config(options)?, tls.as_ref()).await
        }
        None => new_context(options),
    }
}

fn session_config(options: &EngineOptions) -> Result<SessionConfig> {
    // Leaf-expression pushdown would move `f['simhash']` and `f['n_terms']`
    // of `f = idf_simhash(…)` (sql/40_fingerprints.sql) into the scan each
    // with its own copy of the call, computing every fingerprint twice.
    let mut config = SessionConfig::new()
        .with_information_schema(true)
        .set_bool("datafusion.optimizer.enable_leaf_expression_pushdown", false)
        // Outputs (fingerprints, clusters, pairs, the IDF model) in zstd at
        // level 1, not DataFusion's 3: the fingerprints of `weibo_reposts`
        // are written in 1.04 s instead of 1.37 s, and take 4 % more room.
        // Work files set their own options (sql::WORK_FILE); on a cluster
        // the setting reaches the executors through crate::statement.
        .set_str("datafusion.execution.parquet.compression", "zstd(1)");
    if let Some(n) = options.target_partitions {
        if n == 0 {
            return Err(Error::input("target partitions must be at least 1"));
        }
        config = config.with_target_partitions(n);
    }
    if let Some(n) = options.batch_size {
        if n == 0 {
            return Err(Error::input("batch size must be at least 1"));
        }
        config = config.with_batch_size(n);
    }
    Ok(config)
}

/// An embedded session with every neardup function registered.
pub fn new_context(options: &EngineOptions) -> Result<SessionContext> {
    let mut config = session_config(options)?;
    let limit = options.memory_limit.as_deref().map(parse_size).transpose()?;
    if limit.is_some() {
        // Hash joins hold their build side in memory and cannot spill;
        // sort-merge joins sort (and spill) both sides. Under a limit,
        // bounded memory is worth the slower join.
        config = config.set_bool("datafusion.optimizer.prefer_hash_join", false);
    }
    // Auto under a limit starts with files; the run keeps its work in
    // memory once its inputs are known to fit (`crate::job::footprint`).
    let work_in_memory = match options.work_tables.unwrap_or_default() {
        WorkTables::Memory => true,
        WorkTables::Auto => limit.is_none(),
        WorkTables::Files => false,
    };
    Ok(SessionContext::new_with_state(state(Role::Embedded { memory_limit: limit, work_in_memory }, config)?))
}

/// Parse `df://host:port` (or `host:port`) into host and port.
pub fn parse_endpoint(endpoint: &str, default_port: u16) -> Result<(String, u16)> {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r).trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| Error::input(format!("'{endpoint}': port '{p}' is not a number")))?),
        None => (rest, default_port),
    };
    if host.is_empty() {
        return Err(Error::input(format!("'{endpoint}' names no host: use df://HOST:PORT")));
    }
    Ok((host.to_string(), port))
}

/// A client session whose queries run on the cluster at `url`, over mutual
/// TLS with `tls` (the scheduler's port and the executors' Flight ports).
async fn connect(url: &str, config: SessionConfig, tls: Option<&Tls>) -> Result<SessionContext> {
    let (host, port) = parse_endpoint(url, 50050)?;
    // The static distributed planner: Ballista 55's adaptive planner (on by
    // default, marked experimental) planned stage after stage without end on
    // the clusters statement; see docs/design.md.
    let mut config = config.upgrade_for_ballista().set_str(ballista_core::config::BALLISTA_ADAPTIVE_PLANNER_ENABLED, "false");
    let scheme = match tls {
        None => "http",
        Some(tls) => {
            config = config.with_ballista_use_tls(true).with_ballista_override_create_grpc_client_endpoint(tls.endpoint_hook());
            "https"
        }
    };
    let scheduler = format!("{scheme}://{host}:{port}");
    check_scheduler(&scheduler, tls).await.map_err(|e| e.context(format!("the scheduler at {host}:{port}")))?;
    let state = state(Role::Client, config)?
        .upgrade_for_ballista(scheduler)
        .map_err(|e| Error::runtime(format!("cannot reach the scheduler at {host}:{port}: {e}")))?;
    let ctx = SessionContext::new_with_state(state);
    // Ballista replaces the state's function lists with its own: register ours again.
    for f in crate::udf::scalar_functions() {
        ctx.register_udf(f.as_ref().clone());
    }
    for f in crate::udf::aggregate_functions() {
        ctx.register_udaf(f.as_ref().clone());
    }
    Ok(ctx)
}

/// Ask the scheduler at `url` something harmless (the status of a job that
/// does not exist), so that a scheduler that is not there, or certificates
/// that one side refuses, are said before any work and in these terms
/// rather than as a failed query.
async fn check_scheduler(url: &str, tls: Option<&Tls>) -> Result<()> {
    use ballista_core::serde::protobuf::{scheduler_grpc_client::SchedulerGrpcClient, GetJobStatusParams};
    let settings = ballista_core::utils::GrpcClientConfig::default();
    let mut endpoint = ballista_core::utils::create_grpc_client_endpoint(url.to_string(), Some(&settings))
        .map_err(|e| Error::input(format!("'{url}' is not a scheduler address: {e}")))?;
    if let Some(tls) = tls {
        endpoint = (tls.endpoint_hook())(endpoint).map_err(|e| Error::input(format!("cannot use TLS for '{url}': {e}")))?;
    }
    let answer = match endpoint.connect().await {
        Ok(channel) => SchedulerGrpcClient::new(channel).get_job_status(GetJobStatusParams { job_id: "neardup-check".into() }).await.map(drop),
        Err(e) => Err(tonic::Status::from_error(Box::new(e))),
    };
    answer.map_err(|status| unreachable_scheduler(status, tls.is_some()))
}

/// Why a scheduler did not answer, in the user's terms. Over TLS, a
/// connection that was made and then failed (a TLS alert, a record that is
/// not TLS, or the server closing it, which is how a refused client
/// certificate often shows) means the two sides' certificates or TLS
/// settings disagree: retrying will not help.
fn unreachable_scheduler(status: tonic::Status, tls: bool) -> Error {
    use std::io::ErrorKind::{AddrNotAvailable, ConnectionRefused, HostUnreachable, NetworkUnreachable, TimedOut};
    let not_connected = crate::error::chain(&status).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| matches!(io.kind(), ConnectionRefused | TimedOut | HostUnreachable | NetworkUnreachable | AddrNotAvailable))
    });
    let error = match (tls, not_connected) {
        (true, false) => Error::input(
            "the TLS connection failed: check that --tls-ca is the cluster's CA, that --tls-cert was signed by it, \
             that the scheduler's certificate names the host in --cluster, and that the scheduler runs with TLS",
        ),
        (true, true) => Error::runtime("no answer: is the scheduler running at that address?"),
        (false, _) => Error::runtime(
            "no answer: is the scheduler running at that address? A cluster with TLS needs --tls-ca, --tls-cert \
             and --tls-key (or NEARDUP_TLS_CA, NEARDUP_TLS_CERT, NEARDUP_TLS_KEY)",
        ),
    };
    error.from_source(status)
}

/// `ctx`, with hash joins preferred: for a statement whose join has one side
/// known to be small, such as tonight's keys against a store's. Under a
/// memory limit the session prefers sort-merge joins (see
/// [`new_context`]), which would sort the large side as well. The tables
/// and functions are those of `ctx`.
pub fn with_hash_joins(ctx: &SessionContext) -> SessionContext {
    let mut state = ctx.state();
    state.config_mut().options_mut().optimizer.prefer_hash_join = true;
    SessionContext::new_with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_tables_are_read_from_a_job_file() {
        let engine: EngineOptions = toml::from_str("memory_limit = \"2G\"\nwork_tables = \"files\"").unwrap();
        assert_eq!(engine.work_tables, Some(WorkTables::Files));
        let unset: EngineOptions = toml::from_str("memory_limit = \"2G\"").unwrap();
        assert_eq!(unset.work_tables, None);
        // Written back, an unset choice stays unset.
        assert!(!toml::to_string(&unset).unwrap().contains("work_tables"));
        let wrong = toml::from_str::<EngineOptions>("work_tables = \"disk\"").unwrap_err().to_string();
        assert!(wrong.contains("disk") && wrong.contains("files"), "{wrong}");
    }

    #[test]
    fn endpoints() {
        assert_eq!(parse_endpoint("df://sched:50050", 1).unwrap(), ("sched".into(), 50050));
        assert_eq!(parse_endpoint("10.0.0.1:7000", 1).unwrap(), ("10.0.0.1".into(), 7000));
        assert_eq!(parse_endpoint("sched", 50050).unwrap(), ("sched".into(), 50050));
        assert!(parse_endpoint("df://:1", 1).is_err());
        assert!(parse_endpoint("df://h:port", 1).unwrap_err().to_string().contains("'port'"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("512mb").unwrap(), 512 << 20);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("lots").unwrap_err().to_string().contains("cannot read size 'lots'"));
        assert!(parse_size("0").is_err());
    }
}
