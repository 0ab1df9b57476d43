#!/usr/bin/env python3
"""Where a neardup run leaves cores idle: the run sampled by `perf` on every
core, its samples counted in windows of 10 ms and set against the statement
the run's debug log shows last, so that the stretches where fewer cores than
the machine has were busy can be read off with what ran then.

    python3 bench/perf/idle_cores.py OUT neardup-args...
    python3 bench/perf/idle_cores.py /tmp/weibo dedup \\
        --input ../shared/data/weibo_reposts.parquet --duplicate-ids keep-first -o /tmp/out --overwrite

Runs the release binary (build it first), writes OUT.data (perf's samples)
and OUT.log (the debug log), and prints the idle core-seconds of the whole
run and each 50 ms with more than 15 ms of a core idle, in seconds from the
first sample, with the statement that ends next (the log names a statement
when it ends, so that one was running) and the last one ended.
`perf report -i OUT.data --time A,B`, with A and B that first sample's time
(printed) plus a stretch's seconds, then shows what ran in it. Last, each
stage of the run (its `neardup: STAGE  N ms` line; the stages follow each
other from the start of the log's first statement) with its busy share of
the cores and its idle core-ms.
Sampling costs a few per cent, so the run is slower than without it.
Needs `perf` (Debian's linux-perf) and kernel.perf_event_paranoid <= 2.
"""
import bisect
import datetime
import os
import re
import subprocess
import sys

HZ = 1999
WINDOW = 0.01
REPORT = 5  # windows a reported stretch
MIN_IDLE = 0.015  # core-seconds idle in a stretch worth reporting


def main():
    out, args = sys.argv[1], sys.argv[2:]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    binary = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target")), "release", "neardup")
    env = dict(os.environ, NEARDUP_LOG="debug", NEARDUP_LOG_FORMAT="plain")
    with open(out + ".log", "w") as log:
        subprocess.run(["perf", "record", "-q", "-F", str(HZ), "--clockid", "CLOCK_REALTIME", "-o", out + ".data", binary, *args], env=env, stdout=log, stderr=log, check=True)
    times = subprocess.run(["perf", "script", "-i", out + ".data", "-F", "time"], capture_output=True, text=True, check=True).stdout
    # Samples on the wall clock (--clockid), as the log's times are.
    samples = sorted(float(t.strip().rstrip(":")) for t in times.split() if t.strip())
    cores = os.cpu_count() or 1
    start = samples[0]
    windows = int((samples[-1] - start) / WINDOW) + 1
    busy = [0] * windows
    for t in samples:
        busy[int((t - start) / WINDOW)] += 1
    idle = [max(0.0, cores - n / (HZ * WINDOW)) * WINDOW for n in busy]
    print(f"wall {samples[-1] - start:.3f} s from {start:.3f}, {cores} cores, idle {sum(idle):.3f} core-seconds")
    events, stages, first = [], [], 0.0
    with open(out + ".log") as log:
        for line in log:
            m = re.match(r"(\d{4}-\d\d-\d\dT[\d:.]+)Z .*?(\d+) ms\s+(.*)", line)
            if m:
                at = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
                if not events:
                    # The first statement's line comes when it ends.
                    first = at - int(m.group(2)) / 1000 - start
                events.append((at - start, m.group(3)[:80]))
            stage = re.match(r"neardup: (\w+)\s+(\d+) ms", line)
            if stage:
                stages.append((stage.group(1), int(stage.group(2)) / 1000))
    ends = [e[0] for e in events]
    for w in range(0, windows, REPORT):
        stretch = sum(idle[w : w + REPORT])
        if stretch > MIN_IDLE:
            # The log names a statement when it ends: the one that ends next
            # is the one running in the stretch.
            last = bisect.bisect(ends, (w + REPORT) * WINDOW)
            after = events[last - 1][1] if last else "(start)"
            ending = bisect.bisect(ends, w * WINDOW)
            running = events[ending][1] if ending < len(events) else "(end)"
            print(f"{w * WINDOW:7.2f} s  idle {stretch * 1000:4.0f} ms  in: {running}  after: {after}")
    print_stages(stages, idle, first, cores)


def print_stages(stages, idle, begin, cores):
    """A table of the stages (name, seconds), which follow each other from
    `begin` (seconds from the first sample): each one's busy share of the
    cores and its idle core-ms, from the windows' `idle` core-seconds."""
    print("\n| stage | ms | busy | idle core-ms |\n|---|---|---|---|")
    for name, seconds in stages:
        inside = [i for i in range(len(idle)) if begin <= i * WINDOW < begin + seconds]
        if inside:
            waited = sum(idle[i] for i in inside)
            share = 1 - waited / (len(inside) * WINDOW * cores)
            print(f"| {name} | {seconds * 1000:.0f} | {share:.0%} | {waited * 1000:.0f} |")
        begin += seconds



if __name__ == "__main__":
    main()
