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

Rewrites of one *event* by different authors are found by a second procedure,
since sharing words does not make two texts one event:

1. stories named by reading the corpora (STORIES below): on BBC News, the
   articles whose titles name one running story (the Greek sprinters' doping
   case, the Yukos affair, David Blunkett's resignation, the WorldCom trial,
   The Aviator's awards season); on Weibo original posts, the posts that carry
   one news event's hashtag (the Boston bombing, the Ya'an earthquake, the
   WeChat fee plan, the "周一见" scandal, ...), not a column's (晚安, 快讯);
2. every pair of one story whose texts, both of at least 60 characters, share
   at most 5 % of the shorter one (containment of neardup's shingle sketches,
   `containment(shingle_sketch(a), shingle_sketch(b))` in `neardup sql`);
3. `events.md` prints them side by side, to be read.

Then each knob S runs at the defaults otherwise (`--min-shared S`), and the
script counts the pairs of both lists that end up in one cluster: the target
is none at any S, and the script exits with status 1 when any is.

    python bench/quality/same_story.py --out target/same-story --neardup target/release/neardup
"""
import json
import os
import sys

from cli import arguments, dedup, sql

KNOBS = ["0.1", "0.3", "0.5", "0.7", "0.9"]
CORPORA = {
    "bbc": "bbc_news.parquet",
    "heybox": "heybox_articles.parquet",
    "peoples_daily": "peoples_daily_1998.parquet",
    "weibo": "weibo_original.parquet",
}
MAX_SHARED = 0.05
# Running stories and news events, named by reading titles and hashtags
# (docs/quality.md): corpus -> story -> the words that name it (in a BBC
# title; in a Weibo post's text, its hashtag).
STORIES = {
    "bbc": {
        "Greek sprinters' doping case": ["Greek", "Kenteris"],
        "Yukos affair": ["Yukos"],
        "Blunkett resignation": ["Blunkett"],
        "WorldCom trial": ["Ebbers", "WorldCom"],
        "The Aviator's awards season": ["Aviator"],
    },
    "weibo": {
        "Boston marathon bombing": ["#波士顿爆炸#"],
        "Ya'an earthquake": ["#四川雅安地震#", "#地震温情#"],
        "WeChat fee plan": ["#微信收费标准#"],
        "周一见 scandal": ["#周一见#"],
        "越南乳瓜": ["#越南乳瓜#"],
        "5-yuan train meals": ["#火车盒饭5元#"],
    },
}
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

    events = same_event_pairs(args)
    results = {"same_story_pairs": len(truth), "by_source": {}, "same_event_pairs": len(events),
               "events": {}, "merged": {}, "events_merged": {}}
    for p in pairs:
        key = f"{p['source_a']}/{p['source_b']}"
        results["by_source"][key] = results["by_source"].get(key, 0) + 1
    for e in events:
        results["events"][e["story"]] = results["events"].get(e["story"], 0) + 1
    for knob in KNOBS + ["none"]:
        out = os.path.join(args.out, f"min-shared-{knob}")
        dedup(args.neardup, inputs, out, ["--min-shared", knob])
        clusters = sql(args.neardup, [f"c={out}/clusters"], "SELECT source, id, cluster_id FROM c")
        cluster_of = {(c["source"], c["id"]): c["cluster_id"] for c in clusters}
        merged = sum(1 for (sa, ia, sb, ib) in truth
                     if (sa, ia) in cluster_of and cluster_of[(sa, ia)] == cluster_of.get((sb, ib)))
        results["merged"][knob] = merged
        results["events_merged"][knob] = sum(
            1 for e in events if (e["source"], e["a"]) in cluster_of and cluster_of[(e["source"], e["a"])] == cluster_of.get((e["source"], e["b"])))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))
    # The target: documents of one story that share no passage are
    # never merged, at any setting of the knob.
    broken = {k: n for part in ("merged", "events_merged") for k, n in results[part].items() if n}
    if broken:
        sys.exit(f"same-story pairs merged (knob: pairs): {broken}")


def same_event_pairs(args):
    """The pairs of one story of STORIES that share at most MAX_SHARED of the
    shorter text, both of at least MIN_CHARS characters; written, with their
    texts, to OUT/events.md."""
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq

    found = []
    for source, stories in STORIES.items():
        file = os.path.join(args.data, CORPORA[source])
        column = "title" if source == "bbc" else "text"
        docs = sql(args.neardup, [f"d={file}"], f"SELECT CAST(id AS VARCHAR) AS id, {column} AS named, text FROM d "
                                                 f"WHERE character_length(text) >= {MIN_CHARS}")
        candidates = []
        for story, words in stories.items():
            members = sorted(d["id"] for d in docs if d["named"] and any(w in d["named"] for w in words))
            candidates += [(story, a, b) for a, b in itertools.combinations(members, 2)]
        if not candidates:
            continue
        table = os.path.join(args.out, f"event-candidates-{source}.parquet")
        pq.write_table(pa.table({"story": [c[0] for c in candidates], "a": [c[1] for c in candidates],
                                 "b": [c[2] for c in candidates]}), table)
        shares = sql(args.neardup, [f"d={file}", f"p={table}"],
                     "SELECT p.story, p.a, p.b, containment(shingle_sketch(x.text), shingle_sketch(y.text)) AS shared_a, "
                     "containment(shingle_sketch(y.text), shingle_sketch(x.text)) AS shared_b, "
                     "substr(x.text, 1, 160) AS head_a, substr(y.text, 1, 160) AS head_b "
                     "FROM p JOIN d x ON CAST(x.id AS VARCHAR) = p.a JOIN d y ON CAST(y.id AS VARCHAR) = p.b "
                     "ORDER BY p.story, p.a, p.b")
        found += [dict(r, source=source) for r in shares if max(r["shared_a"], r["shared_b"]) <= MAX_SHARED]
    with open(os.path.join(args.out, "events.md"), "w") as f:
        shown = {}
        for e in found:
            shown[e["story"]] = shown.get(e["story"], 0) + 1
            if shown[e["story"]] > 6:
                continue
            f.write(f"## {e['story']}: {e['source']}/{e['a']} and {e['b']}, shared {e['shared_a']:.2f} / {e['shared_b']:.2f}\n\n")
            f.write(f"- {e['head_a'].replace(chr(10), ' ')}\n- {e['head_b'].replace(chr(10), ' ')}\n\n")
    return found


if __name__ == "__main__":
    main()
