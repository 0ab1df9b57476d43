//! Whether a one-shot run's work fits in memory under `--memory-limit`
//! (`--work-tables auto`): its peak with the work tables in memory,
//! estimated from its inputs' footers before a page is read.
//!
//! With the work in memory the client does the id check, the copies' check,
//! the MinHash candidates and the check of candidates itself, over tables it
//! holds; with files, statements that spill do them. Under `--memory-limit
//! 2G` a run of `weibo_reposts` takes 16.4–16.7 s at a peak of 1,118–1,147
//! MiB with files, and 5.4–6.4 s at 761–824 MiB in memory: files are for
//! inputs that do not fit, not for every run under a limit.

use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::prelude::SessionContext;

use super::config::Columns;
use super::inputs::CheckedInputs;
use crate::session::{EngineOptions, WorkTables};

/// A run's peak with its work in memory, apart from what grows with its
/// inputs: the program, jieba-rs's dictionary, the engine's threads, and
/// room for a large vocabulary's learned POS factors and document
/// frequencies. Runs of a few thousand documents peak at 139–220 MiB
/// (`sample_data`, `weibo_original`, `bbc_news`, `peoples_daily_1998`).
const BASE: u64 = 256 << 20;

/// Bytes held at the peak for each byte of text read (text and title,
/// before compression): `heybox_articles` (66 MB of text, 18,060 articles)
/// peaks 457 MiB above a small run, about 7 bytes a byte.
const PER_TEXT_BYTE: u64 = 7;

/// Bytes held at the peak for each document beyond its text: its
/// fingerprint, term set, sketch and their rows in the work tables.
/// `weibo_reposts` (768,573 posts, 36 MB of text) peaks 673 MiB above a
/// small run, of which its text accounts for 239 MiB: about 560 bytes a post.
const PER_ROW: u64 = 560;

/// What the estimate allows for beyond the peaks measured: a corpus with
/// more duplicates, longer lists or a larger vocabulary than those above.
const MARGIN: u64 = 2;

/// The peak of a one-shot run with its work tables in memory, over inputs
/// of `rows` documents and `text_bytes` bytes of text and titles.
pub(super) fn peak_in_memory(rows: u64, text_bytes: u64) -> u64 {
    let growing = PER_TEXT_BYTE.saturating_mul(text_bytes).saturating_add(PER_ROW.saturating_mul(rows));
    BASE.saturating_add(MARGIN.saturating_mul(growing))
}

/// Whether work whose peak is `peak` stays in memory under `limit`.
fn fits(peak: u64, limit: u64) -> bool {
    peak <= limit
}

/// What a run's inputs hold, by their footers: rows, and bytes of text and
/// titles before compression. Kept with the session (a config extension)
/// for the statements that size their batches by it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct InputContents {
    rows: u64,
    text_bytes: u64,
}

impl InputContents {
    /// The contents of the checked inputs' files, of the text and title columns.
    pub(super) fn of(checked: &CheckedInputs, columns: &Columns) -> InputContents {
        let mut read = vec![columns.text.as_str()];
        read.extend(columns.title.as_deref().filter(|t| !t.is_empty()));
        let (rows, text_bytes) = checked.inputs.iter().map(|i| i.contents(&read)).fold((0, 0), |(r, b), (rows, bytes)| (r + rows, b + bytes));
        InputContents { rows, text_bytes }
    }

    /// Keep them with `ctx`'s session.
    pub(super) fn register(self, ctx: &SessionContext) {
        ctx.state_ref().write().config_mut().set_extension(std::sync::Arc::new(self));
    }
}

/// Text a batch of the statements that segment the inputs (or find their
/// boilerplate lines) carries: enough that short posts do not pay per batch,
/// few enough that a corpus of long articles still deals every core many
/// batches. In batches of 256 rows whatever the text, `weibo_reposts`'
/// segmentation over the inputs (`--work-tables files`) took 3.7–4.1 s;
/// in batches of 4,096 rows 2.7–3.3 s, Heybox's unchanged (2026-11-29).
const BATCH_TEXT_BYTES: u64 = 1 << 20;

/// The fewest and the most rows of such a batch: 256 rows of long articles
/// (Heybox: 0.9 MiB), and a work table's batch.
const BATCH_ROWS: std::ops::RangeInclusive<u64> = 256..=8192;

