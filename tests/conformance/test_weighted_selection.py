"""Weighted partition selection reads the same units-by-degree counts on every engine.

On the ``many`` dataset (units with up to 6 rows, capped at 6 rows in 6 groups, some keys NULL) a GROUP BY
without public keys uses weighted Gaussian selection; its exact input — per group, the units
holding 1..6 groups — and every other measurement must be bit-identical to DuckDB's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.conformance.engines import OTHER_ENGINES
from tests.support.exact import exact_data

from dalenius.engine.session import Session

QUERIES = [
    "SELECT code, COUNT(*) FROM mixed GROUP BY code",
    "SELECT day, code, COUNT(*), AVG(amount) FROM mixed WHERE amount > 0 GROUP BY day, code",
    "SELECT LOWER(code) AS c, SUM(amount) FROM mixed GROUP BY LOWER(code)",
]


SALT = 20261124
"""One bounding key for every engine: units over their caps keep the same rows everywhere."""


def measured(session: Session, sql: str) -> dict[str, Any]:
    """The exact measurements of ``sql`` as plain Python values."""
    _, exact = exact_data(session, sql, 1, 1e-6, salt=SALT)
    return {
        "groups": [tuple(g) for g in exact.groups],
        "scalars": {k: v.tolist() for k, v in exact.scalars.items()},
        "histograms": {k: v.tolist() for k, v in exact.histograms.items()},
    }


@pytest.mark.parametrize("sql", QUERIES)
def test_the_plan_selects_by_weight_and_degrees_stay_within_the_cap(
    sql: str, duckdb_sessions: dict[str, Session]
) -> None:
    plan, exact = exact_data(duckdb_sessions["many"], sql, 1, 1e-6)
    assert plan.selection is not None
    m = plan.measurement(plan.selection.measurement)
    assert m.kind == "degrees"
    degrees = exact.histograms[m.name]
    assert degrees.shape == (len(exact.groups), 6)
    assert degrees.sum() > 0
    # Every unit with a row in a group counts once there: the degree counts add up to the
    # group's distinct units, which no cap lowers here.
    assert (degrees.sum(axis=1) >= 1).all()


@pytest.mark.parametrize("engine", OTHER_ENGINES)
@pytest.mark.parametrize("sql", QUERIES)
def test_engine_matches_duckdb_on_weighted_selection(
    sql: str,
    engine: str,
    duckdb_sessions: dict[str, Session],
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    expected = measured(duckdb_sessions["many"], sql)
    got = measured(sessions_on(engine)["many"], sql)
    assert got == expected, sql
