"""One query's peak memory, raw DuckDB or Dalenius, each in a fresh process measured the same way.

``bench/engines.py --memory`` runs this once per query and side. A fresh process per run is the
only fair measure: DuckDB's memory is its own (not Python objects, so ``tracemalloc`` misses it),
and a process that already ran other queries keeps their buffers and its peak. Each side
imports only what it needs — raw: ``duckdb``; Dalenius: its session (with numpy and sqlglot;
pandas and pyarrow are imported only where a DataFrame is asked for) — opens the same Parquet files the same way (DuckDB, default threads and memory limit),
runs the query once, and prints its peak resident set (``VmHWM``) and its resident set just before
the query (after imports and setup), in bytes, as ``peak=… before=…``.

    python bench/peak.py raw "SELECT ..." people=/path/people.parquet visits=/path/visits.parquet
    python bench/peak.py dalenius "SELECT ..." --catalog /path/census.toml [--delta 1e-6]

This is a benchmark's helper, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
from fractions import Fraction
from pathlib import Path


def status(key: str) -> int:
    """A ``/proc/self/status`` memory field (``VmHWM``, ``VmRSS``) in bytes."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def raw(sql: str, tables: list[str]) -> int:
    """Run ``sql`` on plain DuckDB over views of the Parquet files; the RSS before it."""
    import duckdb

    con = duckdb.connect(":memory:")
    for entry in tables:
        name, _, path = entry.partition("=")
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
    before = status("VmRSS")
    con.execute(sql).fetchall()
    return before


def dalenius(sql: str, catalog: Path, delta: float | None) -> int:
    """Answer ``sql`` through a Dalenius session with a SQLite ledger; the RSS before it."""
    from dalenius.core.catalog import load_catalog
    from dalenius.core.loss import ApproxDP
    from dalenius.engine.session import connect
    from dalenius.ledger import open_ledger

    loaded = load_catalog(catalog)
    with tempfile.TemporaryDirectory() as tmp:
        ledger = open_ledger(str(Path(tmp) / "ledger.sqlite"))
        ledger.set_dataset(loaded.name, definition="approx")
        ledger.set_budget("bench", loaded.name, ApproxDP(Fraction(10**6), Fraction(1, 2)))
        session = connect(loaded, ledger=ledger, analyst="bench")
        before = status("VmRSS")
        session.query(sql, epsilon=1, delta=delta)
        ledger.close()
    return before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=["raw", "dalenius"])
    parser.add_argument("sql")
    parser.add_argument("tables", nargs="*", help="raw: NAME=PATH of each Parquet table")
    parser.add_argument("--catalog", type=Path, help="dalenius: the catalog file")
    parser.add_argument("--delta", type=float, default=None, help="dalenius: the query's δ")
    args = parser.parse_args(argv)
    if args.side == "raw":
        before = raw(args.sql, args.tables)
    else:
        before = dalenius(args.sql, args.catalog, args.delta)
    print(f"peak={status('VmHWM')} before={before}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
