"""BigQuery's differential-privacy syntax, lifted out of the SQL text before parsing.

``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, max_groups_contributed = 2,
privacy_unit_column = pid) ...`` and the aggregate argument ``contribution_bounds_per_group =>
(low, high)`` are not understood by sqlglot. They are read here and blanked out with spaces, so the
rest of the query parses as ordinary SQL and every line/column in error messages stays where the
analyst wrote it.

Example:
    >>> dp = extract("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5) COUNT(*) FROM t")
    >>> dp.options["epsilon"], dp.sql.split()
    ('1', ['SELECT', 'COUNT(*)', 'FROM', 't'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from dalenius.core.errors import QueryError, SourceSpan

OPTION_NAMES = ("epsilon", "delta", "max_groups_contributed", "privacy_unit_column")

_CLAUSE = re.compile(r"\bSELECT\s+WITH\s+DIFFERENTIAL_PRIVACY\b", re.IGNORECASE)
_OPTIONS = re.compile(r"\s*OPTIONS\s*\(", re.IGNORECASE)
_BOUNDS = re.compile(
    r",\s*contribution_bounds_per_group\s*=>\s*\(\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\)",
    re.IGNORECASE,
)
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\($")


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
    """Find and blank BigQuery's DP clause and named contribution bounds."""
    out = Extracted(sql=sql)
    text = sql
    match = _CLAUSE.search(text)
    if match:
        out.enabled = True
        start = match.start() + len("SELECT")
        end = match.end()
        opts = _OPTIONS.match(text, end)
        if opts:
            close = _matching_paren(text, opts.end() - 1)
            if close < 0:
                raise QueryError(
                    "the OPTIONS list is not closed.",
                    clause="WITH DIFFERENTIAL_PRIVACY",
                    sql=sql,
                    span=_span(sql, opts.start(), "OPTIONS"),
                    fix="close it: OPTIONS (epsilon = 1, delta = 1e-6)",
                )
            out.options = _parse_options(sql, opts.end(), close)
            end = close + 1
        text = text[:start] + _blank(text[start:end]) + text[end:]
    for bound in list(_BOUNDS.finditer(text)):
        owner = _owner_call(text, bound.start())
        if owner is None:
            raise QueryError(
                "contribution_bounds_per_group must be an argument of an aggregate.",
                clause="SELECT",
                sql=sql,
                span=_span(sql, bound.start() + 1, "contribution_bounds_per_group"),
                fix="write SUM(x, contribution_bounds_per_group => (0, 100)).",
            )
        try:
            low, high = Fraction(bound.group(1)), Fraction(bound.group(2))
        except (ValueError, ZeroDivisionError):
            raise QueryError(
                "contribution bounds must be two numbers.",
                clause="SELECT",
                sql=sql,
                span=_span(sql, bound.start() + 1, "contribution_bounds_per_group"),
                fix="write contribution_bounds_per_group => (0, 100).",
            ) from None
        if low > high:
            raise QueryError(
                f"the lower contribution bound {bound.group(1)} is above the upper one {bound.group(2)}.",
                clause="SELECT",
                sql=sql,
                span=_span(sql, bound.start() + 1, "contribution_bounds_per_group"),
                fix=f"write contribution_bounds_per_group => ({bound.group(2)}, {bound.group(1)}).",
            )
        out.bounds[owner] = (low, high)
        text = (
            text[: bound.start()] + _blank(text[bound.start() : bound.end()]) + text[bound.end() :]
        )
    out.sql = text
    return out


def _blank(text: str) -> str:
    return "".join(ch if ch == "\n" else " " for ch in text)


def _matching_paren(text: str, open_at: int) -> int:
    depth = 0
    quote: str | None = None
    for i in range(open_at, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _owner_call(text: str, at: int) -> int | None:
    """Offset of the function name whose parenthesis encloses position ``at``."""
    depth = 0
    for i in range(at - 1, -1, -1):
        ch = text[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                name = _CALL.search(text[: i + 1])
                return name.start(1) if name else None
            depth -= 1
    return None


def _parse_options(sql: str, start: int, end: int) -> dict[str, str]:
    options: dict[str, str] = {}
    body = sql[start:end]
    for raw in body.split(","):
        if not raw.strip():
            continue
        offset = start + body.index(raw)
        if "=" not in raw:
            raise QueryError(
                f"cannot read the option {raw.strip()!r}.",
                clause="WITH DIFFERENTIAL_PRIVACY",
                sql=sql,
                span=_span(sql, offset + len(raw) - len(raw.lstrip()), raw.strip()),
                fix="write options as name = value, e.g. OPTIONS (epsilon = 1, delta = 1e-6).",
            )
        name, value = (part.strip() for part in raw.split("=", 1))
        key = name.lower()
        if key not in OPTION_NAMES:
            raise QueryError(
                f"unknown option {name!r}.",
                clause="WITH DIFFERENTIAL_PRIVACY",
                sql=sql,
                span=_span(sql, offset + len(raw) - len(raw.lstrip()), name),
                fix=f"use {', '.join(OPTION_NAMES)}.",
            )
        if key in options:
            raise QueryError(
                f"option {name!r} is given twice.",
                clause="WITH DIFFERENTIAL_PRIVACY",
                sql=sql,
                fix="give each option once.",
            )
        options[key] = value.strip("'\"`")
    return options


def _span(sql: str, start: int, text: str) -> SourceSpan:
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    return SourceSpan(line=line, column=column, text=text)
