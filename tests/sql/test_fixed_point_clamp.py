"""The fixed-point clamp of a clipped double sum is dropped only where it can never bind.

For each case the generated per-row expression is evaluated in DuckDB on the values that push it
hardest (the bounds, just inside and outside them, ±∞, NaN, NULL, subnormals); every result must
lie within ``±row_units`` (``[0, row_units]`` for squares), which is what the sensitivity assumes.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb
import pytest

from dalenius.plan.expr import Col
from dalenius.plan.nodes import Measurement
from dalenius.plan.sensitivity import sum_grid, sum_sq_grid
from dalenius.sql.emit import Compiler

CASES = [
    ((Fraction(0), Fraction(500000)), Fraction(0)),
    ((Fraction(0), Fraction(500000)), Fraction(250000)),
    ((Fraction(-1, 3), Fraction(7, 3)), Fraction(1)),
    ((Fraction(10**6), Fraction(10**6 + 1)), Fraction(10**6) + Fraction(1, 2)),
    ((Fraction(-(10**300)), Fraction(10**300)), Fraction(0)),
    ((Fraction(10**15), Fraction(10**15 + 1)), Fraction(10**15)),
    # The upper bound rounds up by 1/24 to a double: ~10^8 grid steps past row_units.
    ((Fraction(10**15), Fraction(10**15) + Fraction(1, 3)), Fraction(10**15)),
]


def measurement(kind: str, bounds: tuple[Fraction, Fraction], center: Fraction) -> Measurement:
    grid = sum_grid if kind == "sum" else sum_sq_grid
    g, units = grid(bounds, center, "float")
    return Measurement("m0", kind, Col("x"), "float", bounds, center, g, units, units, Fraction(1))


@pytest.mark.parametrize("kind", ["sum", "sum_sq"])
@pytest.mark.parametrize(("bounds", "center"), CASES)
def test_each_row_stays_within_its_units(
    kind: str, bounds: tuple[Fraction, Fraction], center: Fraction
) -> None:
    m = measurement(kind, bounds, center)
    # The SUM's argument, i.e. one row's value in grid units.
    row = Compiler({}).measurement(m).args["this"].sql("duckdb")
    low, high = float(bounds[0]), float(bounds[1])
    values = [low, high, (low + high) / 2, low * (1 + 1e-16), high * (1 + 1e-16), 5e-324, 0.0]
    values += [float(x) for x in (bounds[0] - 1, bounds[1] + 1) if abs(x) < 10**308]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])
    con.execute("INSERT INTO t VALUES ('inf'), ('-inf'), ('nan'), (NULL)")
    results = [r[0] for r in con.execute(f"SELECT {row} FROM t").fetchall()]
    assert results[-1] is None  # NULL stays NULL: SUM skips it
    low_units = 0 if kind == "sum_sq" else -m.row_units
    assert all(low_units <= r <= m.row_units for r in results[:-1]), (results, m.row_units)


def test_the_clamp_stays_where_rounding_could_pass_the_units() -> None:
    far = measurement(
        "sum", (Fraction(10**15), Fraction(10**15) + Fraction(1, 3)), Fraction(10**15)
    )
    near = measurement("sum", (Fraction(0), Fraction(500000)), Fraction(0))
    for m, clamped in ((far, True), (near, False)):
        sql = Compiler({}).measurement(m).sql("duckdb")
        assert (f"< -{m.row_units} THEN -{m.row_units}" in sql) is clamped, sql
