"""The registry of scalar SQL functions: one :class:`FunctionSpec` entry per function.

An entry says everything Dalenius needs to know about a function: its arity, the type of its
result (and which argument types it refuses), how its bounds follow from its arguments' bounds
(interval arithmetic, :func:`dalenius.plan.derive.bounds_of`), how to compute it on public values
(:func:`dalenius.plan.evaluate.evaluate`), whether it may post-process a released aggregate, the
sqlglot expression class that reads and writes it (looked up by name in :mod:`dalenius.sql`, so
this layer never imports sqlglot), and how each engine's SQL spells the call. Adding a function
is one entry here, plus, in :mod:`dalenius.sql.emit`, a case only where an engine needs a guard
the plain call lacks (``ROUND`` half away from zero on PostgreSQL, ``FLOOR`` of a huge double on
Spark, ``ABS`` of a BIGINT); ``tests/plan/test_functions.py`` checks that every entry is complete.

Example:
    >>> spec = FUNCTIONS["ROUND"]
    >>> (spec.min_args, spec.max_args, spec.sqlglot, spec.post)
    (1, 2, 'Round', True)
    >>> spec.result(["int", "int"], None), spec.evaluate([2.5, 0])
    ('int', 3.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dalenius.core.dialect import DIALECTS as ENGINE_DIALECTS

Value = Any
"""A value computed on public data (``None`` is SQL's NULL)."""

Bounds = tuple[Fraction, Fraction]


class Empty:
    """Marks an expression that is always NULL (contributes nothing to a sum)."""


EMPTY = Empty()

Interval = Bounds | Empty | None
"""Public bounds of a value, :data:`EMPTY` if it is always NULL, ``None`` if not derivable."""

Pick = Callable[..., Fraction]
"""``min`` or ``max`` over an iterable of bounds."""

Fail = Callable[[str, str], Exception]
"""``fail(what, fix)``: the error a strict type check raises (the caller adds where and why)."""

NUMERIC = frozenset({"int", "float"})

DIALECTS = tuple(ENGINE_DIALECTS)
"""The engines whose SQL every function must be spelled in (every :mod:`dalenius.core.dialect`)."""

MAX_ROUND_DIGITS = 15
"""ROUND keeps at most this many digits either side of the point (doubles hold no more)."""


class EvaluationError(ValueError):
    """An expression that cannot be evaluated on public values (for example a date function)."""


@dataclass(frozen=True)
class FunctionSpec:
    """One scalar function.

    Attributes:
        name: the name analysts write and plans hold (``Func.name``).
        min_args: the fewest arguments.
        max_args: the most arguments.
        result: the result type from the argument types; with a ``fail`` it refuses argument
            types the engine would have to convert (the strict check), without it never refuses.
        bounds: the result's bounds from the arguments' (``None`` where none can be derived,
            e.g. for text).
        evaluate: the value on public arguments (SQL semantics), or ``None`` when it cannot be
            computed outside the engine (date parts: keys are then not enumerated).
        sqlglot: the name of the sqlglot expression class that reads and writes the call.
        spelling: how each engine in :data:`DIALECTS` writes the call (the start of its SQL).
        post: whether it may be applied to a released aggregate (``ROUND(AVG(x), 1)``).
        strict_nulls: NULL in any argument gives NULL (all but ``COALESCE``).
        row: whether it may appear in row-level expressions, computed by the engine. ``False``
            for functions that fail on some values in some engine (``SQRT(-1)``, ``LN(0)``):
            those only post-process released aggregates, computed by Dalenius, where a value
            outside their domain gives NULL.
    """

    name: str
    min_args: int
    max_args: int
    result: Callable[[Sequence[str], Fail | None], str]
    bounds: Callable[[Sequence[Interval]], Interval]
    evaluate: Callable[[Sequence[Value]], Value] | None
    sqlglot: str
    spelling: Mapping[str, str]
    post: bool = False
    strict_nulls: bool = True
    row: bool = True

    def __call__(self, args: Sequence[Value]) -> Value:
        """The function on public values, with SQL's NULL semantics."""
        if self.strict_nulls and any(a is None for a in args):
            return None
        if self.evaluate is None:
            raise EvaluationError(f"{self.name} cannot be evaluated on public values")
        return self.evaluate(args)


# -- result types -----------------------------------------------------------------------------


def common_type(types: Sequence[str], fail: Fail | None) -> str:
    """The type values of ``types`` share (numbers widen to float); strict: refuse a mix."""
    concrete = {t for t in types if t != "null"}
    if not concrete:
        return "null"
    if concrete <= NUMERIC:
        return "float" if "float" in concrete else "int"
    if len(concrete) > 1 and fail is not None:
        raise fail(
            f"values of different types are mixed: {sorted(concrete)}.",
            "make every branch the same type.",
        )
    return min(concrete)


def _of_first(need: str, result: str) -> Callable[[str], Callable[..., str]]:
    """A type rule: the first argument must be ``need`` (or NULL); the result is ``result``."""

    def rule_for(name: str) -> Callable[..., str]:
        def rule(types: Sequence[str], fail: Fail | None) -> str:
            if fail is not None and types[0] not in (need, "null"):
                article = "a date" if need == "date" else "text"
                raise fail(
                    f"{name} needs {article}.",
                    f"apply {name} to a {'date' if need == 'date' else 'text'} column.",
                )
            return result

        return rule

    return rule_for


def _substring_type(types: Sequence[str], fail: Fail | None) -> str:
    """SUBSTRING(text, start[, length]): text, from text and whole numbers."""
    if fail is not None and types[0] not in ("str", "null"):
        raise fail("SUBSTRING needs text.", "apply SUBSTRING to a text column.")
    if fail is not None and any(t not in ("int", "null") for t in types[1:]):
        raise fail(
            "SUBSTRING's start and length are whole numbers.", "write SUBSTRING(column, 1, 2)."
        )
    return "str"


def _numeric_for(name: str) -> Callable[..., str]:
    def rule(types: Sequence[str], fail: Fail | None) -> str:
        if fail is not None and any(t not in NUMERIC | {"null"} for t in types):
            raise fail(f"{name} needs numbers.", f"apply {name} to a numeric column.")
        return "int" if set(types) - {"null"} <= {"int"} else "float"

    return rule


# -- bounds -----------------------------------------------------------------------------------


def _no_bounds(args: Sequence[Interval]) -> Interval:
    return None


def union(parts: Sequence[Interval]) -> Interval:
    """The smallest interval holding every part (``None`` if any part is unbounded)."""
    return _envelope(parts, min, max)


def _envelope(parts: Sequence[Interval], low: Pick, high: Pick) -> Interval:
    """``(low of the lower ends, high of the upper ends)`` of the bounded parts; NULLs skipped."""
    if any(p is None for p in parts):
        return None
    real = [p for p in parts if isinstance(p, tuple)]
    if not real:
        return EMPTY
    return low(p[0] for p in real), high(p[1] for p in real)


def _abs_bounds(args: Sequence[Interval]) -> Interval:
    a = args[0]
    if a is None or isinstance(a, Empty):
        return a
    lo, hi = a
    if lo >= 0:
        return lo, hi
    if hi <= 0:
        return -hi, -lo
    return Fraction(0), max(-lo, hi)


def _extreme_bounds(pick: Pick) -> Callable[[Sequence[Interval]], Interval]:
    """LEAST (``min``) or GREATEST (``max``): the pick of the lower ends and of the upper ends."""
    return lambda args: _envelope(args, pick, pick)


def _integral_bounds(args: Sequence[Interval]) -> Interval:
    a = args[0]
    if a is None or isinstance(a, Empty):
        return a
    return Fraction(math.floor(a[0])), Fraction(math.ceil(a[1]))


# -- values -----------------------------------------------------------------------------------


def is_int(v: Value) -> bool:
    """Whether ``v`` is an integer value (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def finite(v: Value) -> bool:
    """Whether ``v`` is a number a double holds (post-processing must not fail on any value)."""
    try:
        return math.isfinite(float(v))
    except (OverflowError, TypeError, ValueError):
        return False


def _floor(args: Sequence[Value]) -> Value:
    x = args[0]
    if not finite(x):
        return x  # ±∞ (a saturated value) and NaN are their own floor and ceiling
    return math.floor(x) if not is_int(x) else x


def _ceil(args: Sequence[Value]) -> Value:
    x = args[0]
    if not finite(x):
        return x
    return math.ceil(x) if not is_int(x) else x


def _round(args: Sequence[Value]) -> Value:
    return round_half_away(args[0], int(args[1]) if len(args) > 1 else 0)


def round_half_away(x: Value, digits: int) -> Value:
    """``x`` rounded to ``digits`` digits, halves away from zero (as the generated SQL does)."""
    digits = max(-MAX_ROUND_DIGITS, min(MAX_ROUND_DIGITS, digits))
    if is_int(x) and digits >= 0:
        return x
    if not finite(x):
        return x
    scale = 10.0**digits
    scaled = abs(float(x)) * scale
    if not math.isfinite(scaled):
        return float(x)  # a double this large has no digit after the point to round
    rounded = math.floor(scaled + 0.5) / scale
    return (
        math.copysign(rounded, float(x)) if digits > 0 else float(math.copysign(rounded, float(x)))
    )


def _substring(args: Sequence[Value]) -> Value:
    """SQL's SUBSTRING for a start from 1 and a length from 0 (the binder admits no others):
    ``length`` characters from the ``start``-th, counted from 1.
    """
    text, start = str(args[0]), int(args[1])
    end = None if len(args) < 3 else start - 1 + int(args[2])
    return text[start - 1 : end]


def _sqrt(args: Sequence[Value]) -> Value:
    x = float(args[0])
    return math.sqrt(x) if x >= 0 or math.isnan(x) else None


def _ln(args: Sequence[Value]) -> Value:
    x = float(args[0])
    return math.log(x) if x > 0 else math.nan if math.isnan(x) else None


def _exp(args: Sequence[Value]) -> Value:
    x = float(args[0])
    return math.exp(x) if x < 709 else math.inf


def _power(args: Sequence[Value]) -> Value:
    base, exponent = float(args[0]), float(args[1])
    if base < 0 and not exponent.is_integer():
        return None  # not a real number
    if base == 0 and exponent < 0:
        return None  # division by zero
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.copysign(math.inf, base) if exponent % 2 == 1 else math.inf


def _outward(low: float, high: float) -> Bounds | None:
    """Bounds from float ends, one step outward each (the functions' float rounding); an end of
    exactly 0 (``SQRT(0)``, ``LN(1)``, ``POWER(0, p)``, exact in IEEE arithmetic) stays 0.
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    low = low if low == 0 else math.nextafter(low, -math.inf)
    high = high if high == 0 else math.nextafter(high, math.inf)
    return Fraction(low), Fraction(high)


def _increasing(
    func: Callable[[float], float], low_end: float, open_low: bool
) -> Callable[[Sequence[Interval]], Interval]:
    """Bounds of a function increasing on its domain ``[low_end, ∞)`` (open at ``low_end`` when
    ``open_low``), NULL outside it: the image of the interval's part inside the domain.
    """

    def bounds(args: Sequence[Interval]) -> Interval:
        a = args[0]
        if a is None or isinstance(a, Empty):
            return a
        lo, hi = float(a[0]), float(a[1])
        if hi < low_end or (open_low and hi <= low_end):
            return EMPTY  # NULL for every value allowed
        if lo < low_end or (open_low and lo <= low_end):
            if open_low:
                return None  # unbounded below near the domain's end (LN near 0)
            lo = low_end
        try:
            return _outward(func(lo), func(hi))
        except (OverflowError, ValueError):
            return None

    return bounds


def _power_bounds(args: Sequence[Interval]) -> Interval:
    """POWER(x, n) for a constant whole ``n`` ≥ 0, exactly (even ``n`` is not monotone: it goes
    through ``|x|``); other exponents: the increasing image over ``x`` ≥ 0, or none.
    """
    a, p = args
    if a is None or p is None or isinstance(a, Empty) or isinstance(p, Empty) or p[0] != p[1]:
        return None if not (isinstance(a, Empty) or isinstance(p, Empty)) else EMPTY
    n = p[0]
    if n.denominator == 1 and 0 <= n <= 64:
        k = int(n)
        if k % 2 == 1:
            return a[0] ** k, a[1] ** k
        m = _abs_bounds([a])
        assert isinstance(m, tuple)
        return m[0] ** k, m[1] ** k
    if n > 0:
        return _increasing(lambda x: math.pow(x, float(n)), 0.0, False)([a])
    if a[0] > 0:  # decreasing on (0, ∞)
        return _outward(math.pow(float(a[1]), float(n)), math.pow(float(a[0]), float(n)))
    return None


# -- the registry -----------------------------------------------------------------------------


def _spelled(head: str, **overrides: str) -> dict[str, str]:
    return {d: overrides.get(d, head) for d in DIALECTS}


_text = _of_first("str", "str")
_date_part = _of_first("date", "int")

# The functions that may post-process an aggregate come first, in the order a refusal lists them.
_SPECS = (
    FunctionSpec(
        "ROUND", 1, 2, _numeric_for("ROUND"), _integral_bounds, _round, "Round",
        _spelled("ROUND(", postgres="pg_temp.dalenius_round("), post=True,
    ),
    FunctionSpec(
        "GREATEST", 2, 16, common_type, _extreme_bounds(max), max, "Greatest",
        _spelled("GREATEST(", duckdb="CASE WHEN"), post=True,
    ),
    FunctionSpec(
        "LEAST", 2, 16, common_type, _extreme_bounds(min), min, "Least",
        _spelled("LEAST(", duckdb="CASE WHEN"), post=True,
    ),
    FunctionSpec(
        "ABS", 1, 1, _numeric_for("ABS"), _abs_bounds, lambda a: abs(a[0]), "Abs",
        _spelled("ABS("), post=True,
    ),
    FunctionSpec(
        "FLOOR", 1, 1, _numeric_for("FLOOR"), _integral_bounds, _floor, "Floor",
        _spelled("FLOOR("), post=True,
    ),
    FunctionSpec(
        "CEIL", 1, 1, _numeric_for("CEIL"), _integral_bounds, _ceil, "Ceil",
        _spelled("CEIL("), post=True,
    ),
    FunctionSpec(
        "COALESCE", 1, 16, common_type, union,
        lambda a: next((x for x in a if x is not None), None), "Coalesce",
        _spelled("COALESCE("), post=True, strict_nulls=False,
    ),
    FunctionSpec(
        "SQRT", 1, 1, _numeric_for("SQRT"), _increasing(math.sqrt, 0.0, False), _sqrt, "Sqrt",
        _spelled("SQRT("), post=True, row=False,
    ),
    FunctionSpec(
        "LN", 1, 1, _numeric_for("LN"), _increasing(math.log, 0.0, True), _ln, "Ln",
        _spelled("LN("), post=True, row=False,
    ),
    FunctionSpec(
        "EXP", 1, 1, _numeric_for("EXP"), _increasing(math.exp, -math.inf, False), _exp, "Exp",
        _spelled("EXP("), post=True, row=False,
    ),
    FunctionSpec(
        "POWER", 2, 2, _numeric_for("POWER"), _power_bounds, _power, "Pow",
        _spelled("POWER("), post=True, row=False,
    ),
    FunctionSpec(
        "LOWER", 1, 1, _text("LOWER"), _no_bounds, lambda a: str(a[0]).lower(), "Lower",
        _spelled("LOWER("),
    ),
    FunctionSpec(
        "UPPER", 1, 1, _text("UPPER"), _no_bounds, lambda a: str(a[0]).upper(), "Upper",
        _spelled("UPPER("),
    ),
    FunctionSpec(
        "LENGTH", 1, 1, _of_first("str", "int")("LENGTH"), _no_bounds,
        lambda a: len(str(a[0])), "Length", _spelled("LENGTH("),
    ),
    FunctionSpec(
        "TRIM", 1, 1, _text("TRIM"), _no_bounds, lambda a: str(a[0]).strip(" "), "Trim",
        _spelled("TRIM("),
    ),
    FunctionSpec(
        "SUBSTRING", 2, 3, _substring_type, _no_bounds, _substring, "Substring",
        _spelled("SUBSTRING("),
    ),
    FunctionSpec(
        "YEAR", 1, 1, _date_part("YEAR"), _no_bounds, None, "Year",
        _spelled("YEAR(", postgres="EXTRACT(YEAR FROM"),
    ),
    FunctionSpec(
        "MONTH", 1, 1, _date_part("MONTH"), _no_bounds, None, "Month",
        _spelled("MONTH(", postgres="EXTRACT(MONTH FROM"),
    ),
    FunctionSpec(
        "DAY", 1, 1, _date_part("DAY"), _no_bounds, None, "Day",
        _spelled("DAY(", postgres="EXTRACT(DAY FROM"),
    ),
)  # fmt: skip

FUNCTIONS: Mapping[str, FunctionSpec] = {spec.name: spec for spec in _SPECS}
"""Every scalar function allowed in expressions, by name. Each is deterministic and total on its
domain: an expression that could fail on some rows would make a refusal depend on the data."""

POST_FUNCTIONS = tuple(spec.name for spec in _SPECS if spec.post)
"""Functions allowed around aggregates (post-processing of the noisy answers)."""
