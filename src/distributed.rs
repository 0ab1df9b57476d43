//! The processes of an Apache DataFusion Ballista cluster: a scheduler and
//! executors, whose session state is that of every other role
//! ([`crate::session::state`], role [`Role::Cluster`]); a client connects
//! through [`crate::session::context`]. The scheduler is built without
//! Ballista's REST API, which would serve session settings over HTTP.
//!
//! With certificates ([`crate::tls`]) every endpoint is mutual TLS. Ballista
//! 55 has no TLS setting for its servers: the scheduler's gRPC server and
//! the executors' Flight servers are then built here, from Ballista's own
//! services, and the cluster schedules by pull (the executor's gRPC server,
//! which the push scheduler calls, has no hook for TLS).

use std::net::SocketAddr;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::error::BallistaError;
use ballista_core::extension::SessionConfigExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_core::utils::{create_grpc_server, GrpcServerConfig};
use ballista_core::{ConfigProducer, RuntimeProducer};
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_executor::flight_service::BallistaFlightService;
use ballista_executor::shutdown::Shutdown;
use ballista_executor::ArrowFlightServerProvider;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_server};
use datafusion::execution::SessionState;
use datafusion::prelude::SessionConfig;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use crate::error::{Error, Result};
use crate::statement::SortedSinks;
use crate::session::{parse_endpoint, runtime_env, state, Role};
use crate::tls::{Tls, TlsFiles};

/// The session state of the scheduler and executors.
fn cluster_state(config: SessionConfig) -> datafusion::error::Result<SessionState> {
    state(Role::Cluster, config)
}

/// Settings of a scheduler process.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    pub bind: String,
    pub port: u16,
    /// The host executors reach the scheduler by, to report on the tasks
    /// it gave them (default: the bind address, or `localhost` when it
    /// listens on every interface).
    pub external_host: Option<String>,
    /// An executor silent for this long is declared lost and its tasks run
    /// elsewhere.
    pub executor_timeout_secs: u64,
    /// Mutual TLS on the scheduler's port.
    pub tls: Option<TlsFiles>,
}

fn ballista_error(e: BallistaError) -> Error {
    Error::runtime(e.to_string())
}

/// Run a scheduler until the process is stopped.
pub async fn run_scheduler(options: SchedulerOptions) -> Result<()> {
    let SchedulerOptions { bind, port, external_host, executor_timeout_secs, tls } = options;
    let address: SocketAddr =
        format!("{bind}:{port}").parse().map_err(|e| Error::input(format!("cannot bind to {bind}:{port}: {e}")))?;
    if executor_timeout_secs == 0 {
        return Err(Error::input("--executor-timeout must be at least 1 second"));
    }
    let tls = tls.as_ref().map(Tls::load).transpose()?;
    let mut config = SchedulerConfig {
        bind_host: bind.clone(),
        bind_port: port,
        external_host: external_host.unwrap_or_else(|| match address.ip().is_unspecified() {
            true => "localhost".into(),
            false => bind.clone(),
        }),
        executor_timeout_seconds: executor_timeout_secs,
        expire_dead_executor_interval_seconds: executor_timeout_secs.clamp(1, 15),
        no_executors_grace_period_seconds: executor_timeout_secs,
        ..Default::default()
    }
    .with_override_session_builder(Arc::new(cluster_state));
    if let Some(tls) = &tls {
        config.scheduling_policy = TaskSchedulingPolicy::PullStaged;
        config.use_tls = true;
        config.override_create_grpc_client_endpoint = Some(tls.endpoint_hook());
    }
    let cluster = BallistaCluster::new_from_config(&config).await.map_err(ballista_error)?;
    eprintln!("neardup: scheduler listening on {address}{}", if tls.is_some() { " (mutual TLS)" } else { "" });
    match tls {
        None => start_server(cluster, address, Arc::new(config)).await.map_err(ballista_error),
        Some(tls) => serve_scheduler_tls(cluster, address, Arc::new(config), &tls).await,
    }
}

/// The scheduler's gRPC service behind mutual TLS. Ballista's own server
/// also mounts health routes and an optional Flight proxy; neardup uses
/// neither.
async fn serve_scheduler_tls(cluster: BallistaCluster, address: SocketAddr, config: Arc<SchedulerConfig>, tls: &Tls) -> Result<()> {
    config.validate().map_err(ballista_error)?;
    let (decoding, encoding) =
        (config.grpc_server_max_decoding_message_size as usize, config.grpc_server_max_encoding_message_size as usize);
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config).await.map_err(ballista_error)?;
    let service = SchedulerGrpcServer::new(scheduler).max_decoding_message_size(decoding).max_encoding_message_size(encoding);
    create_grpc_server(&GrpcServerConfig::default())
        .tls_config(tls.server())
        .map_err(|e| Error::input(format!("cannot serve TLS with the scheduler's certificate: {e}")))?
        .add_service(service)
        .serve(address)
        .await
        .map_err(|e| Error::runtime(format!("the scheduler's server on {address} stopped: {e}")))
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
    /// Mutual TLS on every connection to and from the executor.
    pub tls: Option<TlsFiles>,
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
        override_physical_codec: Some(Arc::new(SortedSinks::default())),
        executor_heartbeat_interval_seconds: options.heartbeat_interval_secs.max(1),
        ..defaults
    };
    let config = match &options.tls {
        None => config,
        Some(files) => with_tls(config, &Tls::load(files)?)?,
    };
    eprintln!("neardup: executor on {}:{} (flight) and {} (grpc)", options.bind, options.port, options.grpc_port);
    start_executor_process(Arc::new(config)).await.map_err(ballista_error)
}

/// An executor of a secured cluster: it asks the scheduler for work (pull),
/// serves Flight behind mutual TLS, and its tasks fetch shuffles from the
/// other executors over TLS with its certificate.
fn with_tls(config: ExecutorProcessConfig, tls: &Tls) -> Result<ExecutorProcessConfig> {
    if config.external_host.is_none() {
        return Err(Error::input(
            "an executor of a TLS cluster needs --external-host: the name in its certificate, by which the scheduler, \
             clients and other executors reach it",
        ));
    }
    let hook = tls.endpoint_hook();
    let task_hook = hook.clone();
    let tasks: ConfigProducer = Arc::new(move || {
        SessionConfig::new_with_ballista().with_ballista_use_tls(true).with_ballista_override_create_grpc_client_endpoint(task_hook.clone())
    });
    Ok(ExecutorProcessConfig {
        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
        override_create_grpc_client_endpoint: Some(hook),
        override_config_producer: Some(tasks),
        override_arrow_flight_service: Some(flight_server(tls.clone(), config.grpc_max_decoding_message_size, config.grpc_max_encoding_message_size)),
        ..config
    })
}

/// Ballista's Flight service (results and shuffle files of the executor's
/// work folder) behind mutual TLS.
fn flight_server(tls: Tls, decoding: u32, encoding: u32) -> Arc<ArrowFlightServerProvider> {
    Arc::new(move |work_dir: String, address: SocketAddr, mut shutdown: Shutdown, settings: GrpcServerConfig| {
        let tls = tls.server();
        tokio::spawn(async move {
            let service = FlightServiceServer::new(BallistaFlightService::new(work_dir))
                .max_decoding_message_size(decoding as usize)
                .max_encoding_message_size(encoding as usize);
            create_grpc_server(&settings)
                .tls_config(tls)
                .map_err(BallistaError::TonicError)?
                .add_service(service)
                .serve_with_shutdown(address, shutdown.recv())
                .await
                .map_err(BallistaError::TonicError)
        })
    })
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
