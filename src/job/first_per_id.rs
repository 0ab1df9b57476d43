//! `--duplicate-ids keep-first` done by the client, on the documents it
//! reads into memory for segmentation (stages.rs, `hold_documents`).
//!
//! The rows are dealt to the partitions by a hash of their (source, id), so
//! that the rows of a repeated id meet in one partition. Each partition is
//! sorted by (source, id) there, as segmentation wants it, and of each run
//! of one id the first row by text, then title, then keep key is kept: the
//! row inputs.rs's ranking statement keeps. This spares the statements that
//! find the repeated ids and rank their rows, which read the inputs twice
//! more (Weibo: the suspects query 144 ms and the ranking 98 ms, with the
//! read of a view that left them out).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use datafusion::arrow::array::{make_comparator, Array, ArrayRef, AsArray, RecordBatch, StringViewArray};
use datafusion::arrow::compute::{cast, interleave_record_batch, SortOptions};
use datafusion::arrow::datatypes::DataType;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::error::{Error, Result};

/// The documents, one row per id.
pub(super) struct FirstPerId {
    /// Each partition's rows in (source, id) order, in batches of at most
    /// the rows asked for.
    pub partitions: Vec<Vec<RecordBatch>>,
    /// The ids (source, id) found on more than one row, in order.
    pub repeated: Vec<(String, String)>,
    /// The row kept of each repeated id, in `repeated`'s order.
    pub kept: Vec<RecordBatch>,
    /// The rows left out.
    pub dropped: u64,
}

/// Where a row is: its batch and its row in the batch.
type At = (usize, usize);

/// Of a repeated id: its row kept, and how many rows carry it.
struct Repeated {
    kept: At,
    rows: u64,
}

/// One row per (source, id) of `batches` (which have the columns `source`
/// and `id`; `text`, `title` and `keep_key` rank a repeated id's rows when
/// present), in `parts` partitions sorted by (source, id), in batches of
/// `rows`, each given to `finish` on its partition's thread. The result
/// does not depend on how the rows came in batches.
pub(super) fn first_per_id(batches: &[RecordBatch], parts: usize, rows: usize, finish: impl Fn(RecordBatch) -> Result<RecordBatch> + Sync) -> Result<FirstPerId> {
    let parts = parts.max(1);
    let keys = id_keys(batches, parts)?;
    let inputs: Vec<&RecordBatch> = batches.iter().collect();
    let gather = |at: &[At]| finish(interleave_record_batch(&inputs, at)?);
    let dealt = crate::parallel::on_threads((0..parts).collect(), |p| -> Result<_> {
        let (kept, repeated) = sorted_part(batches, &keys, p)?;
        Ok((kept.chunks(rows.max(1)).map(gather).collect::<Result<Vec<_>>>()?, repeated))
    });
    let (mut partitions, mut repeated) = (Vec::with_capacity(parts), Vec::new());
    for part in dealt {
        let (batches, of_repeated) = part?;
        partitions.push(batches);
        repeated.extend(of_repeated);
    }
    // In (source, id) order, whichever partitions they met in.
    repeated.sort_unstable_by(|a: &Repeated, b: &Repeated| keys.compare(a.kept, b.kept));
    let dropped = repeated.iter().map(|r| r.rows - 1).sum();
    let ids = repeated.iter().map(|r| (keys.source(r.kept).to_string(), keys.id_text(r.kept).to_string())).collect();
    let at: Vec<At> = repeated.iter().map(|r| r.kept).collect();
    let kept = match at.is_empty() {
        true => Vec::new(),
        false => vec![gather(&at)?],
    };
    Ok(FirstPerId { partitions, repeated: ids, kept, dropped })
}

/// Each row's (source, id) as a sort key: the rank of its source among the
/// inputs' names, and the first 8 bytes of its id, which order most ids
/// alone (Weibo's are 6 characters); with the ids, for the ties.
struct IdKeys {
    /// Each batch's sources and ids.
    sources: Vec<StringViewArray>,
    ids: Vec<StringViewArray>,
    /// Each batch's rows: (source rank, id prefix), and the partition dealt to.
    keys: Vec<Vec<((u32, u64), u32)>>,
}

impl IdKeys {
    fn id(&self, at: At) -> &[u8] {
        self.id_text(at).as_bytes()
    }

    fn id_text(&self, (b, r): At) -> &str {
        self.ids[b].value(r)
    }

    fn source(&self, (b, r): At) -> &str {
        self.sources[b].value(r)
    }

    fn key(&self, (b, r): At) -> (u32, u64) {
        self.keys[b][r].0
    }

    /// The order of two rows by (source, id).
    fn compare(&self, a: At, b: At) -> Ordering {
        self.key(a).cmp(&self.key(b)).then_with(|| self.id(a).cmp(self.id(b)))
    }
}

