"""Turn sqlglot expressions into plan expressions, type-checked against public metadata.

Only deterministic, total operations are admitted, and operands are type-checked, so a query that
passes cannot fail on particular rows (a failure that depended on the data would leak it): no
casts, no comparisons that make the engine convert row values, division made NULL-safe later.
Integer ``/`` truncates toward zero (PostgreSQL semantics), so ``(age / 10) * 10`` bins ages.
"""

from __future__ import annotations

import calendar
import datetime
import difflib
import math
import re
from collections.abc import Callable, Mapping

from sqlglot import exp

from dalenius.core.errors import QueryError
from dalenius.plan.derive import FieldInfo, type_of
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
    aggregates_read,
)
from dalenius.plan.functions import FUNCTIONS, MAX_ROUND_DIGITS
from dalenius.sql.aggregates import NAMES, recognise

ErrorFactory = Callable[..., QueryError]
"""``error(what, node, clause=..., fix=..., why=..., privacy=...)`` → a located QueryError."""

Resolver = Callable[[exp.Column, str], str]
"""Maps a column reference (in a clause) to a field id, raising a located error if unknown."""

AggregateHook = Callable[[exp.Expr, str], Expr]
"""Turns an aggregate call (in a clause) into a reference to it, or raises."""

COMPARE = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.IntDiv: "/"}
FUNCS: dict[type[exp.Expr], str] = {
    getattr(exp, spec.sqlglot): spec.name for spec in FUNCTIONS.values()
}
"""sqlglot's class of each registered function (:data:`dalenius.plan.functions.FUNCTIONS`)."""

KNOWN_NAMES = tuple(sorted({*FUNCTIONS, *NAMES}))
"""Function names an analyst may write, scalar and aggregate (for "did you mean")."""

_FUNCTION_HELP = (
    "use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, CASE, arithmetic and the "
    f"functions {', '.join(sorted(FUNCTIONS))}."
)


