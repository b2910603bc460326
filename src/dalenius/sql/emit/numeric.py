"""Fixed-point arithmetic in SQL: clipping, exact scaling by powers of two, rounding to nearest.

Every measurement is summed by the engine as integers on a power-of-two grid, so that the exact
answer is bit-identical on every engine and in any row order. These helpers write that
arithmetic, and decide from the bounds alone when a clamp could never bind (the proofs are in
their docstrings).
"""

from __future__ import annotations

from fractions import Fraction

from sqlglot import exp

from dalenius.core.dialect import Dialect
from dalenius.plan.nodes import Measurement
from dalenius.plan.sensitivity import DOUBLE_MAX
from dalenius.sql.emit.dialects import clip_once, computed_double, double_arithmetic


def _clip(
    value: exp.Expr, low: Fraction, high: Fraction, dialect: Dialect | None = None
) -> exp.Expr:
    """``value`` clipped to ``[low, high]``, NULL staying NULL.

    Engines' GREATEST/LEAST skip NULL arguments (``GREATEST(NULL, 0)`` is 0), which would count a
    missing value as the lower bound. One CASE keeps NULL (every test is unknown, so it takes the
    ELSE, the value itself) and is cheaper than a NULL guard around LEAST/GREATEST (about twice as
    fast in DuckDB at 10M rows). NaN compares above every number in DuckDB, PostgreSQL and Spark:
    it is not BETWEEN the bounds, and becomes ``high``.

    The common case, a value within its bounds, is tested first, with one BETWEEN: DuckDB then
    selects rows once instead of twice and, when every row of a vector is within, passes the
    vector through untouched. The ELSE is the value rather than nothing: DuckDB then knows the
    result's range and nullness from the column's, and keeps its fast arithmetic for what follows
    (a sum of squares took 1.6 times as long without it; ``bench/clip.py``, ``docs/engines.md``).

    That form writes the value five times. A value other than a column (a clamp around a clipped
    aggregate, a bin index) keeps the two-test form, which writes it three times, so that nested
    clips do not grow the SQL five-fold per level; both forms give the same result on every row.

    On PostgreSQL (``dialect``) a double computed by the overflow-safe arithmetic's PL/pgSQL
    twins is clipped by one function call that computes it once, the two-test form's CASE in its
    body: written out, PostgreSQL computed the double three times per row (TPC-H Q1's discounted
    price: 13.5 s at SF 1, 5.1 s computed once; ``docs/engines.md``).
    """
    low_sql, high_sql = _number(low), _number(high)
    if dialect is not None and computed_double(value, dialect):
        return clip_once(value, low_sql, high_sql)
    below = exp.If(this=exp.LT(this=value.copy(), expression=low_sql), true=low_sql.copy())
    above = exp.If(this=exp.GT(this=value.copy(), expression=high_sql), true=high_sql.copy())
    if not isinstance(value, exp.Column):
        return exp.Case(ifs=[below, above], default=value.copy())
    within = exp.If(
        this=exp.Between(this=value.copy(), low=low_sql.copy(), high=high_sql.copy()),
        true=value.copy(),
    )
    return exp.Case(ifs=[within, below, above], default=value.copy())


_SUM_SPAN = Fraction(2**40)
"""A centred sum's clamp is dropped when every bound is within 2^40 grid steps of 0."""


_SQUARE_SPAN = Fraction(2**16)
"""A sum of squares' clamp is dropped when every bound is within 2^16 reaches of 0."""


def _rounding_below(m: Measurement, span: Fraction) -> bool:
    """Whether doubles keep a clipped row's grid value within 0.05 of ``±row_units``: no clamp needed.

    The value is ``(clip(x) − c)/g`` computed as ``fl(fl(x)·2^k − fl(c/g))`` (a sum) or
    ``fl((fl(x) − fl(c))·2^a)²·2^b`` (a sum of squares), with ``x`` already clipped to the bounds
    written as doubles (NaN and ±∞ become a bound, NULL stays NULL). The exact value lies within
    ``row_units`` (the reach over the grid, rounded up). Each double rounds by at most 2^-53 of
    its magnitude and scaling by a power of two is exact, so with ``M = max(|low|, |high|)``:

    * sum: the error is at most ``3·2^-53·M/g + 2^-53·row_units <= 2^-11`` when ``M/g <= 2^40``;
    * square: the difference's error is at most ``3·2^-53·M`` and the square's at most
      ``2·reach·3·2^-53·M/g2 + 2^-53·row_units``; with ``reach²/g2 <= 2^30`` and
      ``M <= 2^16·reach`` that is below ``6·2^-7 < 0.05``.

    Subnormal rounding is absolute (2^-1075), so the grid (the reach, for squares) must not be
    tiny: ``g >= 2^-1000`` (``reach >= 2^-400``) keeps it far below a grid step.

    Either way ``v`` rounded to the nearest integer stays within ``[−row_units, row_units]`` (``[0, row_units]``),
    so the clamp to those bounds, which costs as much as the clip itself, could never bind;
    without the condition (a centre far from 0 relative to the reach, huge bounds) it is kept.
    """
    assert m.bounds is not None
    top = max(abs(m.bounds[0]), abs(m.bounds[1]))
    if m.row_units > 2**31:
        return False
    if m.kind == "sum":
        return m.granularity >= Fraction(1, 2**1000) and top <= span * m.granularity
    reach = max(abs(m.bounds[0] - m.center), abs(m.bounds[1] - m.center))
    return reach >= Fraction(1, 2**400) and top <= span * reach


