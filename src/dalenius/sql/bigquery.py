"""BigQuery's differential-privacy syntax, lifted out of the SQL text before parsing.

``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, max_groups_contributed = 2,
privacy_unit_column = pid) ...`` and the aggregate argument ``contribution_bounds_per_group =>
(low, high)`` are not understood by sqlglot. They are found among sqlglot's *tokens* (which know
string literals and comments, so text inside a literal or a comment never matches) and their
character ranges are blanked out with spaces, so the rest of the query parses as ordinary SQL and
every line/column in error messages stays where the analyst wrote it.

Example:
    >>> dp = extract("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5) COUNT(*) FROM t")
    >>> dp.options["epsilon"], dp.sql.split()
    ('1', ['SELECT', 'COUNT(*)', 'FROM', 't'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from sqlglot.tokenizer_core import Token, TokenType

from dalenius.core.errors import InvalidLossError, QueryError, SourceSpan
from dalenius.core.loss import read_number
from dalenius.sql import validate

OPTION_NAMES = ("epsilon", "delta", "max_groups_contributed", "privacy_unit_column")

CLAUSE = "WITH DIFFERENTIAL_PRIVACY"
_BOUNDS_NAME = "CONTRIBUTION_BOUNDS_PER_GROUP"


@dataclass
class Extracted:
    """The SQL with the DP clause blanked, and what the clause said.

    Attributes:
        sql: the query text, same length and line structure as the input.
        enabled: whether the query used ``SELECT WITH DIFFERENTIAL_PRIVACY``.
        options: the clause's options as written (lower-case names, raw text values).
        bounds: ``contribution_bounds_per_group`` per aggregate, keyed by the character offset of
            the aggregate's function name.
    """

    sql: str
    enabled: bool = False
    options: dict[str, str] = field(default_factory=dict)
    bounds: dict[int, tuple[Fraction, Fraction]] = field(default_factory=dict)


def extract(sql: str) -> Extracted:
    """Find and blank BigQuery's DP clause and named contribution bounds (from tokens)."""
    tokens = validate.tokenize(sql, "bigquery")
    out = Extracted(sql=sql)
    blank: list[tuple[int, int]] = []
    clause = _clause(tokens)
    if clause is not None:
        out.enabled = True
        first, last = clause
        out.options = _options(sql, tokens, first + 3, last)
        blank.append((tokens[first + 1].start, tokens[max(last, first + 2)].end + 1))
    for i, token in enumerate(tokens):
        if _word(token) == _BOUNDS_NAME and i > 0 and tokens[i - 1].token_type == TokenType.COMMA:
            end, bounds, owner = _bounds(sql, tokens, i)
            out.bounds[owner] = bounds
            blank.append((tokens[i - 1].start, tokens[end].end + 1))
    out.sql = _blanked(sql, blank)
    return out


def _word(token: Token) -> str:
    return token.text.upper() if token.token_type != TokenType.STRING else ""


def _clause(tokens: Sequence[Token]) -> tuple[int, int] | None:
    """Token indexes of ``SELECT`` and of the last token of the clause (``)`` of OPTIONS)."""
    for i in range(len(tokens) - 2):
        if (
            tokens[i].token_type == TokenType.SELECT
            and tokens[i + 1].token_type == TokenType.WITH
            and _word(tokens[i + 2]) == "DIFFERENTIAL_PRIVACY"
        ):
            has_options = i + 4 < len(tokens) and _word(tokens[i + 3]) == "OPTIONS"
            if not has_options or tokens[i + 4].token_type != TokenType.L_PAREN:
                return i, i + 2
            return i, _closing(tokens, i + 4)
    return None


def _closing(tokens: Sequence[Token], open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(tokens)):
        kind = tokens[j].token_type
        depth += kind == TokenType.L_PAREN
        depth -= kind == TokenType.R_PAREN
        if depth == 0:
            return j
    return -1


def _options(sql: str, tokens: Sequence[Token], at: int, last: int) -> dict[str, str]:
    """The options of ``OPTIONS (...)``: ``OPTIONS`` is token ``at``, its ``)`` token ``last``."""
    if at >= len(tokens) or _word(tokens[at]) != "OPTIONS":
        return {}
    if last < 0:
        raise QueryError(
            "the OPTIONS list is not closed.",
            clause=CLAUSE,
            sql=sql,
            span=validate.token_span(sql, tokens[at]),
            fix="close it: OPTIONS (epsilon = 1, delta = 1e-6)",
        )
    options: dict[str, str] = {}
    for item in _split(tokens[at + 2 : last]):
        if item:
            key, value = _option(sql, item, options)
            options[key] = value
    return options