class Converter:
    """Converts and type-checks expressions of one query."""

    def __init__(
        self, error: ErrorFactory, fields: Mapping[str, FieldInfo], resolve: Resolver
    ) -> None:
        self.error = error
        self.fields = fields
        self.resolve = resolve

    def convert(
        self, node: exp.Expr, clause: str, *, aggregate: AggregateHook | None = None
    ) -> Expr:
        """Convert ``node`` and check its types; aggregates go to ``aggregate`` (or are refused).

        With an ``aggregate`` hook the result refers to aggregates whose types only the caller
        knows, so the caller type-checks it.
        """
        out = self._expr(node, clause, aggregate)
        if aggregate is None:
            self.type_of(out, node=node, clause=clause)
        return out

    # -- conversion -----------------------------------------------------------------------------

    def _expr(self, node: exp.Expr, clause: str, aggregate: AggregateHook | None) -> Expr:  # noqa: C901, PLR0912, PLR0915  # one arm per expression node
        """The plan expression for one SQL expression node (refusing what the planner does not accept).

        Long because it has one arm per kind of SQL expression node (columns, literals, operators,
        IS, IN, BETWEEN, LIKE, CASE, EXTRACT, calls of registered functions) and one refusal per
        node it does not accept (subqueries, casts, windows), each a few lines that share nothing.
        """

        def sub(n: exp.Expr) -> Expr:
            return self._expr(n, clause, aggregate)

        if isinstance(node, exp.Paren):
            return sub(node.this)
        if isinstance(node, exp.Column):
            return Col(self.resolve(node, clause))
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Lit(node.this)
            return Lit(self._number(node, clause))
        if isinstance(node, exp.Boolean):
            return Lit(bool(node.this))
        if isinstance(node, exp.Null):
            return Lit(None)
        for cls, op in COMPARE.items():
            if isinstance(node, cls):
                return BinOp(op, sub(node.this), sub(node.expression))
        if isinstance(node, exp.Add | exp.Sub) and (
            isinstance(node.this, exp.Interval) or isinstance(node.expression, exp.Interval)
        ):
            # DATE '1998-12-01' - INTERVAL '90' DAY is a constant, folded here: no row is read.
            return Lit(self._date_of(node, clause).isoformat())
        if isinstance(node, exp.Interval):
            raise self._interval_refusal(node, clause)
        for cls, op in ARITH.items():
            if isinstance(node, cls):
                return BinOp(op, sub(node.this), sub(node.expression))
        if isinstance(node, exp.And | exp.Or):
            return BinOp(
                "AND" if isinstance(node, exp.And) else "OR", sub(node.this), sub(node.expression)
            )
        if isinstance(node, exp.DPipe):
            return BinOp("||", sub(node.this), sub(node.expression))
        if isinstance(node, exp.Not):
            inner = sub(node.this)
            match inner:
                case IsNull(operand=o, negated=n):
                    return IsNull(o, not n)
                case InList(operand=o, items=items, negated=n):
                    return InList(o, items, not n)
                case Between(operand=o, low=lo, high=hi, negated=n):
                    return Between(o, lo, hi, not n)
                case Like(operand=o, pattern=p, negated=n, case_insensitive=ci):
                    return Like(o, p, not n, ci)
            return Not(inner)
        if isinstance(node, exp.Neg):
            inner = sub(node.this)
            if (
                isinstance(inner, Lit)
                and isinstance(inner.value, int | float)
                and not isinstance(inner.value, bool)
            ):
                return Lit(-inner.value)  # a negative constant, not an expression
            return Neg(inner)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.error(
                    "IS is supported only as IS NULL / IS NOT NULL.",
                    node,
                    clause=clause,
                    fix="write = TRUE, or IS NULL.",
                )
            return IsNull(sub(node.this))
        if isinstance(node, exp.Exists) or (
            isinstance(node, exp.In) and node.args.get("query") is not None
        ):
            raise self.error(
                f"{'EXISTS' if isinstance(node, exp.Exists) else 'IN (SELECT ...)'} is answered "
                "only as a condition of WHERE joined to the others by AND.",
                node,
                clause=clause,
                why="there it keeps or drops each row; inside OR, CASE or SELECT it would be a "
                "value of its own.",
                fix="write WHERE ... AND [NOT] EXISTS (SELECT ...), or list the values: IN ('a', 'b').",
            )
        if isinstance(node, exp.In):
            if node.args.get("unnest") is not None:
                raise self.error(
                    "IN UNNEST is not supported.",
                    node,
                    clause=clause,
                    fix="list the values: IN ('a', 'b').",
                )
            return InList(sub(node.this), tuple(sub(e) for e in node.expressions))
        if isinstance(node, exp.Between):
            return self._between(node, sub)
        if isinstance(node, exp.Like | exp.ILike):
            return Like(
                sub(node.this),
                sub(node.expression),
                negated=bool(node.args.get("negate")),
                case_insensitive=isinstance(node, exp.ILike),
            )
        if isinstance(node, exp.Case):
            # The simple form CASE x WHEN v THEN ... is CASE WHEN x = v THEN ... (NULL matches
            # no v, as x = NULL is never true).
            subject = sub(node.this) if node.this is not None else None
            whens = tuple(
                (
                    sub(w.this) if subject is None else BinOp("=", subject, sub(w.this)),
                    sub(w.args["true"]),
                )
                for w in node.args.get("ifs", [])
            )
            default = node.args.get("default")
            return Case(whens, sub(default) if default is not None else None)
        if isinstance(node, exp.If):
            default = node.args.get("false")
            return Case(
                ((sub(node.this), sub(node.args["true"])),),
                sub(default) if default is not None else None,
            )
        if isinstance(node, exp.Extract):
            part = node.this.name.upper() if isinstance(node.this, exp.Var | exp.Identifier) else ""
            if part in ("YEAR", "MONTH", "DAY"):
                return Func(part, (sub(node.expression),))
            raise self.error(
                f"EXTRACT({part}) is not supported.",
                node,
                clause=clause,
                fix="use YEAR, MONTH or DAY.",
            )
        for func_cls, name in FUNCS.items():
            if isinstance(node, func_cls):
                args = self._func_args(node, name, clause, aggregate)
                if name == "ROUND" and len(args) > 1 and not _small_int(args[1]):
                    raise self.error(
                        f"ROUND takes a whole number of digits between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}.",
                        node,
                        clause=clause,
                        fix="write ROUND(x, 2) or ROUND(x, -3).",
                    )
                if name == "SUBSTRING" and not all(_whole_from(a, i) for i, a in enumerate(args)):
                    raise self.error(
                        "SUBSTRING takes a constant start from 1 and a constant length from 0.",
                        node,
                        clause=clause,
                        why="engines disagree on a start below 1, and PostgreSQL fails on a "
                        "negative length, so such a call could fail on some rows.",
                        fix="write SUBSTRING(column, 1, 2).",
                    )
                if not FUNCTIONS[name].row and not any(aggregates_read(a) for a in args):
                    raise self.error(
                        f"{name} applies only to released aggregates here.",
                        node,
                        clause=clause,
                        why=f"{name} fails on some values in some engines, so on rows it could "
                        "fail because of one person's data.",
                        fix=f"apply {name} to an aggregate, e.g. {name}(AVG(x)"
                        + (", 2)" if name == "POWER" else ")")
                        + ", or use arithmetic on rows.",
                    )
                return Func(name, args)
        if isinstance(node, exp.AggFunc | exp.WithinGroup) or recognise(node) is not None:
            if aggregate is None:
                raise self.error(
                    "aggregates are not allowed here.",
                    node,
                    clause=clause,
                    fix="use aggregates in SELECT, HAVING or ORDER BY.",
                )
            return aggregate(node, clause)
        if isinstance(node, exp.Subquery | exp.Select):
            raise self.error(
                "a subquery as a value is answered only beside a comparison or arithmetic "
                "operator of the outer query, not here.",
                node,
                clause=clause,
                why="a value computed from private rows (an average, a total) is an aggregate that "
                "has to be released, with its own noise, before a query can use it: Dalenius "
                "releases such a subquery first, as its own stage, and writes its value in.",
                fix="write it as x > (SELECT AVG(x) FROM t) in the outer query, or release it "
                "with its own query and write its value as a constant; subqueries are also "
                "answered in FROM (or WITH), and as [NOT] EXISTS / IN (SELECT ...) in WHERE.",
                privacy=True,
            )
        if isinstance(node, exp.Cast | exp.TryCast) and aggregate is not None:
            converted = sub(node.this)
            if aggregates_read(converted):
                return self._cast_released(node, converted, clause)
        if isinstance(node, exp.Cast) and _date_literal(node):
            # DATE '1994-01-01' is a constant, checked here: no row is ever cast.
            self._date_of(node, clause)
            return Lit(str(node.this.this))
        if isinstance(node, exp.Cast | exp.TryCast):
            raise self.error(
                "CAST is not supported.",
                node,
                clause=clause,
                why="a cast can fail on some rows, and a failure that depends on the data leaks it.",
                fix="compare with a literal of the column's own type.",
            )
        if isinstance(node, exp.Window):
            raise self.error(
                "window functions are not supported.",
                node,
                clause=clause,
                why="a window function produces one value per row.",
                fix="use GROUP BY and aggregates.",
                privacy=True,
            )
        raise self.unknown(node, clause)

    def _date_of(self, node: exp.Expr, clause: str) -> datetime.date:
        """The date a date constant stands for: ``DATE 'YYYY-MM-DD'`` (or ``CAST('…' AS
        DATE)``), shifted by any ``± INTERVAL 'n' DAY|WEEK|MONTH|YEAR`` (left to right, a month
        past the end of a shorter one clamped to its last day, as PostgreSQL and DuckDB do).
        """
        if isinstance(node, exp.Paren):
            return self._date_of(node.this, clause)
        if isinstance(node, exp.Cast) and _date_literal(node):
            text = str(node.this.this)
            try:
                return datetime.date.fromisoformat(text)
            except ValueError:
                raise self.error(
                    f"DATE '{text}' is not a date.",
                    node,
                    clause=clause,
                    fix="write DATE 'YYYY-MM-DD', e.g. DATE '1994-01-01'.",
                ) from None
        if isinstance(node, exp.Add | exp.Sub):
            base, interval = node.this, node.expression
            if isinstance(node, exp.Add) and isinstance(base, exp.Interval):
                base, interval = interval, base
            if isinstance(interval, exp.Interval) and not isinstance(base, exp.Interval):
                amount, unit = self._interval(interval, clause)
                sign = -1 if isinstance(node, exp.Sub) else 1
                try:
                    return shifted(self._date_of(base, clause), sign * amount, unit)
                except (OverflowError, ValueError):
                    raise self.error(
                        "the shifted date is outside the years 1 to 9999.",
                        node,
                        clause=clause,
                        fix="shift by a smaller interval.",
                    ) from None
        raise self._interval_refusal(node, clause)

    def _interval_refusal(self, node: exp.Expr, clause: str) -> QueryError:
        """An INTERVAL anywhere but beside a date constant (a column, a number, alone)."""
        return self.error(
            "INTERVAL is supported only added to or subtracted from a date constant.",
            node,
            clause=clause,
            why="a date constant plus an interval is a constant, computed when the query is "
            "planned; on a column it would be computed on every row, as a timestamp that "
            "engines write differently.",
            fix="move the interval to the constant's side: d + INTERVAL '1' DAY < DATE "
            "'1994-01-01' is d < DATE '1994-01-01' - INTERVAL '1' DAY.",
        )

    def _interval(self, node: exp.Interval, clause: str) -> tuple[int, str]:
        """The whole number and unit of ``INTERVAL 'n' DAY|WEEK|MONTH|YEAR`` (singular or plural)."""
        value, unit = node.this, node.args.get("unit")
        name = unit.name.upper().rstrip("S") if isinstance(unit, exp.Var) else ""
        text = str(value.this).strip() if isinstance(value, exp.Literal) else ""
        if name not in INTERVAL_UNITS or not re.fullmatch(r"[+-]?\d{1,7}", text):
            raise self.error(
                f"INTERVAL {node.sql(dialect='duckdb').removeprefix('INTERVAL ')} is not supported.",
                node,
                clause=clause,
                why="a date constant is shifted by a whole number of days, weeks, months or years.",
                fix="write INTERVAL '90' DAY, INTERVAL '3' MONTH or INTERVAL '1' YEAR.",
            )
        return int(text), name

    def _cast_released(self, node: exp.Cast, value: Expr, clause: str) -> Expr:
        """CAST of a released value (post-processing, computed by Dalenius, which cannot fail):
        to a whole number it rounds half away from zero, as ``ROUND``; to a decimal type it is
        the value as a double. Other targets are refused with the fix.
        """
        target = node.to.this if isinstance(node.to, exp.DataType) else None
        name = target.value if isinstance(target, exp.DType) else ""
        if name in ("TINYINT", "SMALLINT", "INT", "BIGINT", "INT128"):
            return Func("ROUND", (value,))
        if name in ("FLOAT", "DOUBLE"):
            return BinOp("*", value, Lit(1.0))
        raise self.error(
            f"CAST of a released value to {node.to.sql(dialect='duckdb')} is not supported.",
            node,
            clause=clause,
            why="CAST post-processes a released value only to INTEGER (rounded) or DOUBLE.",
            fix="cast to INTEGER or DOUBLE, or round with ROUND(x, d) (for DECIMAL(p, d)); format "
            "text after the query.",
        )

    def unknown(self, node: exp.Expr, clause: str) -> QueryError:
        """Refuse a function or operator, named as the analyst wrote it, with close names."""
        name = written_name(node)
        function = isinstance(node, exp.Func) and type(node) not in _OPERATORS
        kind = "function" if function else "operator"
        close = (
            difflib.get_close_matches(name.upper(), KNOWN_NAMES, n=3, cutoff=0.6)
            if function
            else []
        )
        fix = (
            f"did you mean {' or '.join(close)}? Otherwise {_FUNCTION_HELP}"
            if close
            else _FUNCTION_HELP
        )
        return self.error(f"the {kind} {name} is not supported here.", node, clause=clause, fix=fix)

    def _number(self, node: exp.Literal, clause: str) -> int | float:
        """A numeric literal, refused if the engine could not hold it exactly or at all."""
        text = str(node.this)
        value: int | float
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = math.inf
        if (isinstance(value, float) and not math.isfinite(value)) or (
            isinstance(value, int) and not -(2**63) <= value < 2**63
        ):
            shown = text if len(text) <= 30 else f"{text[:12]}...{text[-6:]}"
            raise self.error(
                f"the number {shown} is out of range.",
                node,
                clause=clause,
                why="the engine holds whole numbers below 2^63 and decimals below 1.8e308.",
                fix="use a number of ordinary size.",
            )
        return value

    def _between(self, node: exp.Between, sub: Callable[[exp.Expr], Expr]) -> Expr:
        """``BETWEEN``; ``BETWEEN SYMMETRIC`` accepts the ends in either order."""
        operand, low, high = sub(node.this), sub(node.args["low"]), sub(node.args["high"])
        if not node.args.get("symmetric"):
            return Between(operand, low, high)
        if (
            isinstance(low, Lit)
            and isinstance(high, Lit)
            and isinstance(low.value, int | float)
            and isinstance(high.value, int | float)
        ):
            return Between(operand, *((low, high) if low.value <= high.value else (high, low)))
        return BinOp("OR", Between(operand, low, high), Between(operand, high, low))

    def _func_args(
        self, node: exp.Expr, name: str, clause: str, aggregate: AggregateHook | None
    ) -> tuple[Expr, ...]:
        raw: list[exp.Expr] = []
        if isinstance(node.this, exp.Expr):
            raw.append(node.this)
        if name == "ROUND" and node.args.get("decimals") is not None:
            raw.append(node.args["decimals"])
        raw.extend(e for e in node.expressions if isinstance(e, exp.Expr))
        if name == "POWER" and isinstance(node.args.get("expression"), exp.Expr):
            raw.append(node.args["expression"])
        if name == "SUBSTRING":
            raw.extend(node.args[k] for k in ("start", "length") if node.args.get(k) is not None)
        if name == "TRIM" and (node.args.get("position") or node.args.get("expression")):
            raise self.error(
                "TRIM takes one argument here.", node, clause=clause, fix="write TRIM(column)."
            )
        low, high = FUNCTIONS[name].min_args, FUNCTIONS[name].max_args
        if not low <= len(raw) <= high:
            span = f"{low}" + (f" to {high}" if high != low else "")
            raise self.error(
                f"{name} takes {span} argument(s), got {len(raw)}.",
                node,
                clause=clause,
                fix=f"check the call to {name}.",
            )
        return tuple(self._expr(a, clause, aggregate) for a in raw)

    # -- types ----------------------------------------------------------------------------------

    def type_of(self, expr: Expr, *, node: exp.Expr | None = None, clause: str = "WHERE") -> str:
        """Infer a type; refuse mixes the engine would resolve by converting row values.

        The checker is :func:`dalenius.plan.derive.type_of` (strict); this locates its refusal.
        """

        def bad(what: str, fix: str) -> QueryError:
            return self.error(
                what,
                node,
                clause=clause,
                why="the engine would have to convert row values, which can fail on some rows.",
                fix=fix,
            )

        return type_of(expr, self.fields, bad)


