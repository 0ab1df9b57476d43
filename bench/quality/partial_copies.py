"""Graded partial copies: how well neardup measures shared text, and how a
duplication policy (--min-shared) sorts partial copies.

From real articles (Heybox for Chinese, BBC News for English) it makes
copies of which a known share is the original's own text, verbatim, and the
rest is other articles' text: an original keeps a passage of 20, 40, 60 or
80 % of its sentences (by characters), in place, and the sentences around
it are replaced by as much text of other articles, so that the copy has the
original's length and the passage is the planted share of both. Then:

1. `containment` of each original in its copy, as neardup measures it (the
   shares in pairs/), against the planted share: the error of the measure;
2. `neardup dedup --min-shared S` at each knob S, with candidates and a check
   loose enough to let every partial copy through (`--minhash 64x2
   --verify jaccard:0.1`): whether each pair ends up together exactly when
   the planted share of its shorter document reaches S (agreement with the
   knob; pairs within 0.05 of S are not counted);
3. `neardup dedup` at its defaults (MinHash 32x4 and SimHash candidates,
   Jaccard 0.5, --min-shared 0.7): the same agreement with the default knob.

Deterministic. Needs pyarrow and a neardup binary:

    python bench/quality/partial_copies.py --out target/partial --neardup target/release/neardup
"""
import itertools
import json
import os
import random
import re

import pyarrow as pa
import pyarrow.parquet as pq

from cli import arguments, dedup, sql

CORPORA = {"long_zh": ("heybox_articles.parquet", True), "en": ("bbc_news.parquet", False)}
GRADES = [0.2, 0.4, 0.6, 0.8]
KNOBS = [0.3, 0.5, 0.7]
DEFAULT_KNOB = 0.7  # neardup's --min-shared with a check


# neardup's tokens of shingles (src/text/shingles.rs): a Han, kana or Hangul
# character, or a run of letters and digits of another script.
UNSPACED = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\u31f0-\u31ff\uac00-\ud7af"
TOKEN = re.compile(f"[{UNSPACED}]|[^\\W_{UNSPACED}]+")


def tokens(text):
    return len(TOKEN.findall(text))


def sentences(text, zh):
    pattern = r"(?<=[。！？!?\n])" if zh else r"(?<=[.!?])\s+|\n+"
    return [s for s in re.split(pattern, text) if s.strip()]


def partial_copy(original, donors, grade, zh):
    """`original` with a passage of `grade` of its tokens kept in place, the
    rest replaced by as many characters of other articles' text (`donors`,
    an endless stream of their sentences); the copy, and the kept passage's
    share of the original's tokens and of the copy's."""
    parts = sentences(original, zh)
    total = sum(tokens(p) for p in parts)
    # The kept passage: consecutive sentences from a random start, as close to the grade as possible.
    best = None
    for start in range(len(parts)):
        kept = 0
        for end in range(start, len(parts)):
            kept += tokens(parts[end])
            share = kept / total
            if best is None or abs(share - grade) < abs(best[2] - grade):
                best = (start, end + 1, share)
            if share > grade:
                break
    start, end, share = best
    joiner = "" if zh else " "
    before_len = sum(len(p) for p in parts[:start])
    after_len = sum(len(p) for p in parts[end:])

    def take(n_chars):
        """Donor text of `n_chars` characters: whole sentences, then the
        start of the next one (at a word's end in English)."""
        out, got = [], 0
        while got < n_chars:
            s = next(donors)
            if got + len(s) > n_chars:
                s = s[: n_chars - got] if zh else s[: n_chars - got].rsplit(" ", 1)[0]
                out.append(s)
                break
            out.append(s)
            got += len(s)
        return out

    text = joiner.join(take(before_len) + parts[start:end] + take(after_len))
    kept = sum(tokens(p) for p in parts[start:end])
    return text, share, kept / tokens(text)


def donor_sentences(donors, first, zh):
    """The sentences of donors[first], then of the donors after it, in turn:
    a short donor leaves the rest of the gap to the next one."""
    for i in itertools.count(first):
        yield from sentences(donors[i % len(donors)]["text"], zh)


