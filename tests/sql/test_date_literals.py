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
