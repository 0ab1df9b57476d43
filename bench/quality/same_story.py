"""Documents that share their words but no passage (two reports of one kind,
or of one event), and whether any setting of the duplication policy
(--min-shared) merges them.

The procedure that finds and labels them, on BBC News, the Heybox articles, People's Daily
paragraphs and Weibo original posts:

1. a loose run, `neardup dedup --verify jaccard:0.3 --min-shared none`, lists
   every candidate pair whose term sets share at least 30 % of their words;
2. a pair is a *same-story rewrite* when its two documents share at most 5 %
   of the shorter one's text (`greatest(shared_a, shared_b) <= 0.05`): the same
   words, no common run of five tokens beyond a few stock phrases; and both
   have at least 60 characters (shorter ones, captions and photo credits,
   share a word or two by chance);
3. `samples.md` prints the first such pairs side by side, to be read: those
   read so far are reports of different matches of one league and guides to
   different cards of one game, not copies (docs/quality.md); rewrites of one
   event by different authors are still to be found.

Then each knob S runs at the defaults otherwise (`--min-shared S`), and the
script counts the same-story pairs that end up in one cluster: the target is
none at any S.

    python bench/quality/same_story.py --out target/same-story --neardup target/release/neardup
"""
import json
import os

from cli import arguments, dedup, sql

KNOBS = ["0.1", "0.3", "0.5", "0.7", "0.9"]
CORPORA = {
    "bbc": "bbc_news.parquet",
    "heybox": "heybox_articles.parquet",
    "peoples_daily": "peoples_daily_1998.parquet",
    "weibo": "weibo_original.parquet",
}
MAX_SHARED = 0.05
# Shorter texts (captions, photo credits, "(with 1 picture)") share a word or
# two by chance, not a story.
MIN_CHARS = 60


def main():
    parser = arguments(__doc__)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    inputs = [f"{name}={os.path.join(args.data, file)}" for name, file in CORPORA.items()]

    loose = os.path.join(args.out, "loose")
    dedup(args.neardup, inputs, loose, ["--verify", "jaccard:0.3", "--min-shared", "none"])
    pairs = sql(args.neardup, [f"p={loose}/pairs", f"f={loose}/fingerprints"],
                f"SELECT p.source_a, p.id_a, p.source_b, p.id_b, p.similarity, p.shared_a, p.shared_b FROM p "
                f"JOIN f x ON x.source = p.source_a AND x.id = p.id_a "
                f"JOIN f y ON y.source = p.source_b AND y.id = p.id_b "
                f"WHERE p.similarity IS NOT NULL AND greatest(p.shared_a, p.shared_b) <= {MAX_SHARED} "
                f"AND least(x.n_chars, y.n_chars) >= {MIN_CHARS} "
                f"ORDER BY p.source_a, p.id_a, p.source_b, p.id_b")
    truth = {(p["source_a"], p["id_a"], p["source_b"], p["id_b"]) for p in pairs}

    # Pairs to read, side by side.
    texts = {}
    for name, file in CORPORA.items():
        ids = sorted({p["id_a"] for p in pairs if p["source_a"] == name} | {p["id_b"] for p in pairs if p["source_b"] == name})
        if ids:
            listed = ", ".join("'" + i.replace("'", "''") + "'" for i in ids[:400])
            for r in sql(args.neardup, [f"d={os.path.join(args.data, file)}"],
                         f"SELECT CAST(id AS VARCHAR) AS id, substr(text, 1, 160) AS head FROM d WHERE CAST(id AS VARCHAR) IN ({listed})"):
                texts[(name, r["id"])] = r["head"].replace("\n", " ")
    with open(os.path.join(args.out, "samples.md"), "w") as f:
        # The first pairs of each pair of sources, so that every corpus is read.
        shown = {}
        for p in pairs:
            key = (p['source_a'], p['source_b'])
            shown[key] = shown.get(key, 0) + 1
            if shown[key] > 15:
                continue
            f.write(f"## {p['source_a']}/{p['id_a']} and {p['source_b']}/{p['id_b']}: similarity {p['similarity']:.2f}, "
                    f"shared {p['shared_a']:.2f} / {p['shared_b']:.2f}\n\n")
            f.write(f"- {texts.get((p['source_a'], p['id_a']), '')}\n- {texts.get((p['source_b'], p['id_b']), '')}\n\n")

    results = {"same_story_pairs": len(truth), "by_source": {}, "merged": {}}
    for p in pairs:
        key = f"{p['source_a']}/{p['source_b']}"
        results["by_source"][key] = results["by_source"].get(key, 0) + 1
    for knob in KNOBS + ["none"]:
        out = os.path.join(args.out, f"min-shared-{knob}")
        dedup(args.neardup, inputs, out, ["--min-shared", knob])
        clusters = sql(args.neardup, [f"c={out}/clusters"], "SELECT source, id, cluster_id FROM c")
        cluster_of = {(c["source"], c["id"]): c["cluster_id"] for c in clusters}
        merged = sum(1 for (sa, ia, sb, ib) in truth
                     if (sa, ia) in cluster_of and cluster_of[(sa, ia)] == cluster_of.get((sb, ib)))
        results["merged"][knob] = merged
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
