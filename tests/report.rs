//! report.html: written with every run that finds pairs, drawn again by
//! `neardup report` to the same bytes, safe with hostile text, and checked in
//! a real browser (headless Chromium) where one is installed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::{neardup, ok, sample, summary, Bucket};
use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};

fn sample_run(dir: &Path) -> PathBuf {
    let out = dir.join("out");
    let news = format!("news={}", sample("news.parquet"));
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    ok(&neardup(&["dedup", "-q", "-i", &news, "-i", &reprints, "-o", out.to_str().unwrap()]));
    out
}

fn attribute(page: &str, name: &str) -> u64 {
    let at = page.find(&format!("{name}=\"")).unwrap_or_else(|| panic!("no {name}"));
    let rest = &page[at + name.len() + 2..];
    rest[..rest.find('"').unwrap()].parse().unwrap()
}

#[test]
fn every_dedup_writes_a_report_that_matches_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = sample_run(dir.path());
    let page = std::fs::read_to_string(out.join("report.html")).expect("report.html is committed with the output");
    let s = summary(&out);
    assert!(page.len() < 5 << 20, "{} bytes", page.len());
    assert_eq!(attribute(&page, "data-clusters"), s["clusters"].as_u64().unwrap());
    assert_eq!(attribute(&page, "data-pairs"), s["pairs"].as_u64().unwrap());
    for chart in ["timings", "hamming", "similarity", "shared", "sizes"] {
        assert!(page.contains(&format!("data-chart=\"{chart}\"><svg")), "chart {chart}");
    }
    assert!(page.contains("data-chart=\"matrix\""), "two inputs: a source × source matrix");
    assert!(page.contains("pairs below 70 % were not kept"), "the duplication policy is drawn");
    assert!(page.contains("% of its text is in the partner"), "members show their shares of shared text");
    // 65 clusters: the 8 largest and 8 more at random, each with its representative marked.
    assert_eq!(page.matches("<details class=\"cluster\"").count(), 16);
    assert!(page.matches("class=\"doc representative\"").count() >= 16);
    assert!(page.contains("<ins>") || page.contains("<del>"), "differences are marked");
    assert!(page.contains("joined through"), "members say why they joined");
    assert!(s["timings_ms"]["report"].is_u64(), "the report's time is in the summary");
    let near = &s["near_misses"];
    assert_eq!(near["measure"], "jaccard");
    assert_eq!(near["counts"].as_array().unwrap().len(), 51);
}

#[test]
fn the_report_is_drawn_again_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let out = sample_run(dir.path());
    let again = dir.path().join("again.html");
    let o = neardup(&["report", out.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    ok(&o);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(out.join("report.html")).unwrap());
    // An output that is not one is refused by name.
    let o = neardup(&["report", dir.path().to_str().unwrap(), "-o", again.to_str().unwrap()]);
    common::exits_with(&o, 2, &["not a neardup output"]);
}

#[test]
fn members_texts_are_those_of_the_inputs_whether_held_in_memory_or_read_again() {
    // An in-memory run reads the members' texts from the documents it held
    // for segmentation; with work files, from the inputs. The same texts.
    let dir = tempfile::tempdir().unwrap();
    let news = format!("news={}", sample("news.parquet"));
    let reprints = format!("reprints={}", sample("reprints.parquet"));
    let run = |name: &str, work: &str| {
        let out = dir.path().join(name);
        let args = ["dedup", "-i", &news, "-i", &reprints, "-o", out.to_str().unwrap(), "--work-tables", work];
        let o = Command::new(env!("CARGO_BIN_EXE_neardup")).args(args).env("NEARDUP_LOG", "debug").output().unwrap();
        ok(&o);
        let page = std::fs::read_to_string(out.join("report.html")).unwrap();
        // The clusters shown, from the first on: no timings, no output path.
        (common::stderr(&o), page[page.find("id=\"largest\"").expect("clusters are shown")..].to_string())
    };
    let ((memory_log, in_memory), (files_log, with_files)) = (run("memory", "memory"), run("files", "files"));
    assert!(memory_log.contains("FROM held_documents d JOIN report_members"), "{memory_log}");
    assert!(files_log.contains("FROM documents d JOIN report_members") && !files_log.contains("held_documents"), "{files_log}");
    assert!(in_memory.matches("class=\"text").count() >= 16, "texts are shown");
    assert_eq!(in_memory, with_files);
}

fn write_texts(path: &Path, texts: &[&str]) {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, false), Field::new("text", DataType::Utf8, false)]));
    let ids: Vec<String> = (1..=texts.len()).map(|i| i.to_string()).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from_iter_values(ids)), Arc::new(StringArray::from_iter_values(texts.iter().copied()))],
    )
    .unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

const HOSTILE: &str = "<script>document.title='pwned'</script><img src=x onerror=alert(1)> 今天上午，市政府召开新闻发布会，通报了全市经济运行情况和下一步工作安排。";

#[test]
fn hostile_text_is_shown_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("hostile.parquet");
    write_texts(&input, &[HOSTILE, HOSTILE, "另一篇完全不同的文章，讲的是春天的花和秋天的果实。"]);
    let out = dir.path().join("out");
    ok(&neardup(&["dedup", "-q", "-i", input.to_str().unwrap(), "-o", out.to_str().unwrap()]));
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(page.matches("<script").count(), 1, "only the page's own script");
    assert!(!page.contains("<img"), "no element from a document");
    assert!(page.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"));
    if let Some(browser) = chromium() {
        let dom = render_in(&browser, &out.join("report.html"), None).0;
        assert!(dom.contains("<title>neardup dedup"), "the title is the page's, not a document's:\n{}", &dom[..dom.len().min(400)]);
    }
}

