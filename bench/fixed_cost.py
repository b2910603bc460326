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

With ``--history N`` it also measures what a query costs once the ledger holds a history, on the
tiny table: an analyst who has made ``N`` releases already, and a new analyst on a dataset with a
total cap whose other analysts have made ``N`` releases (the cap is checked against every release
of the dataset). Each round asks a new query (the history's analyst must make a new release, not
be answered from the record), planned once before the three timed runs; the difference to the
empty ledger is what the history costs. The history is written through the ledger's own protocol
(reserve, charge, commit), not through queries, so it takes seconds.

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
from dalenius.ledger.base import ChargeRequest, Reservation
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
        # SQLite reports each statement a trigger runs with its parent's text: counted once.
        "statements": float(
            sum(1 for i, t in enumerate(statements) if not i or t != statements[i - 1])
        ),
        "transactions": float(sum(s.startswith("BEGIN") for s in statements)),
    }


def write_history(ledger: SqliteLedger, dataset: str, principals: list[str]) -> None:
    """One committed release of ε = 1 for each name in ``principals`` (repeats allowed)."""
    for i, principal in enumerate(principals):
        request = ChargeRequest(
            principal, dataset, PureDP(Fraction(1)), f"history-{i}", f"history {i}", f"plan-{i}"
        )
        reservation = ledger.reserve(request, charge=True)
        if not isinstance(reservation, Reservation):
            raise RuntimeError(f"release {i} of the history was not charged: {reservation}")
        ledger.commit(reservation, '{"history": true}')


def history_cost(
    catalog: Catalog, size: int, repeats: int, folder: Path, now: Callable[[], float]
) -> dict[str, float]:
    """Median time (seconds) of one query on an empty ledger and on ledgers holding ``size``
    releases: the analyst's own, and (with a total cap) other analysts' on the same dataset."""
    executor = executor_for(catalog)
    budget = PureDP(Fraction(10**9))
    ledgers = {
        "empty": SqliteLedger(folder / "empty.sqlite"),
        "own": SqliteLedger(folder / "own.sqlite"),
        "dataset": SqliteLedger(folder / "dataset.sqlite"),
    }
    ledgers["dataset"].set_dataset(catalog.name, total_cap=budget)
    for ledger in ledgers.values():
        ledger.set_budget("analyst", catalog.name, budget)
    write_history(ledgers["own"], catalog.name, ["analyst"] * size)
    others = [f"other-{i % 100}" for i in range(size)]
    for name in sorted(set(others)):
        ledgers["dataset"].set_budget(name, catalog.name, budget)
    write_history(ledgers["dataset"], catalog.name, others)
    times: dict[str, list[float]] = {name: [] for name in ledgers}
    for i in range(repeats + 1):
        # A new query each round, so the analyst with a history makes a new release too; it is
        # planned first, untimed, so no ledger's figure carries the planning.
        sql = f"{SQL} AND age <> {-i}"
        ledgers["empty"].set_budget(f"planner-{i}", catalog.name, budget)
        connect(catalog, ledger=ledgers["empty"], analyst=f"planner-{i}", executor=executor).query(
            sql, epsilon=1
        )
        for name, ledger in ledgers.items():
            analyst = "analyst" if name == "own" else f"fresh-{i}"
            if analyst != "analyst":
                ledger.set_budget(analyst, catalog.name, budget)
            session = connect(catalog, ledger=ledger, analyst=analyst, executor=executor)
            start = now()
            session.query(sql, epsilon=1)
            if i:  # the first round warms the engine up
                times[name].append(now() - start)
    executor.close()
    for ledger in ledgers.values():
        ledger.close()
    return {name: statistics.median(values) for name, values in times.items()}


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
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="also time a query with N earlier releases in the ledger (0: skip)",
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
        history = (
            history_cost(
                catalogs[SIZES[0]], args.history, args.repeats, Path(tmp), CLOCKS[args.clock]
            )
            if args.history
            else None
        )
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
    if history is not None:
        empty = history["empty"]
        print(f"with a history of {args.history:,} releases in the ledger ({SIZES[0]} people):")
        print(f"  empty ledger, new analyst:                  {empty * 1e3:8.2f} ms")
        for name, what in (
            ("own", "the analyst's own releases"),
            ("dataset", "other analysts' releases, total cap"),
        ):
            took = history[name]
            print(f"  {what + ':':<43} {took * 1e3:8.2f} ms  {(took - empty) * 1e3:+6.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
