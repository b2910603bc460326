"""The plan rewrite rules (dalenius.plan.rewrite): each a no-op without its facts, each applied once,
in the order of RULES, and what each one changes."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import QueryError
from dalenius.plan.expr import Col
from dalenius.plan.nodes import Join, Query, Scan, UnitAggregate
from dalenius.plan.rewrite import RULES, BigQueryOptions, Context, rewrite, unmeasured
from dalenius.plan.rewrite.bigquery_per_unit import bigquery_per_unit
from dalenius.plan.rewrite.measure_joins import measure_joins
from dalenius.sql.to_plan import to_query

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def pums() -> Catalog:
    return load_catalog(FIXTURES / "pums.toml")


def plain(catalog: Catalog, sql: str) -> Query:
    return to_query(sql, catalog).query


def test_rules_apply_in_order_bigquery_then_joins() -> None:
    assert (bigquery_per_unit, measure_joins) == RULES


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*), SUM(age) FROM pums GROUP BY sex",
        "SELECT COUNT(*) FROM pums p JOIN educ_names e ON p.educ = e.educ",
    ],
)
def test_every_rule_leaves_the_query_alone_without_its_facts(pums: Catalog, sql: str) -> None:
    q = plain(pums, sql)
    for rule in RULES:
        assert rule(q, Context()) is q
    assert rewrite(q, Context()) is q


def test_bigquery_rule_aggregates_per_unit_and_group_first(pums: Catalog) -> None:
    q = plain(pums, "SELECT COUNT(*), SUM(age), AVG(age) FROM pums GROUP BY sex")
    out = bigquery_per_unit(q, Context(bigquery=BigQueryOptions()))
    inner = out.relation
    assert isinstance(inner, UnitAggregate) and inner.child == q.relation
    assert inner.keys == (q.group_by[0].expr,)
    # COUNT and SUM per unit are bounded by the unit's row cap (2); AVG by the value's bounds.
    assert [a.bounds for a in inner.aggregates] == [
        (Fraction(0), Fraction(2)),
        (Fraction(0), Fraction(200)),
        (Fraction(0), Fraction(100)),
    ]
    assert [a.func for a in out.aggregates] == ["sum", "sum", "avg"]
    assert all(isinstance(a.arg, Col) for a in out.aggregates)
    assert (out.unit.max_rows, out.unit.max_groups) == (q.unit.max_groups, q.unit.max_groups)


def test_bigquery_rule_uses_the_written_contribution_bounds(pums: Catalog) -> None:
    q = plain(pums, "SELECT SUM(age) FROM pums")
    options = BigQueryOptions(bounds={0: (Fraction(-5), Fraction(7))})
    out = bigquery_per_unit(q, Context(bigquery=options))
    assert out.aggregates[0].bounds == (Fraction(-5), Fraction(7))


def test_bigquery_rule_refuses_mixing_per_unit_and_row_level_statistics(pums: Catalog) -> None:
    q = plain(pums, "SELECT COUNT(*), MEDIAN(age) FROM pums")
    with pytest.raises(QueryError) as info:
        bigquery_per_unit(q, Context(bigquery=BigQueryOptions()))
    assert info.value.clause == "SELECT" and info.value.span is None  # the binder locates it


def test_the_binder_locates_a_rules_refusal(pums: Catalog) -> None:
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*), MEDIAN(age) FROM pums"
    with pytest.raises(QueryError) as info:
        to_query(sql, pums)
    assert info.value.span is not None and info.value.clause == "SELECT"


def test_measure_joins_reads_each_public_join_once_by_catalog_names(pums: Catalog) -> None:
    q = plain(pums, "SELECT COUNT(*) FROM pums p JOIN educ_names e ON p.educ = e.educ")
    assert unmeasured(q)
    asked: list[tuple[str, str]] = []

    def multiplicity(table: str, column: str) -> int:
        asked.append((table, column))
        return 3

    out = rewrite(q, Context(multiplicity=multiplicity))
    assert asked == [("educ_names", "educ")]
    assert isinstance(out.relation, Join) and out.relation.multiplicity == 3
    assert isinstance(out.relation.right, Scan)
    assert not unmeasured(out)
    assert rewrite(out, Context(multiplicity=multiplicity)) is out and len(asked) == 1
