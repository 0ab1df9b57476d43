//! Progress of a run on a terminal: one line per stage, redrawn in place,
//! with the documents and bytes processed so far (counted by the functions
//! that read every document, `term_stats` and `idf_simhash`, in this
//! process), the stage's total when known, and its elapsed time. Nothing is
//! drawn when standard error is not a terminal (logs and orchestrators get
//! the plain or JSON stage lines only), with `--quiet`, or with JSON logs.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static DOCUMENTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// Count `documents` documents of `bytes` bytes as processed.
pub fn add(documents: u64, bytes: u64) {
    DOCUMENTS.fetch_add(documents, Ordering::Relaxed);
    BYTES.fetch_add(bytes, Ordering::Relaxed);
}

struct Shown {
    stage: String,
    total: Option<u64>,
    started: Instant,
}

/// The line drawn on standard error while a stage runs.
pub struct Bar {
    shown: Arc<Mutex<Option<Shown>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Bar {
    /// A bar when standard error is a terminal and `enabled`; otherwise one that draws nothing.
    pub fn new(enabled: bool) -> Bar {
        let shown: Arc<Mutex<Option<Shown>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = (enabled && std::io::stderr().is_terminal()).then(|| {
            let (shown, stop) = (shown.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(s) = shown.lock().expect("progress lock").as_ref() {
                        let _ = write!(std::io::stderr().lock(), "\r\x1b[2K{}", line(s));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        });
        Bar { shown, stop, thread }
    }

    /// Whether this bar draws anything.
    pub fn is_drawn(&self) -> bool {
        self.thread.is_some()
    }

    /// Show `stage` from now on, counting from zero; `total` documents when known.
    pub fn begin(&self, stage: &str, total: Option<u64>) {
        DOCUMENTS.store(0, Ordering::Relaxed);
        BYTES.store(0, Ordering::Relaxed);
        *self.shown.lock().expect("progress lock") = Some(Shown { stage: stage.to_string(), total, started: Instant::now() });
    }

    /// Clear the line (before a stage's log line is written).
    pub fn clear(&self) {
        let mut shown = self.shown.lock().expect("progress lock");
        if shown.take().is_some() && self.thread.is_some() {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.clear();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn line(s: &Shown) -> String {
    let (docs, bytes) = (DOCUMENTS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
    let seconds = s.started.elapsed().as_secs_f64();
    let mut out = format!("neardup: {:<14} ", s.stage);
    match s.total.filter(|&t| t > 0) {
        Some(total) => {
            let done = docs.min(total) as f64 / total as f64;
            let filled = (done * 24.0).round() as usize;
            out += &format!("[{}{}] {:>3.0}% {docs}/{total} documents", "#".repeat(filled), " ".repeat(24 - filled), done * 100.0);
        }
        None if docs > 0 => out += &format!("{docs} documents"),
        None => out += &["|", "/", "-", "\\"][(seconds * 5.0) as usize % 4].to_string(),
    }
    if bytes > 0 {
        out += &format!(", {:.1} MB ({:.1} MB/s)", bytes as f64 / 1e6, bytes as f64 / 1e6 / seconds.max(1e-3));
    }
    out + &format!("  {seconds:.0} s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_counts_totals_and_rates() {
        let s = Shown { stage: "segment".into(), total: Some(200), started: Instant::now() - Duration::from_secs(2) };
        DOCUMENTS.store(50, Ordering::Relaxed);
        BYTES.store(4_000_000, Ordering::Relaxed);
        let l = line(&s);
        assert!(l.contains("[######                  ]  25% 50/200 documents"), "{l}");
        assert!(l.contains("4.0 MB (2.0 MB/s)") && l.ends_with("2 s"), "{l}");
    }
}
