"""Recognise aggregate calls in sqlglot trees: which function, which argument, which quantile."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

SUPPORTED = (
    "COUNT(*), COUNT(x), COUNT(DISTINCT x), SUM(x), AVG(x), MIN(x), MAX(x), MEDIAN(x), "
    "QUANTILE(x, q), PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x [DESC]), "
    "VAR/VARIANCE/VAR_SAMP/VAR_POP(x), STDDEV/STDDEV_SAMP/STDDEV_POP(x)"
)

NAMES = (
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "MEDIAN",
    "QUANTILE",
    "PERCENTILE_CONT",
    "VAR",
    "VARIANCE",
    "VAR_SAMP",
    "VAR_POP",
    "STDDEV",
    "STDDEV_SAMP",
    "STDDEV_POP",
)
"""Aggregate names an analyst may write (offered when an unknown name is close to one)."""

_ANONYMOUS: dict[str, str] = {
    # Spellings sqlglot does not know as functions: SQL Server's VAR/VARP/STDEVP, MySQL's STD.
    "VAR": "var_samp",
    "VARP": "var_pop",
    "STDEVP": "stddev_pop",
    "STD": "stddev_pop",
}

_SIMPLE: dict[type[exp.Expr], str] = {
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.Median: "quantile",
    exp.VariancePop: "var_pop",
    exp.Variance: "var_samp",
    exp.StddevPop: "stddev_pop",
    exp.StddevSamp: "stddev_samp",
    exp.Stddev: "stddev_samp",
}


@dataclass(frozen=True)
class Call:
    """An aggregate call as written: function, argument (``None`` for ``*``), quantile literal."""

    func: str
    arg: exp.Expr | None
    distinct: bool
    q: exp.Expr | None
    name: str
    descending: bool = False


def recognise(node: exp.Expr) -> Call | None:
    """The aggregate ``node`` calls, or ``None`` if it is not one Dalenius knows."""
    if isinstance(node, exp.WithinGroup):
        inner = node.this
        order = node.expression
        percentile = isinstance(inner, exp.PercentileCont | exp.PercentileDisc)
        if percentile and isinstance(order, exp.Order) and len(order.expressions) == 1:
            ordered = order.expressions[0]
            # ORDER BY x DESC counts the fraction q from the top: the (1 - q)-quantile.
            desc = bool(ordered.args.get("desc")) if isinstance(ordered, exp.Ordered) else False
            arg = ordered.this if isinstance(ordered, exp.Ordered) else ordered
            return Call("quantile", arg, False, inner.this, "PERCENTILE_CONT", desc)
        return None
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in _ANONYMOUS:
        name = str(node.this).upper()
        args = node.expressions
        if len(args) != 1:
            return None
        arg = args[0]
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            arg = arg.expressions[0] if len(arg.expressions) == 1 else None
        return Call(_ANONYMOUS[name], arg, distinct, None, name)
    if isinstance(node, exp.Count):
        arg = node.this
        if arg is None or isinstance(arg, exp.Star):
            return Call("count", None, False, None, "COUNT")
        if isinstance(arg, exp.Distinct):
            inner = arg.expressions[0] if len(arg.expressions) == 1 else None
            return Call("count", inner, True, None, "COUNT")
        return Call("count", arg, False, None, "COUNT")
    if isinstance(node, exp.Quantile):
        return Call("quantile", node.this, False, node.args.get("quantile"), "QUANTILE")
    if isinstance(node, exp.PercentileCont | exp.PercentileDisc):
        if node.expression is not None:
            return Call("quantile", node.this, False, node.expression, "PERCENTILE_CONT")
        return None
    for cls, func in _SIMPLE.items():
        if type(node) is cls:
            arg = node.this
            distinct = isinstance(arg, exp.Distinct)
            if distinct:
                arg = arg.expressions[0] if len(arg.expressions) == 1 else None
            return Call(
                func,
                arg,
                distinct,
                exp.Literal.number("0.5") if cls is exp.Median else None,
                cls.__name__.upper(),
            )
    return None


def quantile_value(node: exp.Expr | None) -> Fraction | None:
    """A quantile literal in [0, 1] as an exact fraction, or ``None`` if it is not one."""
    if isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    try:
        value = Fraction(node.this)
    except (ValueError, ZeroDivisionError):
        return None
    return value if 0 <= value <= 1 else None
