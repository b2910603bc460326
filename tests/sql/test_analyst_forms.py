"""Forms analysts write that peers answer: SELECT aliases in HAVING and ORDER BY, the simple
``CASE x WHEN v``, and ``TOP n`` (refused, with ``LIMIT n`` as the fix)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import PrivacyRefusal, PublicAnswer, QueryError
from dalenius.core.loss import ApproxDP
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.expr import AggRef, BinOp, Case, Col, Func, Lit
from dalenius.sql.bind import to_query


@pytest.fixture(scope="module")
def adult(adult_catalog_path: Path) -> Catalog:
    return load_catalog(adult_catalog_path)


def test_an_alias_in_having_is_its_select_expression(adult: Catalog) -> None:
    aliased = to_query("SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING n > 10", adult)
    written = to_query(
        "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING COUNT(*) > 10", adult
    )
    assert aliased.query.having == written.query.having == BinOp(">", AggRef.of(0), Lit(10))
    assert len(aliased.query.aggregates) == 1  # the SELECT's own count, paid for once


def test_an_alias_inside_an_order_by_expression(adult: Catalog) -> None:
    q = to_query(
        "SELECT sex, AVG(age) AS a FROM adult GROUP BY sex ORDER BY a * 2 DESC", adult
    ).query
    assert q.order_by[0].expr == BinOp("*", AggRef.of(0), Lit(2))
    assert q.order_by[0].descending
    assert len(q.aggregates) == 1


def test_a_column_of_the_same_name_takes_precedence_over_an_alias(adult: Catalog) -> None:
    with pytest.raises(PrivacyRefusal, match="'age' is neither aggregated"):
        to_query("SELECT sex, COUNT(*) AS age FROM adult GROUP BY sex HAVING age > 10", adult)


def test_simple_case_is_case_when_equal(adult: Catalog) -> None:
    simple = to_query(
        "SELECT CASE sex WHEN 'Male' THEN 1 WHEN 'Female' THEN 2 END AS s, COUNT(*) "
        "FROM adult GROUP BY s",
        adult,
    ).query
    searched = to_query(
        "SELECT CASE WHEN sex = 'Male' THEN 1 WHEN sex = 'Female' THEN 2 END AS s, COUNT(*) "
        "FROM adult GROUP BY s",
        adult,
    ).query
    assert simple.group_by == searched.group_by
    key = simple.group_by[0]
    assert isinstance(key.expr, Case)
    assert key.expr.whens[0][0] == BinOp("=", Col("adult__sex"), Lit("Male"))
    assert key.keys == (1, 2, None)  # 'Unknown' takes no branch: the NULL key


@pytest.mark.parametrize(
    ("sql", "count"),
    [
        ("SELECT TOP 5 sex, COUNT(*) FROM adult GROUP BY sex", "5"),
        ("select top 10 sex, count(*) from adult group by sex", "10"),
    ],
)
def test_top_is_refused_with_limit_as_the_fix(adult: Catalog, sql: str, count: str) -> None:
    with pytest.raises(QueryError) as err:
        to_query(sql, adult)
    assert err.value.clause == "SELECT"
    assert f"LIMIT {count}" in (err.value.fix or "")
    fixed = sql.replace(f"TOP {count} ", "").replace(f"top {count} ", "") + f" LIMIT {count}"
    assert to_query(fixed, adult).query.limit == int(count)


def test_group_by_without_an_aggregate_over_public_keys_lists_them_for_free(
    adult: Catalog,
) -> None:
    with pytest.raises(PublicAnswer) as answer:
        to_query("SELECT sex FROM adult GROUP BY sex", adult)
    assert answer.value.rows == (("Female",), ("Male",), ("Unknown",))
    assert answer.value.columns == ("sex",) and answer.value.types == ("str",)
    assert "COUNT(*)" in (answer.value.fix or "")
    with pytest.raises(QueryError) as err:  # with HAVING: refused, the keys in the message
        to_query("SELECT sex FROM adult GROUP BY sex HAVING sex <> 'Male'", adult)
    assert not isinstance(err.value, PublicAnswer)
    assert "'Female', 'Male', 'Unknown'" in (err.value.why or "")
    assert to_query("SELECT sex, COUNT(*) FROM adult GROUP BY sex", adult).query.aggregates


def test_group_by_without_an_aggregate_over_private_keys_selects_them(adult: Catalog) -> None:
    q = to_query("SELECT occupation FROM adult GROUP BY occupation", adult).query
    assert [(a.func, a.hidden) for a in q.aggregates] == [("count", True)]
    assert [o.name for o in q.outputs] == ["occupation"]
    ledger = open_ledger(None)
    ledger.set_budget("analyst", adult.name, ApproxDP(Fraction(1), Fraction(1, 10**5)))
    with Session(adult, ledger=ledger, executor=DuckDBExecutor(adult)) as session:
        result = session.query(
            "SELECT occupation FROM adult GROUP BY occupation", epsilon=1, delta="1e-6"
        )
    assert result.columns == ("occupation",)
    assert result.loss.epsilon == 1
    assert "Prof-specialty" in {row[0] for row in result.rows}


def test_cast_of_a_released_value_rounds_or_converts(adult: Catalog) -> None:
    q = to_query(
        "SELECT CAST(AVG(age) AS INTEGER) AS a, CAST(COUNT(*) AS DOUBLE) AS n FROM adult", adult
    ).query
    assert [o.expr for o in q.outputs] == [
        Func("ROUND", (AggRef.of(0),)),
        BinOp("*", AggRef.of(1), Lit(1.0)),
    ]
    with pytest.raises(QueryError, match="DECIMAL"):
        to_query("SELECT CAST(AVG(age) AS DECIMAL(10, 2)) FROM adult", adult)
    with pytest.raises(QueryError, match="CAST is not supported"):
        to_query("SELECT COUNT(*) FROM adult WHERE CAST(age AS INTEGER) > 3", adult)


def test_post_processing_in_order_by(adult: Catalog) -> None:
    q = to_query(
        "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY SQRT(n) DESC", adult
    ).query
    assert q.order_by[0].expr == Func("SQRT", (AggRef.of(0),))
