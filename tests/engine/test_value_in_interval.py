"""Every released value lies inside its own interval (a property over generated queries).

Counts are released clamped at 0, and sums of values that are all ≥ 0 (or all ≤ 0) clamped to
that sign — value and interval together, as post-processing, so the interval still covers the
exact answer whenever the unclamped one did. Post-processed outputs (``ABS(SUM(x))``,
``ROUND(AVG(x), 1)``) get the interval-arithmetic image of their aggregate's interval. Small ε and
near-empty filters make negative noisy counts and sums common, where the old rule released
``-7`` with the interval ``[-1, 0]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import PureDP
from dalenius.engine.postprocess import sign_range
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

AGGREGATES = [
    "COUNT(*)",
    "COUNT(workclass)",
    "COUNT(DISTINCT education)",
    "SUM(capital_loss)",
    "SUM(age - 50)",
    "SUM(-age)",
    "SUM(hours_per_week)",
    "AVG(age)",
    "VAR_POP(hours_per_week)",
    "STDDEV(age)",
]
WRAPPERS = [
    "{}",
    "ROUND({}, 1)",
    "ABS({})",
    "{} * 2",
    "-{}",
    "{} - 100",
    "GREATEST({}, 10)",
    "SQRT({})",
    "LN({})",
    "EXP({} / 1000)",
    "POWER({}, 2)",
    "POWER({} - 5, 3)",
    "POWER({}, 0.5)",
    "POWER({}, -1)",
    "CAST({} AS INTEGER)",
    "CAST({} AS DOUBLE)",
]
FILTERS = [
    "",
    "WHERE age > 85",
    "WHERE sex = 'Unknown'",
    "WHERE workclass = 'Never-worked'",
    "WHERE workclass NOT LIKE '%gov%'",
]
GROUPS = ["", "sex"]


@pytest.fixture(scope="module")
def session(shared_data: Path) -> Iterator[Session]:
    catalog = load_catalog(FIXTURES / "adult.toml")
    ledger = open_ledger(None)
    ledger.set_budget("analyst", catalog.name, PureDP(Fraction(10**6)))
    with Session(catalog, ledger=ledger, executor=DuckDBExecutor(catalog), analyst="analyst") as s:
        yield s


queries = st.tuples(
    st.lists(
        st.tuples(st.sampled_from(AGGREGATES), st.sampled_from(WRAPPERS)), min_size=1, max_size=3
    ),
    st.sampled_from(FILTERS),
    st.sampled_from(GROUPS),
    st.sampled_from(["0.01", "0.1", "1"]),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(queries)
def test_every_released_value_is_inside_its_interval(
    session: Session, query: tuple[list[tuple[str, str]], str, str, str]
) -> None:
    outputs, where, group, epsilon = query
    select = ", ".join(w.format(a) for a, w in outputs)
    if group:
        select = f"{group}, {select}"
    sql = f"SELECT {select} FROM adult {where}" + (f" GROUP BY {group}" if group else "")
    result = session.query(sql, epsilon)
    for row, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        for value, low, high in zip(row, lows, highs, strict=True):
            if value is None or low is None or high is None:
                continue
            assert low <= value <= high, (sql, value, low, high)


def test_counts_are_never_negative(session: Session) -> None:
    for _ in range(20):
        result = session.query("SELECT COUNT(*) FROM adult WHERE sex = 'Unknown'", "0.01")
        (value,), (low,), (high,) = result.rows[0], result.lows[0], result.highs[0]
        assert 0 <= low <= value <= high


def test_sign_range_follows_the_bounds() -> None:
    assert sign_range((Fraction(0), Fraction(5))) == (0, None)
    assert sign_range((Fraction(-5), Fraction(0))) == (None, 0)
    assert sign_range((Fraction(-1), Fraction(1))) == (None, None)
    assert sign_range(None) == (None, None)
