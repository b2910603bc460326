"""The plan rewrite rules (dalenius.plan.rewrite): each a no-op without its facts or on the other
kind of plan, each applied once, in the order of RULES, and what each one changes."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import QueryError
from dalenius.plan.compile import to_dp
from dalenius.plan.expr import Col
from dalenius.plan.nodes import (
    Field,
    Join,
    MeasuredQuery,
    Measurement,
    Query,
    Scan,
    Statistic,
    UnitAggregate,
    UnitSpec,
)
from dalenius.plan.rewrite import RULES, BigQueryOptions, Context, rewrite, unmeasured
from dalenius.plan.rewrite.bigquery_per_unit import bigquery_per_unit
from dalenius.plan.rewrite.bound_contributions import bound_contributions
from dalenius.plan.rewrite.measure_joins import measure_joins
from dalenius.plan.rewrite.public_table_keys import public_table_keys
from dalenius.plan.rewrite.share_measurements import share_measurements
from dalenius.sql.bind import to_query

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def pums() -> Catalog:
    return load_catalog(FIXTURES / "pums.toml")


def plain(catalog: Catalog, sql: str) -> Query:
    return to_query(sql, catalog).query


def test_rules_apply_in_order_bigquery_joins_bounding_sharing() -> None:
    expected = (
        bigquery_per_unit,
        measure_joins,
        public_table_keys,
        bound_contributions,
        share_measurements,
    )
    assert expected == RULES


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
    measured = MeasuredQuery(q, (), ())
    for rule in RULES:
        assert rule(measured, Context()) is measured


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


def test_bounding_is_placed_once_every_join_is_measured(pums: Catalog) -> None:
    q = plain(pums, "SELECT COUNT(*) FROM pums p JOIN educ_names e ON p.educ = e.educ")
    assert q.bounding is None  # the join's multiplicity is not known to the binder
    out = rewrite(q, Context(multiplicity=lambda table, column: 3))
    assert out.bounding is not None and out.bounding.child is out.relation
    assert (out.bounding.unit, out.bounding.max_rows, out.bounding.max_groups) == (
        "p__pid",
        2,
        2,
    )
    # each row its own unit: the join multiplies a row into as many rows and groups
    t, p = Scan("t", "t", ()), Scan("p", "p", (Field("p__k", "k", "p", "int"),))
    row = Query(Join(t, p, "t__k", "p__k", "inner", 3), UnitSpec("row", None, 1, 1, ""), (), (), ())
    b = rewrite(row, Context()).bounding
    assert b is not None and (b.max_rows, b.max_groups, b.enforced) == (3, 3, False)


def test_bounding_follows_a_changed_relation_and_is_not_hashed(pums: Catalog) -> None:
    q = plain(pums, "SELECT COUNT(*) FROM pums WHERE age > 1")
    assert q.bounding is not None and q.bounding.child is q.relation
    changed = replace(q, relation=q.relation.child)  # type: ignore[union-attr]
    placed = bound_contributions(changed, Context())
    assert placed.bounding is not None and placed.bounding.child is changed.relation
    unplaced = replace(q, bounding=None)
    assert to_dp(unplaced, Fraction(1)).fingerprint() == to_dp(q, Fraction(1)).fingerprint()


def test_sharing_merges_identical_measurements_in_first_use_order(pums: Catalog) -> None:
    q = plain(pums, "SELECT COUNT(*) FROM pums")
    count = Measurement(
        "m0", "count", None, "int", None, Fraction(0), Fraction(1), 1, 2, Fraction(0)
    )
    total = replace(count, name="m1", kind="sum", arg=Col("pums__age"))
    measured = MeasuredQuery(
        q,
        (count, total, replace(count, name="m2"), replace(total, name="m3")),
        (Statistic("count", ("m0",)), Statistic("sum", ("m1",)), Statistic("avg", ("m3", "m2"))),
        selection="m2",
    )
    out = share_measurements(measured, Context())
    assert [m.name for m in out.measurements] == ["m0", "m1"]
    assert [s.inputs for s in out.statistics] == [("m0",), ("m1",), ("m1", "m0")]
    assert out.selection == "m0"
    assert share_measurements(out, Context()) == out


@pytest.mark.parametrize(
    ("sql", "kinds"),
    [
        # an AVG reads an earlier plain SUM of its argument rather than a centred one
        ("SELECT SUM(age), AVG(age) FROM pums", ["sum", "count"]),
        # a later SUM is not looked back at: the AVG keeps its centred sum
        ("SELECT AVG(age), SUM(age) FROM pums", ["sum", "count", "sum"]),
        # the centred sum a variance needs is measured where the variance first asks for it
        ("SELECT SUM(age), AVG(age), VAR_POP(age) FROM pums", ["sum", "count", "sum", "sum_sq"]),
    ],
)
def test_sharing_an_avg_with_a_plain_sum(pums: Catalog, sql: str, kinds: list[str]) -> None:
    plan = to_dp(plain(pums, sql), Fraction(1))
    assert [m.kind for m in plan.measurements] == kinds
    assert [m.name for m in plan.measurements] == [f"m{i}" for i in range(len(kinds))]
