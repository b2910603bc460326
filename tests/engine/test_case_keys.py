"""Keys of a ``CASE`` in GROUP BY: its NULL bin, and the keys the query's own WHERE rules out.

A ``CASE`` without ``ELSE`` is NULL for the rows no branch takes; SQL groups them under a NULL
key. That key is as public as the others (derived from the expression and the public domain), so
it is answered like them — dropping it silently answered a different question. And a branch no
row passing the ``WHERE`` can take forms no group (docs/sql.md, "Group keys").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from tests.conformance.datasets import write_mixed
from tests.support.exact import exact_answer, exact_data

import dalenius
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

BINS = (
    "SELECT CASE WHEN age < 25 THEN 1 WHEN age < 45 THEN 2 WHEN age < 65 THEN 3 END AS bin, "
    "COUNT(*) FROM adult GROUP BY bin"
)


@pytest.fixture
def session(adult_catalog_path: Path) -> Iterator[Session]:
    with dalenius.connect(adult_catalog_path, ledger="memory:", budget=10) as s:
        yield s


def _adult(shared_data: Path) -> pd.DataFrame:
    return pd.read_csv(shared_data / "adult.csv", skipinitialspace=True)


def test_the_null_bin_of_a_case_without_else_is_a_key(session: Session, shared_data: Path) -> None:
    plan, _ = exact_data(session, BINS)
    assert plan.query.group_by[0].keys == (1, 2, 3, None)
    answer = exact_answer(session, BINS)
    counts = {row[0]: row[1] for row in answer.rows}
    ages = _adult(shared_data)["age"]
    assert counts == {
        1: int((ages < 25).sum()),
        2: int(((ages >= 25) & (ages < 45)).sum()),
        3: int(((ages >= 45) & (ages < 65)).sum()),
        None: int((ages >= 65).sum()),
    }


def test_a_case_with_else_has_no_null_key(session: Session) -> None:
    plan, _ = exact_data(session, BINS.replace(" END", " ELSE 4 END"))
    assert plan.query.group_by[0].keys == (1, 2, 3, 4)


def test_explain_counts_the_null_key(session: Session) -> None:
    assert session.explain(BINS, epsilon=1).groups == (("bin", 4),)


def test_keys_the_where_rules_out_are_not_released(session: Session) -> None:
    sql = (
        "SELECT CASE WHEN age < 30 THEN 'young' ELSE 'older' END AS b, COUNT(*) FROM adult "
        "WHERE age >= 30 GROUP BY b"
    )
    plan, _ = exact_data(session, sql)
    assert plan.query.group_by[0].keys == ("older",)
    assert [row[0] for row in exact_answer(session, sql).rows] == ["older"]


def test_a_noisy_release_lists_the_null_bin(session: Session) -> None:
    result = session.query(BINS, epsilon=1)
    assert [row[0] for row in result.rows] == [1, 2, 3, None]


def test_the_null_bin_survives_a_subquery(session: Session) -> None:
    sql = (
        "SELECT bin, COUNT(*) FROM (SELECT CASE WHEN age < 25 THEN 1 WHEN age < 45 THEN 2 "
        "WHEN age < 65 THEN 3 END AS bin FROM adult) AS t GROUP BY bin"
    )
    plan, _ = exact_data(session, sql)
    assert plan.query.group_by[0].keys == (1, 2, 3, None)
    assert exact_answer(session, sql).rows == exact_answer(session, BINS).rows


def test_the_null_key_under_contribution_bounding(tmp_path: Path) -> None:
    """Persons bounded to a few rows: the NULL key is counted like the others (same bounding)."""
    catalog = write_mixed(tmp_path)
    with Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog)) as s:
        binned = (
            "SELECT CASE WHEN day IN ('mon', 'tue') THEN 'early' END AS d, COUNT(*) FROM mixed "
            "GROUP BY d"
        )
        plan, nulls = exact_data(s, binned, salt=17)
        _, elses = exact_data(s, binned.replace(" END", " ELSE 'late' END"), salt=17)
    assert plan.query.group_by[0].keys == ("early", None)
    assert nulls.groups == [("early",), (None,)]
    assert elses.groups == [("early",), ("late",)]
    assert [int(v) for v in nulls.scalars["m0"]] == [int(v) for v in elses.scalars["m0"]]