def _option(sql: str, item: Sequence[Token], seen: dict[str, str]) -> tuple[str, str]:
    name = item[0]
    written = sql[item[0].start : item[-1].end + 1]
    if len(item) < 3 or item[1].token_type != TokenType.EQ:
        raise QueryError(
            f"cannot read the option {written!r}.",
            clause=CLAUSE,
            sql=sql,
            span=validate.token_span(sql, name),
            fix="write options as name = value, e.g. OPTIONS (epsilon = 1, delta = 1e-6).",
        )
    key = name.text.lower()
    if key not in OPTION_NAMES:
        raise QueryError(
            f"unknown option {name.text!r}.",
            clause=CLAUSE,
            sql=sql,
            span=validate.token_span(sql, name),
            fix=f"use {', '.join(OPTION_NAMES)}.",
        )
    if key in seen:
        raise QueryError(
            f"option {name.text!r} is given twice.",
            clause=CLAUSE,
            sql=sql,
            span=validate.token_span(sql, name),
            fix="give each option once.",
        )
    value = item[2:]
    if len(value) == 1 and value[0].token_type == TokenType.STRING:
        return key, value[0].text
    return key, sql[value[0].start : value[-1].end + 1].strip('`"')


def _bounds(
    sql: str, tokens: Sequence[Token], at: int
) -> tuple[int, tuple[Fraction, Fraction], int]:
    """``contribution_bounds_per_group => (low, high)`` starting at token ``at``.

    Returns the index of its closing ``)``, the bounds, and the offset of the aggregate's name.
    """
    span = validate.token_span(sql, tokens[at])
    owner = _owner(tokens, at)
    if owner is None:
        raise QueryError(
            "contribution_bounds_per_group must be an argument of an aggregate.",
            clause="SELECT",
            sql=sql,
            span=span,
            fix="write SUM(x, contribution_bounds_per_group => (0, 100)).",
        )
    kinds = [t.token_type for t in tokens[at + 1 : at + 3]]
    close = _closing(tokens, at + 2) if kinds == [TokenType.FARROW, TokenType.L_PAREN] else -1
    parts = _split(tokens[at + 3 : close]) if close > 0 else []
    if len(parts) != 2 or not all(parts):
        raise QueryError(
            "contribution bounds must be two numbers.",
            clause="SELECT",
            sql=sql,
            span=span,
            fix="write contribution_bounds_per_group => (0, 100).",
        )
    texts = [sql[p[0].start : p[-1].end + 1] for p in parts]
    low, high = (_bound(sql, text, span) for text in texts)
    if low > high:
        raise QueryError(
            f"the lower contribution bound {texts[0]} is above the upper one {texts[1]}.",
            clause="SELECT",
            sql=sql,
            span=span,
            fix=f"write contribution_bounds_per_group => ({texts[1]}, {texts[0]}).",
        )
    return close, (low, high), owner


def _split(tokens: Sequence[Token]) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.COMMA:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _bound(sql: str, text: str, span: SourceSpan) -> Fraction:
    try:
        value = read_number("".join(text.split()), "a contribution bound")
    except InvalidLossError as exc:
        raise QueryError(
            exc.what, clause="SELECT", sql=sql, span=span, fix="write two ordinary numbers."
        ) from None
    if abs(value) > validate.MAX_MAGNITUDE:
        raise QueryError(
            f"the contribution bound {text} is beyond the largest accepted "
            f"({float(validate.MAX_MAGNITUDE):.0e}).",
            clause="SELECT",
            sql=sql,
            span=span,
            fix="write bounds of ordinary size, e.g. contribution_bounds_per_group => (0, 100).",
        )
    return value


def _owner(tokens: Sequence[Token], at: int) -> int | None:
    """Character offset of the function name whose bracket encloses token ``at``."""
    depth = 0
    for j in range(at - 1, 0, -1):
        kind = tokens[j].token_type
        if kind == TokenType.R_PAREN:
            depth += 1
        elif kind == TokenType.L_PAREN:
            if depth == 0:
                name = tokens[j - 1]
                return (
                    name.start if name.token_type == TokenType.VAR or name.text.isalpha() else None
                )
            depth -= 1
    return None


def _blanked(sql: str, ranges: Sequence[tuple[int, int]]) -> str:
    chars = list(sql)
    for start, end in ranges:
        for k in range(start, end):
            if chars[k] != "\n":
                chars[k] = " "
    return "".join(chars)