/// Headless Chromium: NEARDUP_CHROMIUM, or `chromium` on the PATH.
fn chromium() -> Option<String> {
    let found = std::env::var("NEARDUP_CHROMIUM").ok().or_else(|| {
        ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|b| {
            Command::new("which").arg(b).output().ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        })
    });
    if found.is_none() {
        eprintln!("SKIPPED: no headless Chromium (install Debian's chromium, or set NEARDUP_CHROMIUM)");
    }
    found
}

/// The page's DOM after its script ran, and what the browser logged. With
/// `screenshot`, a PNG of the page at laptop width too.
fn render_in(browser: &str, page: &Path, screenshot: Option<(&Path, bool)>) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(browser);
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--window-size=1366,2600");
    match screenshot {
        Some((png, dark)) => {
            cmd.arg(format!("--screenshot={}", png.display()));
            if dark {
                cmd.arg("--force-dark-mode").arg("--blink-settings=preferredColorScheme=0");
            }
        }
        None => {
            cmd.arg("--dump-dom");
        }
    }
    let o = cmd.arg(format!("file://{}", page.display())).output().expect("run chromium");
    assert!(o.status.success(), "chromium failed: {}", String::from_utf8_lossy(&o.stderr));
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn the_sample_report_renders_in_a_real_browser() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = sample_run(dir.path());
    let page = out.join("report.html");
    let (dom, log) = render_in(&browser, &page, None);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "the console shows messages:\n{}", console.join("\n"));
    // The script ran (it counts the cluster cards) and the page holds what the summary says.
    assert!(dom.contains("data-ready=\"16\""), "the page's script did not run");
    let s = summary(&out);
    assert_eq!(attribute(&dom, "data-clusters"), s["clusters"].as_u64().unwrap());
    assert_eq!(dom.matches("<svg").count(), 5, "timings, distances, similarity, shared text and sizes");
    // Cargo's folder for integration tests' files (under the build's target directory).
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&shots).unwrap();
    eprintln!("screenshots in {}", shots.display());
    for (name, dark) in [("report-screenshot.png", false), ("report-screenshot-dark.png", true)] {
        let png = shots.join(name);
        render_in(&browser, &page, Some((&png, dark)));
        let bytes = std::fs::read(&png).expect("a screenshot");
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000, "{name}: {} bytes", bytes.len());
    }
}

#[test]
fn a_store_night_shows_the_nights_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let night = |id: &str, file: &str| {
        let input = format!("crawl={}", sample(file));
        let out = dir.path().join("reports").join(id);
        let o = neardup(&["dedup", "-q", "-i", &input, "--store", store.to_str().unwrap(), "--run-id", id, "-o", out.to_str().unwrap()]);
        ok(&o);
        out
    };
    night("2026-11-01", "news.parquet");
    let second = night("2026-11-02", "reprints.parquet");
    let page = std::fs::read_to_string(second.join("report.html")).unwrap();
    let s = summary(&second);
    let dups = s["store"]["duplicates_of_stored"].as_u64().unwrap();
    assert!(dups > 0, "the reprints copy stored news");
    assert!(page.contains("data-chart=\"nights\"><svg"), "the nights are drawn");
    let table = &page[page.find("<table class=\"nights\">").unwrap()..];
    assert_eq!(table.matches("<tr><td>run=").count(), 2, "both nights so far");
    assert!(table.contains(&format!("<tr><td>run=2026-11-02</td><td class=\"n\">{}</td><td class=\"n\">{dups}</td>", s["store"]["added"])));
    assert!(page.contains("stored by run '2026-11-01'"), "a stored representative is named by its run");
    // Drawn again while the store is as it was: the same bytes.
    let again = dir.path().join("again.html");
    ok(&neardup(&["report", second.to_str().unwrap(), "-o", again.to_str().unwrap()]));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), page);
}

#[test]
fn a_report_in_a_bucket_is_drawn_again_to_a_local_file() {
    let Some(s3) = common::s3::start_s3() else { return };
    s3.upload_sample();
    let args = ["dedup", "-q", "-i", "news=s3://archive/crawl/news.parquet", "-i", "reprints=s3://archive/crawl/reprints.parquet", "-o", "s3://archive/runs/report"];
    ok(&s3.neardup(&args));
    let objects = common::s3::list_objects(&s3, "runs/report/");
    assert!(objects.contains(&"runs/report/report.html".to_string()), "{objects:?}");
    let stored = common::s3::get_object(&s3, "runs/report/report.html");
    assert!(!stored.contains(&s3.secret_key) && !stored.contains(&s3.access_key), "no credential in the page");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("report.html");
    ok(&s3.neardup(&["report", "s3://archive/runs/report", "-o", local.to_str().unwrap()]));
    let drawn = std::fs::read_to_string(&local).unwrap();
    assert_eq!(drawn.trim_end(), stored.trim_end(), "the same page, texts read from the bucket's inputs");
    assert!(drawn.contains("<ins>") || drawn.contains("<del>"), "with texts");
}
