"""Read a neardup output folder with pyarrow, an independent Parquet reader,
check its tables' schemas, and print their row counts as JSON."""
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

out = Path(sys.argv[1])
assert (out / "_SUCCESS").exists(), "no _SUCCESS marker"
expected = {
    "fingerprints": {"source": pa.string(), "id": pa.string(), "simhash": pa.uint64(), "n_terms": pa.int64(),
                     "term_set": pa.list_(pa.uint64())},
    "pairs": {"source_a": pa.string(), "id_a": pa.string(), "source_b": pa.string(), "id_b": pa.string(), "hamming": pa.int32(),
              "similarity": pa.float64()},
    "clusters": {"source": pa.string(), "id": pa.string(), "cluster_id": pa.uint64(), "is_representative": pa.bool_()},
}
counts = {}
for name, columns in expected.items():
    table = pq.read_table(out / name)
    for column, typ in columns.items():
        got = table.schema.field(column).type
        assert got in (typ, pa.string_view(), pa.large_string()) if typ == pa.string() else got == typ, f"{name}.{column}: {got}"
    counts[name] = table.num_rows
meta = pq.read_metadata(out / "fingerprints" / "part-00000.parquet").metadata
settings = json.loads(meta[b"neardup"])["settings"]
assert settings["hash"].startswith("xxh3-64"), settings
summary = json.loads((out / "summary.json").read_text())
assert summary["documents"] == counts["fingerprints"]
print(json.dumps(counts))
