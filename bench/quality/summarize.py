"""Print the tables of docs/quality.md from run.py's results.json.

    python bench/quality/summarize.py target/quality-results/results.json
"""
import json
import sys

DEFAULT = "simhash k=3 + minhash 32x4 + jaccard:0.5 (default)"
MAIN = [("none", "simhash k=3"), ("tf", "simhash k=3"), ("tfidf", "simhash k=3"), ("improved", "simhash k=3"),
        ("tf", "simhash k=6"), ("improved", "simhash k=6"), ("tf", "simhash k=10"), ("improved", "simhash k=10"),
        ("tf", "simhash k=10 + jaccard:0.5"), ("improved", "simhash k=10 + jaccard:0.5"),
        ("improved", "simhash k=10 + overlap:0.8"), ("improved", "simhash k=12 + jaccard:0.5"),
        ("improved", "minhash 32x4 + jaccard:0.5"), ("improved", "minhash 42x3 + jaccard:0.5"),
        ("improved", "minhash 32x4 + overlap:0.8"), ("improved full", "minhash 32x4 + jaccard:0.5"),
        ("improved char-3", "minhash 32x4 + jaccard:0.5"),
        ("improved", "simhash k=3 + minhash 32x4 + jaccard:0.4"), ("improved", "simhash k=3 + minhash 32x4 + jaccard:0.6"),
        ("improved", "simhash k=3 + minhash 32x4 + overlap:0.8"), ("improved", "simhash k=3 + minhash 42x3 + jaccard:0.5"),
        ("improved", "simhash k=3 + minhash 20x5 + jaccard:0.5"),
        ("improved boilerplate-10", "simhash k=3 + minhash 32x4 + overlap:0.8"),
        ("improved char-3 boilerplate-10", "simhash k=3 + minhash 32x4 + overlap:0.8"),
        ("improved boilerplate-10", "simhash k=10 + jaccard:0.5"),
        ("improved char-3 boilerplate-10", DEFAULT), ("improved boilerplate-10", DEFAULT),
        ("tf", DEFAULT), ("improved full", DEFAULT), ("improved char-3", DEFAULT), ("improved", DEFAULT)]
SIMHASH = ["none", "tf", "tfidf", "improved:pos", "improved:length", "improved:signal", "improved:title", "improved",
           "improved full", "improved search", "improved char-2", "improved char-3", "improved top-16", "improved top-64",
           "improved boilerplate-10"]
SLICES = ["long_zh", "news_zh", "short_zh", "en"]


def main():
    results = json.load(open(sys.argv[1]))
    index = {(r["slice"], r["fingerprints"], r["join"]): r for r in results}
    prf = lambda p: f"{p['precision']:.3f} / {p['recall']:.3f} / {p['f1']:.3f}"
    print("| fingerprints | candidates and check | " + " | ".join(f"{s} P / R / F1" for s in SLICES) + " |")
    print("|---|---|" + "---|" * len(SLICES))
    for fp, join in MAIN:
        cells = [prf(index[(s, fp, join)]["pairs"]) if (s, fp, join) in index else "–" for s in SLICES]
        bold = "**" if (fp, join) == ("improved", DEFAULT) else ""
        print(f"| {bold}{fp}{bold} | {bold}{join}{bold} | " + " | ".join(cells) + " |")
    print()
    ks = [("long_zh", [3, 6, 10]), ("news_zh", [3, 10]), ("en", [3, 6, 10]), ("short_zh", [3, 10])]
    print("| fingerprints (SimHash only) | " + " | ".join(f"{s} k={k}" for s, kk in ks for k in kk) + " |")
    print("|---|" + "---|" * sum(len(kk) for _, kk in ks))
    for fp in SIMHASH:
        cells = []
        for s, kk in ks:
            for k in kk:
                r = index.get((s, fp, f"simhash k={k}"))
                cells.append(f"{r['pairs']['precision']:.3f} / {r['pairs']['recall']:.3f}" if r else "–")
        print(f"| {fp} | " + " | ".join(cells) + " |")
    print()
    print("| slice | pairs P / R / F1 | clusters P / R / F1 | ARI | recall per edit (found / truth) |")
    print("|---|---|---|---|---|")
    for s, fp in [(s, "improved") for s in SLICES] + [("short_zh", "improved boilerplate-10")]:
        r = index.get((s, fp, DEFAULT))
        if r:
            edits = ", ".join(f"{e['slice']} {e['found']}/{e['pairs']}" for e in r["slices"])
            label = s if fp == "improved" else f"{s} ({fp})"
            print(f"| {label} | {prf(r['pairs'])} | {prf(r['clusters'])} | {r['ari']:.3f} | {edits} |")


if __name__ == "__main__":
    main()
