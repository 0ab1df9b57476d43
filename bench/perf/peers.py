#!/usr/bin/env python3
"""One peer tool on one Parquet file: fingerprint every document, then find
near pairs, each step timed on its own. Prints one JSON object.

    python bench/perf/peers.py PEER --input FILE.parquet [--text-col text]
        [--pairs-limit N]

PEER is one of
  blog        the source blog's method: jieba.lcut, stop words, TF weights,
              MD5 feature hashes folded bit by bit into a 64-bit SimHash;
              pairs by comparing every pair (Hamming distance <= 3), as the
              blog does;
  simhash     the `simhash` package: character 4-gram features, MD5;
              pairs with its SimhashIndex (k = 3);
  datasketch  jieba words, datasketch MinHash (128 permutations);
              pairs with MinHashLSH (Jaccard threshold 0.5);
  spark       Apache Spark in local mode (all cores): character 3-grams,
              HashingTF, MinHashLSH (5 tables); pairs with
              approxSimilarityJoin (Jaccard distance <= 0.5).

The tools run with their documented defaults plus the settings named here,
which match neardup's defaults (k = 3, Jaccard >= 0.5, 128 MinHash
functions). The driver (run.py) runs this script under /usr/bin/time for
peak memory. --pairs-limit N finds pairs among the first N documents only
(for the quadratic blog method); the output says so.
"""

import argparse
import json
import sys
import time


def read_texts(path, column):
    import pyarrow.parquet as pq

    values = pq.read_table(path, columns=[column]).column(0).to_pylist()
    return [v or "" for v in values]


def timed(step):
    started = time.perf_counter()
    result = step()
    return result, time.perf_counter() - started


# -- blog: jieba + MD5 + TF, the source blog's algorithm -----------------------

BLOG_STOPWORDS = set(
    "的 了 和 是 就 都 而 及 与 这 那 有 在 中 为 以 于 不 也 之 很 但 对 到 可 个 如 此 会 上 "
    "来 去 把 被 让 着 从 给 所 能 等 得 地 又 或 者 每 并 然 已 却 才 做 需 其 通过 使用 实现 你 "
    "我 他 她 它 们 什么 怎么 如何 该 由 下 将 这些 那些".split()
)


def blog_fingerprint(text, jieba, hashlib):
    counts = {}
    for word in jieba.lcut(text):
        if word.strip() and word not in BLOG_STOPWORDS:
            counts[word] = counts.get(word, 0) + 1
    if not counts:
        return 0
    votes = [0] * 64
    for word, weight in counts.items():
        # The blog's bit string: the MD5 number in binary, its first 64 digits.
        bits = bin(int(hashlib.md5(word.encode("utf-8")).hexdigest(), 16))[2:].zfill(64)[:64]
        for i in range(64):
            votes[i] += weight if bits[i] == "1" else -weight
    return int("".join("1" if v > 0 else "0" for v in votes), 2)


def run_blog(texts, pairs_limit):
    import hashlib

    import jieba

    jieba.initialize()
    fingerprints, fp_seconds = timed(lambda: [blog_fingerprint(t, jieba, hashlib) for t in texts])

    def all_pairs():
        fps = fingerprints[:pairs_limit]
        found = 0
        for i, a in enumerate(fps):
            for b in fps[i + 1 :]:
                if bin(a ^ b).count("1") <= 3:
                    found += 1
        return found, len(fps)

    (pairs, compared), pair_seconds = timed(all_pairs)
    return fp_seconds, pair_seconds, pairs, compared


# -- simhash package ------------------------------------------------------------


def run_simhash(texts, pairs_limit):
    from simhash import Simhash, SimhashIndex

    hashes, fp_seconds = timed(lambda: [Simhash(t) for t in texts])

    def index_pairs():
        subset = hashes[:pairs_limit]
        index = SimhashIndex([(str(i), h) for i, h in enumerate(subset)], k=3)
        found = 0
        for i, h in enumerate(subset):
            found += sum(1 for j in index.get_near_dups(h) if int(j) > i)
        return found, len(subset)

    (pairs, compared), pair_seconds = timed(index_pairs)
    return fp_seconds, pair_seconds, pairs, compared


