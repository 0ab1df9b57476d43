#!/usr/bin/env python3
"""What a stored document costs a night: the store benchmark, in one command.

    python3 bench/store/run.py              # release build; stores of 10^5, 10^6, 10^7 documents
    python3 bench/store/run.py --quick      # dev build, small stores: proves the benchmark runs

It measures, on this machine and in this run:

  scale   one night of 100,000 real posts (weibo_reposts) against stores of
          growing size, under --memory-limit 2G. Each store is a real first
          night (which freezes the IDF model) plus synthetic segments made by
          examples/synthetic_store.rs: random fingerprints and term sets whose
          sizes follow the night's own, and 2,000 near or exact copies of the
          night's documents spread over the store. By default half the
          synthetic documents are articles: their term-set sizes and lengths
          are those of real Heybox articles (heybox_articles, fingerprinted
          with the store's model), the rest those of the night's posts, so
          the store holds what a mixed crawl holds (--article-percent 0: posts
          only). For each size: wall time,
          peak memory, the bytes of the store, what the night read of it
          (the probe of the compact columns, the pages fetched) and the
          store stages' times; then the slope of a night's time against store
          size (microseconds per stored document) and its projection to 10^8
          and 10^9 documents on 2 and on 64 cores.
  nights  ten equal nights of weibo_reposts (76,803 posts each) into one
          store, in three rounds (--rounds), each into a fresh store: each
          night's median time, and the 10th against the 2nd on the line
          fitted over nights 2 to 10.

Results go to OUT/results.json and OUT/results.md (OUT defaults to
target/store-bench). Nothing asserts a time; the targets stand beside the
measurements.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "perf"))
from run import machine, table  # noqa: E402  (the performance suite's helpers)
from side_by_side import fit  # noqa: E402

WEIBO = ROOT.parent / "shared" / "data" / "weibo_reposts.parquet"
HEYBOX = ROOT.parent / "shared" / "data" / "heybox_articles.parquet"
ARTICLE_SAMPLE = 3000
NIGHT_ID = "2026-12-01"
TARGET_US_PER_DOC = 0.5
TARGET_READ_SHARE = 0.20
TARGET_TEN_NIGHTS = 1.5


def log(message):
    print(f"[store-bench] {message}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out).resolve()
        self.work = self.out / "work"
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.commands = []
        self.results = {"machine": machine(), "mode": "quick" if args.quick else "full", "commands": self.commands}

    def run(self, cmd, measure=False):
        shown = " ".join(str(c) for c in cmd).replace(str(ROOT) + "/", "")
        self.commands.append(shown)
        log(shown if len(shown) < 200 else shown[:200] + " …")
        if not measure:
            done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"command failed ({done.returncode}): {shown}\n{done.stderr[-3000:]}")
            return done.stdout
        with tempfile.NamedTemporaryFile("r", suffix=".time") as stats:
            full = ["/usr/bin/time", "-f", "%e %M", "-o", stats.name] + [str(c) for c in cmd]
            done = subprocess.run(full, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"command failed ({done.returncode}): {shown}\n{done.stderr[-3000:]}")
            wall, rss_kb = stats.read().split()[-2:]
        return {"wall_s": float(wall), "peak_mb": round(int(rss_kb) / 1024), "summary": json.loads(done.stdout)}

    def build(self):
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        cmd = ["cargo", "build", "--bin", "neardup", "--example", "synthetic_store"]
        release = not self.args.quick
        cmd += ["--release"] if release else []
        log("building: " + " ".join(cmd))
        subprocess.run(cmd, cwd=ROOT, check=True)
        folder = target / ("release" if release else "debug")
        self.neardup = folder / "neardup"
        self.generator = folder / "examples" / "synthetic_store"
        self.results["build"] = " ".join(cmd)

    def slices(self, night_docs, seed_docs, nights, per_night):
        """Parquet slices of weibo_reposts: the seed night, the measured night, and equal nights."""
        w = f"w={WEIBO}"
        # One row per id (the file repeats 538 ids), in a fixed order.
        docs = "(SELECT id, text FROM (SELECT id, text, row_number() OVER (PARTITION BY id ORDER BY text) AS r FROM w) WHERE r = 1)"
        sql = []
        seed = self.work / "seed"
        night = self.work / "night"
        sql.append(f"COPY (SELECT * FROM {docs} ORDER BY hash64(id), id LIMIT {seed_docs}) TO '{seed}/p.parquet' STORED AS PARQUET")
        sql.append(
            f"COPY (SELECT * FROM {docs} ORDER BY hash64(id), id LIMIT {night_docs} OFFSET {seed_docs}) "
            f"TO '{night}/p.parquet' STORED AS PARQUET"
        )
        for k in range(nights):
            folder = self.work / "nights" / f"2026-11-{k + 1:02d}"
            sql.append(
                f"COPY (SELECT * FROM {docs} ORDER BY id LIMIT {per_night} OFFSET {k * per_night}) "
                f"TO '{folder}/p.parquet' STORED AS PARQUET"
            )
        articles = self.work / "articles"
        sql.append(f"COPY (SELECT id, text, title FROM h ORDER BY hash64(id), id LIMIT {ARTICLE_SAMPLE}) "
                   f"TO '{articles}/p.parquet' STORED AS PARQUET")
        for folder in [seed, night, articles] + [self.work / "nights" / f"2026-11-{k + 1:02d}" for k in range(nights)]:
            folder.mkdir(parents=True, exist_ok=True)
        self.run([self.neardup, "sql", "-t", w, "-t", f"h={HEYBOX}", "-c", ";\n".join(sql)])

    def night(self, store, run_id, input_dir, report, extra=()):
        return self.run(
            [self.neardup, "dedup", "-q", "--json", "-i", f"crawl={input_dir}", "--store", store, "--run-id", run_id,
             "-o", report, "--overwrite", *extra],
            measure=True,
        )

    def scale(self, sizes):
        store = self.work / "store"
        self.night(store, "0000-seed", self.work / "seed", self.work / "reports" / "seed")
        fingerprints = self.work / "night-fingerprints"
        self.run([self.neardup, "fingerprint", "-q", "-i", f"crawl={self.work / 'night'}", "--idf-model",
                  store / "idf" / "model.parquet", "-o", fingerprints, "--overwrite"])
        mix = []
        if self.args.article_percent > 0:
            articles = self.work / "article-fingerprints"
            self.run([self.neardup, "fingerprint", "-q", "-i", f"crawl={self.work / 'articles'}", "--idf-model",
                      store / "idf" / "model.parquet", "-o", articles, "--overwrite"])
            mix = [articles / "fingerprints" / "part-00000.parquet", self.args.article_percent]
        self.results["article_percent"] = self.args.article_percent
        rows, existing, planted = [], 0, self.args.planted
        for step, size in enumerate(sizes):
            self.run([self.generator, store, fingerprints / "fingerprints" / "part-00000.parquet", size - existing,
                      min(1_000_000, max(size // 10, 1)), planted if step == 0 else 0, step + 1, *mix])
            existing = size
            store_files = [p for p in store.rglob("*.parquet") if "idf" not in p.parts]
            m = self.night(store, NIGHT_ID, self.work / "night", self.work / "reports" / "night", ["--memory-limit", "2G"])
            s = m["summary"]
            read = s["store"]["read"]
            rows.append({
                "stored_documents": s["store"]["stored_documents"],
                "store_files": len(store_files),
                "wall_s": m["wall_s"],
                "peak_mb": m["peak_mb"],
                "store_mb": round(read["store_bytes"] / 2**20, 1),
                "probe_mb": round(read["probe_bytes"] / 2**20, 1),
                "fetch_mb": round(read["fetch_bytes"] / 2**20, 2),
                "read_share": round((read["probe_bytes"] + read["fetch_bytes"]) / max(read["store_bytes"], 1), 3),
                "touched": read["touched_fingerprints"],
                "fetched_rows": read["fetched_rows"],
                "probe_s": read["probe_ms"] / 1000,
                "fetch_s": read["fetch_ms"] / 1000,
                "already_stored_s": read["already_stored_ms"] / 1000,
                "pairs": s["pairs"],
                "duplicates_of_stored": s["store"]["duplicates_of_stored"],
            })
            log(f"store of {rows[-1]['stored_documents']}: {m['wall_s']} s, {m['peak_mb']} MB")
            # The measured night leaves the store as it found it.
            shutil.rmtree(store / "runs" / f"run={NIGHT_ID}")
        n = [r["stored_documents"] for r in rows]
        t = [r["wall_s"] for r in rows]
        mean_n, mean_t = sum(n) / len(n), sum(t) / len(t)
        slope = sum((a - mean_n) * (b - mean_t) for a, b in zip(n, t)) / max(sum((a - mean_n) ** 2 for a in n), 1)
        intercept = mean_t - slope * mean_n
        # The probe is the part that grows; on a cluster it spreads over every core.
        projection = [{"documents": d, "cores": c, "night_s": round(intercept + slope * d * 2 / c, 1)}
                      for d in (10**8, 10**9) for c in (2, 64)]
        self.results["scale"] = {"rows": rows, "us_per_stored_document": round(slope * 1e6, 3),
                                 "intercept_s": round(intercept, 2), "projection": projection}

    def ten_nights(self, nights, rounds):
        """`rounds` times, each into a fresh store: one night's time varies by
        ±15 % on this machine and the machine drifts by the hour, so each
        night's time is the median over the rounds, and the ratio is read off
        the line fitted over nights 2..10 of the medians."""
        runs = []
        for r in range(rounds):
            store = self.work / f"ten-store-{r + 1}"
            runs.append([])
            for k in range(nights):
                run_id = f"2026-11-{k + 1:02d}"
                m = self.night(store, run_id, self.work / "nights" / run_id, self.work / "reports" / "ten" / f"{r + 1}" / run_id)
                runs[-1].append({"wall_s": m["wall_s"], "peak_mb": m["peak_mb"],
                                 "stored_documents": m["summary"]["store"]["stored_documents"]})
            shutil.rmtree(store)
        times = [{"night": f"2026-11-{k + 1:02d}",
                  "wall_s": round(statistics.median(run[k]["wall_s"] for run in runs), 2),
                  "rounds_s": [run[k]["wall_s"] for run in runs],
                  "peak_mb": max(run[k]["peak_mb"] for run in runs),
                  "stored_documents": runs[0][k]["stored_documents"]} for k in range(nights)]
        ratio = times[-1]["wall_s"] / max(times[1]["wall_s"], 1e-3) if len(times) > 1 else None
        self.results["nights"] = {"rounds": rounds, "times": times, "last_over_second": round(ratio, 2) if ratio else None}
        if len(times) > 2:
            second, last, slope = fit([t["wall_s"] for t in times])
            per_round = [fit([n["wall_s"] for n in run]) for run in runs]
            self.results["nights"]["fitted"] = {"second_s": round(second, 2), "last_s": round(last, 2),
                                                "slope_s": round(slope, 3), "last_over_second": round(last / second, 2),
                                                "per_round": [round(l / s, 2) for s, l, _ in per_round]}

    def write(self):
        (self.out / "results.json").write_text(json.dumps(self.results, indent=2))
        (self.out / "results.md").write_text(markdown(self.results))
        log(f"wrote {self.out / 'results.md'}")


def markdown(r):
    m = r["machine"]
    out = [f"# Store benchmark ({r['mode']})\n",
           f"{m['cores']} cores, {m['cpu']}, {m['memory']}; commit {m['commit']}; {m['date']}.\n",
           f"Command: `python3 bench/store/run.py{' --quick' if r['mode'] == 'quick' else ''}` (build: `{r['build']}`).\n"]
    s = r.get("scale")
    if s:
        out.append("\n## A night of 100,000 posts against stores of growing size (`--memory-limit 2G`)\n")
        out.append(f"\nStored documents shaped like articles: {r.get('article_percent', 0)} %; like posts: the rest.\n\n")
        header = ["stored documents", "night s", "peak MB", "store MB", "probe MB", "fetched MB", "read / store",
                  "touched fingerprints", "probe s", "fetch s", "duplicates of stored"]
        out.append(table(header, [[x["stored_documents"], x["wall_s"], x["peak_mb"], x["store_mb"], x["probe_mb"],
                                   x["fetch_mb"], x["read_share"], x["touched"], x["probe_s"], x["fetch_s"],
                                   x["duplicates_of_stored"]] for x in s["rows"]]))
        out.append(f"\nSlope: **{s['us_per_stored_document']} µs per stored document** per night "
                   f"(target ≤ {TARGET_US_PER_DOC}); intercept {s['intercept_s']} s (the night's own work).\n")
        out.append(f"Read share target: ≤ {TARGET_READ_SHARE:.0%} of the store's bytes.\n")
        out.append("\nProjected night (intercept + slope × documents, the slope divided over the cores):\n\n")
        out.append(table(["stored documents", "cores", "night s"],
                         [[p["documents"], p["cores"], p["night_s"]] for p in s["projection"]]))
    n = r.get("nights")
    if n:
        out.append("\n## Ten equal nights of weibo_reposts into one store\n")
        out.append(f"\n{n['rounds']} round{'s' if n['rounds'] != 1 else ''}, each into a fresh store; a night's time is its median over the rounds.\n\n")
        out.append(table(["night", "stored before", "wall s (median)", "each round s", "peak MB"],
                         [[t["night"], t["stored_documents"], t["wall_s"], " ".join(f"{x:.2f}" for x in t["rounds_s"]), t["peak_mb"]]
                          for t in n["times"]]))
        out.append(f"\n10th night / 2nd night, medians: {n['last_over_second']}.\n")
        f = n.get("fitted")
        if f:
            out.append(f"\nOn the line fitted over nights 2 to {len(n['times'])} of the medians: {f['second_s']} s to {f['last_s']} s, "
                       f"{f['slope_s']} s more each night, **{f['last_over_second']}** (target ≤ {TARGET_TEN_NIGHTS}); "
                       f"each round's own fit: {', '.join(str(x) for x in f['per_round'])}.\n")
    out.append("\n## Commands\n\n```\n" + "\n".join(r["commands"]) + "\n```\n")
    return "".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="dev build, small stores and nights")
    p.add_argument("--out", default=str(ROOT / "target" / "store-bench"))
    p.add_argument("--sizes", help="comma-separated store sizes [100000,1000000,10000000]")
    p.add_argument("--planted", type=int, default=2000, help="near copies of the night's documents in the store")
    p.add_argument("--article-percent", type=int, default=50,
                   help="share of synthetic stored documents shaped like Heybox articles (the rest like the night's posts)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the ten nights (each night's time is the median)")
    p.add_argument("--skip", default="", help="comma-separated sections to skip: scale, nights")
    args = p.parse_args()
    if not WEIBO.exists():
        raise SystemExit(f"{WEIBO} is absent: the benchmark needs the shared data folder beside the checkout")
    bench = Bench(args)
    bench.build()
    night_docs, seed_docs, nights, per_night = (100_000, 10_000, 10, 76_803)
    sizes = [100_000, 1_000_000, 10_000_000]
    if args.quick:
        night_docs, seed_docs, nights, per_night, sizes = (2_000, 500, 3, 1_000, [2_000, 20_000])
        args.rounds = 1
        args.planted = min(args.planted, 200)
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    bench.slices(night_docs, seed_docs, nights, per_night)
    started = time.time()
    if "scale" not in args.skip:
        bench.scale(sizes)
    if "nights" not in args.skip:
        bench.ten_nights(nights, max(args.rounds, 1))
    bench.results["total_s"] = round(time.time() - started)
    bench.write()


if __name__ == "__main__":
    main()
