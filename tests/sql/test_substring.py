"""SUBSTRING(text, start[, length]): a row-level text function with a constant start from 1 and
a constant length from 0 (where every engine agrees and none can fail), keys derived from a key
list by evaluating it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import QueryError
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.evaluate import evaluate
from dalenius.plan.expr import Func, Lit
from dalenius.sql.bind import to_query


@pytest.fixture(scope="module")
def session(adult_catalog_path: Path) -> Session:
    catalog = load_catalog(adult_catalog_path)
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (("Private", 1, 3), "Pri"),
        (("Private", 3), "ivate"),
        (("ab", 2, 5), "b"),
        (("ab", 4, 1), ""),
        (("Private", 1, 0), ""),
        (("Ünïcode", 2, 2), "nï"),
    ],
)
def test_its_value_on_public_text_is_sql_s(args: tuple[object, ...], value: str) -> None:
    assert evaluate(Func("SUBSTRING", tuple(Lit(a) for a in args)), {}) == value


@pytest.mark.parametrize(
    "call", ["SUBSTRING(sex, 1, 1)", "SUBSTRING(sex FROM 1 FOR 1)", "SUBSTR(sex, 1, 1)"]
)
def test_keys_follow_from_the_key_list(adult_catalog_path: Path, call: str) -> None:
    catalog = load_catalog(adult_catalog_path)
    query = to_query(f"SELECT {call} AS s, COUNT(*) FROM adult GROUP BY s", catalog).query
    assert query.group_by[0].keys == ("F", "M", "U")


def test_the_engine_answers_as_the_text_says(session: Session) -> None:
    answer = exact_answer(
        session,
        "SELECT SUBSTRING(sex, 1, 1) AS s, COUNT(*) FROM adult "
        "WHERE SUBSTRING(native_country, 1, 6) = 'United' GROUP BY s",
    )
    direct = exact_answer(
        session,
        "SELECT sex, COUNT(*) FROM adult WHERE native_country LIKE 'United%' GROUP BY sex",
    )
    assert sorted(r[1] for r in answer.rows) == sorted(r[1] for r in direct.rows)


@pytest.mark.parametrize(
    "call",
    [
        "SUBSTRING(native_country, 0, 2)",
        "SUBSTRING(native_country, -1, 2)",
        "SUBSTRING(native_country, 1, -1)",
        "SUBSTRING(native_country, age, 2)",
        "SUBSTRING(native_country, 1, age)",
    ],
)
def test_a_start_below_one_a_negative_or_a_column_length_is_refused(
    session: Session, call: str
) -> None:
    with pytest.raises(QueryError) as caught:
        session.plan(f"SELECT COUNT(*) FROM adult WHERE {call} = 'Un'", 1)
    assert caught.value.clause == "WHERE"
    assert "constant start from 1" in caught.value.what
    assert "SUBSTRING(column, 1, 2)" in (caught.value.fix or "")


def test_substring_of_a_number_is_refused(session: Session) -> None:
    with pytest.raises(QueryError, match="SUBSTRING needs text"):
        session.plan("SELECT COUNT(*) FROM adult WHERE SUBSTRING(age, 1, 1) = '3'", 1)
