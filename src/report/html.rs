//! The page: one HTML file with its stylesheet, charts and script inline.

use std::fmt::Write;

use super::charts::{self, Bars, Series, BLUE, ORANGE};
use super::diff::{self, Words};
use super::{cut, escape, Cluster, Member, Report, MAX_TEXT_CHARS};

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// Draw the page. `words` splits texts into the words that differences are
/// marked by (see [`diff::Words`]); `None` uses Unicode word boundaries.
pub fn render(report: &Report, words: Option<Words<'_>>) -> Result<String, String> {
    let words = words.unwrap_or(&diff::unicode_words);
    let mut page = String::with_capacity(256 * 1024);
    head(&mut page, report);
    brief(&mut page, report)?;
    pairs(&mut page, report)?;
    clusters(&mut page, report)?;
    cluster_list(&mut page, "largest", "The largest clusters", &report.largest, words);
    cluster_list(&mut page, "sample", "A random sample of clusters", &report.sampled, words);
    nights(&mut page, report)?;
    notes(&mut page, report);
    let _ = write!(page, "</main>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n");
    Ok(page)
}

fn count(report: &Report, label: &str) -> u64 {
    report.counts.iter().find(|(l, _)| l == label).map_or(0, |(_, v)| *v)
}

fn head(page: &mut String, r: &Report) {
    let title = format!("neardup {} — {}", r.command, r.output);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n\
         <body data-clusters=\"{}\" data-pairs=\"{}\" data-documents=\"{}\">\n<header><h1>{}</h1>\
         <p class=\"sub\">neardup {} · <a href=\"#brief\">run</a> · <a href=\"#pairs\">pairs</a> · \
         <a href=\"#clusters\">clusters</a> · <a href=\"#largest\">largest</a> · <a href=\"#sample\">sample</a>{}</p></header>\n<main>\n",
        escape(&title),
        count(r, "clusters"),
        count(r, "pairs"),
        count(r, "documents"),
        escape(&title),
        escape(&r.version),
        if r.nights.is_empty() { "" } else { " · <a href=\"#nights\">nights</a>" },
    );
}

