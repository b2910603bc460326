"""Subqueries used as values (``WHERE balance > (SELECT AVG(balance) FROM customer)``), found in
the query's text so that each can be released first, on its own, and its value written in its
place (:mod:`dalenius.engine.staged_release`).

A value computed from private rows is an aggregate: it has to be released, with its own noise,
before another query may use it. Released, it is public — what the outer query does with it is
post-processing of one release, and the two releases compose sequentially. So the query is
answered in two stages, charged together: the subquery's text alone, then the outer text with the
released value as a constant.

They are found among the *tokens* (as :mod:`dalenius.sql.bigquery` finds its clause), so that
the texts the planner sees keep every line and column where the analyst wrote it: the subquery
is the whole text with everything outside it blanked, the outer query the whole text with the
subquery replaced by a constant padded with spaces. A refusal in either points at the analyst's
own line and column.

A subquery is a value when it is a parenthesised ``SELECT`` (or ``WITH``) that a comparison or an
arithmetic operator stands next to; ``IN (SELECT …)``, ``EXISTS (SELECT …)`` and a subquery in
FROM are other forms, answered by the planner itself.

Example:
    >>> found = find("SELECT COUNT(*) FROM t WHERE x > (SELECT AVG(x) FROM t)")
    >>> found[0].sql.strip()
    'SELECT AVG(x) FROM t'
    >>> found[0].clause
    'WHERE'
    >>> outer_text("SELECT COUNT(*) FROM t WHERE x > (SELECT AVG(x) FROM t)", found, ["2.5"])
    'SELECT COUNT(*) FROM t WHERE x > (2.5)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot.tokenizer_core import Token, TokenType

from dalenius.sql import validate

_OPERATORS = frozenset(
    {
        TokenType.EQ,
        TokenType.NEQ,
        TokenType.LT,
        TokenType.LTE,
        TokenType.GT,
        TokenType.GTE,
        TokenType.PLUS,
        TokenType.DASH,
        TokenType.STAR,
        TokenType.SLASH,
    }
)
"""Tokens beside which a parenthesised SELECT is a value."""

SENTINEL = 918_273_640
"""Where the constants standing in for subqueries start (the n-th is ``SENTINEL + n`` for a
count, that plus one half for any other value): the outer query is planned with them before
any data is read — its loss, measurements and outputs do not depend on a constant's value — and a
number no query is likely to hold can be written back as the subquery wherever the plan shows it
(an output's name, explain's filters)."""

ALLOWED_CLAUSES = ("SELECT", "WHERE", "HAVING")
"""Where a subquery's released value may stand: every use there is post-processing or a filter
whose sensitivity does not depend on the value (LIMIT, OFFSET or a join condition would let the
value decide whether the query is valid)."""


def placeholder(n: int, kind: str) -> str:
    """The constant standing in for the ``n``-th subquery: an integer for a count (``kind``
    its output's kind), else a double.
    """
    return str(SENTINEL + n) if kind == "count" else f"{SENTINEL + n}.5"


@dataclass(frozen=True)
class Subquery:
    """One subquery used as a value.

    Attributes:
        sql: the whole query text with everything but the subquery's SELECT blanked (newlines
            kept), so that the planner's positions are the analyst's.
        start: the offset of its opening parenthesis in the query text.
        end: the offset of its closing parenthesis.
        text: the subquery as written (without its parentheses), for notes.
        clause: the clause it stands in (``WHERE``, ``SELECT`` …).
        nested: whether it stands inside a subquery of another form (``IN (SELECT …)``,
            ``EXISTS``, ``FROM``) rather than in the outer query itself.
    """

    sql: str
    start: int
    end: int
    text: str
    clause: str
    nested: bool = False


def find(sql: str) -> list[Subquery]:
    """The subqueries of ``sql`` used as values, in the order they are written: the outermost
    ones, also inside a subquery of another form (``IN (SELECT …)``, ``EXISTS``, ``FROM``).

    Raises:
        QueryError: the text is too large or too deeply nested (:func:`validate.check_text`).
    """
    tokens = validate.check_text(sql)
    found: list[Subquery] = []
    enclosing: list[int] = []  # where each subquery of another form around token i closes
    i = 0
    while i < len(tokens) - 1:
        while enclosing and i > enclosing[-1]:
            enclosing.pop()
        token = tokens[i]
        opens = token.token_type == TokenType.L_PAREN and tokens[i + 1].token_type in (
            TokenType.SELECT,
            TokenType.WITH,
        )
        if not opens:
            i += 1
            continue
        close = _closing(tokens, i)
        if close is None:  # unbalanced: the parser refuses it with its own message
            return found
        before = tokens[i - 1].token_type if i > 0 else None
        after = tokens[close + 1].token_type if close + 1 < len(tokens) else None
        if not (before in _OPERATORS or after in _OPERATORS):
            # Another form (IN, EXISTS, FROM): a subquery used as a value may stand inside it.
            enclosing.append(close)
            i += 1
            continue
        start, end = token.start, tokens[close].start
        body_start, body_end = tokens[i + 1].start, tokens[close - 1].end + 1
        found.append(
            Subquery(
                sql=_blank(sql[:body_start]) + sql[body_start:body_end] + _blank(sql[body_end:]),
                start=start,
                end=end,
                text=" ".join(sql[body_start:body_end].split()),
                clause=validate.clause_at(tokens, i),
                nested=bool(enclosing),
            )
        )
        i = close + 1
    return found


def outer_text(
    sql: str, subqueries: Sequence[Subquery], values: Sequence[str], *, pad: bool = False
) -> str:
    """``sql`` with each subquery replaced by its value (a SQL constant): in parentheses, or
    with ``pad`` padded with spaces to the subquery's length where it fits, so that every position
    after it stays where the analyst wrote it.
    """
    parts: list[str] = []
    last = 0
    for value, sub in zip(values, subqueries, strict=True):
        parts.append(sql[last : sub.start])
        width = sub.end + 1 - sub.start
        if pad and len(value) <= width:
            parts.append(value + _blank(sql[sub.start + len(value) : sub.end + 1]))
        else:
            parts.append(f"({value})")
        last = sub.end + 1
    parts.append(sql[last:])
    return "".join(parts)


def _closing(tokens: Sequence[Token], open_at: int) -> int | None:
    """The index of the parenthesis closing the one at ``open_at``."""
    depth = 0
    for j in range(open_at, len(tokens)):
        kind = tokens[j].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    return None


def _blank(text: str) -> str:
    """``text`` as spaces, its line breaks kept."""
    return "".join(c if c in "\r\n" else " " for c in text)