_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1

_MAX_FACTOR = 1000
"""Powers of two up to 2^±1000 are normal doubles: a scaling by any of them is exact."""


def _bigint_bounds(m: Measurement) -> bool:
    """Whether ``m`` reads integers whose bounds fit BIGINT (so a clipped value casts safely)."""
    assert m.bounds is not None
    return m.arg_type == "int" and all(
        b.denominator == 1 and _BIGINT_MIN <= b <= _BIGINT_MAX for b in m.bounds
    )


def _log2(power: Fraction) -> int:
    """The exponent of a power of two given as a Fraction.

    Example:
        >>> _log2(Fraction(1, 8)), _log2(Fraction(4))
        (-3, 2)
    """
    if power >= 1:
        return power.numerator.bit_length() - 1
    return -(power.denominator.bit_length() - 1)


def _scaled(value: exp.Expr, exponent: int, dialect: Dialect) -> exp.Expr:
    """``value`` (a DOUBLE) times ``2**exponent``, as factors that are each a normal double.

    Scaling by a power of two is exact unless it overflows or underflows. The grid of very fine
    bounds (``[0, 1e-300]``) needs a scale beyond the largest double, so it is split. PostgreSQL
    raises when a product underflows to zero, so there a factor below 1 goes through its
    IEEE-safe multiplication.

    Example:
        >>> from dalenius.core.dialect import DUCKDB
        >>> _scaled(exp.column("x"), 3, DUCKDB).sql("duckdb")
        '(x * CAST(8 AS DOUBLE))'
    """
    out = value
    while exponent:
        step = max(-_MAX_FACTOR, min(_MAX_FACTOR, exponent))
        exponent -= step
        factor = (
            _double(exp.Literal.number(2**step))
            if 0 <= step <= 62
            else _double_text(repr(2.0**step))
        )
        if step < 0 and not dialect.ieee_doubles:
            out = double_arithmetic("*", out, factor, dialect)
        else:
            out = exp.Paren(this=exp.Mul(this=out, expression=factor))
    return out


def _double_literal(x: Fraction) -> exp.Expr:
    """``x`` rounded to the nearest double, as a DOUBLE literal (any magnitude up to 2^1024)."""
    if x.denominator == 1 and abs(x) < 2**53:
        return _number(x)
    node = _double_text(repr(float(abs(x))))
    return exp.Neg(this=node) if x < 0 else node


def _wide(value: exp.Expr) -> exp.Expr:
    """An integer widened to DECIMAL(38, 0) before a product that may pass 2^63."""
    return exp.cast(value, exp.DataType.build("DECIMAL(38, 0)"))


def _nearest(value: exp.Expr, dialect: Dialect) -> exp.Expr:
    """``value`` (a DOUBLE, ``|value| <= 2**31``) rounded to the nearest BIGINT, halves to even.

    The same on every engine, so the exact answer is bit-identical everywhere: DuckDB's and
    PostgreSQL's cast round this way; Spark's cast truncates, so there ``RINT`` rounds first.
    Any rounding to the nearest integer keeps a value within ``[−row_units, row_units]`` when it
    lies within 0.5 of that range (:func:`_rounding_below`), so the choice of halves does not
    touch the sensitivity; the one cast per row is the cheapest (in DuckDB ``FLOOR(x + 0.5)``
    cost 0.3 times the raw sum of a double column more, ``docs/engines.md``).

    Example:
        >>> from dalenius.core.dialect import DUCKDB, SPARK
        >>> _nearest(exp.column("x"), DUCKDB).sql("duckdb")
        'CAST(x AS BIGINT)'
        >>> _nearest(exp.column("x"), SPARK).sql("spark")
        'CAST(RINT(x) AS BIGINT)'
    """
    if not dialect.cast_rounds_to_even:
        value = exp.Anonymous(this="RINT", expressions=[value])
    return exp.cast(value, exp.DataType.Type.BIGINT)


def _double(node: exp.Expr) -> exp.Expr:
    return exp.cast(node, exp.DataType.Type.DOUBLE)


def _number(x: Fraction) -> exp.Expr:
    """``x`` as a SQL literal: an integer within BIGINT exactly, anything else as a double.

    A longer integer literal is a DECIMAL in Spark, which refuses more than 38 digits (the
    largest double has 309), so it is written as the nearest double instead.
    """
    if x.denominator == 1 and abs(x) <= _BIGINT_MAX:
        node: exp.Expr = exp.Literal.number(abs(x.numerator))
    else:
        text = repr(float(min(abs(x), DOUBLE_MAX)))
        node = _double_text(text) if "e" in text or x.denominator == 1 else exp.Literal.number(text)
    return exp.Neg(this=node) if x < 0 else node


def _double_text(text: str) -> exp.Expr:
    """A double written in exponent form, cast from a string.

    Spark reads a numeric literal such as ``1e-300`` as a DECIMAL of 300 digits and refuses it
    (at most 38); ``CAST('1e-300' AS DOUBLE)`` means the same double on every engine.
    """
    return _double(exp.Literal.string(text))
