#!/usr/bin/env python3
"""neardup's performance suite, in one command.

    python3 bench/perf/run.py               # release build, full inputs (~30 min on 2 cores)
    python3 bench/perf/run.py --quick       # small slices, dev build: proves the suite works

It builds neardup and the jieba-rs baseline (examples/jieba_baseline.rs),
installs the peer tools from PyPI into a throwaway virtual environment,
then measures, on this machine and in this run:

  fingerprint  the fingerprint stage alone (`neardup fingerprint`: Parquet in,
               fingerprints out, corpus IDF included) on heybox_articles and
               weibo_reposts, on one core and on all, as MB/s per core and as a
               ratio to raw jieba-rs segmentation of the same texts on one core;
  peers        the same documents through the source blog's Python method,
               `simhash` (+ SimhashIndex), `datasketch` (+ MinHashLSH) and
               Apache Spark's MinHashLSH (local mode), fingerprinting and pair
               finding timed apart, with peak memory; neardup's `pairs` beside;
  join         the banded self-join alone on synthetic fingerprints (uniform
               plus planted near pairs) at three sizes, for the default band
               plan and the 20-table plan (m = 6), with and without a 2 GiB
               memory limit at the largest size: time, peak memory, candidate
               pairs per true pair, and the growth between sizes;
  dedup        the whole `neardup dedup` on weibo_reposts and heybox_articles,
               as seconds and as a ratio per core to raw jieba-rs `tag`.

The fingerprint and dedup sections run in rounds (--rounds, 3 by default),
each measuring jieba-rs and then neardup, and report medians: a shared
machine's speed drifts from minute to minute, and a ratio of two single runs
measured the drift as much as the code.

Results go to OUT/results.json and OUT/results.md (OUT defaults to
target/perf) with the machine, the commit and every command run. Times are
wall-clock seconds; peak memory is the largest resident set of the process
(/usr/bin/time). Nothing here asserts a time: the machine is noisy, and the
table states the targets beside the measurements instead.
"""

import argparse
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PEERS = ["blog", "simhash", "datasketch", "spark"]
# numpy < 2: simhash 2.1.2 multiplies uint8 bit arrays by feature counts,
# which overflows under numpy 2's casting rules once a feature repeats 256 times.
# pyarrow < 20: a release that works with numpy 1 (pyarrow 26 refuses it).
PEER_PACKAGES = ["pyarrow<20", "jieba", "simhash", "datasketch", "pyspark", "numpy<2"]
TEXT_DEDUP_PACKAGES = ["text-dedup"]
# (name, file, text column, title column or "")
DATASETS = [
    ("heybox_articles", "heybox_articles.parquet", "text", "title"),
    ("weibo_reposts", "weibo_reposts.parquet", "text", ""),
]
# weibo_reposts repeats 538 post ids (a post reposted under two events):
# neardup refuses repeated ids unless told to keep one row per id.
NEARDUP_INPUT_ARGS = {"weibo_reposts": ["--duplicate-ids", "keep-first"]}


def log(message):
    print(f"[perf] {message}", file=sys.stderr, flush=True)


