"""Extreme numbers are refused before any data is read, naming the clause or parameter.

Each test has a generous per-test timeout (the refusal must come in bounded time: before the
bounds on ``read_number`` and ``MAX_EPSILON``, ε = 1e8 took about a minute and 1e9 never
returned); the tests also check that nothing was read or charged.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import InvalidLossError, QueryError, UserError
from dalenius.core.loss import PureDP, as_fraction, read_number
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FOUR_HUNDRED_DIGITS = "0." + "3" * 400


class _CountingExecutor(DuckDBExecutor):
    """Counts the queries sent to the engine (a refusal must send none)."""

    reads = 0

    def fetch(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        type(self).reads += 1
        return super().fetch(sql, *args, **kwargs)


@pytest.fixture(scope="module")
def sessions(shared_data: Path) -> Iterator[dict[str, Session]]:
    out = {}
    for name in ("adult", "pums"):
        catalog = load_catalog(FIXTURES / f"{name}.toml")
        ledger = open_ledger(None)
        ledger.set_budget("analyst", catalog.name, PureDP(Fraction(10**6)))
        out[name] = Session(
            catalog, ledger=ledger, executor=_CountingExecutor(catalog), analyst="analyst"
        )
    yield out
    for s in out.values():
        s.close()


PARAMETERS = ["1e999", "1e-400", 5e-324, FOUR_HUNDRED_DIGITS + "1", "1e8", 1e9, "1e999999999"]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("epsilon", PARAMETERS, ids=str)
@pytest.mark.parametrize("mode", ["explain", "query"])
def test_extreme_epsilon_is_refused_naming_it(
    sessions: dict[str, Session], epsilon: Any, mode: str
) -> None:
    session = sessions["adult"]
    before = _CountingExecutor.reads
    with pytest.raises(InvalidLossError) as info:
        getattr(session, mode)("SELECT COUNT(*), AVG(age) FROM adult", epsilon)
    assert "epsilon" in str(info.value)
    assert info.value.fix
    assert _CountingExecutor.reads == before
    assert session.remaining() == PureDP(Fraction(10**6))


@pytest.mark.timeout(20)
@pytest.mark.parametrize("epsilon", ["1e999", FOUR_HUNDRED_DIGITS, "1e9"])
def test_extreme_epsilon_in_the_sql_is_refused(sessions: dict[str, Session], epsilon: str) -> None:
    sql = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {epsilon}) COUNT(*) FROM pums"
    with pytest.raises(UserError) as info:
        sessions["pums"].explain(sql)
    assert "epsilon" in str(info.value)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("dataset", "sql", "clause", "fragment"),
    [
        (
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "
            "SUM(income, contribution_bounds_per_group => (0, 1e400)) FROM pums",
            "SELECT",
            "contribution bound",
        ),
        (
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "
            "SUM(income, contribution_bounds_per_group => (0, 1e19)) FROM pums",
            "SELECT",
            "beyond the largest accepted",
        ),
        (
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, "
            "max_groups_contributed = 99999999999999999999999) COUNT(*) FROM pums",
            "WITH DIFFERENTIAL_PRIVACY",
            "max_groups_contributed must be a whole number from 1",
        ),
        (
            "pums",
            "SELECT SUM(income^60) FROM pums",
            "SELECT",
            "POWER applies only to released aggregates",
        ),
        (
            "pums",
            "SELECT MEDIAN(income^60) FROM pums",
            "SELECT",
            "POWER applies only to released aggregates",
        ),
        ("pums", "SELECT SUM(" + "*".join(["income"] * 4) + ") FROM pums", "SELECT", "beyond"),
        ("pums", "SELECT MEDIAN(" + "*".join(["income"] * 60) + ") FROM pums", "SELECT", "beyond"),
        ("adult", "SELECT COUNT(*) FROM adult WHERE age > 1e400", "WHERE", "out of range"),
        ("adult", "SELECT COUNT(*) FROM adult WHERE age > " + "9" * 400, "WHERE", "out of range"),
        ("adult", "SELECT SUM(age * 1e300) FROM adult", "SELECT", "beyond"),
    ],
)
def test_extreme_literals_are_refused_before_reading(
    sessions: dict[str, Session], dataset: str, sql: str, clause: str, fragment: str
) -> None:
    before = _CountingExecutor.reads
    for mode in ("explain", "query"):
        with pytest.raises(QueryError) as info:
            getattr(sessions[dataset], mode)(sql, 1)
        err = info.value
        assert err.clause == clause, str(err)
        assert fragment in str(err)
        assert err.span is not None and err.fix
    assert _CountingExecutor.reads == before


@pytest.mark.timeout(20)
def test_largest_accepted_epsilon_still_plans(sessions: dict[str, Session]) -> None:
    explanation = sessions["adult"].explain("SELECT COUNT(*), MEDIAN(age) FROM adult", 1000)
    assert explanation is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.1", Fraction(1, 10)), ("1/3", Fraction(1, 3)), ("-2.5e3", Fraction(-2500)), ("0", 0)],
)
def test_read_number_reads_ordinary_numbers_exactly(text: str, expected: Fraction) -> None:
    assert read_number(text, "x") == expected


@pytest.mark.timeout(5)
@pytest.mark.parametrize("text", ["1e999999999", "1e-999999999", "1" * 60, "1/0", "nan", "1e"])
def test_read_number_refuses_at_once(text: str) -> None:
    with pytest.raises(InvalidLossError):
        read_number(text, "x")


def test_computed_fractions_are_not_limited() -> None:
    tiny = Fraction(1, 3**300)
    assert as_fraction(tiny, "epsilon") == tiny
