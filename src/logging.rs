//! Log lines of the long-running processes (`neardup scheduler`,
//! `neardup executor`): Ballista reports through the `log` facade, and this
//! writes its records to standard error, one line each. The level comes from
//! `NEARDUP_LOG` (error, warn, info, debug, trace; default warn).

use std::io::Write;

struct StderrLogger {
    role: &'static str,
}

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
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

/// Send log records to standard error, tagged with the process's `role`.
pub fn init(role: &'static str) -> crate::error::Result<()> {
    let level = level_from_env().map_err(crate::error::Error::input)?;
    // A second call (e.g. in tests) keeps the first logger.
    if log::set_logger(Box::leak(Box::new(StderrLogger { role }))).is_ok() {
        log::set_max_level(level);
    }
    Ok(())
}
