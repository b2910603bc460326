"""A release product's filter (``where=``), parsed on its own before it joins any SQL text.

Products (density, hierarchy, synthetic rows, flows) build one exact query around the analyst's
filter. Spliced as text, ``age > 200) OR (1 = 1`` would escape its parentheses and change which
rows the product's own conditions (a NULL guard, a bin range) cover. Here the filter is checked
(size, nesting), parsed as exactly one condition, and written back by the parser inside
parentheses: the text that reaches the binder is one expression, which the binder then resolves
and types like any query's ``WHERE``.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dalenius.core.errors import QueryError
from dalenius.sql import validate
from dalenius.sql.parse import DEFAULT_DIALECT


def product_filter(where: str | None) -> str | None:
    """``where`` as one parenthesised condition, re-written by the parser (``None`` stays).

    Raises:
        QueryError: the text is empty, too long or deep, or not exactly one condition.

    Example:
        >>> product_filter("age > 40 and sex = 'F'")
        "(age > 40 AND sex = 'F')"
        >>> product_filter("age > 200) OR (1 = 1")
        Traceback (most recent call last):
        ...
        dalenius.core.errors.QueryError: where: the filter is not one condition.
        Why: a product's filter must be a single expression such as age > 40 AND sex = 'F'; ...
        Fix: balance the parentheses and write one condition, without ';' or a statement.
    """
    if where is None:
        return None
    if not where.strip():
        raise QueryError(
            "the filter is empty.",
            clause="where",
            fix="leave where out to use every row, or write a condition such as age > 40.",
        )
    if len(where) > validate.MAX_SQL_CHARS:
        raise QueryError(
            f"the filter is {len(where)} characters long; at most {validate.MAX_SQL_CHARS}.",
            clause="where",
            fix="write a shorter condition.",
        )
    try:
        tree = sqlglot.parse_one(where, dialect=DEFAULT_DIALECT, into=exp.Condition)
    except (ParseError, TokenError, RecursionError):
        tree = None
    if tree is None or isinstance(tree, exp.Query):
        raise QueryError(
            "the filter is not one condition.",
            clause="where",
            why="a product's filter must be a single expression such as age > 40 AND sex = 'F'; "
            "it is parsed alone, so it cannot close the parentheses it is placed in.",
            fix="balance the parentheses and write one condition, without ';' or a statement.",
        )
    return f"({tree.sql(dialect=DEFAULT_DIALECT)})"