/// Rows a batch of the statements that read every document from the inputs
/// ([`BATCH_TEXT_BYTES`] of text at the inputs' mean length), for `ctx`'s
/// run ([`InputContents::register`]); the fewest without its inputs' contents.
pub(super) fn document_batch_rows(ctx: &SessionContext) -> u64 {
    match ctx.state().config().get_extension::<InputContents>() {
        Some(contents) => batch_rows(*contents),
        None => *BATCH_ROWS.start(),
    }
}

fn batch_rows(InputContents { rows, text_bytes }: InputContents) -> u64 {
    let mean = text_bytes.checked_div(rows).unwrap_or(0).max(1);
    (BATCH_TEXT_BYTES / mean).clamp(*BATCH_ROWS.start(), *BATCH_ROWS.end())
}

/// Settle where an embedded one-shot run under `--work-tables auto` and a
/// memory limit keeps its work: in memory (the session is switched to it)
/// when its inputs' estimated peak fits in the limit, else in files. Says
/// what it chose and why, for the progress line; None when there was no
/// choice to make.
pub(super) fn settle(ctx: &SessionContext, engine: &EngineOptions, contents: InputContents) -> Option<String> {
    if engine.cluster.is_some() || engine.work_tables.unwrap_or_default() != WorkTables::Auto {
        return None;
    }
    let MemoryLimit::Finite(limit) = ctx.runtime_env().memory_pool.memory_limit() else { return None };
    let InputContents { rows, text_bytes: bytes } = contents;
    let peak = peak_in_memory(rows, bytes);
    let limit = limit as u64;
    let inputs = format!("{rows} rows, {} of text", mib(bytes));
    if fits(peak, limit) {
        crate::session::keep_work_in_memory(ctx);
        Some(format!("work tables in memory: the inputs ({inputs}) need about {} of the {} limit", mib(peak), mib(limit)))
    } else {
        Some(format!("work tables in files: the inputs ({inputs}) would need about {} in memory, over the {} limit", mib(peak), mib(limit)))
    }
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate in MiB.
    fn peak_mib(rows: u64, text_bytes: u64) -> u64 {
        peak_in_memory(rows, text_bytes) >> 20
    }

    #[test]
    fn the_estimate_is_above_every_measured_peak_and_chooses_by_the_limit() {
        // (rows, text and title bytes before compression, peak MiB measured
        // with the work in memory, 2026-11-29): sample_data, weibo_original,
        // bbc_news, peoples_daily_1998, heybox_articles, weibo_reposts.
        let measured = [
            (507, 408_667, 139),
            (3_387, 1_015_138, 151),
            (2_225, 5_012_404, 174),
            (19_484, 5_610_273, 220),
            (18_060, 66_192_042, 597),
            (768_573, 35_758_906, 813),
        ];
        for (rows, bytes, peak) in measured {
            let estimate = peak_mib(rows, bytes);
            assert!(estimate >= peak + peak / 8, "{rows} rows, {bytes} bytes: estimated {estimate} MiB against {peak} measured");
        }
        // Both large corpora stay in memory under 2 GiB, and go to files under 1 GiB.
        for (rows, bytes, _) in &measured[4..] {
            assert!(fits(peak_in_memory(*rows, *bytes), 2 << 30));
            assert!(!fits(peak_in_memory(*rows, *bytes), 1 << 30));
        }
        // Sizes beyond any input do not overflow.
        assert_eq!(peak_in_memory(u64::MAX, u64::MAX), u64::MAX);
    }

    #[test]
    fn batches_of_documents_carry_about_a_mib_of_text() {
        let rows = |rows, text_bytes| batch_rows(InputContents { rows, text_bytes });
        // heybox_articles, bbc_news, peoples_daily_1998, weibo_reposts.
        assert_eq!(rows(18_060, 66_192_042), 286);
        assert_eq!(rows(2_225, 5_012_404), 465);
        assert_eq!(rows(19_484, 5_610_273), 3_653);
        assert_eq!(rows(768_573, 35_758_906), 8_192);
        // Longer texts still give 256 rows; no text, a work table's batch.
        assert_eq!(rows(10, 1 << 30), 256);
        assert_eq!(rows(0, 0), 8_192);
        assert_eq!(rows(1_000, 0), 8_192);
    }
}
