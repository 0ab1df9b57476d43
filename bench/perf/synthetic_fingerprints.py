"""Write a synthetic fingerprint table for the join benchmark.

N rows (source, id, simhash): uniformly random 64-bit fingerprints, of
which a fraction are planted near copies of another row (1 to K bits
flipped), so the true pairs within distance K are known. Deterministic for
a given seed.

    python bench/perf/synthetic_fingerprints.py --rows 1000000 --out target/fp-1e6.parquet [--k 3] [--planted 0.01]

Prints the number of planted pairs. Random pairs within distance 3 are
vanishingly rare among uniform 64-bit values (about n² · 43,745 / 2^65).
"""
import argparse
import random

import pyarrow as pa
import pyarrow.parquet as pq


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--planted", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=20261122)
    a = p.parse_args()
    rng = random.Random(a.seed)
    fps = [rng.getrandbits(64) for _ in range(a.rows)]
    # Every other row among the first 2 * planted * rows becomes a near copy
    # of the row before it.
    planted = 0
    for t in range(1, min(a.rows, 2 * int(a.rows * a.planted)), 2):
        mask = 0
        for bit in rng.sample(range(64), rng.randint(1, a.k)):
            mask |= 1 << bit
        fps[t] = fps[t - 1] ^ mask
        planted += 1
    table = pa.table({
        "source": pa.array(["synthetic"] * a.rows),
        "id": pa.array([f"{i:09d}" for i in range(a.rows)]),
        "simhash": pa.array(fps, type=pa.uint64()),
    })
    pq.write_table(table, a.out, compression="zstd")
    print(planted)


if __name__ == "__main__":
    main()