/// The sort keys of every row, and the partition of `parts` each is dealt
/// to (by a hash of its source and id); the batches are shared out among
/// as many threads.
fn id_keys(batches: &[RecordBatch], parts: usize) -> Result<IdKeys> {
    let as_views = |b: &RecordBatch, name: &str| -> Result<StringViewArray> { Ok(cast(column(b, name)?, &DataType::Utf8View)?.as_string_view().clone()) };
    let sources = batches.iter().map(|b| as_views(b, "source")).collect::<Result<Vec<_>>>()?;
    let ids = batches.iter().map(|b| as_views(b, "id")).collect::<Result<Vec<_>>>()?;
    // A batch comes from one input: its source is mostly the last one seen.
    let mut names = BTreeSet::new();
    for s in &sources {
        let mut last = None;
        for name in s.iter().flatten() {
            if last != Some(name) {
                names.insert(name);
                last = Some(name);
            }
        }
    }
    let ranks: BTreeMap<&str, u32> = names.into_iter().zip(0..).collect();
    let key = |b: usize| -> Result<Vec<((u32, u64), u32)>> {
        let mut last: Option<(&str, u32)> = None;
        let mut keys = Vec::with_capacity(ids[b].len());
        for (source, id) in sources[b].iter().zip(ids[b].iter()) {
            let (Some(source), Some(id)) = (source, id) else {
                return Err(Error::input("a document has no id: give every row an id, or the right id column with --id-col"));
            };
            let rank = match last {
                Some((name, rank)) if name == source => rank,
                _ => ranks[source],
            };
            last = Some((source, rank));
            let mut prefix = [0u8; 8];
            let n = id.len().min(8);
            prefix[..n].copy_from_slice(&id.as_bytes()[..n]);
            let part = xxh3_64_with_seed(id.as_bytes(), u64::from(rank)) % parts as u64;
            keys.push(((rank, u64::from_be_bytes(prefix)), part as u32));
        }
        Ok(keys)
    };
    let shares: Vec<Vec<usize>> = (0..parts).map(|t| (t..batches.len()).step_by(parts).collect()).collect();
    let done = crate::parallel::on_threads(shares, |share| share.into_iter().map(|b| Ok((b, key(b)?))).collect::<Result<Vec<_>>>());
    let mut keys = vec![Vec::new(); batches.len()];
    for (b, k) in done.into_iter().collect::<Result<Vec<_>>>()?.into_iter().flatten() {
        keys[b] = k;
    }
    Ok(IdKeys { sources, ids, keys })
}

/// Partition `p`: its rows sorted by (source, id), one per id, and the
/// repeated ids among them.
fn sorted_part(batches: &[RecordBatch], keys: &IdKeys, p: usize) -> Result<(Vec<At>, Vec<Repeated>)> {
    let mut rows: Vec<((u32, u64), At)> = Vec::new();
    for (b, batch) in keys.keys.iter().enumerate() {
        rows.extend(batch.iter().enumerate().filter(|(_, k)| k.1 as usize == p).map(|(r, k)| (k.0, (b, r))));
    }
    // Stable: rows of one key stay in the order they came in.
    radsort::sort_by_key(&mut rows, |row| row.0);
    // Ids that share their first 8 bytes are ordered by the whole id.
    for tie in rows.chunk_by_mut(|x, y| x.0 == y.0).filter(|t| t.len() > 1) {
        tie.sort_by(|x, y| keys.id(x.1).cmp(keys.id(y.1)).then(x.1.cmp(&y.1)));
    }
    let (mut kept, mut repeated) = (Vec::with_capacity(rows.len()), Vec::new());
    for run in rows.chunk_by(|x, y| x.0 == y.0 && keys.id(x.1) == keys.id(y.1)) {
        let mut first = run[0].1;
        for &(_, other) in &run[1..] {
            if ranks_before(batches, other, first)? {
                first = other;
            }
        }
        kept.push(first);
        if run.len() > 1 {
            repeated.push(Repeated { kept: first, rows: run.len() as u64 });
        }
    }
    Ok((kept, repeated))
}