class Suite:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = self.out / "work"
        self.work.mkdir(exist_ok=True)
        self.commands = []
        self.cores = os.cpu_count() or 1
        self.results = {"machine": machine(), "mode": "quick" if args.quick else "full", "commands": self.commands}

    # -- running things -----------------------------------------------------------

    def measure(self, cmd, one_core=False, timeout=None, env=None, both=False, tolerate_failure=False):
        """Run `cmd`, returning wall/user/sys seconds, peak RSS (MB) and stdout."""
        if one_core:
            cmd = ["taskset", "-c", "0"] + cmd
        shown = " ".join(shlex.quote(str(c)) for c in cmd)
        self.commands.append(shown.replace(str(ROOT) + "/", ""))
        with tempfile.NamedTemporaryFile("r", suffix=".time") as stats:
            full = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", stats.name] + [str(c) for c in cmd]
            log(shown if len(shown) < 200 else shown[:200] + " …")
            try:
                done = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                return {"timed_out_after_s": timeout}
            if done.returncode != 0:
                if tolerate_failure:
                    last = [l for l in done.stderr.strip().splitlines() if l.strip()][-1:] or ["no message"]
                    return {"failed": f"exit {done.returncode}: {last[0].strip()[:200]}"}
                raise SystemExit(f"command failed ({done.returncode}): {shown}\n{done.stderr[-3000:]}")
            wall, user, system, rss_kb = stats.read().split()[-4:]
        return {
            "wall_s": float(wall),
            "cpu_s": round(float(user) + float(system), 2),
            "peak_mb": round(int(rss_kb) / 1024),
            "stdout": done.stdout + (done.stderr if both else ""),
        }

    def neardup(self, *args, one_core=False, timeout=None):
        result = self.measure([self.binary] + list(args) + ["--json", "--quiet"], one_core=one_core, timeout=timeout)
        if "stdout" in result:
            result["summary"] = json.loads(result.pop("stdout"))
        return result

    # -- setup ------------------------------------------------------------------------

    def build(self):
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        profile = self.args.profile
        cmd = ["cargo", "build", "--bin", "neardup", "--example", "jieba_baseline"]
        cmd += ["--release"] if profile == "release" else []
        log("building: " + " ".join(cmd))
        subprocess.run(cmd, cwd=ROOT, check=True)
        folder = target / ("release" if profile == "release" else "debug")
        self.binary = folder / "neardup"
        self.baseline = folder / "examples" / "jieba_baseline"
        self.results["build"] = {"profile": profile, "command": " ".join(cmd)}

    def venv(self):
        packages = [p for p in PEER_PACKAGES if "spark" not in self.args.skip or p not in ("pyspark", "numpy<2")]
        self.python = self.install(Path(self.args.venv), packages)
        if "text-dedup" not in self.args.skip:
            # Its pins (datasets, urllib3 <= 2.0, onnxruntime …) get a venv of their own.
            self.textdedup_python = self.install(Path(self.args.venv + "-text-dedup"), TEXT_DEDUP_PACKAGES)

    def install(self, folder, packages):
        """A virtual environment with `packages`; returns its python."""
        python = folder / "bin" / "python"
        if not python.exists():
            log(f"creating the peers' virtual environment in {folder}")
            subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"] + packages, check=True)
        versions = subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
            capture_output=True, text=True, check=True,
        ).stdout
        wanted = {re.split("[<>=]", p)[0].lower() for p in packages}
        found = {p["name"]: p["version"] for p in json.loads(versions) if p["name"].lower() in wanted}
        self.results.setdefault("peer_versions", {}).update(found)
        return python

    def datasets(self):
        """The inputs: the shared files, or their first rows in quick mode."""
        data = Path(self.args.data).resolve()
        chosen = []
        for name, file, text, title in DATASETS:
            path = data / file
            if not path.exists():
                raise SystemExit(f"{path} is missing: pass --data with the folder of the shared Parquet files")
            if self.args.quick:
                sliced = self.work / f"{name}-quick.parquet"
                subprocess.run(
                    [str(self.python), "-c",
                     "import sys, pyarrow.parquet as pq; "
                     "pq.write_table(pq.read_table(sys.argv[1]).slice(0, int(sys.argv[3])), sys.argv[2])",
                     str(path), str(sliced), str(self.args.quick_rows)],
                    check=True,
                )
                path = sliced
            chosen.append((name, path, text, title))
        return chosen

    # -- sections ---------------------------------------------------------------------

    def jieba(self, path, text, all_cores=False):
        """Raw jieba-rs over the texts of `path`: bytes, documents, MB/s per mode; on one core, or on
        every core at once (`all_cores`: the MB/s of them all)."""
        if not all_cores:
            return json.loads(self.measure([self.baseline, path, text], one_core=True)["stdout"])
        cmd = ["env", f"JIEBA_BASELINE_THREADS={self.cores}", self.baseline, path, text]
        return json.loads(self.measure(cmd)["stdout"])

    def fingerprint(self, datasets):
        rows = []
        runs = [
            ("improved_1core", ["--weighting", "improved"], True, "tag"),
            ("tfidf_1core", ["--weighting", "tfidf"], True, "cut"),
            ("improved_all_cores", ["--weighting", "improved"], False, "tag"),
        ]
        for name, path, text, title in datasets:
            title_args = ["--title-col", title, *NEARDUP_INPUT_ARGS.get(name, [])]
            # Each round measures jieba-rs, then neardup right after it: the
            # machine's speed drifts between minutes, and a ratio of two runs
            # far apart measured the drift (Weibo's `tag`: 8.7 to 13.8 MB/s).
            rounds = []
            for _ in range(self.args.rounds):
                jieba = self.jieba(path, text)
                mb = jieba["bytes"] / 1e6
                done = {"jieba": jieba}
                for label, weighting, one_core, reference in runs:
                    out = self.work / f"fp-{name}-{label}"
                    r = self.neardup("fingerprint", "--input", path, *title_args, *weighting, "--output", out,
                                     "--overwrite", one_core=one_core)
                    per_core = mb / r["wall_s"] / (1 if one_core else self.cores)
                    done[label] = dict(r, mb_s_per_core=per_core, ratio=per_core / jieba[reference]["mb_per_s"])
                rounds.append(done)
            jieba = rounds[0]["jieba"]
            row = {"dataset": name, "documents": jieba["documents"], "mb": round(jieba["bytes"] / 1e6, 2),
                   "rounds": len(rounds),
                   "jieba_mb_s": {m: round(median(r["jieba"][m]["mb_per_s"] for r in rounds), 2)
                                  for m in ("cut", "tag", "cut_all")}}
            for label, _weighting, _one_core, reference in runs:
                done = [r[label] for r in rounds]
                ratios = [d["ratio"] for d in done]
                row[label] = {
                    "wall_s": round(median(d["wall_s"] for d in done), 2),
                    "cpu_s": round(median(d["cpu_s"] for d in done), 2),
                    "peak_mb": max(d["peak_mb"] for d in done),
                    "mb_s_per_core": round(median(d["mb_s_per_core"] for d in done), 2),
                    f"ratio_to_jieba_{reference}": round(median(ratios), 3),
                    "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                    "stages_ms": middle(done)["summary"]["timings_ms"],
                }
            rows.append(row)
        self.results["fingerprint"] = rows

    def peers(self, datasets):
        rows = []
        for name, path, text, _title in datasets:
            fp_dir = self.work / f"fp-{name}-improved_all_cores" / "fingerprints"
            out = self.work / f"pairs-{name}"
            ours = self.neardup("pairs", "--fingerprints", fp_dir, "--output", out, "--overwrite")
            fp = next(r for r in self.results["fingerprint"] if r["dataset"] == name)["improved_all_cores"]
            rows.append({
                "dataset": name, "tool": "neardup", "cores": self.cores,
                "fingerprint_s": fp["wall_s"], "fingerprint_peak_mb": fp["peak_mb"],
                "pairs_s": ours["wall_s"], "pairs_peak_mb": ours["peak_mb"],
                "pairs": ours["summary"]["pairs"], "pairs_among": ours["summary"]["documents"],
            })
            for peer in PEERS:
                if peer in self.args.skip:
                    continue
                cmd = [self.python, HERE / "peers.py", peer, "--input", path, "--text-col", text]
                limit = self.args.pairs_limit.get(peer, {}).get(name)
                if limit:
                    cmd += ["--pairs-limit", str(limit)]
                # A full run records a peer's failure in the table; the quick run (CI) stops on it.
                r = self.measure(cmd, timeout=self.args.peer_timeout, tolerate_failure=not self.args.quick)
                row = {"dataset": name, "tool": peer, "cores": self.cores if peer == "spark" else 1}
                for problem in ("timed_out_after_s", "failed"):
                    if problem in r:
                        row[problem] = r[problem]
                if "stdout" in r:
                    p = json.loads(r["stdout"].strip().splitlines()[-1])
                    row.update({
                        "fingerprint_s": p["fingerprint_seconds"], "pairs_s": p["pairs_seconds"],
                        "peak_mb": r["peak_mb"], "wall_s": r["wall_s"],
                        "pairs": p["pairs"], "pairs_among": p["pairs_among_documents"],
                    })
                rows.append(row)
            if "text-dedup" not in self.args.skip:
                rows.append(self.text_dedup(name, path, text))
        self.results["peers"] = rows

    def text_dedup(self, name, path, text):
        """text-dedup's SimHash script, offline on the local Parquet file, one process."""
        out = self.work / f"text-dedup-{name}"
        cmd = [self.textdedup_python, "-m", "text_dedup.simhash", "--path", "parquet", "--data_files", path,
               "--split", "train", "--column", text, "--output", out, "--num_proc", "1", "--bit_diff", "3",
               "--num_bucket", "4", "--clean_cache", "--cache_dir", self.work / "text-dedup-cache"]
        env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(self.work / "hf-home"),
                   COLUMNS="200")
        r = self.measure(cmd, timeout=self.args.peer_timeout, env=env, both=True, tolerate_failure=True)
        row = {"dataset": name, "tool": "text-dedup", "cores": 1}
        for problem in ("timed_out_after_s", "failed"):
            if problem in r:
                row[problem] = r[problem]
                return row
        # Its log: "SimHashing : 1.72s", "Clustering : 0.02s", "Before : N", "After : M".
        log_text = r["stdout"]
        def number(label):
            found = re.search(label + r"\s*:\s*([0-9.]+)", log_text)
            if not found:
                raise SystemExit(f"text-dedup printed no '{label}':\n{log_text[-2000:]}")
            return float(found.group(1))
        before, after = int(number("Before")), int(number("After"))
        row.update({
            "fingerprint_s": number("SimHashing"), "pairs_s": number("Clustering"), "peak_mb": r["peak_mb"],
            "wall_s": r["wall_s"], "pairs": f"removes {before - after:,}", "pairs_among": before,
        })
        return row

    def join(self):
        rows = []
        collisions_of, pairs_of = {}, {}
        sizes = self.args.join_sizes
        for n in sizes:
            fps = self.work / f"synthetic-{n}.parquet"
            made = subprocess.run([str(self.python), HERE / "synthetic_fingerprints.py", "--rows", str(n), "--out", fps],
                                  check=True, capture_output=True, text=True)
            planted = int(made.stdout.split()[-1])
            plans = [("default", []), ("20 tables (m=6)", ["--band-blocks", "6"])]
            for plan, plan_args in plans:
                # Memory limits at the largest size, for the default plan:
                # 10^7 fingerprints sort in memory under 2G (the limit has
                # room for it) and join, spilling, under 1G.
                limits = [None] + (["2G", "1G"] if n == max(sizes) and not plan_args else [])
                for limit in limits:
                    extra = ["--memory-limit", limit] if limit else []
                    r = self.neardup("pairs", "--fingerprints", fps, "--candidates", "simhash", "--verify", "none",
                                     "-k", "3", *plan_args, *extra, "--output", self.work / "join-out", "--overwrite")
                    s = r["summary"]
                    # The join is exact: every planted pair is found, and every plan and
                    # limit finds the same pairs (random fingerprints may add a pair by
                    # chance: about two at 10^7).
                    found = s["near_fingerprint_pairs"]
                    if found < planted:
                        raise SystemExit(f"join lost pairs: {found} found, {planted} planted ({fps})")
                    if pairs_of.setdefault(n, found) != found:
                        raise SystemExit(f"join plans disagree: {found} pairs with {plan}, limit {limit}; {pairs_of[n]} before ({fps})")
                    band = s["band_plan"]
                    if (n, band["m"]) not in collisions_of:
                        collisions_of[(n, band["m"])] = self.band_collisions(fps, band["k"], band["m"])
                    collisions = collisions_of[(n, band["m"])]
                    rows.append({
                        "rows": n, "planted_pairs": planted, "plan": plan, "m": band["m"], "bands": band["bands"], "memory_limit": limit,
                        "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_mb": r["peak_mb"],
                        "true_pairs": s["near_fingerprint_pairs"], "band_key_matches": collisions,
                        "candidates_per_true_pair": round(collisions / max(1, s["near_fingerprint_pairs"]), 2),
                        "join_ms": s["timings_ms"].get("join"),
                    })
        self.results["join"] = rows
        self.results["join_growth"] = growth(rows, sizes)

    def band_collisions(self, fps, k, m):
        """Pairs of distinct fingerprints sharing a band key: the equi-join's output."""
        query = (
            f"WITH f AS (SELECT DISTINCT simhash FROM fp WHERE simhash IS NOT NULL), "
            f"keyed AS (SELECT unnest(band_keys(simhash, {k}, {m})) AS b FROM f), "
            f"c AS (SELECT count(*) AS c FROM keyed GROUP BY b['band'], b['key']) "
            f"SELECT CAST(sum(c * (c - 1) / 2) AS BIGINT) AS matches FROM c"
        )
        done = subprocess.run([str(self.binary), "sql", "-t", f"fp={fps}", "--format", "json", "-c", query],
                              capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])["matches"] or 0

    def dedup(self, datasets):
        rows = []
        for name, path, text, title in datasets:
            # As in `fingerprint`: jieba-rs, then neardup, round after round.
            # `tag` on all cores too: raw jieba-rs run as neardup runs, which
            # is not `tag` on one core times the cores (docs/performance.md).
            rounds = []
            for _ in range(self.args.rounds):
                jieba = self.jieba(path, text)
                every = self.jieba(path, text, all_cores=True)
                r = self.neardup("dedup", "--input", path, "--title-col", title, *NEARDUP_INPUT_ARGS.get(name, []),
                                 "--output", self.work / f"dedup-{name}", "--overwrite")
                per_core = jieba["bytes"] / 1e6 / r["wall_s"] / self.cores
                rounds.append(dict(r, tag_mb_s=jieba["tag"]["mb_per_s"], ratio=per_core / jieba["tag"]["mb_per_s"],
                                   tag_all_s=every["tag"]["seconds"], ratio_all=every["tag"]["seconds"] / r["wall_s"]))
            ratios = [r["ratio"] for r in rounds]
            ratios_all = [r["ratio_all"] for r in rounds]
            s = middle(rounds)["summary"]
            rows.append({
                "dataset": name, "documents": s["documents"], "rounds": len(rounds),
                "wall_s": round(median(r["wall_s"] for r in rounds), 2),
                "cpu_s": round(median(r["cpu_s"] for r in rounds), 2),
                "peak_mb": max(r["peak_mb"] for r in rounds),
                "jieba_tag_mb_s": round(median(r["tag_mb_s"] for r in rounds), 2),
                "ratio_to_jieba_tag": round(median(ratios), 3),
                "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                "jieba_tag_all_cores_s": round(median(r["tag_all_s"] for r in rounds), 3),
                "ratio_to_tag_all_cores": round(median(ratios_all), 3),
                "ratio_all_cores_range": [round(min(ratios_all), 3), round(max(ratios_all), 3)],
                "pairs": s["pairs"], "clusters": s["clusters"],
                "candidate_pairs": s["candidate_pairs"], "stages_ms": s["timings_ms"],
            })
        self.results["dedup"] = rows

    # -- reporting --------------------------------------------------------------------

    def write(self):
        (self.out / "results.json").write_text(json.dumps(self.results, indent=2, ensure_ascii=False) + "\n")
        (self.out / "results.md").write_text(markdown(self.results))
        log(f"wrote {self.out / 'results.md'} and results.json")


