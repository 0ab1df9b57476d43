"""One run over every slice of the benchmark: do the defaults fit each kind of text?

A nightly job over a mixed crawl cannot choose settings per document kind. This
runs `neardup dedup` once over the four slices of a benchmark built by
make_benchmark.py (long Chinese articles, news paragraphs, short posts and
English articles, each an input named after its slice), with the defaults or
the flags given, and scores the one output per slice, as `neardup eval` scores
a slice run alone:

  pairs     precision = reported pairs whose documents the slice's truth groups
            together / reported pairs with a document of the slice; recall =
            truth pairs whose documents the run groups together / truth pairs
  clusters  precision and recall over the document pairs that share a group

and counts reported pairs across slices (documents of two kinds paired).

    python bench/quality/mixed_run.py --bench B --neardup target/release/neardup \\
        [--out OUT] [--json] [-- extra dedup flags]

Prints a Markdown table (or JSON with --json); OUT keeps the run's output.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

import pyarrow.parquet as pq

SLICES = ["long_zh", "news_zh", "short_zh", "en"]


class Groups:
    """Union-find over documents `(source, id)`."""

    def __init__(self):
        self.parent = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)

    def label(self, x):
        return self.find(x) if x in self.parent else None


def pairs_of(table):
    t = table.to_pydict()
    return [((sa, ia), (sb, ib)) for sa, ia, sb, ib in zip(t["source_a"], t["id_a"], t["source_b"], t["id_b"])]


def same_group_pairs(groups):
    members = defaultdict(list)
    for x in list(groups.parent):
        members[groups.find(x)].append(x)
    return {p for m in members.values() for p in itertools.combinations(sorted(m), 2)}


def ratio(a, b):
    return a / b if b else 1.0


def score(out, bench):
    clusters = pq.read_table(os.path.join(out, "clusters")).to_pydict()
    predicted = Groups()
    by_cluster = defaultdict(list)
    for s, i, c in zip(clusters["source"], clusters["id"], clusters["cluster_id"]):
        by_cluster[c].append((s, i))
    for members in by_cluster.values():
        for m in members[1:]:
            predicted.union(members[0], m)
    reported = pairs_of(pq.read_table(os.path.join(out, "pairs")))
    for a, b in reported:
        predicted.union(a, b)
    predicted_pairs = same_group_pairs(predicted)
    rows = {}
    for name in SLICES:
        truth_pairs = pairs_of(pq.read_table(os.path.join(bench, name, "truth.parquet")))
        truth = Groups()
        for a, b in truth_pairs:
            truth.union(a, b)
        mine = [(a, b) for a, b in reported if name in (a[0], b[0])]
        right = sum(1 for a, b in mine if truth.label(a) is not None and truth.label(a) == truth.label(b))
        found = sum(1 for a, b in truth_pairs if predicted.label(a) is not None and predicted.label(a) == predicted.label(b))
        truth_same = same_group_pairs(truth)
        predicted_same = {p for p in predicted_pairs if name in (p[0][0], p[1][0])}
        both = len(truth_same & predicted_same)
        rows[name] = {
            "truth_pairs": len(truth_pairs), "reported_pairs": len(mine),
            "pair_precision": ratio(right, len(mine)), "pair_recall": ratio(found, len(truth_pairs)),
            "cluster_precision": ratio(both, len(predicted_same)), "cluster_recall": ratio(both, len(truth_same)),
        }
    across = sum(1 for a, b in reported if a[0] != b[0])
    return rows, across


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", required=True, help="folder written by make_benchmark.py")
    parser.add_argument("--neardup", required=True, help="the neardup binary")
    parser.add_argument("--out", help="where the run's output goes [a temporary folder]")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("flags", nargs="*", help="extra flags for neardup dedup (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "out")
        cmd = [args.neardup, "dedup", "-q", "--overwrite", "-o", out]
        for name in SLICES:
            cmd += ["-i", f"{name}={os.path.join(args.bench, name, 'documents.parquet')}"]
        run = subprocess.run(cmd + args.flags, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"mixed_run.py: neardup failed ({run.returncode}):\n{run.stderr}")
        rows, across = score(out, args.bench)
    if args.json:
        print(json.dumps({"slices": rows, "pairs_across_slices": across, "flags": args.flags}, indent=1))
        return
    print("| slice | truth pairs | reported | pair precision | pair recall | cluster precision | cluster recall |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['truth_pairs']} | {r['reported_pairs']} | {r['pair_precision']:.4f} | {r['pair_recall']:.4f} "
              f"| {r['cluster_precision']:.4f} | {r['cluster_recall']:.4f} |")
    print(f"\nReported pairs across slices: {across}")


if __name__ == "__main__":
    main()