/// Whether row `a` comes before row `b` of the same id: by text, then title,
/// then keep key (ascending, NULLs last), as inputs.rs ranks them.
fn ranks_before(batches: &[RecordBatch], a: At, b: At) -> Result<bool> {
    let ascending = SortOptions { descending: false, nulls_first: false };
    for name in ["text", "title", "keep_key"] {
        let (Some(x), Some(y)) = (batches[a.0].column_by_name(name), batches[b.0].column_by_name(name)) else { continue };
        let order = make_comparator(x.as_ref(), y.as_ref(), ascending)?(a.1, b.1);
        if order.is_ne() {
            return Ok(order.is_lt());
        }
    }
    Ok(false)
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    batch.column_by_name(name).ok_or_else(|| Error::runtime(format!("the documents have no column {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use datafusion::arrow::array::{AsArray, StringArray, StringViewArray};
    use datafusion::arrow::datatypes::{Field, Schema};

    fn batch(rows: &[(&str, &str, Option<&str>)]) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("source", DataType::Utf8, false),
            Field::new("id", DataType::Utf8, false),
            Field::new("text", DataType::Utf8View, true),
        ]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringViewArray::from_iter(rows.iter().map(|r| r.2))),
        ];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    fn texts(batches: &[RecordBatch]) -> Vec<String> {
        let cell = |b: &RecordBatch, c: usize, r: usize| match c {
            2 => b.column(2).as_string_view().is_valid(r).then(|| b.column(2).as_string_view().value(r).to_string()).unwrap_or("∅".into()),
            _ => b.column(c).as_string::<i32>().value(r).to_string(),
        };
        batches.iter().flat_map(|b| (0..b.num_rows()).map(move |r| format!("{}/{}:{}", cell(b, 0, r), cell(b, 1, r), cell(b, 2, r)))).collect()
    }

    #[test]
    fn of_a_repeated_id_the_row_of_the_first_text_is_kept_in_id_order() {
        let batches = [
            batch(&[("a", "2", Some("y")), ("b", "1", Some("q")), ("a", "10", None)]),
            batch(&[("a", "2", Some("x")), ("a", "10", Some("z")), ("a", "3", Some("w"))]),
            batch(&[("a", "2", Some("x")), ("a", "1", Some("v"))]),
        ];
        for parts in [1, 2, 3, 8] {
            let found = first_per_id(&batches, parts, 2, Ok).unwrap();
            assert_eq!(found.partitions.len(), parts);
            // Each partition sorted by (source, id), in batches of 2.
            let mut all: Vec<String> = Vec::new();
            for p in &found.partitions {
                assert!(p.iter().all(|b| b.num_rows() <= 2 && b.num_rows() > 0));
                let rows = texts(p);
                let mut sorted = rows.clone();
                sorted.sort_by(|x, y| x.split(':').next().cmp(&y.split(':').next()));
                assert_eq!(rows, sorted, "{parts}");
                all.extend(rows);
            }
            all.sort();
            // "a/10": the NULL text ranks last; "a/2": "x" before "y". (As
            // text, "a/10:" sorts before "a/1:".)
            assert_eq!(all, ["a/10:z", "a/1:v", "a/2:x", "a/3:w", "b/1:q"], "{parts}");
            assert_eq!(found.repeated, [("a".to_string(), "10".to_string()), ("a".into(), "2".into())]);
            assert_eq!(texts(&found.kept), ["a/10:z", "a/2:x"]);
            assert_eq!(found.dropped, 3);
        }
    }

    #[test]
    fn ids_alike_in_their_first_bytes_and_sources_keep_their_order() {
        // Ids of one 8-byte prefix, a NUL byte, and two inputs with the same ids.
        let batches = [
            batch(&[("b", "abcdefgh1", Some("1")), ("a", "abcdefgh", Some("2")), ("a", "abcdefgh\0", Some("3"))]),
            batch(&[("a", "abcdefgh1", Some("4")), ("a", "abcdefgh0", Some("5")), ("b", "abcdefgh1", Some("0")), ("a", "abcdefgh", Some("6"))]),
        ];
        for parts in [1, 2, 5] {
            let found = first_per_id(&batches, parts, 256, Ok).unwrap();
            for p in &found.partitions {
                let ids: Vec<String> = texts(p).iter().map(|t| t.split(':').next().unwrap().to_string()).collect();
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "{parts}: {ids:?}");
            }
            // Sorted as text, where ':' comes after the digits and the NUL.
            let mut all: Vec<String> = found.partitions.iter().flat_map(|p| texts(p)).collect();
            all.sort();
            assert_eq!(all, ["a/abcdefgh\0:3", "a/abcdefgh0:5", "a/abcdefgh1:4", "a/abcdefgh:2", "b/abcdefgh1:0"], "{parts}");
            assert_eq!(found.repeated, [("a".to_string(), "abcdefgh".to_string()), ("b".into(), "abcdefgh1".into())]);
            assert_eq!(found.dropped, 2);
        }
    }

    #[test]
    fn ids_that_do_not_repeat_are_all_kept() {
        let batches = [batch(&[("a", "1", Some("t")), ("b", "1", Some("t"))])];
        let found = first_per_id(&batches, 2, 256, Ok).unwrap();
        assert_eq!((found.dropped, found.repeated.len(), found.kept.len()), (0, 0, 0));
        assert_eq!(found.partitions.iter().map(|p| texts(p).len()).sum::<usize>(), 2);
        let none = first_per_id(&[], 2, 256, Ok).unwrap();
        assert!(none.partitions.iter().all(Vec::is_empty) && none.kept.is_empty());
        let missing = RecordBatch::try_new(Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, false)])), vec![Arc::new(StringArray::from(vec!["1"]))]).unwrap();
        assert!(first_per_id(&[missing], 1, 256, Ok).is_err());
    }
}
