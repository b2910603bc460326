"""Date constants: ``DATE 'YYYY-MM-DD'`` and ``CAST('…' AS DATE)`` are checked when the query is
planned (no row is ever cast) and plan exactly as the plain string literal does."""

from __future__ import annotations

from pathlib import Path

import pytest

import dalenius
from dalenius.core.errors import QueryError
from dalenius.datasets.census import write_demo


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dalenius.Session:
    catalog = write_demo(tmp_path_factory.mktemp("census"), n=500)
    return dalenius.connect(str(catalog), budget=10, ledger="memory:")


@pytest.mark.parametrize(
    "constant", ["DATE '1980-01-01'", "CAST('1980-01-01' AS DATE)", "'1980-01-01'"]
)
def test_a_date_constant_plans_as_the_string_literal(
    session: dalenius.Session, constant: str
) -> None:
    plain = session.plan("SELECT COUNT(*) FROM people WHERE date_of_birth < '1980-01-01'", 1)
    plan = session.plan(f"SELECT COUNT(*) FROM people WHERE date_of_birth < {constant}", 1)
    assert plan.fingerprint() == plain.fingerprint()


def test_a_date_that_does_not_exist_is_refused_at_its_clause(session: dalenius.Session) -> None:
    sql = "SELECT COUNT(*) FROM people WHERE date_of_birth < DATE '1980-13-01'"
    with pytest.raises(QueryError) as caught:
        session.plan(sql, 1)
    assert caught.value.clause == "WHERE"
    assert "is not a date" in caught.value.what and "YYYY-MM-DD" in (caught.value.fix or "")


def test_a_cast_of_a_column_is_still_refused(session: dalenius.Session, tmp_path: Path) -> None:
    with pytest.raises(QueryError, match="CAST is not supported"):
        session.plan("SELECT COUNT(*) FROM people WHERE CAST(zip AS DATE) < DATE '1980-01-01'", 1)


@pytest.mark.parametrize(
    ("constant", "folded"),
    [
        ("DATE '1998-12-01' - INTERVAL '90' DAY", "1998-09-02"),
        ("DATE '1994-01-01' + INTERVAL '1' YEAR", "1995-01-01"),
        ("date '1993-07-01' + interval '3' month", "1993-10-01"),
        ("DATE '1980-01-31' + INTERVAL '1' MONTH", "1980-02-29"),
        ("DATE '1980-02-29' - INTERVAL '1' YEAR", "1979-02-28"),
        ("INTERVAL '2' WEEKS + DATE '1980-01-01'", "1980-01-15"),
        ("DATE '1980-01-01' + INTERVAL '3 months'", "1980-04-01"),
        ("DATE '1980-01-01' + INTERVAL 1 YEAR - INTERVAL '1' DAY", "1980-12-31"),
        ("(DATE '1980-03-31' - INTERVAL '1' MONTH) + INTERVAL '-1' DAY", "1980-02-28"),
    ],
)
def test_date_arithmetic_on_constants_folds_to_a_date_when_planned(
    session: dalenius.Session, constant: str, folded: str
) -> None:
    plain = session.plan(f"SELECT COUNT(*) FROM people WHERE date_of_birth < '{folded}'", 1)
    plan = session.plan(f"SELECT COUNT(*) FROM people WHERE date_of_birth < {constant}", 1)
    assert plan.fingerprint() == plain.fingerprint()


@pytest.mark.parametrize("amount", [-400, -13, -1, 0, 1, 2, 11, 12, 25])
@pytest.mark.parametrize("unit", ["DAY", "MONTH", "YEAR"])
@pytest.mark.parametrize("day", ["2000-01-31", "2000-02-29", "1999-03-31", "1998-12-01"])
def test_folding_agrees_with_the_engines_own_date_arithmetic(
    day: str, amount: int, unit: str
) -> None:
    """DuckDB, an independent oracle, computes the same dates (month ends clamped alike)."""
    import datetime

    import duckdb

    from dalenius.sql.expressions import shifted

    with duckdb.connect() as con:
        engine = con.execute(
            f"SELECT CAST(DATE '{day}' + INTERVAL '{amount}' {unit} AS DATE)"
        ).fetchall()
    assert shifted(datetime.date.fromisoformat(day), amount, unit) == engine[0][0]


@pytest.mark.parametrize(
    ("where", "what", "clause_text"),
    [
        (
            "date_of_birth + INTERVAL '1' DAY < DATE '1980-01-01'",
            "INTERVAL is supported only",
            "d < DATE",
        ),
        (
            "date_of_birth < DATE '1980-01-01' + INTERVAL '1' HOUR",
            "INTERVAL '1' HOUR is not supported",
            "DAY",
        ),
        ("date_of_birth < DATE '1980-01-01' + INTERVAL '1.5' DAY", "is not supported", "DAY"),
        ("date_of_birth < DATE '9999-06-01' + INTERVAL '1' YEAR", "outside the years", "smaller"),
        (
            "date_of_birth < '1980-01-01' + INTERVAL '1' YEAR",
            "INTERVAL is supported only",
            "d < DATE",
        ),
        ("date_of_birth < DATE '1980-02-30' + INTERVAL '1' DAY", "is not a date", "YYYY-MM-DD"),
    ],
)
def test_other_interval_arithmetic_is_refused_at_its_clause(
    session: dalenius.Session, where: str, what: str, clause_text: str
) -> None:
    with pytest.raises(QueryError) as caught:
        session.plan(f"SELECT COUNT(*) FROM people WHERE {where}", 1)
    assert caught.value.clause == "WHERE"
    assert what in caught.value.what
    assert clause_text in (caught.value.fix or "")
