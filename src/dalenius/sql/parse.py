"""Parse analyst SQL with sqlglot, turning its errors into located, fixable messages."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token

from dalenius.core.errors import QueryError, SourceSpan
from dalenius.sql import validate

DEFAULT_DIALECT = "duckdb"
"""Dialect analysts write in; DuckDB's SQL is close to PostgreSQL's and the SQL standard."""


def parse(sql: str, dialect: str = DEFAULT_DIALECT) -> exp.Expr:
    """Parse one SQL statement, after the size and nesting checks of :mod:`dalenius.sql.validate`.

    Raises:
        QueryError: for empty input, several statements, text too long or too deeply nested, a
            syntax error, or a modifier the binder would not apply (with clause, line and column).

    Example:
        >>> parse("SELECT COUNT(*) FROM adult").sql()
        'SELECT COUNT(*) FROM adult'
    """
    if not sql or not sql.strip():
        raise QueryError(
            "the query is empty.",
            clause="statement",
            sql=sql,
            span=SourceSpan(1, 1, ""),
            fix="write a query such as SELECT COUNT(*) FROM adult",
        )
    tokens = validate.check_text(sql, dialect)
    try:
        # The tokens check_text read are parsed as they are (tokenizing is the costly half).
        statements = Dialect.get_or_raise(dialect).parser().parse(tokens, sql)
    except ParseError as exc:
        raise _top_refusal(sql, tokens) or _syntax_error(sql, exc, dialect) from None
    except TokenError as exc:  # check_text tokenized already; kept for safety
        raise QueryError(
            f"syntax error: {exc}",
            clause="statement",
            sql=sql,
            span=validate.span_at(sql, 0, sql[:6]),
            fix="check quotes and brackets are closed.",
        ) from None
    found = [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]
    if not found:
        raise QueryError(
            "the query is empty.",
            clause="statement",
            sql=sql,
            span=validate.token_span(sql, tokens[0]) if tokens else None,
            fix="write a query such as SELECT COUNT(*) FROM adult",
        )
    if len(found) > 1:  # check_text refuses this first, with the position of the second
        raise QueryError(
            f"one statement at a time, got {len(found)}.",
            clause="statement",
            sql=sql,
            span=validate.span_at(sql, 0, sql[:6]),
            fix="send each SELECT on its own; remove the extra ';'.",
        )
    statement = found[0]
    validate.check_tree(statement, sql, span_of)
    return statement


def _top_refusal(sql: str, tokens: list[Token]) -> QueryError | None:
    """SQL Server's ``SELECT TOP n``, which the dialects Dalenius reads do not have: the fix is
    ``LIMIT n`` (applied to the noisy answers, free), or ``None`` if the query has no ``TOP``.
    """
    texts = [t.text.upper() for t in tokens]
    for i, text in enumerate(texts[:-1]):
        if text != "TOP" or i == 0:
            continue
        before = texts[i - 1]
        if before != "SELECT" and not (
            before in ("DISTINCT", "ALL") and texts[i - 2 : i - 1] == ["SELECT"]
        ):
            continue
        count = tokens[i + 1].text if tokens[i + 1].text.isdigit() else "n"
        return QueryError(
            f"SELECT TOP {count} is not part of the SQL Dalenius reads.",
            clause="SELECT",
            sql=sql,
            span=validate.token_span(sql, tokens[i]),
            why="TOP is SQL Server's spelling; DuckDB, PostgreSQL and Spark write LIMIT.",
            fix=f"remove TOP {count} and end the query with LIMIT {count} (applied to the noisy answers, free).",
        )
    return None


def _syntax_error(sql: str, exc: ParseError, dialect: str) -> QueryError:
    first = exc.errors[0] if exc.errors else {}
    line = int(first.get("line") or 1)
    col = int(first.get("col") or 1)
    highlight = str(first.get("highlight") or "")
    description = str(first.get("description") or "invalid syntax").rstrip(".")
    lines = sql.split("\n")
    offset = sum(len(x) + 1 for x in lines[: line - 1]) + max(col - len(highlight), 0)
    return QueryError(
        f"syntax error: {description} near {highlight!r}"
        if highlight
        else f"syntax error: {description}",
        clause=validate.clause_before(sql, offset + 1, dialect),
        sql=sql,
        span=SourceSpan(line, max(col - len(highlight) + 1, 1), highlight),
        fix="check the SQL near the marked position.",
    )


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
    return validate.span_at(sql, start, text)
