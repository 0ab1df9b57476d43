//! The one place a DataFusion session is built.
//!
//! Every run (the job, `neardup sql`, tests) gets its context from
//! [`new_context`], so the function list and engine settings cannot drift
//! between them. A cluster's scheduler and executors are to take the same
//! function list from [`crate::udf`].

use std::sync::Arc;

use datafusion::execution::disk_manager::DiskManagerBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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

/// A session with every neardup function registered.
pub fn new_context(options: &EngineOptions) -> Result<SessionContext> {
    let mut config = SessionConfig::new().with_information_schema(true);
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
    let mut runtime = RuntimeEnvBuilder::new()
        .with_disk_manager_builder(DiskManagerBuilder::default())
        .with_object_store_registry(Arc::new(crate::storage::EnvStoreRegistry::new()));
    if let Some(limit) = &options.memory_limit {
        runtime = runtime.with_memory_limit(parse_size(limit)?, 1.0);
    }
    let runtime = runtime.build_arc()?;
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(Arc::clone(&runtime))
        .with_default_features()
        .build();
    crate::udf::register_all(&mut state)?;
    Ok(SessionContext::new_with_state(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("512mb").unwrap(), 512 << 20);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("lots").unwrap_err().to_string().contains("cannot read size 'lots'"));
        assert!(parse_size("0").is_err());
    }
}
