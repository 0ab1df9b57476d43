"""Evaluate neardup's settings on the labelled benchmark, in one table.

For every slice (long_zh, short_zh, en) and every fingerprint setting
(weighting, tokenizer, top-K), fingerprint the documents once
(`neardup dedup`), then find pairs with every candidate/verification setting
(`neardup pairs`, which reuses the fingerprints) and score each result with
`neardup eval`. Writes OUT/results.json, OUT/results.md and one chart per
slice (OUT/<slice>-pr-vs-k.svg: precision and recall against k for each
weighting).

    python bench/quality/run.py --bench target/quality --out target/quality-results \\
        [--neardup target/debug/neardup] [--k 0,1,2,3,4,5,6,7,8,9,10] [--slices long_zh,en]

Build the benchmark first with bench/quality/make_benchmark.py.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

SLICES = ["long_zh", "news_zh", "short_zh", "en"]

# Fingerprint settings: name -> dedup flags.
FINGERPRINTS = {
    "none": ["--weighting", "none"],
    "tf": ["--weighting", "tf"],
    "tfidf": ["--weighting", "tfidf"],
    "improved": ["--weighting", "improved"],
    "improved:pos": ["--weighting", "improved:pos"],
    "improved:length": ["--weighting", "improved:length"],
    "improved:signal": ["--weighting", "improved:signal"],
    "improved:title": ["--weighting", "improved:title"],
    "improved full": ["--weighting", "improved", "--tokenizer", "full"],
    "improved search": ["--weighting", "improved", "--tokenizer", "search"],
    "improved char-2": ["--weighting", "improved", "--tokenizer", "char-2"],
    "improved char-3": ["--weighting", "improved", "--tokenizer", "char-3"],
    "improved top-16": ["--weighting", "improved", "--top-k", "16"],
    "improved top-64": ["--weighting", "improved", "--top-k", "64"],
    "improved boilerplate-10": ["--weighting", "improved", "--boilerplate-lines", "10"],
    "improved char-3 boilerplate-10": ["--weighting", "improved", "--tokenizer", "char-3", "--boilerplate-lines", "10"],
}


def joins(fingerprint, ks):
    """The (name, k or None, pairs flags) settings evaluated on one fingerprint setting."""
    simhash_only = ["--candidates", "simhash", "--verify", "none"]
    out = [(f"simhash k={k}", k, simhash_only + ["-k", str(k)]) for k in ks]
    if fingerprint in ("improved", "improved full", "improved char-2", "improved char-3", "tf", "tfidf",
                       "improved boilerplate-10", "improved char-3 boilerplate-10"):
        simhash = ["--candidates", "simhash"]
        out += [(f"simhash k={k} + jaccard:0.5", None, simhash + ["-k", str(k), "--verify", "jaccard:0.5"]) for k in (6, 10, 12)]
        out += [("simhash k=10 + overlap:0.8", None, simhash + ["-k", "10", "--verify", "overlap:0.8"])]
        minhash = ["--candidates", "minhash"]
        out += [
            ("minhash 32x4 + jaccard:0.5", None, minhash + ["--minhash", "32x4", "--verify", "jaccard:0.5"]),
            ("minhash 42x3 + jaccard:0.5", None, minhash + ["--minhash", "42x3", "--verify", "jaccard:0.5"]),
            ("minhash 32x4 + overlap:0.8", None, minhash + ["--minhash", "32x4", "--verify", "overlap:0.8"]),
        ]
        both = ["--candidates", "simhash+minhash", "-k", "3"]
        out += [
            ("simhash k=3 + minhash 32x4 + jaccard:0.4", None, both + ["--minhash", "32x4", "--verify", "jaccard:0.4"]),
            ("simhash k=3 + minhash 32x4 + jaccard:0.6", None, both + ["--minhash", "32x4", "--verify", "jaccard:0.6"]),
            ("simhash k=3 + minhash 32x4 + overlap:0.8", None, both + ["--minhash", "32x4", "--verify", "overlap:0.8"]),
            ("simhash k=3 + minhash 42x3 + jaccard:0.5", None, both + ["--minhash", "42x3", "--verify", "jaccard:0.5"]),
            ("simhash k=3 + minhash 20x5 + jaccard:0.5", None, both + ["--minhash", "20x5", "--verify", "jaccard:0.5"]),
            ("simhash k=3 + minhash 32x4 + jaccard:0.5 (default)", None, []),
            # SimHash-cosine (paper 001 §2.3(2)): the same candidates, checked on SimHash vectors.
            ("simhash k=3 + minhash 32x4 + cosine:0.7", None, both + ["--minhash", "32x4", "--verify", "cosine:0.7"]),
            ("simhash k=3 + minhash 32x4 + cosine:0.8", None, both + ["--minhash", "32x4", "--verify", "cosine:0.8"]),
            ("simhash k=3 + minhash 32x4 + cosine:0.9", None, both + ["--minhash", "32x4", "--verify", "cosine:0.9"]),
            ("simhash k=3 + minhash 32x4 + cosine:0.95", None, both + ["--minhash", "32x4", "--verify", "cosine:0.95"]),
            ("simhash k=10 + cosine:0.9", None, simhash + ["-k", "10", "--verify", "cosine:0.9"]),
        ]
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"run.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def chart(path, title, series, ks):
    """A small SVG line chart: precision (solid) and recall (dashed) vs k, one colour per series."""
    w, h, left, top, right, bottom = 640, 360, 50, 30, 150, 40
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    x = lambda k: left + (k - min(ks)) / max(1, max(ks) - min(ks)) * (w - left - right)
    y = lambda v: top + (1 - v) * (h - top - bottom)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{left}" y="18" font-size="14">{title}</text>']
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{w - right}" y2="{y(v):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for k in ks:
        parts.append(f'<text x="{x(k):.1f}" y="{h - bottom + 16}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{(w - right + left) / 2}" y="{h - 6}" text-anchor="middle">max Hamming distance k</text>')
    for i, (name, points) in enumerate(series.items()):
        c = colours[i % len(colours)]
        for metric, dash in (("precision", ""), ("recall", ' stroke-dasharray="5,4"')):
            pts = " ".join(f"{x(k):.1f},{y(p[metric]):.1f}" for k, p in points)
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        ly = top + 18 * i
        parts.append(f'<line x1="{w - right + 10}" y1="{ly}" x2="{w - right + 30}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        parts.append(f'<text x="{w - right + 36}" y="{ly + 4}">{name}</text>')
    ly = top + 18 * len(series) + 10
    parts.append(f'<text x="{w - right + 10}" y="{ly}">solid: precision</text>')
    parts.append(f'<text x="{w - right + 10}" y="{ly + 16}">dashed: recall</text>')
    parts.append("</svg>\n")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--bench", required=True, help="folder written by make_benchmark.py")
    parser.add_argument("--out", required=True)
    parser.add_argument("--neardup", default=os.path.join(here, "../../target/debug/neardup"))
    parser.add_argument("--k", default="0,1,2,3,4,5,6,7,8,9,10")
    parser.add_argument("--fingerprints", default=",".join(FINGERPRINTS), help="fingerprint settings to run")
    parser.add_argument("--slices", default=",".join(SLICES))
    args = parser.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    work = os.path.join(args.out, "runs")
    os.makedirs(work, exist_ok=True)
    results = []
    for slice_ in args.slices.split(","):
        docs = os.path.join(args.bench, slice_, "documents.parquet")
        truth = os.path.join(args.bench, slice_, "truth.parquet")
        for fp_name in args.fingerprints.split(","):
            base = os.path.join(work, f"{slice_}-{fp_name.replace(' ', '-').replace(':', '-')}")
            # A cosine check keeps the SimHash vectors the grid's cosine rows compare.
            run([args.neardup, "dedup", "-q", "--overwrite", "-i", f"{slice_}={docs}", "-o", base, "-k", "0",
                 "--verify", "cosine:0.8"] + FINGERPRINTS[fp_name])
            for join_name, k, flags in joins(fp_name, ks):
                out = f"{base}-pairs"
                run([args.neardup, "pairs", "-q", "--overwrite", "--fingerprints", f"{slice_}={base}/fingerprints",
                     "-o", out] + flags)
                report = json.loads(run([args.neardup, "eval", "--truth", truth, "--predicted", out,
                                         "--documents", f"{base}/fingerprints", "--json"]))
                row = {"slice": slice_, "fingerprints": fp_name, "join": join_name,
                       "k": k,
                       "pairs": report["pairs"], "clusters": report["clusters"],
                       "ari": report["adjusted_rand_index"], "slices": report["slices"]}
                results.append(row)
                print(f"{slice_:8} {fp_name:16} {join_name:52} P={row['pairs']['precision']:.3f} "
                      f"R={row['pairs']['recall']:.3f} F1={row['pairs']['f1']:.3f}", flush=True)
                shutil.rmtree(out)
            shutil.rmtree(base)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("| slice | fingerprints | candidates and check | precision | recall | F1 | cluster F1 | ARI |\n")
        f.write("|---|---|---|---|---|---|---|---|\n")
        for r in results:
            f.write(f"| {r['slice']} | {r['fingerprints']} | {r['join']} | {r['pairs']['precision']:.3f} | "
                    f"{r['pairs']['recall']:.3f} | {r['pairs']['f1']:.3f} | {r['clusters']['f1']:.3f} | {r['ari']:.3f} |\n")
    for slice_ in args.slices.split(","):
        series = {}
        for weighting in ("none", "tf", "tfidf", "improved"):
            points = [(r["k"], r["pairs"]) for r in results
                      if r["slice"] == slice_ and r["fingerprints"] == weighting and r["k"] is not None]
            if points:
                series[weighting] = points
        if series:
            chart(os.path.join(args.out, f"{slice_}-pr-vs-k.svg"),
                  f"{slice_}: SimHash pairs, precision and recall vs k", series, ks)
    print(f"wrote {args.out}/results.md, results.json and charts")


if __name__ == "__main__":
    main()
