"""The rule that prevents silently dropped modifiers: every argument of every accepted node is
consumed by the binder or refused before binding.

The first tests walk sqlglot's expression classes the binder accepts (``validate.HANDLED``) and
their ``arg_types``: each argument the binder does not read is refused, naming the clause, and
each argument the table claims to read exists (a renamed argument in a new sqlglot would otherwise
slip through). The last test parses every query the conformance table answers and checks that each
node in it is one the table lists, so no accepted node escapes the check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp
from tests.sql_conformance.cases import answered

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import QueryError
from dalenius.sql import bigquery, validate
from dalenius.sql.bind import to_query
from dalenius.sql.parse import parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

UNREAD = sorted(
    (cls.__name__, arg)
    for cls, handled in validate.HANDLED.items()
    for arg in cls.arg_types
    if arg not in handled and arg not in validate._DIALECT_FLAGS
)


def test_every_handled_argument_exists_in_sqlglot() -> None:
    for cls, handled in validate.HANDLED.items():
        assert handled <= set(cls.arg_types), (cls.__name__, handled - set(cls.arg_types))


@pytest.mark.parametrize(("name", "arg"), UNREAD)
def test_every_unread_argument_is_refused(name: str, arg: str) -> None:
    cls = next(c for c in validate.HANDLED if c.__name__ == name)
    node = cls(**{arg: exp.Var(this="x")})
    select = exp.Select(expressions=[node]) if cls is not exp.Select else node
    with pytest.raises(QueryError) as info:
        validate.check_tree(select, "SELECT x")
    err = info.value
    assert err.clause, str(err)
    assert err.fix, str(err)
    assert "not supported" in str(err)


def test_dialect_flags_are_flags() -> None:
    """The few arguments accepted without reading are spellings, never clauses or operands."""
    for cls in validate.HANDLED:
        for arg in validate._DIALECT_FLAGS & set(cls.arg_types):
            node = cls(**{arg: True})
            assert not isinstance(node.args[arg], exp.Expr)


def test_answered_queries_use_only_listed_nodes() -> None:
    for case in answered():
        extracted = bigquery.extract(case.sql)
        tree = parse(extracted.sql, "bigquery" if extracted.enabled else "duckdb")
        unlisted = {type(n).__name__ for n in tree.walk() if type(n) not in validate.HANDLED} - {
            "Anonymous"
        }
        assert not unlisted, (case.name, unlisted)


@pytest.mark.parametrize(
    ("sql", "clause", "fragment"),
    [
        ("SELECT COUNT(*) FROM adult TABLESAMPLE 10%", "FROM", "TABLESAMPLE"),
        ("SELECT COUNT(*) FROM adult USING SAMPLE 10%", "USING SAMPLE", "USING SAMPLE"),
        ("SELECT COUNT(*) FROM adult a SEMI JOIN edu_levels l USING (education)", "JOIN", "SEMI"),
        ("SELECT COUNT(*) FROM adult a ANTI JOIN edu_levels l USING (education)", "JOIN", "ANTI"),
        ("SELECT sex, COUNT(*) FROM adult GROUP BY CUBE (sex)", "GROUP BY", "CUBE"),
        ("SELECT COUNT(*) FROM adult WHERE ROUND(age, 1, 1) > 3", "WHERE", "not supported"),
    ],
)
def test_modifiers_are_refused_with_clause_and_position(
    sql: str, clause: str, fragment: str
) -> None:
    catalog = load_catalog(FIXTURES / "adult.toml")
    with pytest.raises(QueryError) as info:
        to_query(sql, catalog)
    err = info.value
    assert err.clause == clause, str(err)
    assert fragment in str(err)
    assert err.span is not None and err.fix
