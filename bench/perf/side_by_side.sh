#!/usr/bin/env bash
# Two or more neardup builds on the same `dedup`, alternating, N times each:
# the median milliseconds of every stage and statement (NEARDUP_LOG=debug),
# side by side. Builds measured in turn share the machine's state, which
# drifts by the hour; a comparison of runs made apart does not.
#
#   BINS="/tmp/neardup-before /tmp/neardup-after" bash bench/perf/side_by_side.sh 3 \
#       -i ../shared/data/weibo_reposts.parquet --duplicate-ids keep-first
#
# Writes to a temporary folder, removed after.
set -euo pipefail
n="$1"
shift
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for _ in $(seq "$n"); do
  for bin in $BINS; do
    NEARDUP_LOG=debug "$bin" dedup "$@" -o "$out/run" --overwrite 2>&1 | sed "s|^|$(basename "$bin") |"
  done
done | python3 -c '
import collections, re, statistics, sys
rows, builds = collections.OrderedDict(), []
for line in sys.stdin:
    build, line = line.split(" ", 1)
    if build not in builds:
        builds.append(build)
    m = re.search(r"DEBUG \S+:\s+(\d+) ms  (.{0,60})", line)
    if m:
        rows.setdefault(m.group(2), {}).setdefault(build, []).append(int(m.group(1)))
        continue
    m = re.match(r"neardup: (\S+)\s+(\d+) ms", line)
    if m:
        rows.setdefault("stage " + m.group(1), {}).setdefault(build, []).append(int(m.group(2)))
        continue
    m = re.search(r"in ([\d.]+) s$", line)
    if m:
        rows.setdefault("total", {}).setdefault(build, []).append(float(m.group(1)) * 1000)
print(" ".join(f"{b:>14}" for b in builds))
for name, times in rows.items():
    medians = [statistics.median(times.get(b, [0])) for b in builds]
    if max(medians) >= 30:
        print(" ".join(f"{m:14.0f}" for m in medians), " ", name)
'
