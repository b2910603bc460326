"""How to clip in SQL: the forms of a clipped SUM timed beside the raw SUM on DuckDB, in one run.

Dalenius clips every value to its public bounds before summing, and a double sum is turned into an
exact fixed-point integer per row. This prints, for the 10M-row census of ``bench/engines.py``
(the integer columns ``income`` and ``age``, and ``income`` as a DOUBLE), the median time of each
form divided by the raw ``SUM``: the CASE clip Dalenius generates (the within-bounds test first)
and the CASE it generated before (two tests, then ELSE), ``LEAST(GREATEST(x, lo), hi)`` without
and with the NULL guard it would need (the engines' GREATEST/LEAST skip NULLs), and the
fixed-point double sum with and without the clamp to ±row_units that can never bind within
``dalenius.sql.emit.numeric._rounding_below``.

Each form runs on two copies of the columns: an in-memory table (how the DuckDB executor holds a
CSV source) and the Parquet file itself (how it reads a Parquet source). They differ: DuckDB
evaluates a *function* of one column once per entry of a Parquet dictionary (``age`` has 101
distinct values), but a CASE once per row.

    .venv/bin/python bench/clip.py [--rows 10000000] [--repeats 7] [--arrivals]

``--arrivals`` times the same forms on the data-as-it-comes table of ``bench/engines.py``
(``arrivals.parquet``, written by a run of it at the same ``--rows``): ``score``, an integer 15% of
which lies outside [0, 100], and ``amount``, a double with 10% NULLs and a Pareto tail past 1000
(its fixed point: 2^20 steps per unit, not centred, as Dalenius writes it).

This is a benchmark, not a test: it prints one table and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from dalenius.datasets.census import write_benchmark

CASE = (
    "CASE WHEN {x} BETWEEN 0 AND {hi} THEN {x} WHEN {x} < 0 THEN 0 WHEN {x} > {hi} THEN {hi} "
    "ELSE {x} END"
)
TWO_TESTS = "CASE WHEN {x} < 0 THEN 0 WHEN {x} > {hi} THEN {hi} ELSE {x} END"
LEAST = "LEAST(GREATEST({x}, 0), {hi})"
GUARD = "CASE WHEN {x} IS NULL THEN NULL ELSE LEAST(GREATEST({x}, 0), {hi}) END"
# The fixed-point grid of a double in [0, 500000] centred at 250000: 2^12 steps per unit.
SHIFT = "(CAST({clip} AS DOUBLE) * CAST(4096 AS DOUBLE)) - 1024000000"
CLAMP = (
    "CASE WHEN {s} < -1024000000 THEN -1024000000 WHEN {s} > 1024000000 THEN 1024000000 "
    "ELSE {s} END"
)


def forms() -> dict[str, tuple[str, str]]:
    """Name -> (query, the raw query it is compared with)."""
    chosen: dict[str, tuple[str, str]] = {}
    for column, high in (("income", 500000), ("age", 100)):
        raw = f"SELECT SUM({column}) FROM p"
        variants = {
            "CASE, within first (Dalenius)": CASE,
            "CASE, two tests (before)": TWO_TESTS,
            "LEAST(GREATEST())": LEAST,
            "LEAST(GREATEST()) + NULL guard": GUARD,
        }
        chosen[f"raw SUM({column})"] = (raw, raw)
        for name, form in variants.items():
            sql = f"SELECT SUM({form.format(x=column, hi=high)}) FROM p"
            chosen[f"  {column}: {name}"] = (sql, raw)
    raw_f = "SELECT SUM(f) FROM p"
    shifted = SHIFT.format(clip=CASE.format(x="f", hi=500000))
    before = SHIFT.format(clip=TWO_TESTS.format(x="f", hi=500000))
    return chosen | {
        "raw SUM(double)": (raw_f, raw_f),
        "  double: fixed point, clamped (older)": (
            f"SELECT SUM(CAST(FLOOR({CLAMP.format(s=shifted)} + 0.5) AS BIGINT)) FROM p",
            raw_f,
        ),
        "  double: fixed point, two-test CASE (before)": (
            f"SELECT SUM(CAST(FLOOR({before} + 0.5) AS BIGINT)) FROM p",
            raw_f,
        ),
        "  double: fixed point (Dalenius)": (
            f"SELECT SUM(CAST(FLOOR({shifted} + 0.5) AS BIGINT)) FROM p",
            raw_f,
        ),
    }


def arrival_forms() -> dict[str, tuple[str, str]]:
    """Name -> (query, raw query) on ``arrivals``: values outside their bounds, NULLs, a tail."""
    raw = "SELECT SUM(score) FROM p"
    chosen = {"raw SUM(score)": (raw, raw)}
    for name, form in {
        "CASE, within first (Dalenius)": CASE,
        "CASE, two tests (before)": TWO_TESTS,
        "LEAST(GREATEST())": LEAST,
    }.items():
        chosen[f"  score: {name}"] = (f"SELECT SUM({form.format(x='score', hi=100)}) FROM p", raw)
    raw_f = "SELECT SUM(amount) FROM p"
    grid = "SELECT SUM(CAST(FLOOR(CAST({clip} AS DOUBLE) * CAST(1048576 AS DOUBLE) + 0.5) AS BIGINT)) FROM p"
    return chosen | {
        "raw SUM(amount)": (raw_f, raw_f),
        "  amount: clipped (Dalenius's CASE), no grid": (
            f"SELECT SUM({CASE.format(x='amount', hi=1000)}) FROM p",
            raw_f,
        ),
        "  amount: fixed point, no clip": (grid.format(clip="amount"), raw_f),
        "  amount: fixed point (Dalenius)": (
            grid.format(clip=CASE.format(x="amount", hi=1000)),
            raw_f,
        ),
        "  amount: fixed point, LEAST(GREATEST()) + guard": (
            grid.format(clip=GUARD.format(x="amount", hi=1000)),
            raw_f,
        ),
    }


def run(
    con: duckdb.DuckDBPyConnection, repeats: int, chosen: dict[str, tuple[str, str]]
) -> dict[str, float]:
    """The median CPU time of every form on the relation ``p`` of ``con``, forms interleaved.

    CPU time of this process (DuckDB's threads included), not wall time: the work a form costs,
    which other processes loading the machine move far less than they move wall time.
    """
    times: dict[str, list[float]] = {name: [] for name in chosen}
    for query, _ in chosen.values():
        con.execute(query).fetchall()
    for _ in range(repeats):  # interleaved, so load on the machine hits every form alike
        for name, (query, _) in chosen.items():
            start = time.process_time()
            con.execute(query).fetchall()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "dalenius-bench")
    parser.add_argument(
        "--arrivals",
        action="store_true",
        help="time the forms on bench/engines.py's arrivals table (run that first at --rows)",
    )
    args = parser.parse_args(argv)
    folder = args.data / f"rows-{args.rows}"
    if args.arrivals:
        parquet = f"read_parquet('{folder / 'arrivals.parquet'}')"
        columns, chosen = "score, amount", arrival_forms()
    else:
        if not (folder / "census.toml").exists():
            write_benchmark(folder, args.rows)
        parquet = f"read_parquet('{folder / 'people.parquet'}')"
        columns, chosen = "income, age, CAST(income AS DOUBLE) AS f", forms()
    sources = {
        "in-memory table": f"CREATE TABLE p AS SELECT {columns} FROM {parquet}",
        "Parquet file": f"CREATE VIEW p AS SELECT {columns} FROM {parquet}",
    }
    medians = {}
    for source, create in sources.items():
        con = duckdb.connect()
        con.execute(create)
        medians[source] = run(con, args.repeats, chosen)
        con.close()
    print(
        f"DuckDB {duckdb.__version__}, {args.rows:,} rows, median CPU time of {args.repeats} runs"
    )
    print(f"{'form':<46}" + "".join(f" {s:>22}" for s in sources))
    print(f"{'':<46}" + f" {'CPU ms':>13} {'x raw':>8}" * len(sources))
    for name, (_, raw) in chosen.items():
        cells = ""
        for source in sources:
            median = medians[source]
            base = next(median[n] for n, (q, r) in chosen.items() if q == r == raw)
            cells += f" {median[name] * 1e3:13.1f} {median[name] / base:8.2f}"
        print(f"{name:<46}{cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