# -- datasketch -----------------------------------------------------------------


def run_datasketch(texts, pairs_limit):
    import jieba
    from datasketch import MinHash, MinHashLSH

    jieba.initialize()

    def minhash(text):
        m = MinHash(num_perm=128)
        m.update_batch([w.encode("utf-8") for w in set(jieba.lcut(text)) if w.strip()])
        return m

    hashes, fp_seconds = timed(lambda: [minhash(t) for t in texts])

    def lsh_pairs():
        subset = hashes[:pairs_limit]
        lsh = MinHashLSH(threshold=0.5, num_perm=128)
        for i, m in enumerate(subset):
            lsh.insert(i, m)
        found = 0
        for i, m in enumerate(subset):
            found += sum(1 for j in lsh.query(m) if j > i)
        return found, len(subset)

    (pairs, compared), pair_seconds = timed(lsh_pairs)
    return fp_seconds, pair_seconds, pairs, compared


# -- Apache Spark ---------------------------------------------------------------


def run_spark(path, column, pairs_limit):
    from pyspark.ml.feature import HashingTF, MinHashLSH, NGram, RegexTokenizer
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("neardup-peer")
        .config("spark.driver.memory", "8g")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    docs = (
        spark.read.parquet(path)
        .select(F.col(column).alias("text"))
        .withColumn("doc", F.monotonically_increasing_id())
        .na.fill({"text": ""})
    )
    chars = RegexTokenizer(inputCol="text", outputCol="chars", pattern="", gaps=True, minTokenLength=1, toLowercase=True)
    shingles = NGram(n=3, inputCol="chars", outputCol="shingles")
    tf = HashingTF(inputCol="shingles", outputCol="features", numFeatures=1 << 20, binary=True)

    def fingerprint():
        # MinHashLSH refuses empty feature vectors: texts under 3 characters.
        featured = tf.transform(shingles.transform(chars.transform(docs)).filter(F.size("shingles") > 0))
        model = MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=5, seed=1).fit(featured)
        hashed = model.transform(featured).select("doc", "features", "hashes").cache()
        return model, hashed, hashed.count()

    (model, hashed, _), fp_seconds = timed(fingerprint)

    def pairs():
        subset = hashed.orderBy("doc").limit(pairs_limit) if pairs_limit < 1 << 62 else hashed
        joined = model.approxSimilarityJoin(subset, subset, 0.5, distCol="distance")
        found = joined.filter(F.col("datasetA.doc") < F.col("datasetB.doc")).count()
        return found, subset.count()

    (found, compared), pair_seconds = timed(pairs)
    spark.stop()
    return fp_seconds, pair_seconds, found, compared


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", choices=["blog", "simhash", "datasketch", "spark"])
    parser.add_argument("--input", required=True)
    parser.add_argument("--text-col", default="text")
    parser.add_argument("--pairs-limit", type=int, default=1 << 62)
    args = parser.parse_args()

    texts = read_texts(args.input, args.text_col)
    size = sum(len(t.encode("utf-8")) for t in texts)
    if args.peer == "spark":
        fp_s, pair_s, pairs, compared = run_spark(args.input, args.text_col, args.pairs_limit)
    else:
        run = {"blog": run_blog, "simhash": run_simhash, "datasketch": run_datasketch}[args.peer]
        fp_s, pair_s, pairs, compared = run(texts, args.pairs_limit)
    json.dump(
        {
            "peer": args.peer,
            "documents": len(texts),
            "bytes": size,
            "fingerprint_seconds": round(fp_s, 3),
            "pairs_seconds": round(pair_s, 3),
            "pairs": pairs,
            "pairs_among_documents": compared,
        },
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    main()
