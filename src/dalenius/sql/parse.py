"""Parse analyst SQL with sqlglot, turning its errors into located, fixable messages."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dalenius.core.errors import QueryError, SourceSpan

DEFAULT_DIALECT = "duckdb"
"""Dialect analysts write in; DuckDB's SQL is close to PostgreSQL's and the SQL standard."""


def parse(sql: str, dialect: str = DEFAULT_DIALECT) -> exp.Expr:
    """Parse one SQL statement.

    Raises:
        QueryError: for empty input, several statements, or a syntax error (with line and column).

    Example:
        >>> parse("SELECT COUNT(*) FROM adult").sql()
        'SELECT COUNT(*) FROM adult'
    """
    if not sql or not sql.strip():
        raise QueryError(
            "the query is empty.", fix="write a query such as SELECT COUNT(*) FROM adult"
        )
    try:
        statements = sqlglot.parse(sql, read=dialect)
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        line = int(first.get("line") or 1)
        col = int(first.get("col") or 1)
        highlight = str(first.get("highlight") or "")
        description = str(first.get("description") or "invalid syntax").rstrip(".")
        raise QueryError(
            f"syntax error: {description} near {highlight!r}"
            if highlight
            else f"syntax error: {description}",
            sql=sql,
            span=SourceSpan(line, max(col - len(highlight) + 1, 1), highlight),
            fix="check the SQL near the marked position.",
        ) from None
    except TokenError as exc:
        raise QueryError(
            f"syntax error: {exc}", sql=sql, fix="check quotes and brackets are closed."
        ) from None
    statements = [s for s in statements if s is not None]
    if not statements:
        raise QueryError(
            "the query is empty.", fix="write a query such as SELECT COUNT(*) FROM adult"
        )
    if len(statements) > 1:
        raise QueryError(
            f"one statement at a time, got {len(statements)}.",
            fix="send each SELECT on its own; remove the extra ';'.",
        )
    statement = statements[0]
    assert statement is not None
    return statement


def span_of(node: exp.Expr, sql: str) -> SourceSpan | None:
    """Where ``node`` stands in ``sql``: from sqlglot's token offsets, else by searching its text."""
    offsets = [
        (n.meta["start"], n.meta["end"])
        for n in node.walk()
        if isinstance(n, exp.Expr) and "start" in n.meta and "end" in n.meta
    ]
    if offsets:
        start = min(s for s, _ in offsets)
        end = max(e for _, e in offsets)
        # A function's own token (COUNT, AVG) sits before its arguments: widen to the call.
        text = sql[start : end + 1]
        needle = node.sql(dialect=DEFAULT_DIALECT)
        found = sql.upper().rfind(needle.upper(), 0, end + 1) if needle else -1
        if found != -1 and found <= start:
            start, text = found, sql[found : found + len(needle)]
        return _span_at(sql, start, text)
    needle = node.sql(dialect=DEFAULT_DIALECT)
    found = sql.upper().find(needle.upper()) if needle else -1
    if found == -1:
        return None
    return _span_at(sql, found, sql[found : found + len(needle)])


def _span_at(sql: str, start: int, text: str) -> SourceSpan:
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    return SourceSpan(line=line, column=column, text=text.splitlines()[0] if text else text)
