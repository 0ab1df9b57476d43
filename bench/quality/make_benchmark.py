"""Build neardup's labelled near-duplicate benchmark from real documents.

Reads the real corpora in ../shared/data and writes, per slice of the
benchmark, a document table and its ground truth:

    OUT/long_zh/documents.parquet   Heybox articles (long Chinese web text)
    OUT/news_zh/documents.parquet   People's Daily 1998 paragraphs of 60+ characters (formal Chinese news)
    OUT/short_zh/documents.parquet  Weibo original posts (short Chinese)
    OUT/en/documents.parquet        BBC News articles (English)
    OUT/<slice>/truth.parquet       source_a, id_a, source_b, id_b, edit

Each slice holds sampled originals plus copies made by the edits a crawler
meets (docs/algorithm.md §8): site boilerplate around the text, navigation
and footer lines, width and punctuation changes, whitespace, a sentence
deleted, inserted or moved, a passage deleted, numbers and dates edited,
truncation, reposts with a comment prepended, an edited headline (site
suffix, tag, shortened; on slices with titles), and a mix of three edits
(which edits the headline half of the time).
A deleted or inserted sentence is a small edit, as the others are: it takes
at most a third of the text away, or adds at most half as much again (larger
changes are the graded partial copies of partial_copies.py), and an inserted
sentence comes from a text of the corpus that is not in the benchmark.
Hard negatives come with it: copies of different articles are wrapped in the
same few site templates, and originals share categories. Duplicates already
present among the originals are found by brute force over every pair and
labelled `natural`: by default when 70 % of the shorter text's character
5-grams (after normalisation) are found in the other, the definition of
duplicate that neardup's default policy states (--min-shared 0.7); with
`--natural jaccard`, when the Jaccard similarity of the two 5-gram sets
reaches 0.7 (the benchmark's labels before 2026-11-26). The `source` of every document is its slice name, so
`neardup dedup -i long_zh=OUT/long_zh/documents.parquet` matches the truth.

Deterministic: the same data, seed and scale give byte-identical files.

    python bench/quality/make_benchmark.py --out target/quality [--scale quick|full] [--seed N]
"""
import argparse
import os
import random
import re
import sys
import unicodedata

import pyarrow as pa
import pyarrow.parquet as pq

SLICES = {
    # slice: (file, originals at quick scale, at full scale, shortest original in characters)
    "long_zh": ("heybox_articles.parquet", 150, 1500, 1),
    "news_zh": ("peoples_daily_1998.parquet", 150, 1500, 60),
    "short_zh": ("weibo_original.parquet", 150, 1500, 1),
    "en": ("bbc_news.parquet", 150, 1000, 1),
}
NATURAL_JACCARD = 0.7

ZH_TEMPLATES = [
    (["首页 > 游戏资讯 > 正文", "来源：游民速报　发布时间：2019-08-01 10:32", "【字号 大 中 小】【打印】【关闭】"],
     ["责任编辑：王小明", "免责声明：本文仅代表作者观点，与本站无关。", "相关阅读：热门游戏排行榜 | 新游预告 | 攻略合集", "扫码关注公众号，获取更多资讯"]),
    (["当前位置：主页 > 新闻中心 > 业界动态", "2020年03月15日 08:00　来源：电竞日报"],
     ["本文来源于网络，如有侵权请联系删除。", "上一篇：新版本更新内容汇总　下一篇：玩家社区精选", "Copyright © 2020 某某网 版权所有 京ICP备12345678号"]),
    (["【转载】", "原标题见文末　作者：小编"],
     ["（完）", "点击阅读原文查看更多精彩内容", "广告：下载APP领取新手礼包，限时免费！"]),
]
EN_TEMPLATES = [
    (["Home > News > World", "Published 14:32 GMT, 3 March 2005 | Share this article"],
     ["Related stories: Top headlines | Most read | Editors' picks", "Copyright 2005 Example Media. All rights reserved.", "Advertisement"]),
    (["SKIP TO CONTENT", "Menu | Sections | Sign in", "From our correspondent"],
     ["Sign up for our newsletter to get the day's top stories.", "Terms of use | Privacy policy | Contact us"]),
    (["[Reposted]", "Source: wire services"],
     ["Read more at the original site.", "Sponsored: Find the best deals today!"]),
]
ZH_COMMENTS = ["转发微博", "说得太好了！", "mark一下，慢慢看", "这个必须顶", "哈哈哈哈", "同意楼主的看法。", "求真相"]
EN_COMMENTS = ["Worth a read.", "Interesting!", "This.", "Can't believe this happened", "Sharing for later"]
HALF_TO_FULL = {"，": ",", "。": ".", "！": "!", "？": "?", "：": ":", "；": ";", "（": "(", "）": ")"}


def sentences(text, zh):
    """Split text into sentences, keeping each sentence's end mark."""
    pattern = r"[^。！？!?\n]*[。！？!?\n]+|[^。！？!?\n]+$" if zh else r"[^.!?\n]*[.!?\n]+\s*|[^.!?\n]+$"
    return [s for s in re.findall(pattern, text) if s.strip()]


