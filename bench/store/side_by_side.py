#!/usr/bin/env python3
"""Ten equal nights of two or more neardup builds, alternating, side by side.

    python3 bench/store/run.py --skip scale          # makes the ten nights' inputs once
    python3 bench/store/side_by_side.py 2 /tmp/neardup-before /tmp/neardup-after

Each round runs every build in turn over the ten nights of weibo_reposts
(target/store-bench/work/nights), each into a fresh store. Builds measured
in turn share the machine's state, which drifts by the hour, so only a
comparison made this way says which build is faster. Prints, per build, the
median of each night's wall time, and the line fitted over nights 2 to 10:
its 2nd and 10th nights and their ratio (the issue's 10th / 2nd).
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NIGHTS = ROOT / "target" / "store-bench" / "work" / "nights"


def ten_nights(binary, folder):
    """The wall seconds of each night, into a fresh store under `folder`."""
    times = []
    for night in sorted(NIGHTS.iterdir()):
        cmd = [binary, "dedup", "-q", "-i", f"crawl={night}", "--store", f"{folder}/store", "--run-id", night.name,
               "-o", f"{folder}/report", "--overwrite"]
        started = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - started)
    return times


def fit(times):
    """Least squares over nights 2..n: the fitted 2nd and last nights."""
    xs = list(range(2, len(times) + 1))
    ys = times[1:]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my + slope * (2 - mx), my + slope * (xs[-1] - mx), slope


def main():
    if len(sys.argv) < 3 or not NIGHTS.is_dir():
        sys.exit(__doc__)
    rounds, binaries = int(sys.argv[1]), sys.argv[2:]
    runs = {b: [] for b in binaries}
    for r in range(rounds):
        for b in binaries:
            with tempfile.TemporaryDirectory() as folder:
                runs[b].append(ten_nights(b, folder))
            print(f"round {r + 1}, {Path(b).name}: " + " ".join(f"{t:.2f}" for t in runs[b][-1]), file=sys.stderr)
    print("| build | 2nd night (fit) | 10th night (fit) | slope per night | 10th / 2nd |")
    print("|---|---|---|---|---|")
    for b in binaries:
        medians = [statistics.median(night) for night in zip(*runs[b])]
        second, last, slope = fit(medians)
        print(f"| {Path(b).name} | {second:.2f} s | {last:.2f} s | {slope:.3f} s | **{last / second:.2f}** |")


if __name__ == "__main__":
    main()
