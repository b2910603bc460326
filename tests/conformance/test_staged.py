"""A subquery used as a value is released first on every engine, and the outer query answered
with its released value written in: the whole runs end to end on DuckDB, PostgreSQL and Spark
(the constant is a SQL literal each engine reads as a number), and the outer query's exact
answer for a given constant is the same on each.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest
from tests.conformance.engines import OTHER_ENGINES
from tests.support.exact import same_exact_units

from dalenius.core.loss import PureDP
from dalenius.engine.session import Session
from dalenius.engine.staged_release import StagedRelease

STAGED = (
    "SELECT s_name, COUNT(*) AS n FROM orders JOIN supplier ON suppkey = s_suppkey "
    "WHERE amount > (SELECT AVG(amount) FROM orders) GROUP BY s_name"
)
CONSTANTS = ["12.5", "-3", "1e-05", "NULL"]


@pytest.mark.parametrize("engine", ["duckdb", *OTHER_ENGINES])
def test_a_staged_query_runs_on_every_engine_and_agrees_with_duckdb(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    session, reference = sessions_on(engine)["shop"], sessions_on("duckdb")["shop"]
    staged = session._staged(STAGED, 1, None, None)
    assert isinstance(staged, StagedRelease)
    for constant in CONSTANTS:
        outer = staged.replan([constant])
        assert outer.plan.loss == staged.outer.loss
        text = STAGED.replace("(SELECT AVG(amount) FROM orders)", f"({constant})")
        same_exact_units(reference, session, text)
    session.ledger.set_budget(session.analyst, session.dataset, PureDP(Fraction(100)))
    result = session.query(STAGED, epsilon=50)
    assert result.loss == PureDP(Fraction(50))
    assert any(n.startswith("The subquery (SELECT AVG(amount) FROM orders)") for n in result.notes)
