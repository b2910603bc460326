"""The leading WITH list of the exact SQL, split for an engine that keeps MATERIALIZED itself."""

from __future__ import annotations

import pytest

from dalenius.executors.ctes import CTE, split_with


def test_each_expression_keeps_its_name_hint_and_body() -> None:
    sql = (
        'WITH __input AS NOT MATERIALIZED (SELECT "a" FROM t WHERE (x > 1)), '
        "`b c` AS MATERIALIZED (SELECT COUNT(*) AS n FROM __input), d AS (SELECT 1) "
        "SELECT n FROM `b c`"
    )
    split = split_with(sql)
    assert split is not None
    assert split.ctes == (
        CTE("__input", "NOT MATERIALIZED", 'SELECT "a" FROM t WHERE (x > 1)'),
        CTE("`b c`", "MATERIALIZED", "SELECT COUNT(*) AS n FROM __input"),
        CTE("d", "", "SELECT 1"),
    )
    assert [c.materialized for c in split.ctes] == [False, True, False]
    assert split.main == "SELECT n FROM `b c`"
    assert split.sql() == (
        'WITH __input AS (SELECT "a" FROM t WHERE (x > 1)), `b c` AS (SELECT COUNT(*) AS n FROM '
        "__input), d AS (SELECT 1) SELECT n FROM `b c`"
    )


@pytest.mark.parametrize(
    "body",
    [
        "SELECT ')' AS x",
        "SELECT 'it''s (' AS x",
        r"SELECT 'a\')' AS x",
        'SELECT 1 AS ")"',
        "SELECT 1 AS `)``(`",
        "SELECT 1 -- a comment )\n AS x",
        "SELECT /* ) */ 1 AS x",
        "WITH z AS (SELECT 1 AS x) SELECT x FROM (SELECT x FROM z) AS q",
    ],
)
def test_brackets_inside_literals_names_and_comments_are_not_counted(body: str) -> None:
    split = split_with(f"WITH a AS MATERIALIZED ({body}) SELECT * FROM a")
    assert split is not None
    assert split.ctes == (CTE("a", "MATERIALIZED", body),)
    assert split.main == "SELECT * FROM a"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "WITH a AS (SELECT 1",
        "WITH a AS (SELECT 1)",
        "WITH a (x) AS (SELECT 1) SELECT x FROM a",
        "WITH a AS (SELECT 'unterminated) SELECT 1",
        "WITH a AS (SELECT 1) , SELECT 1",
        "WITH AS (SELECT 1) SELECT 1",
    ],
)
def test_another_form_is_not_split(sql: str) -> None:
    assert split_with(sql) is None


def test_hints_are_read_in_any_case_and_spacing() -> None:
    split = split_with("with a as  not\n materialized (SELECT 1) SELECT 2")
    assert split is not None
    assert split.ctes == (CTE("a", "NOT MATERIALIZED", "SELECT 1"),)
