"""Keys the WHERE lists: a GROUP BY expression with no public domain, which the query's own
``WHERE`` restricts to literals (``expr IN ('a', 'b')``, ``expr = 'a'``), takes those literals as
its public keys (:func:`dalenius.plan.derive.listed_keys`).

Every grouped row passed the condition, so its key is one of the literals, and the literals are
the analyst's, public: each is answered (an empty one as noise around zero), with no private
selection and no δ. These check the keys found and refused, that the exact answers are the
groups' own counts, and that explain says where the keys came from.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import QueryError
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.derive import listed_keys
from dalenius.plan.expr import BinOp, Col, Func, InList, Lit


@pytest.fixture
def session(adult_catalog_path: Path) -> Session:
    catalog = load_catalog(adult_catalog_path)
    ledger = open_ledger(None)
    ledger.set_budget("analyst", "adult", PureDP(Fraction(10)))
    return Session(catalog, ledger=ledger, executor=DuckDBExecutor(catalog))


def _and(*parts: object) -> object:
    node = parts[0]
    for part in parts[1:]:
        node = BinOp("AND", node, part)  # type: ignore[arg-type]
    return node


COUNTRY = Col("native_country")
CANADA_MEXICO = InList(COUNTRY, (Lit("Canada"), Lit("Mexico")))


@pytest.mark.parametrize(
    ("predicate", "kind", "keys"),
    [
        (CANADA_MEXICO, "str", ("Canada", "Mexico")),
        (BinOp("=", Lit("Peru"), COUNTRY), "str", ("Peru",)),
        (_and(BinOp(">", Col("age"), Lit(30)), CANADA_MEXICO), "str", ("Canada", "Mexico")),
        # Two lists: the keys both allow, in the first list's order.
        (_and(CANADA_MEXICO, InList(COUNTRY, (Lit("Mexico"), Lit("Peru")))), "str", ("Mexico",)),
        (InList(Col("fnlwgt"), (Lit(3), Lit(1), Lit(3))), "int", None),  # another expression
    ],
)
def test_the_keys_a_where_lists(predicate: object, kind: str, keys: tuple | None) -> None:
    assert listed_keys(COUNTRY, predicate, kind) == keys  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("predicate", "kind"),
    [
        (InList(COUNTRY, (Lit("Canada"),), negated=True), "str"),  # NOT IN lists what is out
        (BinOp("OR", CANADA_MEXICO, BinOp(">", Col("age"), Lit(30))), "str"),  # not every row
        (InList(COUNTRY, (Lit("Canada"), Col("occupation"))), "str"),  # not all literals
        (InList(COUNTRY, (Lit("Canada"), Lit(1))), "str"),  # a literal of another type
        (InList(COUNTRY, (Lit(1.5),)), "float"),  # floats: equality is brittle
        (InList(COUNTRY, (Lit("Canada"), Lit(None))), "str"),  # NULL matches nothing
        (BinOp("<>", COUNTRY, Lit("Canada")), "str"),
    ],
)
def test_a_where_that_lists_nothing_sure_gives_no_keys(predicate: object, kind: str) -> None:
    assert listed_keys(COUNTRY, predicate, kind) is None  # type: ignore[arg-type]


def test_an_expression_is_matched_as_written() -> None:
    prefix = Func("substring", (COUNTRY, Lit(1), Lit(2)))
    where = InList(prefix, (Lit("Ca"), Lit("Me")))
    assert listed_keys(prefix, where, "str") == ("Ca", "Me")
    assert listed_keys(COUNTRY, where, "str") is None


def test_listed_keys_are_answered_without_delta(session: Session, shared_data: Path) -> None:
    """``native_country`` has no key list: without the WHERE's list its groups would need a
    private selection (and δ); with it, every listed country is a cell, an absent one too."""
    sql = (
        "SELECT native_country, COUNT(*) AS n FROM adult "
        "WHERE native_country IN ('Canada', 'Mexico', 'Atlantis') GROUP BY native_country"
    )
    prepared = session.prepare(sql, Fraction(1), None)
    (key,) = prepared.plan.query.group_by
    assert key.keys == ("Canada", "Mexico", "Atlantis") and key.listed
    assert prepared.plan.selection is None
    data = pd.read_csv(shared_data / "adult.csv")
    counts = data["native_country"].value_counts()
    exact = {row[0]: row[1] for row in exact_answer(session, sql).rows}
    assert exact == {
        "Canada": counts["Canada"],
        "Mexico": counts["Mexico"],
        "Atlantis": 0,
    }
    result = session.query(sql, 1)
    assert [r[0] for r in result.rows] == ["Canada", "Mexico", "Atlantis"]
    for row, low, high in zip(result.rows, result.lows, result.highs, strict=True):
        assert low[1] <= row[1] <= high[1]


def test_without_the_list_the_groups_still_need_delta(session: Session) -> None:
    with pytest.raises(QueryError, match="delta"):
        session.prepare(
            "SELECT native_country, COUNT(*) FROM adult WHERE age > 30 GROUP BY native_country",
            Fraction(1),
            None,
        )


def test_explain_says_where_the_keys_came_from(session: Session) -> None:
    shown = session.explain(
        "SELECT SUBSTRING(occupation, 1, 4) AS job, COUNT(*) FROM adult "
        "WHERE SUBSTRING(occupation, 1, 4) IN ('Tech', 'Sale') GROUP BY job",
        1,
    )
    assert shown.groups == (("job", 2),)
    assert any("job's 2 keys are the values the WHERE lists for it" in n for n in shown.notes)
