#!/usr/bin/env python3
"""Where a neardup run's CPU goes, by pipeline step: a `perf` profile with
call stacks, each sample charged to the first frame (from the leaf up) that
names one of the given markers (a UDF, a writer, an operator), with the
hottest leaf functions under each.

    perf record -F 500 --call-graph dwarf,32768 -o perf.data -- \\
        neardup fingerprint -q -i FILE -o OUT --overwrite --target-partitions 1
    perf script -i perf.data > stacks.txt
    python3 bench/perf/by_stage.py stacks.txt [MARKERS] [LEAVES]

MARKERS is a comma-separated list of substrings of function names (the
default covers the fingerprint stage and the join); LEAVES is how many leaf
functions to list under each (default 6). Samples under no marker are
"other".
"""
import collections
import re
import sys

DEFAULT_MARKERS = (
    "jieba_rs::Jieba::tag,Sketcher,normalize,WordSet,DocStats,strip_lines,TextFeatures,ShingleSketch,"
    "TermStats,LineHashes,IdfSimhash,MinhashKeys,sort_partition,"
    "ArrowColumnWriter,ParquetRecordBatchReader,HashJoinStream,UnnestStream,AggregateStream,SharedKeys,"
    "JaccardPairs,BandedPairs,unconfirmed_copies,WindowAgg"
)


def stacks(path):
    """Each sample's frames, leaf first, from `perf script` output."""
    current = None
    for line in open(path, errors="replace"):
        if not line.strip():
            if current is not None:
                yield current
            current = None
        elif not line.startswith("\t"):
            current = []
        elif current is not None:
            parts = line.strip().split(None, 1)
            if len(parts) > 1:
                current.append(re.sub(r"\+0x[0-9a-f]+.*$", "", parts[1]))
    if current:
        yield current


def main():
    path = sys.argv[1]
    markers = (sys.argv[2] if len(sys.argv) > 2 else DEFAULT_MARKERS).split(",")
    leaves = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    totals, by_leaf, n = collections.Counter(), collections.defaultdict(collections.Counter), 0
    for frames in stacks(path):
        n += 1
        step = next((m for f in frames for m in markers if m in f), "other")
        totals[step] += 1
        by_leaf[step][frames[0][:100] if frames else "?"] += 1
    for step, count in totals.most_common():
        print(f"{100 * count / n:5.1f}% {step}")
        for leaf, c in by_leaf[step].most_common(leaves):
            print(f"      {100 * c / n:5.1f}% {leaf}")


if __name__ == "__main__":
    main()
