"""Evaluate a plan expression in Python with SQL semantics (NULL propagates, division is total).

Used where an expression must be computed on *public* values, never on data: to enumerate the
keys of a GROUP BY expression over a column whose domain is public (``LEAST((age / 10) * 10, 60)``
over the integer bounds of ``age``, ``CASE`` bins, ``LOWER(education)`` over its key list), and to
post-process released aggregates (``ROUND(AVG(x), 1)``, ``HAVING COUNT(*) > 100``).

Semantics match the SQL Dalenius generates (:mod:`dalenius.sql.emit`): integer ``/`` truncates
toward zero, ``%`` takes the sign of the dividend, division by zero is NULL, comparisons with
NULL are NULL, ``AND``/``OR`` use three-valued logic.

Example:
    >>> from dalenius.plan.expr import BinOp, Col, Func, Lit
    >>> bins = Func("LEAST", (BinOp("*", BinOp("/", Col("age"), Lit(10)), Lit(10)), Lit(60)))
    >>> [evaluate(bins, {"age": a}) for a in (17, 45, 99)]
    [10, 40, 60]
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from dalenius.plan.expr import (
    Between,
    BinOp,
    Case,
    Col,
    Expr,
    Func,
    InList,
    IsNull,
    Like,
    Lit,
    Neg,
    Not,
)
from dalenius.plan.functions import FUNCTIONS, EvaluationError, Value, is_int

__all__ = ["EvaluationError", "Value", "evaluate"]


def evaluate(expr: Expr, env: Mapping[str, Value]) -> Value:  # noqa: C901, PLR0912  # one arm per expression node
    """The value of ``expr`` when each column ``name`` holds ``env[name]``."""
    match expr:
        case Col(name=name):
            if name not in env:
                raise EvaluationError(f"no value for column {name!r}")
            return env[name]
        case Lit(value=v):
            return v
        case BinOp(op="AND", left=left, right=right):
            return _and(evaluate(left, env), evaluate(right, env))
        case BinOp(op="OR", left=left, right=right):
            return _or(evaluate(left, env), evaluate(right, env))
        case BinOp(op=op, left=left, right=right):
            return _binary(op, evaluate(left, env), evaluate(right, env))
        case Not(operand=o):
            v = evaluate(o, env)
            return None if v is None else not v
        case Neg(operand=o):
            v = evaluate(o, env)
            return None if v is None else -v
        case IsNull(operand=o, negated=neg):
            return (evaluate(o, env) is None) != neg
        case InList(operand=o, items=items, negated=neg):
            v = evaluate(o, env)
            values = [evaluate(i, env) for i in items]
            if v is None:
                return None
            if any(_equal(v, x) for x in values if x is not None):
                return not neg
            if any(x is None for x in values):
                return None
            return neg
        case Between(operand=o, low=lo, high=hi, negated=neg):
            v, a, b = evaluate(o, env), evaluate(lo, env), evaluate(hi, env)
            inside = _and(_binary(">=", v, a), _binary("<=", v, b))
            return None if inside is None else inside != neg
        case Like(operand=o, pattern=p, negated=neg, case_insensitive=ci):
            v, pat = evaluate(o, env), evaluate(p, env)
            if v is None or pat is None:
                return None
            return _like(str(v), str(pat), ci) != neg
        case Func(name=name, args=args):
            return _function(name, [evaluate(a, env) for a in args])
        case Case(whens=whens, default=default):
            for cond, value in whens:
                if evaluate(cond, env) is True:
                    return evaluate(value, env)
            return evaluate(default, env) if default is not None else None
    raise EvaluationError(f"cannot evaluate {expr!r}")


def _and(a: Value, b: Value) -> Value:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: Value, b: Value) -> Value:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _equal(a: Value, b: Value) -> bool:
    return bool(a == b)


def _binary(op: str, a: Value, b: Value) -> Value:  # noqa: C901  # one arm per operator
    if a is None or b is None:
        return None
    if op == "=":
        return a == b
    if op == "<>":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    if op == "||":
        return f"{a}{b}"
    if op in ("+", "-", "*"):
        try:
            return a + b if op == "+" else a - b if op == "-" else a * b
        except OverflowError:
            # An integer beyond the doubles met a float: in doubles the result saturates to ±∞.
            return _binary(op, _saturated(a), _saturated(b))
    if op == "/":
        if b == 0:
            return None
        if is_int(a) and is_int(b):
            quotient = abs(a) // abs(b)
            return quotient if (a >= 0) == (b >= 0) else -quotient
        try:
            return a / b
        except OverflowError:
            return _saturated(a) / _saturated(b)
    if op == "%":
        if b == 0:
            return None
        if is_int(a) and is_int(b):
            rest = abs(a) % abs(b)
            return rest if a >= 0 else -rest
        a, b = _saturated(a), _saturated(b)
        # fmod(±∞, b) and fmod(a, NaN) are NaN in SQL engines; Python raises instead.
        return math.fmod(a, b) if math.isfinite(a) and not math.isnan(b) else math.nan
    raise EvaluationError(f"unknown operator {op}")


def _saturated(v: Value) -> Value:
    """``v`` as a float, ±∞ beyond the largest double."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _function(name: str, args: list[Value]) -> Value:
    spec = FUNCTIONS.get(name)
    if spec is None:
        raise EvaluationError(f"{name} cannot be evaluated on public values")
    return spec(args)


def _like(value: str, pattern: str, case_insensitive: bool) -> bool:
    import re

    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    flags = re.IGNORECASE | re.DOTALL if case_insensitive else re.DOTALL
    return re.fullmatch(regex, value, flags) is not None