def build(data, n, seed):
    docs, truth = {}, []
    for name, (file, zh) in CORPORA.items():
        rows = [r for r in pq.read_table(os.path.join(data, file)).to_pylist() if r["text"] and len(r["text"]) >= 600]
        rng = random.Random(f"{seed}/{name}")
        picked = rng.sample(rows, min(2 * n, len(rows)))
        originals, donors = picked[:n], picked[n:]
        for i, r in enumerate(originals):
            grade = GRADES[i % len(GRADES)]
            if len(sentences(r["text"], zh)) < 5:
                continue
            copy, share, share_of_copy = partial_copy(r["text"], donor_sentences(donors, i, zh), grade, zh)
            a, b = f"{name}-{r['id']}", f"{name}-{r['id']}~partial"
            docs[a], docs[b] = r["text"], copy
            # The donors' own texts are not in the corpus: the copy is the original's only relative.
            # The copy has the original's length, so the passage is about the same share of
            # both; the policy asks for the shorter document's share.
            truth.append({"corpus": name, "id_a": a, "id_b": b, "grade": grade, "share": share,
                          "shorter_share": max(share, share_of_copy)})
    return docs, truth


def main():
    parser = arguments(__doc__)
    parser.add_argument("--n", type=int, default=400, help="originals per corpus")
    parser.add_argument("--seed", default="20261125")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    docs, truth = build(args.data, args.n, args.seed)
    corpus = os.path.join(args.out, "documents.parquet")
    pq.write_table(pa.table({"id": list(docs), "text": list(docs.values())}), corpus)
    pq.write_table(pa.table({k: [t[k] for t in truth] for k in truth[0]}), os.path.join(args.out, "truth.parquet"))

    # 1. The measure against the planted share.
    rows = sql(args.neardup, [f"d={corpus}", f"t={os.path.join(args.out, 'truth.parquet')}"],
                       "SELECT t.corpus, t.grade, t.share, containment(shingle_sketch(a.text), shingle_sketch(b.text)) AS measured "
                       "FROM t JOIN d a ON a.id = t.id_a JOIN d b ON b.id = t.id_b")
    results = {"pairs": len(truth), "measure": {}, "policy": {}}
    for name in CORPORA:
        errors = sorted(abs(r["measured"] - r["share"]) for r in rows if r["corpus"] == name)
        if errors:
            results["measure"][name] = {
                "pairs": len(errors), "mean_abs_error": sum(errors) / len(errors),
                "p95_abs_error": errors[int(0.95 * (len(errors) - 1))], "max_abs_error": errors[-1],
            }

    # 2. The policy at each knob, with loose candidates and check; then the
    # defaults as they are (candidates, check and the policy's 0.7).
    by_pair = {(t["id_a"], t["id_b"]): t for t in truth}
    runs = [(str(k), k, ["--minhash", "64x2", "--verify", "jaccard:0.1", "--min-shared", str(k)]) for k in KNOBS]
    runs.append(("defaults", DEFAULT_KNOB, []))
    for name, knob, flags in runs:
        out = os.path.join(args.out, f"min-shared-{name}")
        dedup(args.neardup, [f"bench={corpus}"], out, flags)
        clusters = sql(args.neardup, [f"c={os.path.join(out, 'clusters')}"], "SELECT id, cluster_id FROM c")
        cluster_of = {r["id"]: r["cluster_id"] for r in clusters}
        per_grade = {}
        for (a, b), t in by_pair.items():
            together = a in cluster_of and cluster_of.get(a) == cluster_of.get(b)
            # The planted share of the shorter document decides; a pair within 0.05 of the
            # knob is too close to call.
            if abs(t["shorter_share"] - knob) < 0.05:
                continue
            wanted = t["shorter_share"] >= knob
            g = per_grade.setdefault(f"{t['corpus']} {t['grade']}", [0, 0])
            g[0] += together == wanted
            g[1] += 1
        agree = sum(g[0] for g in per_grade.values())
        total = sum(g[1] for g in per_grade.values())
        results["policy"][name] = {"agree": agree, "pairs": total, "share": agree / total if total else None,
                                        "by_grade": {k: f"{v[0]}/{v[1]}" for k, v in sorted(per_grade.items())}}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
