"""A query over a large Parquet table never pulls the table into Python.

A child process opens a session on a generated Parquet file (16M rows, about 400 MB once decoded)
and answers a grouped query through DuckDB; the growth of its peak resident memory during the
query must stay far below the size of the data. No time is measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 16_000_000
CHUNK = 1_000_000

CHILD = r"""
import json, sys
from dalenius.core.catalog import load_catalog
from dalenius.engine.session import connect
from dalenius.executors.duckdb import DuckDBExecutor

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)

catalog = load_catalog(sys.argv[1])
# Two threads, as in CI: DuckDB's scan buffers grow with the thread count, the data do not.
session = connect(catalog, budget=10, executor=DuckDBExecutor(catalog, threads=2))
session.query("SELECT COUNT(*) FROM big WHERE v > 1e9", epsilon=0.1)  # loads extensions, warms up
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak (VmHWM) to the current size
result = session.query("SELECT k, COUNT(*), AVG(v), SUM(n) FROM big GROUP BY k", epsilon=1)
print(json.dumps({"growth": status("VmHWM") - before, "groups": len(result.rows)}))
"""


def write_big(folder: Path) -> int:
    """Write the table in row groups; return its decoded (in-memory Arrow) size in bytes."""
    rng = np.random.Generator(np.random.PCG64(5))  # test data only, never noise
    labels = np.array([f"key-{i:02d}" for i in range(50)])
    decoded = 0
    with pq.ParquetWriter(
        folder / "big.parquet",
        pa.schema([("n", pa.int64()), ("v", pa.float64()), ("k", pa.string())]),
    ) as writer:
        for _ in range(ROWS // CHUNK):
            chunk = pa.table(
                {
                    "n": rng.integers(0, 1000, CHUNK),
                    "v": rng.normal(50, 20, CHUNK),
                    "k": labels[rng.integers(0, 50, CHUNK)],
                }
            )
            decoded += chunk.nbytes
            writer.write_table(chunk, row_group_size=1 << 17)
    keys = ", ".join(f'"{label}"' for label in labels)
    (folder / "big.toml").write_text(
        '[dataset]\nname = "big"\n[tables.big]\nsource = { parquet = "big.parquet" }\n'
        'privacy_unit = "row"\n[tables.big.columns]\n'
        'n = { type = "int", bounds = [0, 1000] }\nv = { type = "float", bounds = [0, 100] }\n'
        f'k = {{ type = "str", keys = [{keys}] }}\n'
    )
    return decoded


def test_a_large_parquet_query_stays_in_the_engine(tmp_path: Path) -> None:
    decoded = write_big(tmp_path)
    assert decoded > 350 * 2**20
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "big.toml")],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["groups"] == 50
    # Pulling the rows into Python would take at least the decoded size; DuckDB streams them.
    assert report["growth"] < decoded / 6, (report, decoded)
