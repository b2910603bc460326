"""BigQuery's clause is found among sqlglot's tokens: never inside a string literal or a comment."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import QueryError
from dalenius.plan.expr import Lit
from dalenius.plan.nodes import Filter
from dalenius.sql.bigquery import extract
from dalenius.sql.bind import to_query

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUSE = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1)"


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT COUNT(*) FROM adult WHERE workclass = '{CLAUSE}'",
        f"SELECT COUNT(*) FROM adult -- {CLAUSE}",
        f"SELECT COUNT(*) FROM adult /* {CLAUSE} */",
        f"/* {CLAUSE} */ SELECT COUNT(*) FROM adult",
        f'SELECT COUNT(*) AS "{CLAUSE}" FROM adult',
    ],
)
def test_clause_text_in_literals_and_comments_is_not_the_clause(sql: str) -> None:
    out = extract(sql)
    assert not out.enabled
    assert out.options == {}
    assert out.sql == sql  # nothing blanked, the literal is not rewritten


def test_the_literal_reaches_the_plan_unchanged() -> None:
    catalog = load_catalog(FIXTURES / "adult.toml")
    resolved = to_query(f"SELECT COUNT(*) FROM adult WHERE workclass = '{CLAUSE}'", catalog)
    assert resolved.options.epsilon is None
    relation = resolved.query.relation
    assert isinstance(relation, Filter)
    assert Lit(CLAUSE) in [relation.predicate.left, relation.predicate.right]  # type: ignore[union-attr]


def test_bounds_text_in_a_literal_is_not_a_bound() -> None:
    sql = (
        f"{CLAUSE} SUM(income, contribution_bounds_per_group => (0, 10)) FROM pums "
        "WHERE 'x, contribution_bounds_per_group => (5, 6)' <> ''"
    )
    out = extract(sql)
    assert out.enabled and out.options == {"epsilon": "1"}
    assert list(out.bounds.values()) == [(Fraction(0), Fraction(10))]
    assert "'x, contribution_bounds_per_group => (5, 6)'" in out.sql
    assert len(out.sql) == len(sql)


def test_the_clause_across_lines_keeps_positions() -> None:
    sql = (
        "SELECT\n  WITH DIFFERENTIAL_PRIVACY\n  OPTIONS (epsilon = 0.5, delta = 1e-6,\n"
        "  privacy_unit_column = 'pid')\n  COUNT(*) FROM pums"
    )
    out = extract(sql)
    assert out.options == {"epsilon": "0.5", "delta": "1e-6", "privacy_unit_column": "pid"}
    assert out.sql.count("\n") == sql.count("\n") and len(out.sql) == len(sql)
    assert out.sql.split() == ["SELECT", "COUNT(*)", "FROM", "pums"]


def test_a_parenthesis_inside_an_option_string_does_not_end_the_list() -> None:
    out = extract(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (privacy_unit_column = ')') COUNT(*) FROM t"
    )
    assert out.options == {"privacy_unit_column": ")"}


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1 COUNT(*) FROM pums", "not closed"),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon) COUNT(*) FROM pums", "cannot read"),
        (
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, epsilon = 2) COUNT(*) FROM pums",
            "given twice",
        ),
        (
            f"{CLAUSE} SUM(income, contribution_bounds_per_group => (9, 1)) FROM pums",
            "above the upper one",
        ),
        (
            f"{CLAUSE} SUM(income, contribution_bounds_per_group => (a, 1)) FROM pums",
            "finite number",
        ),
    ],
)
def test_clause_errors_are_located(sql: str, fragment: str) -> None:
    catalog = load_catalog(FIXTURES / "pums.toml")
    with pytest.raises(QueryError) as info:
        to_query(sql, catalog)
    err = info.value
    assert fragment in str(err)
    assert err.clause and err.span is not None and err.fix
