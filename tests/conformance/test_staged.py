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


CORRELATED = (
    "SELECT COUNT(*) AS n FROM orders JOIN supplier ON suppkey = s_suppkey "
    "WHERE s_suppkey < 9 AND amount < (SELECT AVG(amount) FROM orders o2 "
    "WHERE o2.suppkey = s_suppkey)"
)


@pytest.mark.parametrize("engine", ["duckdb", *OTHER_ENGINES])
def test_a_correlated_subquery_runs_on_every_engine_and_agrees_with_duckdb(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    """The per-supplier query gives the same exact cells on every engine, and the outer query
    with a CASE of values per supplier (integer keys, negative and tiny values, NULL) too."""
    session, reference = sessions_on(engine)["shop"], sessions_on("duckdb")["shop"]
    staged = session._staged(CORRELATED, 1, None, None)
    assert isinstance(staged, StagedRelease)
    (stage,) = staged.stages
    assert stage.correlation is not None
    same_exact_units(reference, session, stage.correlation.stage_sql)
    values = ["12.5", "-3", "1e-05", "NULL", "64.25", "100", "0", "20.0"]
    case = stage.correlation.case([(str(k), v) for k, v in zip(range(1, 9), values, strict=True)])
    assert staged.replan([case]).plan.loss == staged.outer.loss
    subquery = CORRELATED[CORRELATED.index("(SELECT") :]
    same_exact_units(reference, session, CORRELATED.replace(subquery, f"({case})"))
    session.ledger.set_budget(session.analyst, session.dataset, PureDP(Fraction(100)))
    result = session.query(CORRELATED, epsilon=50)
    assert result.loss == PureDP(Fraction(50))
    assert any("per value of s_suppkey: 8 values" in n for n in result.notes)


LOOKUP = (
    "SELECT COUNT(*), SUM(amount) FROM orders WHERE amount < CASE suppkey WHEN 1 THEN 10 "
    "WHEN 1 THEN 500 WHEN 2 THEN 64.25 WHEN 3 THEN -1 WHEN 4 THEN NULL WHEN 6 THEN 1e300 "
    "WHEN 7 THEN 20.5 WHEN 8 THEN 100 WHEN 12 THEN 50 END"
)
"""A CASE Spark writes as a map lookup: a repeated key (the first branch wins), a NULL and a huge
value, keys no row holds (12) and rows whose key has no branch (5, 9, 10, 11)."""


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_a_long_case_of_constants_answers_alike_as_a_map_lookup(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    session, reference = sessions_on(engine)["shop"], sessions_on("duckdb")["shop"]
    exact = session.prepare(LOOKUP, 1).exact.main
    assert ("TRY_ELEMENT_AT(MAP(" in exact) is (engine == "spark")
    same_exact_units(reference, session, LOOKUP)
    # One branch fewer than the lookup needs (7): a CASE on every engine.
    shorter = LOOKUP.replace("WHEN 8 THEN 100 WHEN 12 THEN 50 ", "")
    assert "TRY_ELEMENT_AT" not in session.prepare(shorter, 1).exact.main
    same_exact_units(reference, session, shorter)
