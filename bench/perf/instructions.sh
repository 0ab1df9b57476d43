#!/usr/bin/env bash
# Instructions, counted exactly, of neardup's segmentation beside raw
# jieba-rs `tag` on the same texts: valgrind's callgrind over the first DOCS
# non-null texts of a corpus, one thread each.
#
#   bash bench/perf/instructions.sh FILE.parquet [DOCS] [COLUMN]
#   bash bench/perf/instructions.sh ../shared/data/heybox_articles.parquet 1500
#
# Wall-clock times on a shared machine of two cores vary by up to 2x from
# hour to hour; instruction counts vary by 0.03 %. They say whether a change
# to the per-document work (normalisation, term statistics, the shingle
# sketch, the Arrow columns) did less of it, which timings of runs of a few
# seconds cannot. They do not weigh cache misses or branch mispredictions:
# confirm a gain with the timed benchmarks (bench/perf/run.py).
#
# Prints, in instructions: jieba-rs `tag` alone (examples/jieba_baseline.rs);
# `text_features` of sql/20_terms.sql over the same texts, less the building
# of its analyzer (the dictionary load, once per process), and what in it is
# jieba-rs (`cut`, and `tag` of the words it learns), normalisation, the term
# statistics beside it, and the sketch.
# Needs valgrind (Debian's valgrind) and a release build (made if needed).
set -euo pipefail
cd "$(dirname "$0")/../.."
file="$1"
docs="${2:-1500}"
column="${3:-text}"
cargo build -q --release --bin neardup --example jieba_baseline >&2
bin="${CARGO_TARGET_DIR:-target}/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

JIEBA_BASELINE_WARMUP=0 valgrind --tool=callgrind --callgrind-out-file="$work/jieba.cg" -q \
  "$bin/examples/jieba_baseline" "$file" "$column" "$docs" > "$work/jieba.json"
# One partition: the scan, and so the LIMIT, keep the file's order.
valgrind --tool=callgrind --callgrind-out-file="$work/neardup.cg" -q \
  "$bin/neardup" sql -t "w=$file" -c "SET datafusion.execution.target_partitions = 1;
    SET datafusion.execution.batch_size = 256;
    SELECT sum(list_length(f['terms'])) FROM (
      SELECT text_features(\"$column\", NULL, 'precise', '', true) AS f
      FROM (SELECT \"$column\" FROM w WHERE \"$column\" IS NOT NULL LIMIT $docs))" --format csv > /dev/null

for run in jieba neardup; do
  callgrind_annotate --inclusive=yes "$work/$run.cg" > "$work/$run.txt"
done
python3 - "$work" <<'PY'
import json, re, sys
work = sys.argv[1]

def inclusive(run):
    counts = {}
    for line in open(f"{work}/{run}.txt"):
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S*?:(.*?) \[", line)
        if m:
            counts.setdefault(m.group(2), int(m.group(1).replace(",", "")))
    return lambda name: counts.get(name, 0)

jieba, neardup = inclusive("jieba"), inclusive("neardup")
meta = json.load(open(f"{work}/jieba.json"))
tag = jieba("jieba_rs::Jieba::tag")
analyze = neardup("neardup::udf::term_stats::analyze") - neardup("neardup::udf::args::TextSettings::from_args")
# Segmentation cuts with `cut` and tags only the words it has not learned
# (src/text/learned_tags.rs): both are jieba-rs's share.
inside = neardup("jieba_rs::Jieba::tag") + neardup("jieba_rs::Jieba::cut")
# The statement counts a document's words with `DocStats::of_words`, which
# learns the tags of new words (`tag`) on the way; its cut is apart.
stats = neardup("neardup::text::stats::DocStats::of_words")
rows = [
    ("jieba-rs tag, alone", tag),
    ("text_features, less its analyzer's building", analyze),
    ("  of which jieba-rs cut and tag", inside),
    ("  term statistics beside them", stats - neardup("jieba_rs::Jieba::tag")),
    ("  normalisation", neardup("neardup::text::normalize::normalize_at_most")),
    ("  shingle sketch", neardup("neardup::text::shingles::Sketcher::sketch")),
]
print(f"{meta['documents']} documents, {meta['bytes']:,} bytes of {meta['file']}")
for name, n in rows:
    print(f"{name:<46} {n:>16,}  {n / meta['documents']:>10,.0f} per document")
print(f"text_features / tag: {analyze / tag:.3f}")
PY
