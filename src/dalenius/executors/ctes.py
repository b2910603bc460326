"""The leading ``WITH`` list of the exact SQL, split into its common table expressions, for an
engine that honours ``MATERIALIZED`` itself (Spark: :mod:`dalenius.executors.spark`).

Contribution bounding needs some of its expressions evaluated once: a unit found within its caps
in one read must not be found over them in another (:mod:`dalenius.sql.emit.bounding`). DuckDB
and PostgreSQL keep a ``MATERIALIZED`` expression for the statement; Spark's grammar has no such
hint and may evaluate an expression once per reference. Its executor therefore runs each
``MATERIALIZED`` expression first, keeps the result, and lets the statement read the kept rows.

The scanner reads only what the exact SQL writes at its head — ``WITH name AS [NOT]
[MATERIALIZED] (body), …`` followed by the main query — and skips string literals, quoted
identifiers and comments while it matches brackets, reading backslash escapes as Spark's lexer
does. Anything else is not split (``None``), and the statement runs as written.

Example:
    >>> s = split_with("WITH a AS MATERIALIZED (SELECT ')' AS x), b AS (SELECT * FROM a) SELECT 1")
    >>> [(c.name, c.hint, c.body) for c in s.ctes], s.main
    ([('a', 'MATERIALIZED', "SELECT ')' AS x"), ('b', '', 'SELECT * FROM a')], 'SELECT 1')
    >>> s.sql()
    "WITH a AS (SELECT ')' AS x), b AS (SELECT * FROM a) SELECT 1"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"\s*(`(?:[^`]|``)*`|\"(?:[^\"]|\"\")*\"|[A-Za-z_][A-Za-z0-9_]*)\s*")
_AS = re.compile(r"AS\s+(?:(NOT\s+MATERIALIZED|MATERIALIZED)\s*)?\(", re.IGNORECASE)
_WITH = re.compile(r"\s*WITH\s", re.IGNORECASE)
_QUOTES = {"'": "'", '"': '"', "`": "`"}


@dataclass(frozen=True)
class CTE:
    """One common table expression: its name as written, its hint and its body."""

    name: str
    hint: str
    """``"MATERIALIZED"``, ``"NOT MATERIALIZED"`` or ``""``."""
    body: str

    @property
    def materialized(self) -> bool:
        """Whether the statement asks for this expression to be evaluated once."""
        return self.hint == "MATERIALIZED"


@dataclass(frozen=True)
class Split:
    """A statement's leading ``WITH`` list and the query after it."""

    ctes: tuple[CTE, ...]
    main: str

    def sql(self, ctes: tuple[CTE, ...] | None = None) -> str:
        """The statement with ``ctes`` (by default its own) and no hints: Spark reads it."""
        listed = ", ".join(f"{c.name} AS ({c.body})" for c in (self.ctes if ctes is None else ctes))
        return f"WITH {listed} {self.main}"


def split_with(sql: str) -> Split | None:
    """``sql``'s leading ``WITH`` list and main query, or ``None`` if it has no such list or it
    is written in another form than the exact SQL's (see the module's docstring).
    """
    start = _WITH.match(sql)
    if start is None:
        return None
    at = start.end()
    ctes: list[CTE] = []
    while True:
        name = _NAME.match(sql, at)
        if name is None:
            return None
        head = _AS.match(sql, name.end())
        if head is None:
            return None
        end = _closing(sql, head.end() - 1)
        if end is None:
            return None
        hint = re.sub(r"\s+", " ", (head.group(1) or "").upper())
        ctes.append(CTE(name.group(1), hint, sql[head.end() : end].strip()))
        at = end + 1
        rest = re.match(r"\s*,", sql[at:])
        if rest is None:
            main = sql[at:].strip()
            return Split(tuple(ctes), main) if main else None
        at += rest.end()


def _closing(sql: str, opening: int) -> int | None:
    """The index of the bracket closing the one at ``opening``, or ``None`` if there is none."""
    depth = 0
    i = opening
    n = len(sql)
    while i < n:
        c = sql[i]
        if c in _QUOTES:
            i = _past_quoted(sql, i)
            if i < 0:
                return None
            continue
        if sql.startswith("--", i):
            newline = sql.find("\n", i)
            i = n if newline < 0 else newline + 1
            continue
        if sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            if close < 0:
                return None
            i = close + 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _past_quoted(sql: str, i: int) -> int:
    """The index just past the literal or quoted name starting at ``i`` (-1 if unterminated).
    A doubled quote closes and reopens it, which leaves the brackets around it alone; inside a
    string literal a backslash escapes the next character, as in Spark's lexer.
    """
    quote = sql[i]
    j = i + 1
    while j < len(sql):
        c = sql[j]
        if c == "\\" and quote == "'":
            j += 2
            continue
        if c == quote:
            return j + 1
        j += 1
    return -1