def shingles(text):
    norm = "".join(ch for ch in unicodedata.normalize("NFKC", text).lower() if ch.isalnum())
    return {norm[i : i + 5] for i in range(max(1, len(norm) - 4))}


# ---- the edits -------------------------------------------------------------

def boilerplate(text, rng, ctx):
    head, foot = rng.choice(ctx["templates"])
    return "\n".join(head) + "\n" + text + "\n" + "\n".join(foot)


def nav_footer(text, rng, ctx):
    _, foot = rng.choice(ctx["templates"])
    return text + "\n" + "\n".join(rng.sample(foot, min(2, len(foot))))


def width_punctuation(text, rng, ctx):
    if ctx["zh"]:
        out = []
        for ch in text:
            if ch in HALF_TO_FULL:
                out.append(HALF_TO_FULL[ch])
            elif "0" <= ch <= "9" or "a" <= ch.lower() <= "z":
                out.append(chr(ord(ch) + 0xFEE0))  # ASCII to full width
            else:
                out.append(ch)
        return "".join(out)
    return text.replace("'", "\u2019").replace('"', "\u201c").replace(", ", " , ").replace(". ", " . ")


def whitespace(text, rng, ctx):
    parts = sentences(text, ctx["zh"])
    return ("\n\n" if rng.random() < 0.5 else "  ").join(p.strip() for p in parts) + "\n"


def _pick(parts, rng):
    return rng.randrange(len(parts))


# A sentence deleted or inserted is a small edit, as the others are: at most
# a third of the text goes, or half as much again comes in (the copy keeps
# two thirds of its text from the original). Larger changes are partial
# copies, which bench/quality/partial_copies.py grades against the
# duplication policy.
SMALL_EDIT = 1 / 3


def sentence_delete(text, rng, ctx):
    parts = sentences(text, ctx["zh"])
    if len(parts) < 3:
        return None
    small = [i for i, p in enumerate(parts) if len(p) <= SMALL_EDIT * len(text)]
    if not small:
        return None
    del parts[rng.choice(small)]
    return "".join(parts)


def sentence_insert(text, rng, ctx):
    parts = sentences(text, ctx["zh"])
    donor = sentences(rng.choice(ctx["elsewhere"]), ctx["zh"])
    donor = [d for d in donor if len(d) <= SMALL_EDIT / (1 - SMALL_EDIT) * len(text)]
    if len(parts) < 2 or not donor:
        return None
    parts.insert(rng.randrange(len(parts) + 1), rng.choice(donor))
    return "".join(parts)


def sentence_move(text, rng, ctx):
    parts = sentences(text, ctx["zh"])
    if len(parts) < 3:
        return None
    moved = parts.pop(_pick(parts, rng))
    parts.insert(rng.randrange(len(parts) + 1), moved)
    return "".join(parts)


