//! Bad input, tried: damaged Parquet files among good ones, text that is not
//! UTF-8, duplicate and missing ids, binary text columns, degenerate texts,
//! one very large document, and outputs that cannot be written. Each is exit
//! code 2 with a message naming the file, input or value, or is handled as
//! documented; nothing half-written remains.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::buffer::{Buffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;

mod common;
use common::*;

fn write(path: &Path, ids: Vec<&str>, texts: ArrayRef) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("text", texts.data_type().clone(), true),
    ]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(ids)), texts]).unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn texts(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

/// A folder with one good file.
fn folder_with_good_file(dir: &Path, name: &str) -> std::path::PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    write(&folder.join("a-good.parquet"), vec!["g1", "g2"], texts(&["北京今天有雨，气温下降。", "上海明天天晴，适合出行。"]));
    folder
}

fn fails_with(o: &std::process::Output, needles: &[&str]) {
    exits_with(o, 2, needles);
}

fn nothing_left(dir: &Path, out: &Path) {
    assert!(!out.exists(), "a failed run leaves no output");
    let names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains("staging")), "{names:?}");
}

#[test]
fn damaged_files_among_good_ones_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();

    // The footer damaged (the magic bytes intact).
    let folder = folder_with_good_file(dir.path(), "footer");
    let good = std::fs::read(folder.join("a-good.parquet")).unwrap();
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 30..n - 8].fill(0xAB);
    std::fs::write(folder.join("b-bad.parquet"), &bad).unwrap();
    fails_with(&neardup(&["dedup", "-q", "-i", folder.to_str().unwrap(), "-o", o]), &["b-bad.parquet", "damaged"]);
    nothing_left(dir.path(), &out);

    // Data pages damaged (the footer intact): found when read, then named.
    let folder = folder_with_good_file(dir.path(), "pages");
    let mut bad = good.clone();
    for b in &mut bad[8..40] {
        *b ^= 0x5A;
    }
    std::fs::write(folder.join("b-bad.parquet"), &bad).unwrap();
    fails_with(&neardup(&["dedup", "-q", "-i", folder.to_str().unwrap(), "-o", o]), &["b-bad.parquet", "cannot be read", "repair it or remove it"]);
    nothing_left(dir.path(), &out);

    // Binary garbage in a text column declared as UTF-8.
    let folder = folder_with_good_file(dir.path(), "garbage");
    let bytes = b"ok\xff\xfe\x00garbage";
    // SAFETY: deliberately invalid UTF-8, written as it would come from a broken producer.
    let garbage = unsafe {
        StringArray::new_unchecked(OffsetBuffer::new(vec![0i32, 2, bytes.len() as i32].into()), Buffer::from(bytes.to_vec()), None)
    };
    write(&folder.join("b-bad.parquet"), vec!["x1", "x2"], Arc::new(garbage));
    fails_with(&neardup(&["dedup", "-q", "-i", folder.to_str().unwrap(), "-o", o]), &["b-bad.parquet", "not valid UTF-8"]);
    nothing_left(dir.path(), &out);

    // A text column holding bytes, not text.
    let folder = dir.path().join("binary");
    std::fs::create_dir_all(&folder).unwrap();
    let binary: ArrayRef = Arc::new(datafusion::arrow::array::BinaryArray::from(vec![b"abc".as_ref(), b"\x00\x01".as_ref()]));
    write(&folder.join("b.parquet"), vec!["b1", "b2"], binary);
    fails_with(&neardup(&["dedup", "-q", "-i", folder.to_str().unwrap(), "-o", o]), &["column 'text'", "must be text"]);
    nothing_left(dir.path(), &out);
}

