"""Evaluate neardup's settings on the labelled benchmark, in one table.

For every slice (long_zh, short_zh, en), weighting and tokenizer, fingerprint
the documents once (`neardup dedup`), then join them at every distance k
(`neardup pairs`, which reuses the fingerprints) and score each result with
`neardup eval`. Writes OUT/results.json and OUT/results.md.

    python bench/quality/run.py --bench target/quality --out target/quality-results \
        [--neardup target/debug/neardup] [--k 0,1,2,3,4,5,6,8,10] \
        [--weightings none,tf,tfidf,improved] [--tokenizers precise,full,search,char-2]

Build the benchmark first with bench/quality/make_benchmark.py.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

SLICES = ["long_zh", "short_zh", "en"]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"run.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--bench", required=True, help="folder written by make_benchmark.py")
    parser.add_argument("--out", required=True)
    parser.add_argument("--neardup", default=os.path.join(here, "../../target/debug/neardup"))
    parser.add_argument("--k", default="0,1,2,3,4,5,6,8,10")
    parser.add_argument("--weightings", default="none,tf,tfidf,improved")
    parser.add_argument("--tokenizers", default="precise,full,search,char-2")
    parser.add_argument("--slices", default=",".join(SLICES))
    args = parser.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    work = os.path.join(args.out, "runs")
    os.makedirs(work, exist_ok=True)
    results = []
    for slice_ in args.slices.split(","):
        docs = os.path.join(args.bench, slice_, "documents.parquet")
        truth = os.path.join(args.bench, slice_, "truth.parquet")
        for weighting in args.weightings.split(","):
            for tokenizer in args.tokenizers.split(","):
                base = os.path.join(work, f"{slice_}-{weighting}-{tokenizer}")
                run([args.neardup, "dedup", "-q", "--overwrite", "-i", f"{slice_}={docs}", "-o", base,
                     "--weighting", weighting, "--tokenizer", tokenizer, "-k", "0"])
                for k in ks:
                    out = f"{base}-k{k}"
                    run([args.neardup, "pairs", "-q", "--overwrite", "--fingerprints", f"{slice_}={base}/fingerprints",
                         "-o", out, "-k", str(k)])
                    report = json.loads(run([args.neardup, "eval", "--truth", truth, "--predicted", out,
                                             "--documents", f"{base}/fingerprints", "--json"]))
                    row = {"slice": slice_, "weighting": weighting, "tokenizer": tokenizer, "k": k,
                           "pairs": report["pairs"], "clusters": report["clusters"],
                           "ari": report["adjusted_rand_index"], "slices": report["slices"]}
                    results.append(row)
                    print(f"{slice_:8} {weighting:8} {tokenizer:8} k={k:<2} pairs P={row['pairs']['precision']:.3f} "
                          f"R={row['pairs']['recall']:.3f} F1={row['pairs']['f1']:.3f}", flush=True)
                    shutil.rmtree(out)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("| slice | weighting | tokenizer | k | precision | recall | F1 | cluster F1 | ARI |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in results:
            f.write(f"| {r['slice']} | {r['weighting']} | {r['tokenizer']} | {r['k']} | {r['pairs']['precision']:.3f} | "
                    f"{r['pairs']['recall']:.3f} | {r['pairs']['f1']:.3f} | {r['clusters']['f1']:.3f} | {r['ari']:.3f} |\n")
    print(f"wrote {args.out}/results.md and results.json")


if __name__ == "__main__":
    main()
