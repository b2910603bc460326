"""Dalenius's fixed cost per query: its time beside raw DuckDB's where the engine does almost nothing.

Run ``.venv/bin/python bench/fixed_cost.py`` (``--repeats 300``; see ``docs/engines.md``). Over the
census benchmark tables (``dalenius.datasets.census``, Parquet) at two sizes — a tiny table of 100
people, where nearly all of Dalenius's time is its own fixed cost, and 100,000 people — it runs
``SELECT COUNT(*) FROM people WHERE age >= 40`` at ε = 1 through a session on the embedded default
(DuckDB, a SQLite ledger file), interleaved with the same SQL on a raw DuckDB connection over the
same files. Every Dalenius run is a fresh analyst, so none is answered from the ledger's record:
each is a new release (the plan of a repeated query shape is cached, as in a dashboard).

Prints, from one run: the median times, their ratio, Dalenius's fixed cost (its median minus raw
DuckDB's on the tiny table), the median time inside the ledger, the ledger's statements and
transactions per query (counted with SQLite's trace callback), the median time of one ``fsync``
in the ledger's folder (the floor of each synced transaction), and the load average before and
after, so a reader can tell a quiet machine from a loaded one.

With ``--clock cpu`` every time is this process's CPU time instead of wall time (DuckDB's threads
run in this process): on a machine loaded by other work it moves far less than wall time, so two
versions can still be compared there; it leaves out the waits, the ``fsync`` of each commit among
them.

This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import duckdb

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.loss import PureDP
from dalenius.datasets.census import write_benchmark
from dalenius.engine.session import connect
from dalenius.executors.factory import executor_for
from dalenius.ledger.sqlite import SqliteLedger

SQL = "SELECT COUNT(*) FROM people WHERE age >= 40"
SIZES = (100, 100_000)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
DATA = Path(tempfile.gettempdir()) / "dalenius-bench"
"""Where the generated tables are kept between runs (the same folder as ``bench/engines.py``'s)."""


def catalog_of(data: Path, rows: int) -> Catalog:
    """The census catalog of ``rows`` people, generated once into ``data``."""
    path = data / f"rows-{rows}" / "census.toml"
    if not path.exists():
        write_benchmark(path.parent, rows)
    return load_catalog(path)


def measure(
    catalog: Catalog,
    repeats: int,
    ledger_path: Path,
    now: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Interleaved medians (seconds) of Dalenius and raw DuckDB, and the ledger's work per query."""
    raw = duckdb.connect(":memory:")
    for table in catalog.tables:
        raw.execute(
            f"CREATE VIEW {table.name} AS SELECT * FROM read_parquet('{table.source.location}')"
        )
    ledger = SqliteLedger(ledger_path)
    executor = executor_for(catalog)
    statements: list[str] = []
    in_ledger = [0.0]

    def timed(name: str) -> None:
        method = getattr(ledger, name)

        def call(*args: object, **kwargs: object) -> object:
            start = now()
            try:
                return method(*args, **kwargs)
            finally:
                in_ledger[0] += now() - start

        setattr(ledger, name, call)

    for name in ("reserve", "charge", "commit", "remaining"):
        timed(name)

    def dalenius(i: int, trace: list[str] | None = None) -> tuple[float, float]:
        analyst = f"bench-{i}"
        ledger.set_budget(analyst, catalog.name, PureDP(Fraction(10**6)))
        session = connect(catalog, ledger=ledger, analyst=analyst, executor=executor)
        in_ledger[0] = 0.0
        if trace is not None:
            ledger.trace(trace.append)
        start = now()
        session.query(SQL, epsilon=1)
        took = now() - start
        ledger.trace(None)
        return took, in_ledger[0]

    def plain() -> float:
        start = now()
        raw.execute(SQL).fetchall()
        return now() - start

    dalenius(-1)  # warm-up: plans, mechanisms, the engine's relations
    plain()
    dalenius(-2, statements)
    d_times, r_times, l_times = [], [], []
    for i in range(repeats):
        r_times.append(plain())
        took, in_l = dalenius(i)
        d_times.append(took)
        l_times.append(in_l)
    executor.close()
    ledger.close()
    raw.close()
    return {
        "dalenius": statistics.median(d_times),
        "raw": statistics.median(r_times),
        "ledger": statistics.median(l_times),
        "statements": float(len(statements)),
        "transactions": float(sum(s.startswith("BEGIN") for s in statements)),
    }


def fsync_median(folder: Path, repeats: int) -> float:
    """The median time (seconds) to sync a small write in ``folder``: the floor of a synced commit."""
    path = folder / "fsync-probe"
    times = []
    with path.open("wb") as handle:
        for _ in range(repeats):
            handle.write(b"x" * 512)
            handle.flush()
            start = time.perf_counter()
            os.fsync(handle.fileno())
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300, help="timed runs per size (median)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall time or this process's CPU time",
    )
    args = parser.parse_args(argv)
    catalogs = {rows: catalog_of(DATA, rows) for rows in SIZES}
    before = os.getloadavg()[0]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rows, catalog in catalogs.items():
            results[rows] = measure(
                catalog, args.repeats, Path(tmp) / f"ledger-{rows}.sqlite", CLOCKS[args.clock]
            )
        synced = fsync_median(Path(tmp), args.repeats)
    after = os.getloadavg()[0]
    print(
        f"{SQL}, ε = 1, DuckDB + SQLite ledger file, medians of {args.repeats}, interleaved, "
        f"{args.clock} clock"
    )
    print(f"load average {before:.1f} before, {after:.1f} after, on {os.cpu_count()} cores")
    print(f"{'people':>8} {'dalenius ms':>12} {'raw ms':>8} {'ratio':>6} {'ledger ms':>10}")
    for rows, r in results.items():
        print(
            f"{rows:8,} {r['dalenius'] * 1e3:12.2f} {r['raw'] * 1e3:8.2f} "
            f"{r['dalenius'] / r['raw']:6.2f} {r['ledger'] * 1e3:10.2f}"
        )
    tiny = results[SIZES[0]]
    print(
        f"fixed cost per query (dalenius - raw at {SIZES[0]} people): "
        f"{(tiny['dalenius'] - tiny['raw']) * 1e3:.2f} ms; the ledger's part "
        f"{tiny['ledger'] * 1e3:.2f} ms in {tiny['transactions']:.0f} transactions, "
        f"{tiny['statements']:.0f} statements"
    )
    print(
        f"one fsync in the ledger's folder, median: {synced * 1e3:.2f} ms "
        "(each synced write transaction pays at least one)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