/// The survivors of an input read by several cores come in the input's
/// order, the same file on any number of cores: before, two cores wrote
/// the rows of their halves as they came, and under keep-first the file
/// changed from run to run.
#[test]
fn survivors_are_the_same_file_on_any_number_of_cores() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("crawl");
    std::fs::create_dir_all(&folder).unwrap();
    // Four files, so that the scan has parts for every core; d3 repeats
    // across two of them, d1 within one.
    let files: [(&str, Vec<&str>, &[&str]); 4] = [
        ("a.parquet", vec!["d1", "d2", "d1"], &["北京天安门广场", "上海外滩夜景很美", "北京天安门"]),
        ("b.parquet", vec!["d3", "d4"], &["广州塔的灯光", "深圳湾公园"]),
        ("c.parquet", vec!["d5", "d3"], &["杭州西湖断桥", "广州塔"]),
        ("d.parquet", vec!["d6", "d7"], &["成都大熊猫基地", "重庆洪崖洞夜景"]),
    ];
    for (name, ids, values) in files {
        write(&folder.join(name), ids, texts(values));
    }
    let input = format!("crawl={}", folder.display());
    let run = |cores: &str| {
        let out = dir.path().join(format!("out-{cores}"));
        let args = ["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap(), "--duplicate-ids", "keep-first", "--survivors", "--target-partitions", cores];
        ok(&neardup(&args));
        let folder = out.join("survivors/crawl");
        let mut names: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        names.iter().map(|p| std::fs::read(p).unwrap()).collect::<Vec<_>>()
    };
    let one = run("1");
    assert_eq!(one.len(), 2, "the rows of the other ids, then those kept of the repeated ids");
    assert!(run("3") == one, "the survivors' files differ between one core and three");
    let survivors = read_dir(&dir.path().join("out-1/survivors/crawl"));
    // The other ids in the input's order, then d1 and d3, each by its first text.
    assert_eq!(strings(&survivors, "id"), ["d2", "d4", "d5", "d6", "d7", "d1", "d3"]);
    assert_eq!(strings(&survivors, "text")[5..], ["北京天安门".to_string(), "广州塔".to_string()]);
}

#[test]
fn duplicate_and_missing_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let file = dir.path().join("ids.parquet");
    write(&file, vec!["d1", "d1", "d2"], texts(&["北京天安门", "上海外滩夜景", "三"]));
    let input = format!("crawl={}", file.display());
    fails_with(&neardup(&["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap()]), &["input 'crawl'", "id 'd1' on 2 documents", "unique"]);
    // Or, when asked, one row per id is kept (the smallest text) and the rest counted.
    let kept = dir.path().join("kept");
    // In memory the held documents find the repeated ids; under a memory
    // limit, statements do. The same row is kept.
    let on_disk = dir.path().join("kept-on-disk");
    for (out, limit) in [(&kept, None), (&on_disk, Some("1G"))] {
        let mut args = vec!["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap(), "--duplicate-ids", "keep-first", "--survivors"];
        args.extend(limit.map(|l| ["--memory-limit", l, "--work-tables", "files"]).into_iter().flatten());
        ok(&neardup(&args));
        let s = summary(out);
        assert_eq!((s["documents"].as_u64(), s["duplicate_ids_dropped"].as_u64()), (Some(2), Some(1)), "{limit:?}");
        let fingerprints = read_dir(&out.join("fingerprints"));
        assert_eq!(strings(&fingerprints, "id"), ["d1", "d2"]);
        // Of d1's rows, the first by text: "上…" (U+4E0A) before "北…" (U+5317), six characters.
        assert_eq!(u64s(&fingerprints, "n_chars"), [Some(6), Some(1)], "{limit:?}");
        // The survivors are one row per id too, the same row.
        let survivors = read_dir(&out.join("survivors/crawl"));
        let mut rows: Vec<(String, String)> = strings(&survivors, "id").into_iter().zip(strings(&survivors, "text")).collect();
        rows.sort();
        assert_eq!(rows, [("d1".to_string(), "上海外滩夜景".to_string()), ("d2".to_string(), "三".to_string())], "{limit:?}");
    }
    // A store night keeps the same row, and knows both ids as stored the next night.
    let store = dir.path().join("store").display().to_string();
    for night in ["2026-01-01", "2026-01-02"] {
        let report = dir.path().join(night);
        let args = ["dedup", "-q", "-i", &input, "-o", report.to_str().unwrap(), "--duplicate-ids", "keep-first", "--store", &store, "--run-id", night];
        ok(&neardup(&args));
        let s = summary(&report);
        assert_eq!(s["duplicate_ids_dropped"].as_u64(), Some(1), "{night}");
        assert_eq!(s["store"]["already_stored"].as_u64(), Some(if night == "2026-01-01" { 0 } else { 2 }), "{night}");
    }
    let run = read_dir(&dir.path().join("store/runs/run=2026-01-01"));
    let mut stored: Vec<(String, Option<u64>)> = strings(&run, "id").into_iter().zip(u64s(&run, "n_chars")).collect();
    stored.sort();
    assert_eq!(stored, [("d1".to_string(), Some(6)), ("d2".to_string(), Some(1))]);
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true), Field::new("text", DataType::Utf8, true)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(vec![Some("a"), None])), texts(&["一", "二"])]).unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    fails_with(&neardup(&["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap()]), &["input 'crawl'", "1 document(s) without an id"]);
    // The same id in two inputs is fine: documents are (source, id).
    let other = dir.path().join("other.parquet");
    write(&other, vec!["a"], texts(&["一"]));
    write(&file, vec!["a"], texts(&["二"]));
    let second = format!("more={}", other.display());
    ok(&neardup(&["dedup", "-q", "-i", &input, "-i", &second, "-o", out.to_str().unwrap()]));
    assert_eq!(summary(&out)["documents"].as_u64(), Some(2));
    let fingerprints = read_dir(&out.join("fingerprints"));
    let mut both: Vec<(String, String)> = strings(&fingerprints, "source").into_iter().zip(strings(&fingerprints, "id")).collect();
    both.sort();
    assert_eq!(both, [("crawl".to_string(), "a".to_string()), ("more".to_string(), "a".to_string())]);
}

#[test]
fn degenerate_texts_are_documents_without_terms() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("odd.parquet");
    let values: Vec<Option<&str>> = vec![None, Some(""), Some("   \t\n  "), Some("😀😀🎉🎉"), Some("，。！？……"), Some("北京今天有雨，气温下降。")];
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true), Field::new("text", DataType::Utf8, true)]));
    let ids = StringArray::from(vec!["null", "empty", "blank", "emoji", "punct", "real"]);
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(StringArray::from(values))]).unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let out = dir.path().join("out");
    ok(&neardup(&["dedup", "-q", "-i", file.to_str().unwrap(), "-o", out.to_str().unwrap()]));
    let s = summary(&out);
    assert_eq!((s["documents"].as_u64(), s["documents_without_terms"].as_u64()), (Some(6), Some(5)));
    // Documents without terms have no fingerprint and are nobody's duplicate.
    assert_eq!(s["duplicates"], 0);
    let batches = read_dir(&out.join("fingerprints"));
    let hashes = u64s(&batches, "simhash");
    assert_eq!(hashes.iter().filter(|h| h.is_none()).count(), 5);
}

