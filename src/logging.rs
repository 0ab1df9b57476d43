//! Log lines of the long-running processes (`neardup scheduler`,
//! `neardup executor`) and of the job: Ballista reports through the `log`
//! facade, and this writes its records to standard error, one line each. The
//! level comes from `NEARDUP_LOG` (error, warn, info, debug, trace; default
//! warn). In the job it applies to neardup's own records (at debug, each
//! statement's time); the libraries' stay at warn, since DataFusion's debug
//! records are its optimizer's every plan.

use std::io::Write;

struct StderrLogger {
    role: &'static str,
    /// The level of other crates' records.
    libraries: log::LevelFilter,
}

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        let own = metadata.target().starts_with("neardup");
        metadata.level() <= if own { log::max_level() } else { self.libraries }
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
            let line = format!("{now} {} {:<5} {}: {}\n", self.role, record.level(), record.target(), record.args());
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

/// The level `NEARDUP_LOG` names, or `warn`.
fn level_from_env() -> Result<log::LevelFilter, String> {
    match std::env::var("NEARDUP_LOG") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| format!("NEARDUP_LOG='{v}' is not a log level: use error, warn, info, debug or trace")),
        _ => Ok(log::LevelFilter::Warn),
    }
}

/// Send log records to standard error, tagged with the process's `role`
/// ("job" keeps other crates' records at warn at most).
pub fn init(role: &'static str) -> crate::error::Result<()> {
    let level = level_from_env().map_err(crate::error::Error::input)?;
    let libraries = if role == "job" { level.min(log::LevelFilter::Warn) } else { level };
    // A second call (e.g. in tests) keeps the first logger.
    if log::set_logger(Box::leak(Box::new(StderrLogger { role, libraries }))).is_ok() {
        log::set_max_level(level);
    }
    Ok(())
}
