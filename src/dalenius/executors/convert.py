"""The one grammar by which text values become numbers, booleans and dates in every engine.

A catalog declares a column's type; the data may hold it as text (a CSV file, a ``TEXT`` column).
DuckDB converts with ``TRY_CAST``; PostgreSQL has no ``TRY_CAST`` (a bad value would make the whole
query fail, and an error that depends on one row's content reveals it), and Spark's casts accept
engine-specific forms (Java's ``5d``, Unicode digits). The PostgreSQL and Spark executors therefore
guard every conversion with the regular expressions below, and read anything else as NULL:

* int: optional sign, digits with an optional fraction (or a leading ``.``), an optional exponent
  of at most three digits; surrounding ASCII white space is allowed. The value is rounded half away
  from zero (``2.5`` → 3, ``-2.5`` → -3) and must fit a signed 64-bit integer.
* float: the same decimal numbers, correctly rounded to the nearest double (overflow gives ±∞,
  underflow 0), plus ``nan``, ``inf`` and ``infinity`` with an optional sign, in any case.
* bool: ``true t yes y 1`` and ``false f no n 0``, in any case, without white space.
* date: ``YYYY-M-D`` (one- or two-digit month and day) naming a real calendar day of years 1–9999.

These are exactly the forms DuckDB's ``TRY_CAST`` reads the same way; the few it reads beyond them
(hexadecimal ``0x10``, ``1_000``, four-digit exponents, dates such as ``2021/02/03``) are listed in
``docs/engines.md`` as known differences. The patterns use no backslash, so they can be written
inside a PostgreSQL or Spark SQL string literal as they are.

Example:
    >>> import re
    >>> [bool(re.match(INT_TEXT, s)) for s in ["12", " -2.5 ", "1e3", "0x10", "n/a", "١"]]
    [True, True, True, False, False, False]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext

from dalenius.core.dialect import Dialect

_WS = "[ \t\n\v\f\r]*"
"""ASCII white space, as DuckDB trims it around numbers (the characters themselves, no escapes)."""

DECIMAL = "[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]{1,3})?"
"""A decimal number, with optional sign, fraction and exponent (no anchors)."""

INT_TEXT = f"^{_WS}{DECIMAL}{_WS}$"
"""Text read as an int (rounded half away from zero) or as a finite float."""

NAN_TEXT = f"^{_WS}[+-]?[nN][aA][nN]{_WS}$"
"""Text read as a float NaN."""

POS_INF_TEXT = f"^{_WS}[+]?[iI][nN][fF]([iI][nN][iI][tT][yY])?{_WS}$"
"""Text read as +∞."""

NEG_INF_TEXT = f"^{_WS}-[iI][nN][fF]([iI][nN][iI][tT][yY])?{_WS}$"
"""Text read as −∞."""

DATE_TEXT = f"^{_WS}([0-9]{{4}})-([0-9]{{1,2}})-([0-9]{{1,2}}){_WS}$"
"""Text read as a date; groups 1, 2 and 3 are the year, month and day."""

TRUE_TEXT = ("true", "t", "yes", "y", "1")
"""Lower-cased text read as TRUE."""

FALSE_TEXT = ("false", "f", "no", "n", "0")
"""Lower-cased text read as FALSE."""

BIGINT_MIN = -(2**63)
BIGINT_MAX = 2**63 - 1


def _exact(value: Decimal) -> str:
    return format(value, "f")


with localcontext() as _ctx:
    _ctx.prec = 2000
    DOUBLE_OVERFLOW = _exact(Decimal(2) ** 1024 - Decimal(2) ** 970)
    """Decimal magnitudes at or above this round to ±∞ as doubles (the largest double plus half
    an ulp; the tie rounds to even, which is ∞)."""
    DOUBLE_UNDERFLOW = _exact(Decimal(2) ** -1075)
    """Decimal magnitudes at or below this round to 0 as doubles (half the smallest subnormal)."""


def sql_string(text: str) -> str:
    """``text`` as a standard SQL string literal (quotes doubled; no backslash escapes needed).

    Example:
        >>> sql_string("it's")
        "'it''s'"
    """
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Conversions:
    """How one engine converts a source column: the parts of the ladder that differ by engine."""

    dialect: Dialect
    from_text: Callable[[str, str], str]
    """SQL reading a text value as the declared type through the grammar above (NULL otherwise)."""
    exact_to_bigint: Callable[[str], str]
    """SQL rounding an exact decimal half away from zero to BIGINT, NULL outside its range."""
    exact_to_double: Callable[[str], str]
    """SQL converting an exact decimal to the nearest double, never raising."""


def converted(value: str, kind: str | None, declared: str, engine: Conversions) -> str | None:
    """SQL reading ``value``, a source column of ``kind``, as the ``declared`` type.

    ``kind`` is what the column holds, whatever the engine calls its type: ``text``,
    ``integer``, ``float``, ``exact`` (a decimal), ``bool``, ``date`` or ``timestamp``; ``None``
    for anything else.

    ``None`` when the column cannot become the declared type without guessing (a double
    declared ``int``): the executor refuses it with a fix. A float's NaN becomes NULL (missing,
    not a number: the same rule on every engine).

    Example:
        >>> from dalenius.core.dialect import SPARK
        >>> spark = Conversions(SPARK, lambda v, d: v, lambda v: v, lambda v: v)
        >>> converted("`x`", "integer", "float", spark)
        "NULLIF(CAST(`x` AS DOUBLE), CAST('NaN' AS DOUBLE))"
        >>> converted("`x`", "float", "int", spark) is None
        True
    """
    double = engine.dialect.double_type
    out: str | None = None
    if kind == "text":
        out = engine.from_text(value, declared)
    elif declared == "int":
        if kind == "integer":
            out = f"CAST({value} AS BIGINT)"
        elif kind == "exact":
            out = engine.exact_to_bigint(value)
    elif declared == "float":
        if kind in ("integer", "float"):
            out = f"CAST({value} AS {double})"
        elif kind == "exact":
            out = engine.exact_to_double(value)
    elif declared == "str":
        if kind == "integer":
            out = f"CAST({value} AS {engine.dialect.text_type})"
    elif declared == "bool":
        if kind == "bool":
            out = value
    elif declared == "date":
        if kind == "date":
            out = value
        elif kind == "timestamp":
            out = f"CAST({value} AS DATE)"
    if out is not None and declared == "float":
        out = f"NULLIF({out}, CAST('NaN' AS {double}))"
    return out