fn brief(page: &mut String, r: &Report) -> Result<(), String> {
    page.push_str("<section id=\"brief\"><h2>The run in brief</h2>\n<div class=\"counts\">");
    for (label, value) in &r.counts {
        let _ = write!(page, "<div class=\"count\" data-count=\"{}\"><b>{}</b><span>{}</span></div>", escape(label), group(*value), escape(label));
    }
    page.push_str("</div>\n<table class=\"inputs\"><thead><tr><th>input</th><th>location</th><th>documents</th><th>without terms</th></tr></thead><tbody>");
    for i in &r.inputs {
        let _ = write!(
            page,
            "<tr><td>{}</td><td class=\"url\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&i.name),
            escape(&i.url),
            group(i.documents),
            group(i.without_terms)
        );
    }
    page.push_str("</tbody></table>\n<details><summary>Settings</summary><table class=\"settings\">");
    for (k, v) in &r.settings {
        let _ = write!(page, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    }
    page.push_str("</table></details>\n");
    let labels: Vec<String> = r.timings.iter().map(|(s, _)| s.clone()).collect();
    let values: Vec<f64> = r.timings.iter().map(|(_, ms)| *ms as f64 / 1000.0).collect();
    let svg = charts::horizontal(&labels, &values, "seconds")?;
    figure(page, "timings", &svg, &format!("Stage timings: {:.2} s in all.", r.total_ms as f64 / 1000.0));
    page.push_str("</section>\n");
    Ok(())
}

fn figure(page: &mut String, name: &str, svg: &str, caption: &str) {
    let _ = write!(page, "<figure class=\"chart\" data-chart=\"{name}\">{svg}<figcaption>{caption}</figcaption></figure>\n");
}

fn pairs(page: &mut String, r: &Report) -> Result<(), String> {
    page.push_str("<section id=\"pairs\"><h2>Pairs</h2>\n");
    let k = r.max_hamming as usize;
    let labels: Vec<String> = (0..r.hamming.len().max(k + 1)).map(|d| d.to_string()).collect();
    let mut values: Vec<f64> = r.hamming.iter().map(|&c| c as f64).collect();
    values.resize(labels.len(), 0.0);
    let bars = Bars { labels: &labels, series: &[Series { color: BLUE, values: &values }], x_desc: "Hamming distance", y_desc: "pairs", log_y: false, marker: Some(k as f64 + 1.0), overlay: false };
    let caption = format!(
        "Pairs by the Hamming distance of their fingerprints. The red line closes the SimHash candidates' reach (k = {k}); pairs beyond it came from MinHash."
    );
    figure(page, "hamming", &bars.svg()?, &caption);
    if let Some(s) = &r.similarity {
        similarity(page, s)?;
    }
    if let Some(s) = &r.shared {
        shared(page, s)?;
    }
    page.push_str("</section>\n");
    Ok(())
}

fn similarity(page: &mut String, s: &super::Similarity) -> Result<(), String> {
    // From a little below the nearest near miss (or the threshold) to 1.
    let first = s.near_misses.iter().position(|&c| c > 0);
    let threshold_bin = (s.threshold / s.bin_width).round() as usize;
    let low = first.unwrap_or(threshold_bin).min(threshold_bin).saturating_sub(2);
    let bins = s.kept.len().max(s.near_misses.len());
    let labels: Vec<String> = (low..bins)
        .map(|i| if (i - low) % 5 == 0 { format!("{:.2}", i as f64 * s.bin_width) } else { String::new() })
        .collect();
    let pick = |v: &[u64]| (low..bins).map(|i| v.get(i).copied().unwrap_or(0) as f64).collect::<Vec<f64>>();
    let (kept, missed) = (pick(&s.kept), pick(&s.near_misses));
    let series = [Series { color: BLUE, values: &kept }, Series { color: ORANGE, values: &missed }];
    let bars = Bars { labels: &labels, series: &series, x_desc: &format!("{} similarity of the term sets", s.measure), y_desc: "pairs", log_y: false, marker: Some((threshold_bin - low) as f64), overlay: true };
    let sampled = match s.sample_stride {
        1 => String::new(),
        n => format!(" Near misses counted on one candidate in {n}, then scaled."),
    };
    let caption = format!(
        "<span class=\"key blue\"></span>kept pairs and <span class=\"key orange\"></span>near misses (candidates the check rejected) \
         by similarity, in bins of {:.2}; the red line is the threshold, {}. {} pair(s) of identical fingerprints need no check.{sampled}",
        s.bin_width,
        s.threshold,
        group(s.unchecked)
    );
    figure(page, "similarity", &bars.svg()?, &caption);
    Ok(())
}

fn shared(page: &mut String, s: &super::Shared) -> Result<(), String> {
    let labels: Vec<String> = (0..s.pairs_by_share.len()).map(|i| format!("{}", i * 10)).collect();
    let values: Vec<f64> = s.pairs_by_share.iter().map(|&c| c as f64).collect();
    let marker = s.min_shared.map(|m| m * s.pairs_by_share.len() as f64);
    let bars = Bars { labels: &labels, series: &[Series { color: BLUE, values: &values }], x_desc: "% of the shorter document's text found in the other", y_desc: "pairs", log_y: false, marker, overlay: false };
    let policy = match s.min_shared {
        Some(m) => format!("the red line is the duplication policy: pairs below {:.0} % were not kept.", m * 100.0),
        None => "the run had no duplication policy.".to_string(),
    };
    let unmeasured = match s.unmeasured {
        0 => String::new(),
        n => format!(" {} pair(s) could not be measured (a document stored without a sketch).", group(n)),
    };
    let caption = format!("Pairs by how much of the shorter document's text the other holds, verbatim, in bins of 10 % (each labelled by its lower bound); {policy}{unmeasured}");
    figure(page, "shared", &bars.svg()?, &caption);
    Ok(())
}

/// Cluster sizes in powers of two: 2, 3–4, 5–8, …
fn size_buckets(sizes: &[(u64, u64)]) -> (Vec<String>, Vec<f64>) {
    let (mut labels, mut values) = (Vec::new(), Vec::new());
    let max = sizes.iter().map(|(s, _)| *s).max().unwrap_or(2);
    let (mut low, mut high) = (2u64, 2u64);
    while low <= max {
        let n: u64 = sizes.iter().filter(|(s, _)| (low..=high).contains(s)).map(|(_, c)| c).sum();
        labels.push(if low == high { low.to_string() } else { format!("{low}–{high}") });
        values.push(n as f64);
        low = high + 1;
        high *= 2;
    }
    (labels, values)
}

fn clusters(page: &mut String, r: &Report) -> Result<(), String> {
    page.push_str("<section id=\"clusters\"><h2>Clusters</h2>\n");
    let (labels, values) = size_buckets(&r.cluster_sizes);
    let bars = Bars { labels: &labels, series: &[Series { color: BLUE, values: &values }], x_desc: "documents in the cluster", y_desc: "clusters", log_y: true, marker: None, overlay: false };
    figure(page, "sizes", &bars.svg()?, "Clusters by size, on a logarithmic scale.");
    if let Some(m) = &r.matrix {
        matrix(page, m);
    }
    page.push_str("</section>\n");
    Ok(())
}

fn matrix(page: &mut String, m: &super::SourceMatrix) {
    let max = m.counts.iter().flatten().copied().max().unwrap_or(0).max(1) as f64;
    page.push_str("<h3>Pairs between inputs</h3>\n<table class=\"matrix\" data-chart=\"matrix\"><thead><tr><th></th>");
    for s in &m.sources {
        let _ = write!(page, "<th>{}</th>", escape(s));
    }
    page.push_str("</tr></thead><tbody>");
    for (i, row) in m.counts.iter().enumerate() {
        let _ = write!(page, "<tr><th>{}</th>", escape(&m.sources[i]));
        for &c in row {
            let alpha = (c as f64 / max * 0.85).max(if c > 0 { 0.08 } else { 0.0 });
            let _ = write!(page, "<td class=\"n\" style=\"background: rgba(59,130,196,{alpha:.2})\">{}</td>", group(c));
        }
        page.push_str("</tr>");
    }
    page.push_str("</tbody></table>\n");
}

fn cluster_list(page: &mut String, id: &str, title: &str, clusters: &[Cluster], words: Words<'_>) {
    let _ = write!(page, "<section id=\"{id}\"><h2>{title}</h2>\n");
    if id == "largest" {
        page.push_str("<p class=\"filter\"><input type=\"search\" id=\"filter\" placeholder=\"Show clusters whose text or ids contain…\" aria-label=\"filter clusters\"></p>\n");
    }
    if clusters.is_empty() {
        page.push_str("<p class=\"empty\">No clusters.</p>\n");
    }
    for c in clusters {
        cluster(page, c, words);
    }
    page.push_str("</section>\n");
}

fn cluster(page: &mut String, c: &Cluster, words: Words<'_>) {
    let hidden = c.size.saturating_sub(c.members.len() as u64);
    let more = if hidden > 0 { format!(", {} more not shown", group(hidden)) } else { String::new() };
    let _ = write!(
        page,
        "<details class=\"cluster\" open data-size=\"{}\"><summary>Cluster {} · {} documents{more}</summary>\n<div class=\"members\">",
        c.size,
        escape(&c.label),
        group(c.size)
    );
    let rep_text = c.members.iter().find(|m| m.representative).and_then(|m| m.text.as_deref()).map(|t| cut(t, MAX_TEXT_CHARS).0);
    for m in &c.members {
        member(page, m, rep_text, words);
    }
    page.push_str("</div></details>\n");
}

fn member(page: &mut String, m: &Member, rep_text: Option<&str>, words: Words<'_>) {
    let role = if m.representative { "representative" } else { "member" };
    let _ = write!(page, "<article class=\"doc {role}\"><h4><span class=\"role\">{role}</span> {} / {}</h4>", escape(&m.source), escape(&m.id));
    let why = match (&m.link, m.representative) {
        (_, true) => "kept: the cluster's representative".to_string(),
        (Some(l), false) => {
            let sim = l.similarity.map_or("same fingerprint".to_string(), |s| format!("similarity {s:.3}"));
            let shared = match (l.shared, l.partner_shared) {
                (Some(own), Some(theirs)) => format!("; {:.0} % of its text is in the partner, {:.0} % of the partner's in it", own * 100.0, theirs * 100.0),
                _ => String::new(),
            };
            format!("joined through {}: distance {}, {sim}{shared}", escape(&l.partner), l.hamming)
        }
        (None, false) => "joined through other members".to_string(),
    };
    let _ = write!(page, "<p class=\"why\">{why}</p>");
    match (&m.text, rep_text) {
        (None, _) => {
            let place = m.stored_run.as_ref().map_or("<a href=\"#notes\">the notes</a> say why".to_string(), |r| format!("stored by run '{}'; the store keeps no texts", escape(r)));
            let _ = write!(page, "<p class=\"missing\">No text: {place}.</p>");
        }
        (Some(text), rep) => {
            let (shown, was_cut) = cut(text, MAX_TEXT_CHARS);
            let body = match rep {
                Some(rep) if !m.representative => {
                    let (html, share) = diff::against(rep, shown, words);
                    let _ = write!(page, "<p class=\"share\">{:.0} % of the representative's words kept</p>", share * 100.0);
                    html
                }
                _ => escape(shown),
            };
            let _ = write!(page, "<div class=\"text\">{body}</div>");
            if was_cut {
                let _ = write!(page, "<p class=\"cut\">Cut: the first {} of {} characters.</p>", group(MAX_TEXT_CHARS as u64), group(text.chars().count() as u64));
            }
        }
    }
    page.push_str("</article>");
}

fn nights(page: &mut String, r: &Report) -> Result<(), String> {
    if r.nights.is_empty() {
        return Ok(());
    }
    page.push_str("<section id=\"nights\"><h2>The store's nights</h2>\n");
    let labels: Vec<String> = r.nights.iter().map(|n| n.label.clone()).collect();
    let docs: Vec<f64> = r.nights.iter().map(|n| n.documents as f64).collect();
    let dups: Vec<f64> = r.nights.iter().map(|n| n.duplicates_of_stored.unwrap_or(0) as f64).collect();
    let series = [Series { color: BLUE, values: &docs }, Series { color: ORANGE, values: &dups }];
    let bars = Bars { labels: &labels, series: &series, x_desc: "night", y_desc: "documents", log_y: false, marker: None, overlay: false };
    figure(page, "nights", &bars.svg()?, "<span class=\"key blue\"></span>documents added and <span class=\"key orange\"></span>duplicates of stored documents, by night.");
    page.push_str("<table class=\"nights\"><thead><tr><th>night</th><th>added</th><th>duplicates of stored</th><th>store after it</th></tr></thead><tbody>");
    for n in &r.nights {
        let dups = n.duplicates_of_stored.map_or("–".to_string(), group);
        let _ = write!(page, "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{dups}</td><td class=\"n\">{}</td></tr>", escape(&n.label), group(n.documents), group(n.store_documents));
    }
    page.push_str("</tbody></table></section>\n");
    Ok(())
}

fn notes(page: &mut String, r: &Report) {
    if r.notes.is_empty() {
        return;
    }
    page.push_str("<section id=\"notes\"><h2>Notes</h2><ul>");
    for n in &r.notes {
        let _ = write!(page, "<li>{}</li>", escape(n));
    }
    page.push_str("</ul></section>\n");
}

/// 1234567 as "1,234,567".
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Link, Similarity};
    use super::*;

    fn member(id: &str, representative: bool, text: &str) -> Member {
        Member {
            source: "news".into(),
            id: id.into(),
            representative,
            text: Some(text.into()),
            stored_run: None,
            link: (!representative).then(|| Link { partner: "news/1".into(), hamming: 2, similarity: Some(0.8), shared: Some(0.9), partner_shared: Some(0.45) }),
        }
    }

    fn report() -> Report {
        Report {
            command: "dedup".into(),
            output: "out".into(),
            version: "0.1.0".into(),
            counts: vec![("documents".into(), 10), ("clusters".into(), 1), ("pairs".into(), 1)],
            timings: vec![("segment".into(), 1200), ("join".into(), 300)],
            total_ms: 1600,
            hamming: vec![0, 0, 1],
            max_hamming: 3,
            similarity: Some(Similarity { measure: "jaccard".into(), threshold: 0.5, bin_width: 0.02, kept: vec![0; 51], near_misses: vec![0; 51], sample_stride: 1, unchecked: 0 }),
            shared: Some(super::super::Shared { pairs_by_share: vec![0, 0, 0, 0, 0, 0, 1, 3, 5, 9], unmeasured: 0, min_shared: Some(0.7) }),
            cluster_sizes: vec![(2, 1)],
            largest: vec![Cluster { label: "7".into(), size: 2, members: vec![member("1", true, "a b c"), member("2", false, "a <script>x</script> c")] }],
            ..Default::default()
        }
    }

    #[test]
    fn the_page_has_every_chart_and_escapes_documents() {
        let page = render(&report(), None).unwrap();
        for chart in ["timings", "hamming", "similarity", "shared", "sizes"] {
            assert!(page.contains(&format!("data-chart=\"{chart}\"><svg")), "chart {chart}");
        }
        assert!(!page.contains("<script>x"), "document text is escaped");
        assert!(page.contains("&lt;script&gt;"));
        assert_eq!(page.matches("<script>").count(), 1, "the page's own script only");
        assert!(page.contains("data-clusters=\"1\""));
        assert!(page.contains("90 % of its text is in the partner, 45 % of the partner's in it"), "a member's shares of shared text");
        for load in ["src=", "href=\"http", "url(http", "@import"] {
            assert!(!page.contains(load), "nothing is loaded from the network: {load}");
        }
    }

    #[test]
    fn drawing_twice_gives_the_same_bytes() {
        assert_eq!(render(&report(), None).unwrap(), render(&report(), None).unwrap());
    }

    #[test]
    fn long_texts_are_cut_with_a_note() {
        let mut r = report();
        r.largest[0].members[0].text = Some("字".repeat(MAX_TEXT_CHARS + 10));
        let page = render(&r, None).unwrap();
        assert!(page.contains(&format!("Cut: the first 1,200 of {} characters.", group(MAX_TEXT_CHARS as u64 + 10))), "the cut is said");
        assert!(page.contains(&"字".repeat(MAX_TEXT_CHARS)) && !page.contains(&"字".repeat(MAX_TEXT_CHARS + 1)), "and done");
    }

    #[test]
    fn sizes_fall_in_powers_of_two() {
        let (labels, values) = size_buckets(&[(2, 5), (3, 2), (4, 1), (9, 1)]);
        assert_eq!(labels, ["2", "3–4", "5–8", "9–16"]);
        assert_eq!(values, [5.0, 3.0, 0.0, 1.0]);
        assert_eq!(group(1234567), "1,234,567");
    }
}
