"""Checks on what a request carries, made before anything parses or plans it.

Two kinds of hostile input could otherwise reach code whose cost grows with it, or that fails in
ways no refusal describes:

- **SQL shape.** The parser and the planner walk a query recursively, so the depth of its nesting
  (parentheses, ``NOT``, ``CASE``, subqueries) and the length of an ``AND``/``OR`` chain are
  bounded here, by a scan of the text that counts only what lies outside strings, quoted names
  and comments. A query past a bound is refused with the clause, line and column of the token
  that crossed it.
- **Numbers.** ε, δ and ρ arrive as JSON numbers or as exact text. Only the documented forms are
  accepted — an ASCII decimal (``0.1``, ``1e-6``) or a fraction of two whole numbers (``1/10``)
  — and every value that is not zero lies between :data:`SMALLEST` and :data:`LARGEST`, so no
  later arithmetic overflows, underflows to zero or builds a number with thousands of digits.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Final

from dalenius.core.errors import InvalidLossError, QueryError, SourceSpan
from dalenius.core.loss import MAX_QUERY_EPSILON, epsilon_too_large

MAX_DEPTH: Final = 32
"""The deepest nesting of parentheses, ``NOT``, ``CASE`` and ``SELECT`` a query may have."""

MAX_CHAIN: Final = 120
"""The most ``AND``/``OR`` operators one query may contain."""

MAX_SELECTS: Final = 32
"""The most ``SELECT`` keywords (the query, its subqueries and WITH items) one query may contain."""

SMALLEST: Final = Fraction(1, 10**30)
"""The smallest non-zero ε, δ or ρ accepted (δ as small as 1e-30 is still meaningful)."""

LARGEST: Final = Fraction(10**6)
"""The largest ε, δ or ρ accepted; beyond it no noise is left to speak of."""

MAX_NUMBER_TEXT: Final = 64
"""The longest number text accepted, in characters."""

_DECIMAL = re.compile(r"^[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?$")
_FRACTION = re.compile(r"^[+]?[0-9]{1,40}/[0-9]{1,40}$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_CHAIN_WORDS = {"AND", "OR"}
_CLAUSES = {
    "SELECT": "SELECT",
    "FROM": "FROM",
    "JOIN": "FROM",
    "ON": "ON",
    "WHERE": "WHERE",
    "GROUP": "GROUP BY",
    "HAVING": "HAVING",
    "ORDER": "ORDER BY",
    "WITH": "WITH",
}


class NumberError(ValueError):
    """A number outside the documented forms or range."""


class NumberRefusal(InvalidLossError):
    """A privacy parameter the gateway refuses before anything else sees it."""


class ShapeRefusal(QueryError):
    """SQL the gateway refuses for its nesting or length, before it is parsed."""


def checked_number(name: str, value: object, *, per_release: bool = True) -> object:
    """:func:`bounded_number` for the parameter ``name``, or ``None`` passed through.

    A release's ``epsilon`` above the library's one limit gets the library's refusal, worded as
    in Python and the CLI (:func:`~dalenius.core.loss.epsilon_too_large`); a budget
    (``per_release`` false) may total more.

    Raises:
        InvalidLossError: naming the parameter, the accepted forms and the range.
    """
    if value is None:
        return None
    try:
        if per_release and name == "epsilon" and exact_number(value) > MAX_QUERY_EPSILON:
            raise epsilon_too_large(_shown(value))
        return bounded_number(value)
    except NumberError as error:
        raise NumberRefusal(
            f"{name}: {error}.",
            why="only plain ASCII decimals and fractions are read, and every value is kept "
            "between 1e-30 and 1e6 (or 0) so no arithmetic overflows.",
            fix=f'send {name} as a number such as 0.5 or text such as "0.5", "1e-6" or "1/10".',
        ) from None


def bounded_number(value: object) -> object:
    """Check a privacy parameter from JSON; return it unchanged if acceptable.

    Accepted: a JSON integer or finite float, or text in decimal (``"0.1"``, ``"1e-6"``) or
    fraction (``"1/10"``) form, in ASCII, with no digit separators; zero, or a magnitude in
    [:data:`SMALLEST`, :data:`LARGEST`].

    Raises:
        NumberError: naming the documented forms and range.

    Example:
        >>> bounded_number("1/10"), bounded_number(0.5)
        ('1/10', 0.5)
        >>> bounded_number("1_000")
        Traceback (most recent call last):
        ...
        dalenius.server.guard.NumberError: '1_000' is not a decimal such as 0.1 or 1e-6, nor a fraction such as 1/10
    """
    exact = exact_number(value)
    if exact != 0 and not SMALLEST <= abs(exact) <= LARGEST:
        raise NumberError(
            f"{_shown(value)} is outside the accepted range: 0, or between 1e-30 and 1e6"
        )
    return value


def exact_number(value: object) -> Fraction:
    """The exact value of a JSON number or number text (the forms of :func:`bounded_number`)."""
    if isinstance(value, bool):
        raise NumberError("a boolean is not a number")
    if isinstance(value, int):
        if abs(value) > 10**40:
            raise NumberError(f"{_shown(value)} has too many digits")
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NumberError("the number is not finite")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise NumberError("expected a number or number text")
    text = value.strip()
    if len(text) > MAX_NUMBER_TEXT:
        raise NumberError(f"the number text is longer than {MAX_NUMBER_TEXT} characters")
    if _FRACTION.match(text):
        top, bottom = text.split("/")
        if int(bottom) == 0:
            raise NumberError(f"{_shown(value)} divides by zero")
        return Fraction(int(top), int(bottom))
    if _DECIMAL.match(text):
        try:
            return Fraction(Decimal(text))
        except (InvalidOperation, ValueError, OverflowError):  # pragma: no cover - regex-guarded
            pass
    raise NumberError(
        f"{_shown(value)} is not a decimal such as 0.1 or 1e-6, nor a fraction such as 1/10"
    )


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class _Token:
    word: str
    offset: int


def check_sql_shape(sql: str) -> None:
    """Refuse SQL nested deeper than :data:`MAX_DEPTH`, or with too many AND/OR or SELECTs.

    The depth counts open parentheses, open ``CASE … END`` and a run of ``NOT NOT …``. The scan
    is linear and never recursive; strings, quoted names and comments are skipped.

    Raises:
        QueryError: naming the clause, line and column where a bound was crossed.

    Example:
        >>> check_sql_shape("SELECT COUNT(*) FROM t WHERE NOT (a = 1) AND NOT b = 2")
        >>> check_sql_shape("SELECT " + "(" * 40 + "1" + ")" * 40)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dalenius.server.guard.ShapeRefusal: SELECT: the query is nested more than 32 levels deep ...
    """
    cases: list[int] = [0]  # per open parenthesis: the CASEs opened inside it and not yet ended
    run = chain = selects = 0
    clause = "SELECT"
    for token in _tokens(sql):
        word = token.word
        run = run + 1 if word == "NOT" else 0
        if word == "(":
            cases.append(0)
        elif word == ")" and len(cases) > 1:
            cases.pop()
        elif word == "CASE":
            cases[-1] += 1
        elif word == "END" and cases[-1] > 0:
            cases[-1] -= 1
        elif word in _CHAIN_WORDS:
            chain += 1
        elif word == "SELECT":
            selects += 1
        clause = _CLAUSES.get(word, clause)
        if len(cases) - 1 + sum(cases) + run > MAX_DEPTH:
            raise _refusal(
                sql,
                token,
                clause,
                f"the query is nested more than {MAX_DEPTH} levels deep",
                "the planner's work and memory grow with the nesting of parentheses, NOT, "
                "CASE and subqueries, so the gateway bounds it.",
                "flatten the expression (IN (...) instead of nested ORs, a WITH clause "
                "instead of nested subqueries).",
            )
        if chain > MAX_CHAIN:
            raise _refusal(
                sql,
                token,
                clause,
                f"the query has more than {MAX_CHAIN} AND/OR operators",
                "the planner's work grows with the length of a chain of conditions, so the "
                "gateway bounds it.",
                "use IN (...) or BETWEEN for lists and ranges of values.",
            )
        if selects > MAX_SELECTS:
            raise _refusal(
                sql,
                token,
                "SELECT",
                f"the query has more than {MAX_SELECTS} SELECTs (subqueries and WITH items)",
                "the planner's work grows with the number of subqueries, so the gateway bounds it.",
                "join or aggregate in fewer steps.",
            )


def _refusal(sql: str, token: _Token, clause: str, what: str, why: str, fix: str) -> ShapeRefusal:
    line = sql.count("\n", 0, token.offset) + 1
    column = token.offset - (sql.rfind("\n", 0, token.offset) + 1) + 1
    return ShapeRefusal(
        what,
        clause=clause,
        sql=sql,
        span=SourceSpan(line, column, token.word),
        why=why,
        fix=fix,
    )


def _tokens(sql: str) -> list[_Token]:
    """Parentheses and upper-cased words outside strings, quoted names and comments."""
    out: list[_Token] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            end = sql.find(ch, i + 1)
            while end != -1 and end + 1 < n and sql[end + 1] == ch:
                end = sql.find(ch, end + 2)
            i = n if end == -1 else end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif ch in "()":
            out.append(_Token(ch, i))
            i += 1
        elif ch.isalpha() or ch == "_":
            match = _WORD.match(sql, i)
            if match is None:
                i += 1
                continue
            out.append(_Token(match.group().upper(), i))
            i = match.end()
        else:
            i += 1
    return out
