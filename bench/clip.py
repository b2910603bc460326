"""How to clip in SQL: the forms of a clipped SUM timed beside the raw SUM on DuckDB, in one run.

Dalenius clips every value to its public bounds before summing, and a double sum is turned into an
exact fixed-point integer per row. This prints, for the 10M-row census of ``bench/engines.py``
(an integer column ``income`` and the same values as a DOUBLE), the median time of each form
divided by the raw ``SUM``: the CASE clip Dalenius generates, ``LEAST(GREATEST(x, lo), hi)``
without and with the NULL guard it would need (the engines' GREATEST/LEAST skip NULLs), and the
fixed-point double sum with and without the clamp to ±row_units that can never bind within
``dalenius.sql.to_sql._rounding_below``.

    .venv/bin/python bench/clip.py [--rows 10000000] [--repeats 7]

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

CASE = "CASE WHEN {x} < 0 THEN 0 WHEN {x} > 500000 THEN 500000 ELSE {x} END"
LEAST = "LEAST(GREATEST({x}, 0), 500000)"
GUARD = "CASE WHEN {x} IS NULL THEN NULL ELSE LEAST(GREATEST({x}, 0), 500000) END"
# The fixed-point grid of a double in [0, 500000] centred at 250000: 2^12 steps per unit.
SHIFT = "(CAST({clip} AS DOUBLE) * CAST(4096 AS DOUBLE)) - 1024000000"
CLAMP = (
    "CASE WHEN {s} < -1024000000 THEN -1024000000 WHEN {s} > 1024000000 THEN 1024000000 "
    "ELSE {s} END"
)


def forms() -> dict[str, tuple[str, str]]:
    """Name -> (query, the raw query it is compared with)."""
    raw_i, raw_f = "SELECT SUM(income) FROM p", "SELECT SUM(f) FROM p"
    shifted = SHIFT.format(clip=CASE.format(x="f"))
    return {
        "raw SUM(income)": (raw_i, raw_i),
        "CASE clip (Dalenius)": (f"SELECT SUM({CASE.format(x='income')}) FROM p", raw_i),
        "LEAST(GREATEST())": (f"SELECT SUM({LEAST.format(x='income')}) FROM p", raw_i),
        "LEAST(GREATEST()) + NULL guard": (f"SELECT SUM({GUARD.format(x='income')}) FROM p", raw_i),
        "raw SUM(double)": (raw_f, raw_f),
        "double fixed point, clamped": (
            f"SELECT SUM(CAST(FLOOR({CLAMP.format(s=shifted)} + 0.5) AS BIGINT)) FROM p",
            raw_f,
        ),
        "double fixed point (Dalenius)": (
            f"SELECT SUM(CAST(FLOOR({shifted} + 0.5) AS BIGINT)) FROM p",
            raw_f,
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "dalenius-bench")
    args = parser.parse_args(argv)
    folder = args.data / f"rows-{args.rows}"
    if not (folder / "census.toml").exists():
        write_benchmark(folder, args.rows)
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE p AS SELECT income, CAST(income AS DOUBLE) AS f "
        f"FROM read_parquet('{folder / 'people.parquet'}')"
    )
    chosen = forms()
    times: dict[str, list[float]] = {name: [] for name in chosen}
    for query, _ in chosen.values():
        con.execute(query).fetchall()
    for _ in range(args.repeats):  # interleaved, so load on the machine hits every form alike
        for name, (query, _) in chosen.items():
            start = time.perf_counter()
            con.execute(query).fetchall()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    raw = {q: median[name] for name, (q, r) in chosen.items() if q == r}
    print(f"DuckDB {duckdb.__version__}, {args.rows:,} rows, median of {args.repeats}")
    print(f"{'form':<32} {'ms':>8} {'x raw':>6}")
    for name, (_, r) in chosen.items():
        print(f"{name:<32} {median[name] * 1e3:8.1f} {median[name] / raw[r]:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
