"""Finding subqueries used as values in the query's text, positions kept."""

from __future__ import annotations

import pytest

from dalenius.sql.scalar_subqueries import SENTINEL, find, outer_text, placeholder


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM t WHERE x > (SELECT AVG(x) FROM t)",
        "SELECT COUNT(*) FROM t WHERE (SELECT AVG(x) FROM t) < x",
        "SELECT COUNT(*) FROM t WHERE x > 2 * (SELECT AVG(x) FROM t) AND y = 1",
        "SELECT COUNT(*) FROM t WHERE x - (WITH u AS (SELECT x FROM t) SELECT AVG(x) FROM u) > 0",
    ],
)
def test_a_subquery_beside_an_operator_is_a_value(sql: str) -> None:
    (found,) = find(sql)
    assert sql[found.start] == "(" and sql[found.end] == ")"
    assert found.text in sql
    # The subquery's text keeps its place: the planner's positions are the analyst's.
    assert len(found.sql) == len(sql)
    assert found.sql.strip() == found.text
    assert sql.index(found.text) == found.sql.index(found.text)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM t WHERE x IN (SELECT x FROM u)",
        "SELECT COUNT(*) FROM t WHERE EXISTS (SELECT * FROM u WHERE u.k = t.k)",
        "SELECT COUNT(*) FROM (SELECT x FROM t) AS s",
        "SELECT COUNT(*) FROM t JOIN (SELECT k FROM u) AS s ON s.k = t.k",
        "SELECT COUNT(*) FROM t WHERE x > '(SELECT 1)'",
    ],
)
def test_other_subqueries_are_left_to_the_planner(sql: str) -> None:
    assert find(sql) == []


def test_the_outer_text_holds_padded_stand_ins_or_the_values() -> None:
    sql = (
        "SELECT COUNT(*) FROM t\nWHERE x > (SELECT AVG(x)\n FROM t) AND y < (SELECT MAX(y) FROM t)"
    )
    found = find(sql)
    assert [f.clause for f in found] == ["WHERE", "WHERE"]
    stand_ins = [placeholder(0, "avg"), placeholder(1, "count")]
    assert stand_ins == [f"{SENTINEL}.5", str(SENTINEL + 1)]
    padded = outer_text(sql, found, stand_ins, pad=True)
    assert len(padded) == len(sql) and padded.count("\n") == sql.count("\n")
    assert padded.index("AND") == sql.index("AND")
    assert padded[found[0].start :].startswith(stand_ins[0])
    assert outer_text(sql, found, ["1.5", "NULL"]).startswith(
        "SELECT COUNT(*) FROM t\nWHERE x > (1.5) AND"
    )
    assert outer_text(sql, found, ["1.5", "-2"]).endswith("AND y < (-2)")
    # A value longer than the subquery is written in parentheses, not padded.
    short = "SELECT COUNT(*) FROM t WHERE x > (SELECT 1)"
    assert outer_text(short, find(short), ["-1.2345678901234567e+300"], pad=True).endswith(
        "x > (-1.2345678901234567e+300)"
    )


def test_the_clause_of_each_subquery_is_known() -> None:
    sql = (
        "SELECT COUNT(*) - (SELECT COUNT(*) FROM u) FROM t WHERE x > (SELECT 1) "
        "GROUP BY k HAVING COUNT(*) > (SELECT 2) ORDER BY 1 LIMIT 1 + (SELECT 3)"
    )
    assert [f.clause for f in find(sql)] == ["SELECT", "WHERE", "HAVING", "LIMIT"]
    # Inside a function's or a condition's parentheses: the clause around them.
    nested = "SELECT SUM(x - (SELECT 1)) FROM t WHERE (x - (SELECT 2)) > 0 AND y IN (1, 2)"
    assert [f.clause for f in find(nested)] == ["SELECT", "WHERE"]


def test_a_subquery_inside_a_value_subquery_is_not_found_on_its_own() -> None:
    sql = "SELECT COUNT(*) FROM t WHERE x > (SELECT AVG(x) FROM t WHERE x < (SELECT MAX(x) FROM t))"
    (found,) = find(sql)
    assert found.text.endswith("(SELECT MAX(x) FROM t)")


def test_a_subquery_used_as_a_value_inside_another_form_is_found_nested() -> None:
    """Inside IN, EXISTS, a FROM subquery or a WITH: found, marked nested, its clause the
    subquery's own; one in the outer query itself is not nested."""
    sql = (
        "WITH w AS (SELECT * FROM t WHERE x > (SELECT AVG(x) FROM t)) "
        "SELECT COUNT(*) FROM w WHERE k IN (SELECT k FROM u WHERE y < (SELECT 2)) "
        "AND EXISTS (SELECT 1 FROM u WHERE u.k = w.k AND (SELECT 3) < y) "
        "AND z > (SELECT 4)"
    )
    found = find(sql)
    assert [f.text for f in found] == [
        "SELECT AVG(x) FROM t",
        "SELECT 2",
        "SELECT 3",
        "SELECT 4",
    ]
    assert [f.nested for f in found] == [True, True, True, False]
    assert [f.clause for f in found] == ["WHERE"] * 4
