"""A double is rounded to its grid the same way on every engine: to the nearest, halves to even.

The exact sum of a float column is a sum of integers (:func:`dalenius.sql.emit.numeric._nearest`
per row); if one engine rounded a half up and another to even, the same data would give two exact
answers. Each engine evaluates the generated rounding over the same doubles (exact halves of both
signs and parities, the doubles either side of a half, ``-0.0``, the ends of the range the grid
uses) and is compared with Python's ``round``, which rounds halves to even; the rows' sum is
compared too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlglot import exp
from tests.conformance.engines import EVERY_ENGINE, statement_runner

from dalenius.core.dialect import DIALECTS
from dalenius.sql.emit.numeric import _nearest

HALF_BELOW = 0.49999999999999994
"""The largest double below 0.5: rounds to 0 (``FLOOR(x + 0.5)`` in doubles gives 1)."""

VALUES = [
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.5,
    -1.5,
    2.5,
    -2.5,
    3.5,
    HALF_BELOW,
    -HALF_BELOW,
    0.5000000000000001,
    2.4999999999999996,
    2.5000000000000004,
    1e-300,
    7.0,
    -7.0,
    12345.5,
    12346.5,
    2.0**31 - 0.5,
    -(2.0**31) + 0.5,
    2.0**31,
    -(2.0**31),
    1073741823.75,
]


def query(dialect: str) -> str:
    double = "DOUBLE PRECISION" if dialect == "postgres" else "DOUBLE"
    rounded = _nearest(exp.column("x", quoted=True), DIALECTS[dialect]).sql(dialect=dialect)
    rows = ", ".join(f"({i}, CAST('{v!r}' AS {double}))" for i, v in enumerate(VALUES))
    values = f"(VALUES {rows}) AS t(i, x)"
    return (
        f"SELECT i, {rounded} AS r FROM {values} "
        f"UNION ALL SELECT -1, SUM({rounded}) FROM {values} ORDER BY i"
    )


def check(run: Callable[[str], list[tuple[Any, ...]]], dialect: str) -> None:
    rows = run(query(dialect))
    expected = [round(v) for v in VALUES]
    assert [int(r[1]) for r in rows[1:]] == expected, list(zip(VALUES, rows[1:], strict=True))
    assert rows[0][0] == -1 and int(rows[0][1]) == sum(expected)


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_every_engine_rounds_halves_to_even(engine: str) -> None:
    with statement_runner(engine) as run:
        check(run, engine)
