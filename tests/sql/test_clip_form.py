"""The clip Dalenius generates is the same function on every engine: each value to its bounds.

``CASE WHEN x BETWEEN lo AND hi THEN x WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE x END`` tests
the common case first (``bench/clip.py``), and an expression other than a column keeps the
two-test form; both must keep NULL, send NaN to ``hi`` and ±∞ to the bounds, and leave ``-0.0``
and values on the bounds as they are, on DuckDB, PostgreSQL and Spark. Each engine evaluates the
generated SQL over the same rows and is compared with Python's clip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from sqlglot import exp
from tests.conformance.engines import EVERY_ENGINE, statement_runner

from dalenius.sql.emit.numeric import _clip

BOUNDS = [
    (Fraction(0), Fraction(100)),
    (Fraction(-1, 3), Fraction(7, 3)),
    (Fraction(-(10**300)), Fraction(10**300)),
]
DOUBLES = [
    None,
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    0.0,
    5e-324,
    -1.0,
    1.5,
    50.0,
    99.99999999999999,
    100.0,
    100.00000000000001,
    -1 / 3,
    7 / 3,
    1e300,
    1.7976931348623157e308,
    -1.7976931348623157e308,
]
INTEGERS = [None, -(2**63), -6, -5, 0, 7, 8, 2**63 - 1]


def reference(value: float | int | None, low: Fraction, high: Fraction) -> float | None:
    """Python's clip to the bounds as the engines read them (the nearest doubles)."""
    if value is None:
        return None
    lo, hi = float(low), float(high)
    if isinstance(value, float) and math.isnan(value):
        return hi
    return float(min(max(value, lo), hi))


def literal(value: float | int | None, kind: str) -> str:
    if value is None:
        return f"CAST(NULL AS {kind})"
    if isinstance(value, float) and not math.isfinite(value):
        text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return f"CAST('{text}' AS {kind})"
    return f"CAST('{value!r}' AS {kind})"


def query(values: list[Any], low: Fraction, high: Fraction, kind: str, dialect: str) -> str:
    double = "DOUBLE PRECISION" if dialect == "postgres" else "DOUBLE"
    typed = double if kind == "double" else "BIGINT"
    column = exp.column("x", quoted=True)
    forms = [column, exp.Paren(this=exp.Mul(this=column.copy(), expression=exp.Literal.number(1)))]
    clipped = ", ".join(
        f"CAST({_clip(value, low, high).sql(dialect=dialect)} AS {double})" for value in forms
    )
    rows = ", ".join(f"({i}, {literal(v, typed)})" for i, v in enumerate(values))
    return f"SELECT i, {clipped} FROM (VALUES {rows}) AS t(i, x) ORDER BY i"


def check(run: Callable[[str], list[tuple[Any, ...]]], dialect: str) -> None:
    cases: list[tuple[list[Any], str, tuple[Fraction, Fraction]]]
    cases = [(DOUBLES, "double", b) for b in BOUNDS]
    cases.append((INTEGERS, "bigint", (Fraction(-5), Fraction(7))))
    for values, kind, (low, high) in cases:
        rows = run(query(values, low, high, kind, dialect))
        expected = [reference(v, low, high) for v in values]
        for form in (1, 2):  # the column, then an expression
            got = [row[form] for row in rows]
            assert got == expected, (
                dialect,
                kind,
                form,
                low,
                high,
                list(zip(values, got, strict=True)),
            )


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_every_engine_clips_every_value_to_its_bounds(engine: str) -> None:
    with statement_runner(engine) as run:
        check(run, engine)
