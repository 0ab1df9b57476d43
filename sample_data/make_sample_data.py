"""Build neardup's sample corpus from People's Daily (January 1998) paragraphs.

Run from the project root:  python3 sample_data/make_sample_data.py
Needs pyarrow and ../shared/data/peoples_daily_1998.parquet. Deterministic:
the same input always gives byte-identical outputs.

Writes:
  news.parquet      400 original paragraphs (id, text, date) plus planted
                    copies inside the same source and two rows without text;
  reprints.parquet  edited copies of news paragraphs, as a second source,
                    plus unrelated paragraphs that must not match;
  truth.csv         every planted duplicate pair with the edit applied.
"""
import csv
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared" / "data" / "peoples_daily_1998.parquet"

WIDE = {c: chr(ord(c) + 0xFEE0) for c in "0123456789"}
PUNCT_SWAP = {"，": ",", "。": ".", "！": "!", "？": "?", "：": ":", "；": ";", "（": "(", "）": ")"}


def to_half_width(text):
    text = "".join(chr(ord(c) - 0xFEE0) if 0xFF10 <= ord(c) <= 0xFF19 else c for c in text)
    return "".join(PUNCT_SWAP.get(c, c) for c in text)


def edits(text, rng):
    """Crawler-style variants of a paragraph, each with the name of its edit."""
    sentences = [s for s in re.split(r"(?<=[。！？])", text) if s]
    yield "exact_copy", text
    yield "width_and_punctuation", to_half_width(text)
    yield "spacing", "  ".join(text[i:i + 20] for i in range(0, len(text), 20))
    yield "boilerplate", "【人民网转载】" + text + "（责任编辑：王明）"
    digits = [m.start() for m in re.finditer(r"[0-9０-９]", text)]
    if digits:
        i = rng.choice(digits)
        yield "number_edit", text[:i] + ("７" if text[i] != "７" else "８") + text[i + 1:]
    if len(sentences) >= 4:
        yield "last_sentence_dropped", "".join(sentences[:-1])


def main():
    table = pq.read_table(SOURCE, columns=["id", "text"])
    rows = [(i, t) for i, t in zip(table.column("id").to_pylist(), table.column("text").to_pylist())
            if t and 180 <= len(t) <= 600]
    rng = random.Random(1998)
    rng.shuffle(rows)
    originals, unrelated = rows[:400], rows[400:440]
    originals.sort()

    news = [{"id": i, "text": t, "date": f"1998-01-{(n % 31) + 1:02d}"} for n, (i, t) in enumerate(originals)]
    truth = []
    # Copies inside the same source: the same paragraph under another id.
    for n, (i, t) in enumerate(originals[:5]):
        copy_id = f"{i}-dup"
        news.append({"id": copy_id, "text": t, "date": "1998-02-01"})
        truth.append(("news", i, "news", copy_id, "same_source_copy"))
    news.append({"id": "pd-empty", "text": "", "date": "1998-02-02"})
    news.append({"id": "pd-null", "text": None, "date": "1998-02-02"})

    reprints = []
    picked = originals[5:65]
    for n, (i, t) in enumerate(picked):
        variants = list(edits(t, rng))
        kind, text = variants[n % len(variants)]
        rid = f"r{n:03d}"
        reprints.append({"id": rid, "text": text})
        truth.append(("news", i, "reprints", rid, kind))
    for n, (i, t) in enumerate(unrelated):
        reprints.append({"id": f"u{n:03d}", "text": t})

    schema_news = pa.schema([("id", pa.string()), ("text", pa.string()), ("date", pa.string())])
    pq.write_table(pa.Table.from_pylist(news, schema=schema_news), HERE / "news.parquet", compression="zstd")
    schema_rep = pa.schema([("id", pa.string()), ("text", pa.string())])
    pq.write_table(pa.Table.from_pylist(reprints, schema=schema_rep), HERE / "reprints.parquet", compression="zstd")
    with open(HERE / "truth.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["source_a", "id_a", "source_b", "id_b", "edit"])
        w.writerows(sorted(truth))
    print(f"news: {len(news)} rows, reprints: {len(reprints)} rows, planted pairs: {len(truth)}")


if __name__ == "__main__":
    main()
