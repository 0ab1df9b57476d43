//! How a run reports: progress lines (for people, or JSON), stage timings,
//! and the terminal's progress bar.

use std::collections::BTreeMap;
use std::time::Instant;

/// How a run reports progress.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// No progress lines on standard error.
    pub quiet: bool,
    /// Check everything that can be checked without writing, print the plan, stop.
    pub dry_run: bool,
    pub log_format: LogFormat,
}

/// Progress and error lines on standard error: for people, or one JSON object per line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Plain,
    Json,
}

impl LogFormat {
    /// Write one log line: `event` (a stage name, `plan`, `error`…) with its
    /// message and extra fields.
    pub fn line(self, level: &str, event: &str, message: &str, fields: serde_json::Value) {
        let line = match self {
            LogFormat::Plain => format!("neardup: {message}"),
            LogFormat::Json => {
                let mut object = serde_json::json!({
                    "time": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                    "level": level,
                    "event": event,
                    "message": message,
                });
                if let (Some(o), serde_json::Value::Object(extra)) = (object.as_object_mut(), fields) {
                    o.extend(extra);
                }
                object.to_string()
            }
        };
        eprintln!("{line}");
    }
}

pub(super) struct Progress {
    pub(super) started: Instant,
    stage: Instant,
    pub(super) timings: BTreeMap<String, u64>,
    quiet: bool,
    format: LogFormat,
    bar: crate::progress::Bar,
}

impl Progress {
    pub(super) fn new(options: &RunOptions) -> Progress {
        Progress {
            started: Instant::now(),
            stage: Instant::now(),
            timings: BTreeMap::new(),
            quiet: options.quiet,
            format: options.log_format,
            bar: crate::progress::Bar::new(!options.quiet && options.log_format == LogFormat::Plain),
        }
    }

    /// Draw the running stage on a terminal (with `total` documents when known).
    pub(super) fn begin(&self, stage: &str, total: Option<u64>) {
        self.bar.begin(stage, total);
    }

    /// Whether a bar is drawn (so that its total is worth counting).
    pub(super) fn shows_bar(&self) -> bool {
        self.bar.is_drawn()
    }

    /// Start timing the next stage now (what came since the last stage is
    /// no stage's).
    pub(super) fn restart_stage(&mut self) {
        self.stage = Instant::now();
    }

    pub(super) fn done(&mut self, stage: &str, detail: impl std::fmt::Display) {
        self.bar.clear();
        let ms = self.stage.elapsed().as_millis() as u64;
        if !self.quiet {
            let message = match self.format {
                LogFormat::Plain => format!("{stage:<14} {ms:>8} ms  {detail}"),
                LogFormat::Json => detail.to_string(),
            };
            self.format.line("info", stage, &message, serde_json::json!({ "ms": ms }));
        }
        self.timings.insert(stage.to_string(), ms);
        self.stage = Instant::now();
    }
}
