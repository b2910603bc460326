"""How large a share of a table's rows a query's ``WHERE`` keeps, estimated from public bounds.

A bounded query over one table either reads the table twice (once to find the units over their
caps, once for their rows) or keeps the rows that pass its ``WHERE`` and reads them twice.
Keeping rows costs memory and time in proportion to the rows kept, so it pays when the ``WHERE``
keeps few of them: TPC-H Q6 keeps 1.8% of its lines, and kept, its statement takes 0.79 times
the time; Q1 keeps 98%, and kept it would hold 59 million lines in memory.

The share is estimated as a query optimiser does without statistics, from the catalog alone —
each condition as the fraction of its column's public bounds (or key list) it allows, values
taken as spread evenly and conditions as independent — so the choice reads no data and says
nothing about it. It only chooses how the engine computes the same answer: the kept rows and
the exact answers are the same either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from dalenius.plan.derive import FieldInfo
from dalenius.plan.expr import Between, BinOp, Col, Expr, InList, Lit
from dalenius.plan.nodes import Filter, Project, Relation, Scan

KEEP_SHARE = Fraction(1, 4)
"""A ``WHERE`` estimated to keep at most this share of a table's rows has them kept."""

_ALL = Fraction(1)


def estimated_share(relation: Relation, fields: Mapping[str, FieldInfo]) -> Fraction:
    """The estimated share of the scanned table's rows that ``relation``'s filters keep (1 for
    anything but filters and projections over one scan, or conditions the bounds say nothing of).

    Example:
        >>> from dalenius.plan.nodes import Field
        >>> t = Scan("t", "t", (Field("t__q", "q", "t", "int"),))
        >>> q = {"t__q": FieldInfo("int", (Fraction(1), Fraction(50)), None, False)}
        >>> estimated_share(Filter(t, BinOp("<", Col("t__q"), Lit(13))), q)
        Fraction(12, 49)
    """
    match relation:
        case Scan():
            return _ALL
        case Filter(child=child, predicate=predicate):
            return estimated_share(child, fields) * _share(predicate, fields)
        case Project(child=child):
            return estimated_share(child, fields)
    return _ALL


def _share(condition: Expr, fields: Mapping[str, FieldInfo]) -> Fraction:
    """The share of rows ``condition`` keeps, by its kind (see the module's docstring)."""
    if isinstance(condition, BinOp) and condition.op in ("AND", "OR"):
        left, right = _share(condition.left, fields), _share(condition.right, fields)
        return left * right if condition.op == "AND" else min(_ALL, left + right)
    if isinstance(condition, Between) and not condition.negated:
        span = _span(condition.operand, fields)
        low, high = _number(condition.low), _number(condition.high)
        if span is None or low is None or high is None:
            return _ALL
        return _within(span, max(low, span[0]), min(high, span[1]))
    if isinstance(condition, InList) and not condition.negated:
        one = _share_of_value(condition.operand, fields)
        return min(_ALL, one * len(condition.items))
    if isinstance(condition, BinOp) and condition.op in ("<", "<=", ">", ">=", "="):
        column, literal, op = condition.left, condition.right, condition.op
        if isinstance(column, Lit):  # 13 > q is q < 13
            column, literal = literal, column
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if op == "=":
            return _share_of_value(column, fields)
        span, value = _span(column, fields), _number(literal)
        if span is None or value is None:
            return _ALL
        if op in ("<", "<="):
            return _within(span, span[0], min(value, span[1]))
        return _within(span, max(value, span[0]), span[1])
    return _ALL


def _share_of_value(column: Expr, fields: Mapping[str, FieldInfo]) -> Fraction:
    """The share of rows holding one given value of ``column``: one key of its list, or one
    integer of its bounds.
    """
    info = fields.get(column.name) if isinstance(column, Col) else None
    if info is None:
        return _ALL
    if info.keys:
        return Fraction(1, len(info.keys))
    if info.type == "int" and info.bounds is not None:
        return Fraction(1, max(1, int(info.bounds[1] - info.bounds[0]) + 1))
    return _ALL


def _span(column: Expr, fields: Mapping[str, FieldInfo]) -> tuple[Fraction, Fraction] | None:
    """The public bounds of a numeric column, if it has them and they enclose more than a point."""
    info = fields.get(column.name) if isinstance(column, Col) else None
    if info is None or info.type not in ("int", "float") or info.bounds is None:
        return None
    low, high = info.bounds
    return (low, high) if high > low else None


def _within(span: tuple[Fraction, Fraction], low: Fraction, high: Fraction) -> Fraction:
    return max(Fraction(0), high - low) / (span[1] - span[0])


def _number(expr: Expr) -> Fraction | None:
    if (
        isinstance(expr, Lit)
        and isinstance(expr.value, int | float)
        and not isinstance(expr.value, bool)
    ):
        return Fraction(expr.value) if math.isfinite(expr.value) else None
    return None