def written_name(node: exp.Expr) -> str:
    """A function's name as the analyst spelled it (``VAR``, not sqlglot's ``ANONYMOUS``)."""
    if type(node) in _OPERATORS:
        return _OPERATORS[type(node)]
    if isinstance(node, exp.Anonymous):
        return str(node.this)
    if isinstance(node, exp.Func):
        return node.sql_name()
    return node.key.upper()


_OPERATORS: dict[type[exp.Expr], str] = {
    exp.Pow: "^ (power)",
    exp.BitwiseXor: "# (bitwise xor)",
    exp.BitwiseAnd: "& (bitwise and)",
    exp.BitwiseOr: "| (bitwise or)",
    exp.RegexpLike: "~ (regular expression)",
    exp.NullSafeEQ: "IS NOT DISTINCT FROM",
    exp.NullSafeNEQ: "IS DISTINCT FROM",
    exp.SimilarTo: "SIMILAR TO",
    exp.Glob: "GLOB",
    exp.Escape: "LIKE ... ESCAPE",
    exp.Collate: "COLLATE",
    exp.Filter: "FILTER (WHERE ...)",
    exp.IgnoreNulls: "IGNORE NULLS",
    exp.RespectNulls: "RESPECT NULLS",
    exp.GroupingSets: "GROUPING SETS",
    exp.Any: "ANY",
    exp.All: "ALL",
}


