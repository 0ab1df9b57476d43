//! The processes of an Apache DataFusion Ballista cluster: a scheduler and
//! executors, whose session state is that of every other role
//! ([`crate::session::state`], role [`Role::Cluster`]); a client connects
//! through [`crate::session::context`]. The scheduler is built without
//! Ballista's REST API, which would serve session settings over HTTP.

use std::net::SocketAddr;
use std::sync::Arc;

use ballista_core::extension::SessionConfigExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::RuntimeProducer;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use datafusion::execution::SessionState;
use datafusion::prelude::SessionConfig;

use crate::error::{Error, Result};
use crate::session::{parse_endpoint, runtime_env, state, Role};

/// The session state of the scheduler and executors.
fn cluster_state(config: SessionConfig) -> datafusion::error::Result<SessionState> {
    state(Role::Cluster, config)
}

/// Settings of a scheduler process.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    pub bind: String,
    pub port: u16,
    /// An executor silent for this long is declared lost and its tasks run
    /// elsewhere.
    pub executor_timeout_secs: u64,
}

/// Run a scheduler until the process is stopped.
pub async fn run_scheduler(options: SchedulerOptions) -> Result<()> {
    let SchedulerOptions { bind, port, executor_timeout_secs } = options;
    let address: SocketAddr =
        format!("{bind}:{port}").parse().map_err(|e| Error::input(format!("cannot bind to {bind}:{port}: {e}")))?;
    if executor_timeout_secs == 0 {
        return Err(Error::input("--executor-timeout must be at least 1 second"));
    }
    let config = SchedulerConfig {
        bind_host: bind.clone(),
        bind_port: port,
        executor_timeout_seconds: executor_timeout_secs,
        expire_dead_executor_interval_seconds: executor_timeout_secs.clamp(1, 15),
        no_executors_grace_period_seconds: executor_timeout_secs,
        ..Default::default()
    }
    .with_override_session_builder(Arc::new(cluster_state));
    let cluster = BallistaCluster::new_from_config(&config).await.map_err(|e| Error::runtime(e.to_string()))?;
    eprintln!("neardup: scheduler listening on {address}");
    start_server(cluster, address, Arc::new(config)).await.map_err(|e| Error::runtime(e.to_string()))
}

/// Settings of an executor process.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    pub scheduler: String,
    pub bind: String,
    pub external_host: Option<String>,
    pub port: u16,
    pub grpc_port: u16,
    pub concurrency: Option<usize>,
    pub work_dir: Option<String>,
    pub memory_limit: Option<usize>,
    /// Seconds between heartbeats to the scheduler.
    pub heartbeat_interval_secs: u64,
}

/// Run an executor until the process is stopped.
pub async fn run_executor(options: ExecutorOptions) -> Result<()> {
    let (scheduler_host, scheduler_port) = parse_endpoint(&options.scheduler, 50050)?;
    let registry = BallistaFunctionRegistry::from(&cluster_state(SessionConfig::new_with_ballista())?);
    let work_dir = match &options.work_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("neardup-executor-{}", options.port)).display().to_string(),
    };
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| Error::input(format!("cannot create the work dir '{work_dir}': {e} (choose another with --work-dir)")))?;
    let spill = work_dir.clone();
    let runtime: RuntimeProducer = Arc::new(move |_| runtime_env(Some(&spill), None));
    let defaults = ExecutorProcessConfig::default();
    let config = ExecutorProcessConfig {
        bind_host: options.bind.clone(),
        external_host: options.external_host.clone(),
        port: options.port,
        grpc_port: options.grpc_port,
        scheduler_host,
        scheduler_port,
        vcores: options.concurrency.unwrap_or(defaults.vcores),
        work_dir: Some(work_dir),
        // Some(0) would mean unbounded; without a limit Ballista sizes the pool from the host.
        memory_pool_size: options.memory_limit.map(|m| m as u64),
        override_function_registry: Some(Arc::new(registry)),
        override_runtime_producer: Some(runtime),
        executor_heartbeat_interval_seconds: options.heartbeat_interval_secs.max(1),
        ..defaults
    };
    eprintln!("neardup: executor on {}:{} (flight) and {} (grpc)", options.bind, options.port, options.grpc_port);
    start_executor_process(Arc::new(config)).await.map_err(|e| Error::runtime(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_state_has_every_function() {
        let state = cluster_state(SessionConfig::new_with_ballista()).unwrap();
        for f in crate::udf::scalar_functions() {
            assert!(state.scalar_functions().contains_key(f.name()), "{} missing", f.name());
        }
        assert!(state.aggregate_functions().contains_key("simhash_agg"));
        assert!(state.scalar_functions().contains_key("array_length"), "DataFusion's nested functions are kept");
    }
}