#[test]
fn one_fifty_megabyte_document_is_fingerprinted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.parquet");
    let sentence = "北京市今天发布暴雨蓝色预警，预计午后到夜间有中到大雨。";
    let big = sentence.repeat(50 * 1024 * 1024 / sentence.len() + 1);
    assert!(big.len() >= 50 * 1024 * 1024);
    write(&file, vec!["big", "small", "copy"], texts(&[&big, sentence, sentence]));
    let out = dir.path().join("out");
    ok(&neardup(&["dedup", "-q", "-i", file.to_str().unwrap(), "-o", out.to_str().unwrap()]));
    let s = summary(&out);
    assert_eq!((s["documents"].as_u64(), s["documents_without_terms"].as_u64()), (Some(3), Some(0)));
    // The big document repeats one sentence: its terms are the sentence's,
    // so it is a near duplicate of the sentence alone.
    assert_eq!(s["duplicates"], 2, "{s}");
}

#[test]
fn outputs_that_cannot_be_written_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample("news.parquet");
    // A file where a folder of the output path should be.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let out = blocker.join("out");
    fails_with(&neardup(&["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap()]), &["file/out"]);
    fails_with(&neardup(&["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap(), "--dry-run"]), &["file/out"]);
    // An output that exists and is a file.
    fails_with(&neardup(&["dedup", "-q", "-i", &input, "-o", blocker.to_str().unwrap()]), &["exists and is not a folder"]);
    assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "x");
}

/// A full disk while spilling: exit code 1 (the run may succeed with more
/// space) and a message saying where spill files go; no output is left.
/// Needs a small tmpfs (root); skipped where mounting one is not allowed.
#[test]
fn a_full_disk_while_spilling_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = dir.path().join("tiny");
    std::fs::create_dir_all(&tiny).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs", tiny.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: cannot mount a small tmpfs here (needs root)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(tiny.clone());
    let fingerprints = dir.path().join("fp.parquet");
    ok(&neardup(&["sql", "-c", &format!(
        "COPY (SELECT CAST(value AS VARCHAR) AS id, hash64(CAST(value AS VARCHAR)) AS simhash FROM generate_series(1, 1000000)) \
         TO '{}' STORED AS PARQUET",
        fingerprints.display()
    )]));
    let out = dir.path().join("out");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["pairs", "-q", "-f", fingerprints.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["--candidates", "simhash", "--verify", "none", "--memory-limit", "30M"])
        .env("TMPDIR", &tiny)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("disk is full") && err.contains(tiny.to_str().unwrap()) && err.contains("TMPDIR"), "{err}");
    nothing_left(dir.path(), &out);
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let news = sample("news.parquet");

    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-o", o, "--text-col", "body"]), 2, &["no column 'body'", "--text-col", "id, text, date"]);
    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-o", o, "--id-col", "nope"]), 2, &["no column 'nope'"]);
    exits_with(&neardup(&["dedup", "-q", "-i", "/no/such/file.parquet", "-o", o]), 2, &["/no/such/file.parquet", "does not exist"]);
    exits_with(&neardup(&["dedup", "-q", "-i", &format!("{}/*.nothing", dir.path().display()), "-o", o]), 2, &["no Parquet files"]);
    let fake = dir.path().join("fake.parquet");
    std::fs::write(&fake, "id,text\n1,hello\n").unwrap();
    exits_with(&neardup(&["dedup", "-q", "-i", fake.to_str().unwrap(), "-o", o]), 2, &["fake.parquet", "not a Parquet file"]);
    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-o", o, "--tokenizer", "exact"]), 2, &["unknown tokenizer 'exact'"]);
    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-o", o, "-k", "40"]), 2, &["too large"]);
    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-o", o, "--user-dict", "/no/dict.txt"]), 2, &["/no/dict.txt"]);
    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-o", o, "--keep", "earliest:when"]), 2, &["no input has the column 'when'"]);
    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-i", &news, "-o", o]), 2, &["both named 'news'"]);
    // A glob that picks up a non-Parquet file among Parquet ones: the bad
    // one is named, whatever order the glob lists them in.
    let good = dir.path().join("good");
    std::fs::create_dir_all(&good).unwrap();
    std::fs::copy(&news, good.join("news.parquet")).unwrap();
    exits_with(&neardup(&["dedup", "-q", "-i", &format!("{}/**/*.parquet", dir.path().display()), "-o", o]), 2, &["fake.parquet", "not a Parquet file"]);
    assert!(!out.exists(), "a failed run leaves no output");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(leftovers.iter().all(|n| !n.to_string_lossy().contains("staging")), "{leftovers:?}");

    // An existing output is not overwritten without --overwrite.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "precious").unwrap();
    exits_with(&neardup(&["dedup", "-q", "-i", &news, "-o", o]), 2, &["already exists", "--overwrite"]);
    assert_eq!(std::fs::read_to_string(out.join("keep.txt")).unwrap(), "precious");

    let job = dir.path().join("bad.toml");
    std::fs::write(&job, "output = \"x\"\n[[input]]\nname = \"a\"\nurl = \"a.parquet\"\n[join]\nmax_haming = 2\n").unwrap();
    exits_with(&neardup(&["run", job.to_str().unwrap()]), 2, &["max_haming", "line 6"]);
    exits_with(&neardup(&["dedup", "--bogus"]), 2, &["--bogus"]);
}

#[test]
fn non_text_column_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("out");
    let made = dir.path().join("nums.parquet");
    ok(&neardup(&["sql", "-c", &format!("COPY (SELECT 1 AS id, 42 AS text) TO '{}' STORED AS PARQUET", made.display())]));
    exits_with(&neardup(&["dedup", "-q", "-i", made.to_str().unwrap(), "-o", o.to_str().unwrap()]), 2, &["column 'text'", "must be text"]);
}

/// A Parquet file of the named columns.
fn write_columns(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let fields: Vec<Field> = columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns.into_iter().map(|(_, a)| a).collect()).unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn ids(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

const NEWS: [&str; 3] = ["北京今天有雨，气温明显下降，市民出行请带好雨具。", "上海明天天晴，适合出行，外滩游客众多。", "广州连日高温，电力部门提醒节约用电。"];

/// The crawl of one night: a good file, then one whose text column a new
/// crawler version renamed, then one whose text column holds numbers.
fn drifted_crawl(dir: &Path) -> std::path::PathBuf {
    let crawl = dir.join("crawl");
    write_columns(&crawl.join("a.parquet"), vec![("id", ids(&["a1", "a2", "a3"])), ("text", texts(&NEWS))]);
    write_columns(&crawl.join("b.parquet"), vec![("id", ids(&["b1", "b2", "b3"])), ("body", texts(&NEWS))]);
    let numbers: ArrayRef = Arc::new(datafusion::arrow::array::Int64Array::from(vec![1, 1, 1]));
    write_columns(&crawl.join("c.parquet"), vec![("id", ids(&["c1", "c2", "c3"])), ("text", numbers)]);
    crawl
}

#[test]
fn drifted_files_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let crawl = drifted_crawl(dir.path());
    let out = dir.path().join("out");
    let input = format!("crawl={}", crawl.display());
    let run = |extra: &[&str]| neardup(&[&["dedup", "-q", "-i", &input, "-o", out.to_str().unwrap()], extra].concat());
    // The renamed column, named with the file, the columns it has and what to do.
    exits_with(&run(&[]), 2, &["input 'crawl'", "b.parquet", "no column 'text'", "id, body", "--text-col", "--on-bad-file skip"]);
    nothing_left(dir.path(), &out);
    std::fs::remove_file(crawl.join("b.parquet")).unwrap();
    // The retyped column, with the type found.
    exits_with(&run(&[]), 2, &["c.parquet", "column 'text' holds Int64", "must be text"]);
    nothing_left(dir.path(), &out);
    // Ids that are text in one file and floats in another cannot be one column.
    let floats: ArrayRef = Arc::new(datafusion::arrow::array::Float64Array::from(vec![1.5, 2.5, 3.5]));
    std::fs::remove_file(crawl.join("c.parquet")).unwrap();
    write_columns(&crawl.join("d.parquet"), vec![("id", floats), ("text", texts(&NEWS))]);
    exits_with(&run(&[]), 2, &["d.parquet", "column 'id' holds Float64", "ids must be text or integers"]);
}

#[test]
fn bad_files_are_skipped_named_and_exit_3_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let crawl = drifted_crawl(dir.path());
    // A file whose data pages are damaged (found only when read) and one
    // that is not Parquet at all.
    let good = std::fs::read(crawl.join("a.parquet")).unwrap();
    let mut pages = good.clone();
    for b in &mut pages[8..40] {
        *b ^= 0x5A;
    }
    std::fs::write(crawl.join("e-pages.parquet"), &pages).unwrap();
    std::fs::write(crawl.join("f-fake.parquet"), "id,text\n1,hello\n").unwrap();
    let out = dir.path().join("out");
    let input = format!("crawl={}", crawl.display());
    let o = neardup(&["dedup", "-q", "--log-format", "json", "-i", &input, "-o", out.to_str().unwrap(), "--on-bad-file", "skip"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let s = summary(&out);
    assert_eq!(s["documents"].as_u64(), Some(3), "only a.parquet's documents: {s}");
    let skipped: Vec<(String, String)> = s["skipped_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["file"].as_str().unwrap().rsplit('/').next().unwrap().to_string(), f["reason"].as_str().unwrap().to_string()))
        .collect();
    let names: Vec<&str> = skipped.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(names, ["b.parquet", "c.parquet", "e-pages.parquet", "f-fake.parquet"], "{skipped:?}");
    assert!(skipped[0].1.contains("no column 'text'") && skipped[1].1.contains("holds Int64"), "{skipped:?}");
    assert!(skipped[2].1.contains("cannot be read") && skipped[3].1.contains("not a Parquet file"), "{skipped:?}");
    // Each skipped file is a JSON log line of its own, even with -q.
    let lines: Vec<serde_json::Value> = stderr(&o).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let logged: Vec<&str> = lines.iter().filter(|l| l["event"] == "skipped_file").map(|l| l["file"].as_str().unwrap()).collect();
    assert!(logged.iter().any(|f| f.ends_with("b.parquet")) && logged.iter().any(|f| f.ends_with("e-pages.parquet")), "{lines:?}");
    // The committed output is whole: its documents are a.parquet's.
    assert_eq!(strings(&read_dir(&out.join("fingerprints")), "id").into_iter().collect::<std::collections::BTreeSet<_>>().len(), 3);
    // With every file of an input unusable, nothing is left to run: exit 2.
    let only_bad = dir.path().join("only-bad");
    std::fs::create_dir_all(&only_bad).unwrap();
    std::fs::copy(crawl.join("b.parquet"), only_bad.join("b.parquet")).unwrap();
    let none = neardup(&["dedup", "-q", "-i", only_bad.to_str().unwrap(), "-o", dir.path().join("none").to_str().unwrap(), "--on-bad-file", "skip"]);
    exits_with(&none, 2, &["none of its 1 file(s) can be used", "no column 'text'"]);
}

#[test]
fn text_in_every_encoding_is_read_as_text() {
    use datafusion::arrow::array::{DictionaryArray, LargeStringArray, StringViewArray};
    use datafusion::arrow::datatypes::Int32Type;
    let dir = tempfile::tempdir().unwrap();
    let encodings: Vec<(&str, ArrayRef)> = vec![
        ("plain", texts(&NEWS)),
        ("dictionary", Arc::new(NEWS.iter().copied().collect::<DictionaryArray<Int32Type>>())),
        ("large", Arc::new(LargeStringArray::from(NEWS.to_vec()))),
        ("view", Arc::new(StringViewArray::from(NEWS.to_vec()))),
    ];
    let mut simhashes = Vec::new();
    for (name, text) in encodings {
        // Two files of one input: the plain one, and the encoded one.
        let folder = dir.path().join(name);
        write_columns(&folder.join("a.parquet"), vec![("id", ids(&["a1", "a2", "a3"])), ("text", texts(&NEWS))]);
        write_columns(&folder.join("b.parquet"), vec![("id", ids(&["b1", "b2", "b3"])), ("text", text)]);
        let out = dir.path().join(format!("out-{name}"));
        ok(&neardup(&["dedup", "-q", "-i", folder.to_str().unwrap(), "-o", out.to_str().unwrap()]));
        let s = summary(&out);
        assert_eq!((s["documents"].as_u64(), s["documents_without_terms"].as_u64(), s["pairs"].as_u64()), (Some(6), Some(0), Some(3)), "{name}: {s}");
        simhashes.push(u64s(&read_dir(&out.join("fingerprints")), "simhash"));
    }
    assert!(simhashes.windows(2).all(|w| w[0] == w[1]), "every encoding gives the plain text's fingerprints");
}

#[test]
fn hive_partition_columns_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let crawl = dir.path().join("crawl");
    // The same three articles crawled on two days, under other ids.
    write_columns(&crawl.join("date=2026-11-21/part-0.parquet"), vec![("id", ids(&["a1", "a2", "a3"])), ("text", texts(&NEWS))]);
    write_columns(&crawl.join("date=2026-11-22/part-0.parquet"), vec![("id", ids(&["b1", "b2", "b3"])), ("text", texts(&NEWS))]);
    for (keep, kept) in [("earliest:date", 'a'), ("latest:date", 'b')] {
        let out = dir.path().join(keep.replace(':', "-"));
        ok(&neardup(&["dedup", "-q", "-i", crawl.to_str().unwrap(), "-o", out.to_str().unwrap(), "--keep", keep, "--survivors"]));
        let survivors = read_dir(&out.join("survivors/crawl"));
        let (ids, dates) = (strings(&survivors, "id"), strings(&survivors, "date"));
        assert!(ids.len() == 3 && ids.iter().all(|i| i.starts_with(kept)), "{keep}: {ids:?}");
        let day = if kept == 'a' { "2026-11-21" } else { "2026-11-22" };
        assert!(dates.iter().all(|d| d == day), "{keep}: the partition column is a column of the rows: {dates:?}");
    }
}