def _whole_from(expr: Expr, position: int) -> bool:
    """Whether SUBSTRING's argument at ``position`` is admitted: any text first, then a constant
    start of at least 1 and a constant length of at least 0.
    """
    if position == 0:
        return True
    return (
        isinstance(expr, Lit)
        and isinstance(expr.value, int)
        and not isinstance(expr.value, bool)
        and expr.value >= (1 if position == 1 else 0)
    )


def _small_int(expr: Expr) -> bool:
    return (
        isinstance(expr, Lit)
        and isinstance(expr.value, int)
        and not isinstance(expr.value, bool)
        and abs(expr.value) <= MAX_ROUND_DIGITS
    )


INTERVAL_UNITS = ("DAY", "WEEK", "MONTH", "YEAR")
"""The units a date constant may be shifted by."""


def shifted(day: datetime.date, amount: int, unit: str) -> datetime.date:
    """``day`` shifted by ``amount`` of ``unit`` (SQL's ``date + INTERVAL``): a month or year
    landing past the end of a shorter month gives that month's last day.

    Example:
        >>> shifted(datetime.date(1998, 12, 1), -90, "DAY")
        datetime.date(1998, 9, 2)
        >>> shifted(datetime.date(2000, 1, 31), 1, "MONTH")
        datetime.date(2000, 2, 29)
    """
    if unit in ("DAY", "WEEK"):
        return day + datetime.timedelta(days=amount * (7 if unit == "WEEK" else 1))
    months = day.year * 12 + day.month - 1 + amount * (12 if unit == "YEAR" else 1)
    year, month = divmod(months, 12)
    last = calendar.monthrange(year, month + 1)[1] if 1 <= year <= 9999 else 0
    return datetime.date(year, month + 1, min(day.day, last))


def _date_literal(node: exp.Cast) -> bool:
    """Whether ``node`` is ``DATE 'text'`` (or ``CAST('text' AS DATE)``): a constant."""
    return (
        node.to.this == exp.DataType.Type.DATE
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
    )
