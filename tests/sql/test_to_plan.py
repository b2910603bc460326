"""SQL → logical plan: the shapes of relations, keys and aggregates, and located errors.

The full table of answered and refused queries is in ``tests/sql_conformance``.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import QueryError
from dalenius.plan.expr import AggRef, BinOp, Col, Func, Lit
from dalenius.plan.nodes import Filter, Join, Project, Scan, UnitAggregate
from dalenius.sql.bind import to_query

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def adult(adult_catalog_path: Path) -> Catalog:
    return load_catalog(adult_catalog_path)


@pytest.fixture(scope="module")
def pums(shared_data: Path) -> Catalog:
    return load_catalog(FIXTURES / "pums.toml")


def test_count_star_reads_a_scan(adult: Catalog) -> None:
    q = to_query("SELECT COUNT(*) FROM adult", adult).query
    assert isinstance(q.relation, Scan) and q.relation.table == "adult"
    assert [a.func for a in q.aggregates] == ["count"]
    assert q.unit.kind == "row" and q.group_by == ()


def test_where_becomes_a_filter_over_field_ids(adult: Catalog) -> None:
    q = to_query("SELECT AVG(age) FROM adult WHERE age >= 40", adult).query
    assert isinstance(q.relation, Filter)
    assert q.relation.predicate == BinOp(">=", Col("adult__age"), Lit(40))
    assert q.aggregates[0].bounds == (Fraction(17), Fraction(80))


def test_group_keys_public_declared_and_derived(adult: Catalog) -> None:
    q = to_query(
        "SELECT sex, LEAST((age / 10) * 10, 60) AS a, COUNT(*) FROM adult GROUP BY sex, a", adult
    ).query
    sex, band = q.group_by
    assert sex.keys == ("Female", "Male", "Unknown")
    assert band.expr == Func(
        "LEAST", (BinOp("*", BinOp("/", Col("adult__age"), Lit(10)), Lit(10)), Lit(60))
    )
    assert band.keys == (10, 20, 30, 40, 50, 60)


@pytest.mark.parametrize(
    ("where", "keys"),
    [
        ("sex = 'Male'", ("Male",)),
        ("sex IN ('Female', 'Unknown') AND age > 30", ("Female", "Unknown")),
        ("NOT sex = 'Male' AND sex IS NOT NULL", ("Female", "Unknown")),
        ("sex <> 'Male' OR sex = 'Male'", ("Female", "Male", "Unknown")),
        # Not decided on the keys: another column, text order (collations differ), a function.
        ("sex = 'Male' OR age > 30", ("Female", "Male", "Unknown")),
        ("sex < 'M'", ("Female", "Male", "Unknown")),
        ("LOWER(sex) = 'male'", ("Female", "Male", "Unknown")),
        # Nothing left: every key is kept, as without the condition.
        ("sex = 'Other'", ("Female", "Male", "Unknown")),
    ],
)
def test_keys_the_where_excludes_form_no_group(adult: Catalog, where: str, keys: tuple) -> None:
    q = to_query(f"SELECT sex, COUNT(*) FROM adult WHERE {where} GROUP BY sex", adult).query
    assert q.group_by[0].keys == keys


def test_a_derived_key_keeps_only_what_the_where_lets_through(adult: Catalog) -> None:
    sql = "SELECT (age / 10) * 10 AS a, COUNT(*) FROM adult WHERE age >= 45 AND age < 70 GROUP BY a"
    assert to_query(sql, adult).query.group_by[0].keys == (40, 50, 60)
    sql = "SELECT education_num % 4 AS r, COUNT(*) FROM adult WHERE education_num IN (4, 8) GROUP BY r"
    assert to_query(sql, adult).query.group_by[0].keys == (0,)


def test_group_key_without_public_domain_is_private(adult: Catalog) -> None:
    q = to_query("SELECT occupation, COUNT(*) FROM adult GROUP BY occupation", adult).query
    assert q.group_by[0].keys is None


def test_public_join_waits_for_its_multiplicity(adult: Catalog) -> None:
    q = to_query(
        "SELECT COUNT(*) FROM adult a JOIN edu_levels l ON a.education = l.education", adult
    ).query
    assert isinstance(q.relation, Join) and q.relation.multiplicity == -1


def test_per_unit_subquery_and_projection(pums: Catalog) -> None:
    q = to_query(
        "SELECT AVG(n) FROM (SELECT pid, COUNT(*) AS n FROM pums GROUP BY pid) t", pums
    ).query
    assert isinstance(q.relation, UnitAggregate)
    assert q.unit.kind == "aggregated"
    assert q.aggregates[0].bounds == (
        Fraction(0),
        Fraction(2),
    )  # COUNT per unit, clamped to max_rows
    q = to_query("SELECT SUM(k) FROM (SELECT income / 1000 AS k FROM pums) t", pums).query
    assert isinstance(q.relation, Project)
    assert q.aggregates[0].bounds == (Fraction(0), Fraction(500))
    assert q.unit.kind == "id" and q.unit.field is not None  # the unit id is carried along


def test_outputs_hidden_aggregates_and_post_processing(adult: Catalog) -> None:
    q = to_query(
        "SELECT sex, ROUND(AVG(age), 1) AS a FROM adult GROUP BY sex HAVING COUNT(*) > 10 ORDER BY a DESC LIMIT 2",
        adult,
    ).query
    assert [a.label for a in q.aggregates] == ["AVG(age)", "COUNT(*)"]
    assert [a.hidden for a in q.aggregates] == [False, True]
    assert q.outputs[1].expr == Func("ROUND", (AggRef.of(0), Lit(1)))
    assert q.limit == 2 and q.order_by[0].descending


def test_bigquery_options_are_read(pums: Catalog) -> None:
    resolved = to_query(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6, max_groups_contributed = 1, "
        "privacy_unit_column = pid) COUNT(*) FROM pums",
        pums,
    )
    assert resolved.options.epsilon == Fraction(1, 2) and resolved.options.delta == Fraction(
        1, 10**6
    )
    assert resolved.query.unit.max_groups == 1
    assert isinstance(resolved.query.relation, UnitAggregate)  # per-unit totals, BigQuery's meaning


def test_refusal_points_at_line_and_column(adult: Catalog) -> None:
    sql = "SELECT COUNT(*)\nFROM adult\nWHERE agee > 3"
    with pytest.raises(QueryError) as info:
        to_query(sql, adult)
    err = info.value
    assert err.span is not None
    assert (err.span.line, err.span.column, err.span.text) == (3, 7, "agee")
    assert "WHERE agee > 3\n        ^^^^" in str(err)
    assert err.to_dict()["line"] == 3


def test_bigquery_clause_keeps_positions(pums: Catalog) -> None:
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(nope) FROM pums"
    with pytest.raises(QueryError) as info:
        to_query(sql, pums)
    assert info.value.span is not None and info.value.span.column == sql.index("nope") + 1


def test_syntax_error_has_position(adult: Catalog) -> None:
    with pytest.raises(QueryError) as info:
        to_query("SELECT COUNT(* FROM adult", adult)
    assert info.value.span is not None and info.value.span.line == 1
    assert "syntax error" in str(info.value)
