"""The neardup command line, as the quality scripts call it."""
import json
import subprocess


def sql(neardup, tables, query):
    """Rows of `query` over `tables` (NAME=URL each), as dicts."""
    args = [neardup, "sql", "--format", "json"]
    for t in tables:
        args += ["--table", t]
    out = subprocess.run(args + ["-c", query], check=True, capture_output=True, text=True).stdout
    # One object a line; split on newlines only: str.splitlines() also splits
    # on separators such as U+2028, which JSON leaves unescaped in a text.
    return [json.loads(line) for line in out.split("\n") if line.strip()]


def dedup(neardup, inputs, out, extra):
    """`neardup dedup` of `inputs` (NAME=URL each) into `out`."""
    args = [neardup, "dedup", "-q", "-o", out, "--overwrite"] + extra
    for i in inputs:
        args += ["-i", i]
    subprocess.run(args, check=True)


def arguments(doc):
    """A parser with the options every quality script takes: --data, --out, --neardup."""
    import argparse
    import os

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--data", default=os.path.join(here, "../../../shared/data"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--neardup", default=os.path.join(here, "../../target/release/neardup"))
    return parser