def passage_delete(text, rng, ctx):
    parts = sentences(text, ctx["zh"])
    if len(parts) < 8:
        return None
    n = max(2, len(parts) // 7)
    start = rng.randrange(len(parts) - n)
    return "".join(parts[:start] + parts[start + n :])


def number_edit(text, rng, ctx):
    numbers = list(re.finditer(r"\d+", text))
    if not numbers:
        return None
    chosen = {m.start() for m in rng.sample(numbers, min(len(numbers), rng.randint(1, 3)))}
    out, last = [], 0
    for m in numbers:
        if m.start() in chosen:
            value = int(m.group())
            out.append(text[last : m.start()] + str(value + rng.randint(1, 9)))
            last = m.end()
    return "".join(out) + text[last:]


def truncate(text, rng, ctx):
    if len(text) < 120:
        return None
    cut = int(len(text) * rng.uniform(0.6, 0.8))
    return text[:cut] + ("……阅读全文" if ctx["zh"] else "... Read more")


def repost(text, rng, ctx):
    if ctx["zh"]:
        return f"{rng.choice(ZH_COMMENTS)}//@用户{rng.randint(1000, 9999)}: {text}"
    return f"{rng.choice(EN_COMMENTS)} RT @user{rng.randint(1000, 9999)}: {text}"


ZH_HEADLINES = [lambda t: t + "_游民星空", lambda t: "【转】" + t, lambda t: t[: max(4, len(t) * 3 // 5)], lambda t: t + "（图）"]
EN_HEADLINES = [lambda t: t + " | Example News", lambda t: "UPDATED: " + t,
                lambda t: " ".join(t.split()[: max(3, len(t.split()) * 3 // 5)]), lambda t: t.lower()]


def edit_headline(title, rng, ctx):
    """A reprint's headline: a site suffix or tag added, shortened, or recased."""
    if not title:
        return None
    edited = rng.choice(ZH_HEADLINES if ctx["zh"] else EN_HEADLINES)(title)
    return edited if edited != title else None


def headline(text, rng, ctx):
    """The text unchanged: this edit changes the headline only (see build_slice)."""
    return text if ctx.get("title") else None


EDITS = [boilerplate, nav_footer, width_punctuation, whitespace, sentence_delete, sentence_insert,
         sentence_move, passage_delete, number_edit, truncate, repost, headline]


def mixed(text, rng, ctx):
    for edit in rng.sample([e for e in EDITS if e not in (boilerplate, mixed, headline)], 3):
        text = edit(text, rng, ctx) or text
    return text


EDITS.append(mixed)


# ---- one slice -------------------------------------------------------------

def natural_share(a, b, natural_by):
    """How alike two originals' shingle sets are, as `--natural` measures it:
    their Jaccard similarity, or the share of the smaller set found in the
    other (containment of the shorter text, the definition of duplicate that
    `--min-shared` states)."""
    inter = len(a & b)
    if not inter:
        return 0.0
    if natural_by == "containment":
        return inter / min(len(a), len(b))
    return inter / (len(a) + len(b) - inter)


def build_slice(name, path, n_originals, min_chars, seed, natural_by="containment"):
    table = pq.read_table(path)
    rows = [r for r in table.to_pylist() if r["text"] and len(r["text"].strip()) >= min_chars]
    rng = random.Random(f"{seed}/{name}")
    originals = sorted(rng.sample(rows, min(n_originals, len(rows))), key=lambda r: str(r["id"]))
    zh = name.endswith("_zh")
    # An inserted sentence comes from a text of the corpus that is not in the
    # benchmark: drawn from another original, it made a short post's copy
    # hold that original whole, a duplicate of both by containment that the
    # truth called different (docs/quality.md).
    chosen = {id(r) for r in originals}
    elsewhere = [r["text"] for r in rows if id(r) not in chosen]
    elsewhere = random.Random(f"{seed}/{name}/elsewhere").sample(elsewhere, min(len(elsewhere), 20 * len(originals))) or [r["text"] for r in originals]
    ctx = {"zh": zh, "templates": ZH_TEMPLATES if zh else EN_TEMPLATES, "elsewhere": elsewhere}
    has_title = "title" in table.column_names

    docs, truth = [], []
    for r in originals:
        docs.append({"id": str(r["id"]), "title": r.get("title") if has_title else None, "text": r["text"]})
    # Copies: about half the originals get one or two, each by one edit (or the mix).
    for r in originals:
        if rng.random() >= 0.5:
            continue
        for k in range(rng.choice([1, 1, 2])):
            title = r.get("title") if has_title else None
            ctx["title"] = title
            for _ in range(5):  # an edit may not apply to this text: try another
                edit = rng.choice(EDITS)
                copy = edit(r["text"], rng, ctx)
                new_title = title
                if edit is headline or (edit is mixed and rng.random() < 0.5):
                    new_title = edit_headline(title, rng, ctx) or title
                if copy and (copy != r["text"] or new_title != title):
                    break
            else:
                continue
            copy_id = f"{r['id']}~{edit.__name__}~{k}"
            docs.append({"id": copy_id, "title": new_title, "text": copy})
            truth.append((str(r["id"]), copy_id, edit.__name__))
    # Natural duplicates among the originals, by brute force over every pair.
    sets = [(str(r["id"]), shingles(r["text"])) for r in originals]
    natural = 0
    for i in range(len(sets)):
        a_id, a = sets[i]
        for j in range(i + 1, len(sets)):
            b_id, b = sets[j]
            if natural_share(a, b, natural_by) >= NATURAL_JACCARD:
                truth.append((a_id, b_id, "natural"))
                natural += 1
    docs.sort(key=lambda d: d["id"])
    truth.sort()
    columns = {"id": [d["id"] for d in docs], "text": [d["text"] for d in docs]}
    if has_title:
        columns["title"] = [d["title"] for d in docs]
    truth_table = {
        "source_a": [name] * len(truth), "id_a": [t[0] for t in truth],
        "source_b": [name] * len(truth), "id_b": [t[1] for t in truth], "edit": [t[2] for t in truth],
    }
    return pa.table(columns), pa.table(truth_table), len(originals), natural


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--data", default=os.path.join(here, "../../../shared/data"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--scale", choices=["quick", "full"], default="full")
    parser.add_argument("--seed", default="20261122")
    parser.add_argument("--natural", choices=["containment", "jaccard"], default="containment",
                        help="how duplicates among the originals are found: >= 70 %% of the shorter text's 5-grams "
                             "in the other (the definition of --min-shared 0.7), or Jaccard of character 5-gram "
                             "sets >= 0.7 (the labels before 2026-11-26)")
    args = parser.parse_args()
    for name, (file, quick, full, min_chars) in SLICES.items():
        path = os.path.join(args.data, file)
        if not os.path.exists(path):
            sys.exit(f"make_benchmark.py: {path} is missing (the shared data folder must be beside the project)")
        docs, truth, originals, natural = build_slice(name, path, quick if args.scale == "quick" else full, min_chars, args.seed, args.natural)
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        for table, file_name in [(docs, "documents.parquet"), (truth, "truth.parquet")]:
            tmp = os.path.join(folder, f".{file_name}.tmp")
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, os.path.join(folder, file_name))
        print(f"{name}: {docs.num_rows} documents ({originals} originals), {truth.num_rows} truth pairs ({natural} natural)")


if __name__ == "__main__":
    main()
