"""On PostgreSQL a computed double is clipped by one call that computes it once.

The two-test clip writes its value three times; on PostgreSQL a double computed by the
overflow-safe arithmetic's PL/pgSQL twins was then computed three times per row, each through
a function call (TPC-H Q1's discounted price: 13.5 s at SF 1 against 5.1 s computed once).
``pg_temp.dalenius_clip_p`` takes the value once and returns the same CASE. These check that the
generated SQL calls it with the value written once, and that it gives the CASE's value on
PostgreSQL and DuckDB's on the doubles where a clip can differ: NULL, NaN, ±∞, the bounds and
the doubles either side of them, and values out of a double's usual range.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from sqlglot import exp
from tests.conformance.engines import connect_admin, statement_runner

from dalenius.core.dialect import DUCKDB, POSTGRES
from dalenius.executors.pg_functions import FUNCTIONS
from dalenius.sql.emit.dialects import double_arithmetic
from dalenius.sql.emit.numeric import _clip

LOW, HIGH = Fraction(-3, 4), Fraction(30125, 1000)
VALUES = [
    None,
    math.nan,
    math.inf,
    -math.inf,
    -1e300,
    1e300,
    -0.75,
    math.nextafter(-0.75, -math.inf),
    math.nextafter(-0.75, math.inf),
    30.125,
    math.nextafter(30.125, math.inf),
    math.nextafter(30.125, -math.inf),
    0.0,
    5e-324,
    12.5,
]


def _computed(dialect_name: str) -> exp.Expr:
    """``x * 1 + 0``: on PostgreSQL the outer sum is a PL/pgSQL twin (its argument is a call)."""
    dialect = POSTGRES if dialect_name == "postgres" else DUCKDB
    x = exp.column("x", quoted=True)
    one, zero = exp.Literal.number(1), exp.Literal.number(0)
    return double_arithmetic("+", double_arithmetic("*", x, one, dialect), zero, dialect)


def _rows(run: object, clipped: exp.Expr, dialect: str) -> list[float | None]:
    double = "DOUBLE PRECISION" if dialect == "postgres" else "DOUBLE"
    rows = ", ".join(
        f"({i}, CAST({'NULL' if v is None else repr(repr(v))} AS {double}))"
        for i, v in enumerate(VALUES)
    )
    sql = f"SELECT i, {clipped.sql(dialect=dialect)} FROM (VALUES {rows}) AS t(i, x) ORDER BY i"
    return [r[1] for r in run(sql)]  # type: ignore[operator]


def test_the_sql_computes_the_value_once() -> None:
    sql = _clip(_computed("postgres"), LOW, HIGH, POSTGRES).sql(dialect="postgres")
    assert sql.startswith("pg_temp.dalenius_clip_p(") and sql.count("dalenius_add_p") == 1
    # Elsewhere the CASE stays: DuckDB, and a value that is a column.
    assert "CASE" in _clip(_computed("duckdb"), LOW, HIGH, DUCKDB).sql(dialect="duckdb")
    column = exp.column("x", quoted=True)
    assert "dalenius_clip_p" not in _clip(column, LOW, HIGH, POSTGRES).sql(dialect="postgres")


@pytest.mark.postgres
def test_the_call_gives_the_case_s_value_on_postgres_and_duckdb_s() -> None:
    pg = connect_admin()
    try:
        for statement in FUNCTIONS.values():
            pg.execute(statement)

        def run_pg(sql: str) -> list[tuple[object, ...]]:
            return pg.execute(sql).fetchall()

        called = _rows(run_pg, _clip(_computed("postgres"), LOW, HIGH, POSTGRES), "postgres")
        written = _rows(run_pg, _clip(_computed("postgres"), LOW, HIGH), "postgres")
    finally:
        pg.close()
    with statement_runner("duckdb") as run:
        duck = _rows(run, _clip(_computed("duckdb"), LOW, HIGH, DUCKDB), "duckdb")
    assert called == written == duck
    assert called[:4] == [None, 30.125, 30.125, -0.75]