def middle(runs):
    """The run of the median wall time (the lower middle of an even count)."""
    return sorted(runs, key=lambda r: r["wall_s"])[(len(runs) - 1) // 2]


def growth(rows, sizes):
    """Time ratios between sizes against n log n, per plan (no memory limit)."""
    out = []
    for plan in sorted({r["plan"] for r in rows}):
        runs = {r["rows"]: r for r in rows if r["plan"] == plan and r["memory_limit"] is None}
        for small, large in zip(sizes, sizes[1:]):
            if small in runs and large in runs:
                out.append({
                    "plan": plan, "from": small, "to": large,
                    "time_ratio": round(runs[large]["wall_s"] / max(runs[small]["wall_s"], 1e-3), 1),
                    "n_log_n_ratio": round(large * math.log(large) / (small * math.log(small)), 1),
                })
    return out


def machine():
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        mem = f"{int(next(l.split()[1] for l in open('/proc/meminfo') if l.startswith('MemTotal'))) / 2**20:.0f} GiB"
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return {"cores": os.cpu_count(), "cpu": model, "memory": mem, "os": platform.platform(), "commit": commit,
            "rustc": rustc, "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M")}


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown(r):
    m = r["machine"]
    parts = [
        f"# neardup performance ({r['mode']} run)\n",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory']}; {m['os']}; {m['rustc']}; commit {m['commit']}; "
        f"{m['date']}. Build: `{r['build']['command']}`. Wall-clock seconds; peak memory is the process's "
        f"largest resident set.\n",
    ]
    if "fingerprint" in r:
        parts.append("\n## Fingerprint stage against raw jieba-rs (per core)\n\n"
                     "`neardup fingerprint` (Parquet in, fingerprints out, corpus IDF included) pinned to one core, "
                     "and on all cores; jieba-rs on one core over the same texts, in memory, right before them in "
                     "each round. Medians of the rounds; a ratio's range over them in brackets. Target: improved "
                     "≥ 0.7 × `tag`, tfidf (no POS) ≥ 0.8 × `cut`.\n\n")
        rows = []
        for f in r["fingerprint"]:
            j = f["jieba_mb_s"]

            def ratio(run, reference):
                low, high = run.get("ratio_range", [None, None])
                spread = f" [{low}–{high}]" if low is not None else ""
                return f"{run[f'ratio_to_jieba_{reference}']}× {reference}{spread}"

            one, tfidf, every = f["improved_1core"], f["tfidf_1core"], f["improved_all_cores"]
            rows.append([
                f["dataset"], f"{f['documents']:,}", f["mb"], f.get("rounds", 1), f"{j['cut']} / {j['tag']} / {j['cut_all']}",
                f"{one['mb_s_per_core']} ({ratio(one, 'tag')})",
                f"{tfidf['mb_s_per_core']} ({ratio(tfidf, 'cut')})",
                f"{every['wall_s']} s, {every['mb_s_per_core']}/core ({ratio(every, 'tag')}), {every['peak_mb']} MB",
            ])
        parts.append(table(["dataset", "docs", "MB", "rounds", "jieba-rs cut / tag / cut_all MB/s", "improved, 1 core MB/s",
                            "tfidf, 1 core MB/s", f"improved, {m['cores']} cores"], rows))
    if "peers" in r:
        parts.append("\n## Peers on the same documents\n\n"
                     "Fingerprinting and pair finding timed apart inside each tool (its start-up excluded); MB/s per "
                     "core is the text's size over fingerprinting time and the cores the tool used; the speed-up "
                     "compares neardup pinned to one core (first table) with the tool per core. neardup's pairs "
                     "are `neardup pairs` on its fingerprints (SimHash k=3 plus MinHash 32×4, Jaccard-checked); "
                     "peak memory for neardup is the larger of its two processes.\n\n")
        rows = []
        size = {f["dataset"]: f["mb"] for f in r.get("fingerprint", [])}
        ours = {p["dataset"]: p for p in r["peers"] if p["tool"] == "neardup"}
        one_core = {f["dataset"]: f["improved_1core"]["mb_s_per_core"] for f in r["fingerprint"]}
        for p in r["peers"]:
            if "timed_out_after_s" in p or "failed" in p:
                problem = f"did not finish in {p['timed_out_after_s']} s" if "timed_out_after_s" in p else p["failed"]
                rows.append([p["dataset"], p["tool"], p["cores"], problem, "", "", "", "", ""])
                continue
            per_core = size.get(p["dataset"], 0) / max(p["fingerprint_s"], 1e-3) / p["cores"]
            speedup = ""
            if p["tool"] != "neardup":
                # neardup's own per-core figure: its run pinned to one core.
                n_per_core = one_core[p["dataset"]]
                speedup = f"{n_per_core / max(per_core, 1e-9):.1f}×"
            peak = p.get("peak_mb") or max(p["fingerprint_peak_mb"], p["pairs_peak_mb"])
            among = "all" if p["pairs_among"] >= (ours[p["dataset"]]["pairs_among"]) else f"first {p['pairs_among']:,}"
            rows.append([p["dataset"], p["tool"], p["cores"], p["fingerprint_s"], f"{per_core:.2f}", speedup,
                         f"{p['pairs_s']} ({among})", p["pairs"] if isinstance(p["pairs"], str) else f"{p['pairs']:,}",
                         peak])
        parts.append(table(["dataset", "tool", "cores", "fingerprint s", "MB/s per core", "neardup (1 core) is",
                            "pairs s (documents)", "pairs", "peak MB"], rows))
    if "join" in r:
        parts.append("\n## Banded self-join alone (synthetic fingerprints, k = 3)\n\n"
                     "`neardup pairs --candidates simhash --verify none` on uniform random fingerprints with 1 % planted "
                     "near copies. Band-key matches are the equi-join's output before the exact distance check.\n\n")
        rows = [[f"{j['rows']:,}", j["plan"], f"{j['m']} / {j['bands']}", j["memory_limit"] or "none", j["wall_s"],
                 j["join_ms"], j["peak_mb"], f"{j['true_pairs']:,}", f"{j['band_key_matches']:,}",
                 j["candidates_per_true_pair"]] for j in r["join"]]
        parts.append(table(["rows", "plan", "m / bands", "memory limit", "wall s", "join stage ms", "peak MB",
                            "true pairs", "band-key matches", "candidates per true pair"], rows))
        if r.get("join_growth"):
            parts.append("\nGrowth (wall time, no memory limit):\n\n")
            parts.append(table(["plan", "from", "to", "time ×", "n log n ×"],
                               [[g["plan"], f"{g['from']:,}", f"{g['to']:,}", g["time_ratio"], g["n_log_n_ratio"]]
                                for g in r["join_growth"]]))
    if "dedup" in r:
        parts.append("\n## Whole `neardup dedup` (defaults, all cores)\n\n"
                     "Medians of the rounds, each of jieba-rs on one core, jieba-rs on all cores and then `neardup dedup`; peak memory "
                     "is the largest. Per core against `tag` is the text's megabytes over the wall time and the "
                     f"{r['machine']['cores']} cores, over `tag`'s MB/s of the same round (range over the rounds in "
                     "brackets). Against `tag` on all cores is the seconds of `tag` on every core at once "
                     "(`JIEBA_BASELINE_THREADS`) over neardup's: the same ratio with raw jieba-rs run as neardup is. "
                     "Targets: ≥ 0.5 × on heybox_articles, ≥ 0.25 × on weibo_reposts.\n\n")

        def per_core(d):
            if "ratio_to_jieba_tag" not in d:
                return ""
            low, high = d["ratio_range"]
            return f"{d['ratio_to_jieba_tag']}× [{low}–{high}] ({d['jieba_tag_mb_s']} MB/s)"

        def all_cores(d):
            if "ratio_to_tag_all_cores" not in d:
                return ""
            low, high = d["ratio_all_cores_range"]
            return f"{d['ratio_to_tag_all_cores']}× [{low}–{high}] ({d['jieba_tag_all_cores_s']} s)"

        rows = [[d["dataset"], f"{d['documents']:,}", d.get("rounds", 1), d["wall_s"], d["cpu_s"], d["peak_mb"], per_core(d), all_cores(d),
                 f"{d['candidate_pairs']:,}", f"{d['pairs']:,}", f"{d['clusters']:,}",
                 ", ".join(f"{k} {v / 1000:.1f}" for k, v in d["stages_ms"].items())] for d in r["dedup"]]
        parts.append(table(["dataset", "docs", "rounds", "wall s", "cpu s", "peak MB", "per core against tag",
                            "against tag on all cores", "candidates", "pairs", "clusters", "stages (s)"], rows))
    parts.append("\n## Commands\n\n```\n" + "\n".join(r["commands"]) + "\n```\n")
    return "".join(parts)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small inputs and the dev build: proves the suite runs")
    p.add_argument("--out", default=str(ROOT / "target" / "perf"))
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--profile", choices=["release", "dev"], help="cargo profile [release; dev with --quick]")
    p.add_argument("--venv", default=str(Path.home() / ".cache" / "neardup" / "bench-venv"),
                   help="virtual environment for the peer tools (created if missing)")
    p.add_argument("--sections", default="fingerprint,peers,join,dedup")
    p.add_argument("--skip", default="",
                   help="peers to leave out, comma-separated (blog,simhash,datasketch,spark,text-dedup)")
    p.add_argument("--peer-timeout", type=int, default=1200, help="seconds before a peer run is given up")
    p.add_argument("--rounds", type=int,
                   help="rounds of jieba-rs and neardup, one after the other, in the fingerprint and dedup sections "
                        "[3; 1 with --quick, which only proves the suite runs]")
    p.add_argument("--render", metavar="RESULTS_JSON", help="only rewrite results.md beside an existing results.json")
    args = p.parse_args()
    if args.render:
        results = Path(args.render)
        (results.parent / "results.md").write_text(markdown(json.loads(results.read_text())))
        return
    args.rounds = (1 if args.quick else 3) if args.rounds is None else args.rounds
    if args.rounds < 1:
        raise SystemExit("--rounds: at least 1")
    args.profile = args.profile or ("dev" if args.quick else "release")
    args.skip = [s for s in args.skip.split(",") if s]
    if shutil.which("java") is None and "spark" not in args.skip:
        log("no java on PATH: Spark (its peer) is left out")
        args.skip.append("spark")
    args.quick_rows = 1500
    args.join_sizes = [10_000, 100_000] if args.quick else [100_000, 1_000_000, 10_000_000]
    # The blog compares every pair in Python: quadratic, so on the first
    # 5,000 documents only. Pair finding in the other tools lists every
    # pair of a group, and weibo_reposts has a group of 38,254 identical
    # reposts (731 million pairs): on its first 50,000 documents only.
    args.pairs_limit = {
        "blog": {"heybox_articles": 5000, "weibo_reposts": 5000},
        "simhash": {"weibo_reposts": 50000},
        "datasketch": {"weibo_reposts": 50000},
        "spark": {"weibo_reposts": 50000},
    }
    sections = args.sections.split(",")
    if "peers" in sections and "fingerprint" not in sections:
        raise SystemExit("--sections: peers needs fingerprint (neardup's side of the comparison)")

    suite = Suite(args)
    suite.build()
    suite.venv()
    data = suite.datasets()
    if "fingerprint" in sections:
        suite.fingerprint(data)
    if "peers" in sections:
        suite.peers(data)
    if "join" in sections:
        suite.join()
    if "dedup" in sections:
        suite.dedup(data)
    suite.write()


if __name__ == "__main__":
    main()
