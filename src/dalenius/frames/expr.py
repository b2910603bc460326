"""Row-level expressions of a private frame: ``col("age") >= 40``, written as in Polars.

An expression is a small immutable tree built with Python operators and methods. It means nothing
until a frame *resolves* it against its columns (:meth:`Expr.resolve`): names become references to
catalog columns (or to the definitions of derived columns, inlined), and the types are checked
there, so a misspelt column or a comparison of text with a number is refused at the method call
that made it, before any SQL is written. A resolved tree writes itself as the SQL the binder
reads (:meth:`Expr.sql`), as an analyst would type it: plain names bare (others double-quoted),
text literals with their quotes doubled, only the parentheses precedence needs.

Python semantics are kept where SQL's differ: ``/`` is true division (an integer operand is
widened first) and ``//`` rounds down (``FLOOR``), not toward zero as SQL's integer ``/`` does.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn

from dalenius.core.errors import QueryError
from dalenius.plan.functions import FUNCTIONS, NUMERIC, common_type

if TYPE_CHECKING:
    from dalenius.frames.agg import Agg

Literal = bool | int | float | str | None
"""A Python value an expression may hold: written as an SQL literal."""

MAX_INT = 2**63 - 1


_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")

RESERVED = frozenset(
    [
        "ALL",
        "ANALYSE",
        "ANALYZE",
        "AND",
        "ANTI",
        "ANY",
        "ARRAY",
        "AS",
        "ASC",
        "ASOF",
        "ASYMMETRIC",
        "BETWEEN",
        "BOTH",
        "BY",
        "CASE",
        "CAST",
        "CHECK",
        "COLLATE",
        "COLLATION",
        "COLUMN",
        "CONSTRAINT",
        "CREATE",
        "CROSS",
        "CUBE",
        "CURRENT_CATALOG",
        "CURRENT_DATE",
        "CURRENT_ROLE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "CURRENT_USER",
        "DATE",
        "DEFAULT",
        "DEFERRABLE",
        "DESC",
        "DISTINCT",
        "DIV",
        "DO",
        "ELSE",
        "END",
        "ESCAPE",
        "EXCEPT",
        "EXISTS",
        "FALSE",
        "FETCH",
        "FILTER",
        "FOR",
        "FOREIGN",
        "FROM",
        "FULL",
        "GLOB",
        "GRANT",
        "GROUP",
        "GROUPING",
        "HAVING",
        "ILIKE",
        "IN",
        "INITIALLY",
        "INNER",
        "INTERSECT",
        "INTERVAL",
        "INTO",
        "IS",
        "ISNULL",
        "JOIN",
        "LATERAL",
        "LEADING",
        "LEFT",
        "LIKE",
        "LIMIT",
        "LOCALTIME",
        "LOCALTIMESTAMP",
        "MAP",
        "MOD",
        "NATURAL",
        "NOT",
        "NOTNULL",
        "NULL",
        "OFFSET",
        "ON",
        "ONLY",
        "OR",
        "ORDER",
        "OUTER",
        "OVER",
        "PARTITION",
        "PIVOT",
        "PLACING",
        "POSITIONAL",
        "PRIMARY",
        "QUALIFY",
        "RANGE",
        "REFERENCES",
        "REGEXP",
        "RETURNING",
        "RIGHT",
        "RLIKE",
        "ROLLUP",
        "ROWS",
        "SAMPLE",
        "SELECT",
        "SEMI",
        "SESSION_USER",
        "SETS",
        "SIMILAR",
        "SOME",
        "STRUCT",
        "SYMMETRIC",
        "TABLE",
        "TABLESAMPLE",
        "THEN",
        "TIME",
        "TIMESTAMP",
        "TO",
        "TOP",
        "TRAILING",
        "TRUE",
        "UNION",
        "UNIQUE",
        "UNNEST",
        "UNPIVOT",
        "USER",
        "USING",
        "VALUES",
        "VARIADIC",
        "WHEN",
        "WHERE",
        "WINDOW",
        "WITH",
        "XOR",
    ]
)
"""Words the SQL readers reserve: a column so named is always written quoted."""


def quote(name: str) -> str:
    """An SQL identifier: bare when it is a plain lower-case name (as an analyst writes it, so
    the query's text — which names its aggregates in the plan — is the hand-written one),
    double-quoted otherwise, a quote inside doubled.
    """
    if _PLAIN.fullmatch(name) and name.upper() not in RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def show(value: Any) -> str:
    """A Python value as a user would type it in a call (text in double quotes, as Polars')."""
    if isinstance(value, str) and '"' not in value and "\\" not in value and value.isprintable():
        return f'"{value}"'
    return repr(value)


def refuse(call: str, what: str, *, why: str | None = None, fix: str | None = None) -> NoReturn:
    """Raise the frame's refusal, naming the method call at fault (nothing is read or spent)."""
    raise QueryError(what, clause=call, why=why, fix=fix)


class Scope:
    """The columns a frame exposes at one step: name → resolved expression, in order.

    ``describe`` names where they come from in messages (``table 'adult'``).
    """

    def __init__(
        self,
        columns: Sequence[tuple[str, Expr]],
        describe: str,
        rows: tuple[str, bool] | None = None,
    ) -> None:
        self.columns = tuple(columns)
        self.describe = describe
        self.rows = rows
        """The frame's rows at this step (``FROM … WHERE …``, and whether columns are written
        table-qualified): what an aggregation used as a value is computed over."""
        self._by_name = dict(self.columns)

    def names(self) -> tuple[str, ...]:
        """The visible column names, in order."""
        return tuple(name for name, _ in self.columns)

    def lookup(self, name: str, call: str) -> Expr:
        """The resolved expression of column ``name``, or a refusal with the closest names."""
        found = self._by_name.get(name)
        if found is not None:
            return found
        raise QueryError(
            f"no column {name!r} in {self.describe}{did_you_mean(name, self.names())}",
            clause=call,
            fix=f"use one of: {', '.join(self.names())}.",
        )


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` (any case), or ``"."``."""
    import difflib

    options = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(options), n=1, cutoff=0.6)
    return f"; did you mean {options[close[0]]!r}?" if close else "."


class Expr:
    """A row-level expression (build one with :func:`col`, :func:`lit` or :func:`when`).

    Operators: ``+ - * / //``, comparisons, ``&`` (and), ``|`` (or), ``~`` (not), unary ``-``.
    Python's ``and``/``or``/``not`` and ``in`` cannot be overloaded: use ``& | ~`` and
    :meth:`is_in`.
    """

    __hash__ = None  # type: ignore[assignment]  # == builds an expression, as in Polars

    # -- what subclasses define ----------------------------------------------------------------

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The expression with its names replaced by ``scope``'s definitions, types checked."""
        raise NotImplementedError

    def sql(self, qualify: bool) -> str:
        """The SQL text of a resolved expression (columns table-qualified if ``qualify``)."""
        raise NotImplementedError

    def dtype(self) -> str:
        """The catalog type of a resolved expression (``int``, ``float``, ``str``, ``bool``…)."""
        raise NotImplementedError

    def output_name(self) -> str | None:
        """The name this expression gets as a column: its alias, or the column it reads."""
        return None

    def precedence(self) -> int:
        """How tightly its SQL binds (an operand binding less tightly is parenthesised)."""
        return ATOM

    # -- building ------------------------------------------------------------------------------

    def alias(self, name: str) -> Expr:
        """The expression, named ``name`` as a column (``with_columns``, ``group_by``)."""
        if not isinstance(name, str) or not name:
            refuse(
                f".alias({name!r})", "a column name must be a non-empty string.", fix='alias("n")'
            )
        return Alias(self, name)

    def _binary(self, op: str, other: Any, *, right: bool = False) -> Expr:
        other_expr = as_expr(other)
        return Binary(op, other_expr, self) if right else Binary(op, self, other_expr)

    def __add__(self, other: Any) -> Expr:
        return self._binary("+", other)

    def __radd__(self, other: Any) -> Expr:
        return self._binary("+", other, right=True)

    def __sub__(self, other: Any) -> Expr:
        return self._binary("-", other)

    def __rsub__(self, other: Any) -> Expr:
        return self._binary("-", other, right=True)

    def __mul__(self, other: Any) -> Expr:
        return self._binary("*", other)

    def __rmul__(self, other: Any) -> Expr:
        return self._binary("*", other, right=True)

    def __truediv__(self, other: Any) -> Expr:
        return self._binary("/", other)

    def __rtruediv__(self, other: Any) -> Expr:
        return self._binary("/", other, right=True)

    def __floordiv__(self, other: Any) -> Expr:
        return self._binary("//", other)

    def __rfloordiv__(self, other: Any) -> Expr:
        return self._binary("//", other, right=True)

    def __eq__(self, other: Any) -> Expr:  # type: ignore[override]
        return self._binary("=", other)

    def __ne__(self, other: Any) -> Expr:  # type: ignore[override]
        return self._binary("<>", other)

    def __lt__(self, other: Any) -> Expr:
        return self._binary("<", other)

    def __le__(self, other: Any) -> Expr:
        return self._binary("<=", other)

    def __gt__(self, other: Any) -> Expr:
        return self._binary(">", other)

    def __ge__(self, other: Any) -> Expr:
        return self._binary(">=", other)

    def __and__(self, other: Any) -> Expr:
        return self._binary("AND", other)

    def __rand__(self, other: Any) -> Expr:
        return self._binary("AND", other, right=True)

    def __or__(self, other: Any) -> Expr:
        return self._binary("OR", other)

    def __ror__(self, other: Any) -> Expr:
        return self._binary("OR", other, right=True)

    def __invert__(self) -> Expr:
        return Unary("NOT", self)

    def __neg__(self) -> Expr:
        return Unary("-", self)

    def __bool__(self) -> bool:
        raise TypeError(
            "an expression has no truth value: combine conditions with & | ~, not and/or/not, "
            "and test membership with .is_in([...]), not `in`."
        )

    def is_in(self, values: Iterable[Literal]) -> Expr:
        """Whether the value is one of ``values`` (SQL ``IN``)."""
        items = tuple(values)
        return InList(self, tuple(lit(v) for v in items))

    def is_between(self, lower: Any, upper: Any) -> Expr:
        """``lower <= value <= upper`` (both ends included, as in Polars and SQL)."""
        return Binary("AND", self._binary(">=", lower), self._binary("<=", upper))

    def is_null(self) -> Expr:
        """Whether the value is missing (SQL ``IS NULL``)."""
        return Postfix(self, "IS NULL")

    def is_not_null(self) -> Expr:
        """Whether the value is present (SQL ``IS NOT NULL``)."""
        return Postfix(self, "IS NOT NULL")

    def abs(self) -> Expr:
        """The absolute value."""
        return Call("ABS", (self,), "abs()")

    def floor(self) -> Expr:
        """Rounded down to a whole number."""
        return Call("FLOOR", (self,), "floor()")

    def ceil(self) -> Expr:
        """Rounded up to a whole number."""
        return Call("CEIL", (self,), "ceil()")

    def round(self, decimals: int = 0) -> Expr:
        """Rounded half away from zero to ``decimals`` places (negative: tens, hundreds…)."""
        return Call("ROUND", (self, lit(decimals)), f"round({decimals!r})")

    def clip(self, lower: Any = None, upper: Any = None) -> Expr:
        """The value limited to ``[lower, upper]`` (``GREATEST``/``LEAST``)."""
        out: Expr = self
        if upper is not None:
            out = Call("LEAST", (out, as_expr(upper)), f"clip(upper={upper!r})")
        if lower is not None:
            out = Call("GREATEST", (out, as_expr(lower)), f"clip(lower={lower!r})")
        return out

    def fill_null(self, value: Any) -> Expr:
        """The value, or ``value`` where it is missing (``COALESCE``)."""
        return Call("COALESCE", (self, as_expr(value)), f"fill_null({value!r})")

    def to_lowercase(self) -> Expr:
        """Text in lower case."""
        return Call("LOWER", (self,), "to_lowercase()")

    def to_uppercase(self) -> Expr:
        """Text in upper case."""
        return Call("UPPER", (self,), "to_uppercase()")

    def year(self) -> Expr:
        """The year of a date."""
        return Call("YEAR", (self,), "year()")

    def month(self) -> Expr:
        """The month of a date (1–12)."""
        return Call("MONTH", (self,), "month()")

    def day(self) -> Expr:
        """The day of the month of a date."""
        return Call("DAY", (self,), "day()")

    # -- aggregations, as methods (Polars' style) ---------------------------------------------

    def _agg(self, func: str, **options: Any) -> Agg:
        from dalenius.frames.agg import Agg

        return Agg(func, self, **options)

    def count(self) -> Agg:
        """The noisy number of rows where the value is present (``COUNT(x)``)."""
        return self._agg("count")

    def n_unique(self) -> Agg:
        """The noisy number of distinct values (``COUNT(DISTINCT x)``)."""
        return self._agg("count_distinct")

    def sum(self) -> Agg:
        """The noisy sum of the values clipped to their bounds."""
        return self._agg("sum")

    def mean(self) -> Agg:
        """The noisy mean of the values clipped to their bounds."""
        return self._agg("mean")

    def var(self, ddof: int = 1) -> Agg:
        """The noisy variance (``ddof=1``: sample, as Polars; ``ddof=0``: population)."""
        return self._agg("var", ddof=ddof)

    def std(self, ddof: int = 1) -> Agg:
        """The noisy standard deviation (``ddof`` as in :meth:`var`)."""
        return self._agg("std", ddof=ddof)

    def quantile(self, quantile: float) -> Agg:
        """A private ``quantile`` (between 0 and 1) over the public bounds."""
        return self._agg("quantile", q=quantile)

    def median(self) -> Agg:
        """The private median."""
        return self._agg("median")

    def min(self) -> Agg:
        """A private minimum (a low rank over the public bounds)."""
        return self._agg("min")

    def max(self) -> Agg:
        """A private maximum (a high rank over the public bounds)."""
        return self._agg("max")


def as_expr(value: Any) -> Expr:
    """``value`` as an expression: expressions as they are, an aggregation as the value it
    releases (:class:`Released`), Python values as literals.
    """
    from dalenius.frames.agg import Agg  # agg builds on this module

    if isinstance(value, Agg):
        return Released(value)
    return value if isinstance(value, Expr) else lit(value)


def col(name: str) -> Expr:
    """The column called ``name`` of the frame the expression is used on."""
    if not isinstance(name, str):
        refuse(f"col({name!r})", "a column name must be a string.", fix='col("age")')
    return Col(name)


def lit(value: Any) -> Expr:
    """A constant: ``None``, a bool, an int, a finite float or text."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, datetime.date):
        refuse(
            f"lit({value!r})",
            "a date cannot be a constant in a query.",
            why="the SQL readers spell a date constant as a conversion of text, which is refused.",
            fix='compare its parts: col("d").year() >= 1980, .month(), .day().',
        )
    if value is None or isinstance(value, bool | str):
        pass
    elif isinstance(value, int):
        if abs(value) > MAX_INT:
            refuse(f"lit({value!r})", "the number is beyond a 64-bit integer.")
    elif isinstance(value, float):
        if not math.isfinite(value):
            refuse(f"lit({value!r})", "a number must be finite.")
    else:
        refuse(
            f"lit({value!r})",
            f"a value of type {type(value).__name__} cannot be a constant in a query.",
            fix="use None, a bool, an int, a float or text.",
        )
    if isinstance(value, str) and "\\" in value:
        refuse(
            f"lit({value!r})",
            "text with a backslash cannot be a constant in a query.",
            why="the SQL readers of the dialects Dalenius accepts disagree on what a backslash "
            "in a string means, so the constant could be read as another value.",
            fix="compare with text that has no backslash.",
        )
    return Lit(value)


@dataclass(frozen=True, eq=False)
class Col(Expr):
    """A column named in an expression; resolved by the frame it is used on."""

    name: str

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The column's definition in ``scope``."""
        return scope.lookup(self.name, call)

    def output_name(self) -> str:
        """The column's own name."""
        return self.name

    def __repr__(self) -> str:
        return f"col({show(self.name)})"


@dataclass(frozen=True, eq=False)
class Ref(Expr):
    """A resolved column of a catalog table (``table.column`` after a join)."""

    table: str
    column: str
    type: str

    def resolve(self, scope: Scope, call: str) -> Expr:
        """Already resolved."""
        return self

    def sql(self, qualify: bool) -> str:
        """The quoted column, qualified by its table's name after a join."""
        name = quote(self.column)
        return f"{quote(self.table)}.{name}" if qualify else name

    def dtype(self) -> str:
        """The catalog type."""
        return self.type

    def output_name(self) -> str:
        """The column's name."""
        return self.column

    def __repr__(self) -> str:
        return f"col({show(self.column)})"


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    """A constant."""

    value: Literal

    def resolve(self, scope: Scope, call: str) -> Expr:
        """A constant needs no resolution."""
        return self

    def sql(self, qualify: bool) -> str:
        """The SQL literal: text with doubled quotes, numbers in parentheses if negative."""
        v = self.value
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        text = repr(v)
        return f"({text})" if text.startswith("-") else text

    def dtype(self) -> str:
        """The type of the constant (``null`` for ``None``)."""
        v = self.value
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float):
            return "float"
        return "str"

    def __repr__(self) -> str:
        return show(self.value)


@dataclass(frozen=True, eq=False)
class Released(Expr):
    """An aggregation of the frame's rows used as a value, as in Polars
    (``col("age") > col("age").mean()``: the mean of the rows the filter is applied to).

    It is written as a subquery over the frame's rows at that step, ``(SELECT AVG(age) FROM …)``,
    which ``Session.query`` releases first, with its share of ε, before the query that uses it
    (docs/sql.md, "Subqueries used as values").
    """

    agg: Agg
    rows: tuple[str, bool] | None = None

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The aggregation over ``scope``'s columns and rows."""
        if scope.rows is None:
            refuse(
                call,
                f"{self.agg!r} cannot be used as a value here.",
                fix="use it in filter(), with_columns() or select() of the frame it aggregates.",
            )
        named = self.agg if self.agg.name else self.agg.alias("value")  # no output column
        return Released(named.resolve(scope, call), scope.rows)

    def sql(self, qualify: bool) -> str:
        """``(SELECT AGG(x) FROM … [WHERE …])``."""
        assert self.rows is not None, "resolved first"
        rows, qualified = self.rows
        return f"(SELECT {self.agg.sql(qualified)} {rows})"

    def dtype(self) -> str:
        """The released value's type."""
        return self.agg.dtype()

    def __repr__(self) -> str:
        return repr(self.agg)


@dataclass(frozen=True, eq=False)
class Alias(Expr):
    """An expression with a column name."""

    expr: Expr
    name: str

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The named expression, resolved."""
        return Alias(self.expr.resolve(scope, call), self.name)

    def sql(self, qualify: bool) -> str:
        """The expression's SQL (the name is written by the frame)."""
        return self.expr.sql(qualify)

    def dtype(self) -> str:
        """The expression's type."""
        return self.expr.dtype()

    def output_name(self) -> str:
        """The alias."""
        return self.name

    def __repr__(self) -> str:
        return f"{self.expr!r}.alias({show(self.name)})"


ATOM = 9
_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3, "+": 5, "-": 5, "*": 6, "/": 6, "//": ATOM}
_PRECEDENCE |= dict.fromkeys(("=", "<>", "<", "<=", ">", ">="), 4)


def operand(expr: Expr, qualify: bool, floor: int) -> str:
    """``expr``'s SQL, parenthesised if it binds less tightly than ``floor`` — the fewest
    parentheses, so the text is the one an analyst writes (the plan names aggregates by it).
    """
    text = expr.sql(qualify)
    return f"({text})" if expr.precedence() < floor else text


_ARITHMETIC = ("+", "-", "*", "/", "//")
_COMPARISON = ("=", "<>", "<", "<=", ">", ">=")
_SYMBOL = {"=": "==", "<>": "!=", "AND": "&", "OR": "|"}


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    """An operator between two expressions."""

    op: str
    left: Expr
    right: Expr

    def resolve(self, scope: Scope, call: str) -> Expr:
        """Both sides resolved, and their types checked for the operator."""
        out = Binary(self.op, self.left.resolve(scope, call), self.right.resolve(scope, call))
        out.check(call)
        return out

    def check(self, call: str) -> None:
        """Refuse operands of the wrong types (the engine would convert or fail on some rows)."""
        lt, rt = self.left.dtype(), self.right.dtype()
        types = {lt, rt} - {"null"}
        if self.op in _ARITHMETIC:
            if not types <= NUMERIC:
                refuse(
                    call,
                    f"{self!r} computes with a value of type {_other(types, NUMERIC)}.",
                    fix="use arithmetic on numeric columns only.",
                )
        elif self.op in _COMPARISON:
            if len(types) > 1 and not types <= NUMERIC:
                refuse(
                    call,
                    f"{self!r} compares {_a(lt)} with {_a(rt)}.",
                    why="the engine would have to convert one side row by row, which can fail "
                    "on some rows — a failure that would leak them.",
                    fix=f"compare with {_a(lt)} value.",
                )
        elif not types <= {"bool"}:
            refuse(
                call,
                f"{self!r} combines a value of type {_other(types, {'bool'})} with {self.op}.",
                fix="combine conditions (comparisons, is_in, is_null) with & and |.",
            )

    def sql(self, qualify: bool) -> str:
        """``left op right``; ``/`` widens integers, ``//`` rounds down."""
        level = _PRECEDENCE[self.op]
        if self.op in ("/", "//"):
            left = operand(self.left, qualify, 6)
            if self.left.dtype() != "float" and self.right.dtype() != "float":
                left = f"{left} * 1.0"
            quotient = f"{left} / {operand(self.right, qualify, 7)}"
            return f"FLOOR({quotient})" if self.op == "//" else quotient
        # Comparisons do not chain: an equal operand on the left is parenthesised too.
        left = operand(self.left, qualify, level + (self.op in _COMPARISON))
        return f"{left} {self.op} {operand(self.right, qualify, level + 1)}"

    def precedence(self) -> int:
        """The operator's binding."""
        return _PRECEDENCE[self.op]

    def output_name(self) -> str | None:
        """The left operand's name, as in Polars (``col("age") * 2`` is ``age``)."""
        return self.left.output_name()

    def dtype(self) -> str:
        """``bool`` for comparisons and logic; the numeric type otherwise."""
        if self.op in _COMPARISON or self.op in ("AND", "OR"):
            return "bool"
        if self.op == "/":
            return "float"
        if self.op == "//":  # whole numbers stay whole: the keys derived from int bounds are ints
            return common_type([self.left.dtype(), self.right.dtype()], None)
        return common_type([self.left.dtype(), self.right.dtype()], None)

    def __repr__(self) -> str:
        return f"({self.left!r} {_SYMBOL.get(self.op, self.op)} {self.right!r})"


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _other(types: set[str], allowed: Iterable[str]) -> str:
    return sorted(types - set(allowed))[0]


@dataclass(frozen=True, eq=False)
class Unary(Expr):
    """``NOT`` of a condition, or ``-`` of a number."""

    op: str
    expr: Expr

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The operand resolved and type-checked."""
        inner = self.expr.resolve(scope, call)
        want = {"bool", "null"} if self.op == "NOT" else NUMERIC | {"null"}
        if inner.dtype() not in want:
            refuse(call, f"{self!r} applies {self.op} to a value of type {inner.dtype()}.")
        return Unary(self.op, inner)

    def sql(self, qualify: bool) -> str:
        """``(NOT x)`` or ``(-x)``."""
        if self.op == "NOT":
            return f"NOT {operand(self.expr, qualify, 3)}"
        return f"-{operand(self.expr, qualify, 8)}"

    def precedence(self) -> int:
        """``NOT`` binds below comparisons; ``-`` above products."""
        return 3 if self.op == "NOT" else 7

    def output_name(self) -> str | None:
        """The operand's name."""
        return self.expr.output_name()

    def dtype(self) -> str:
        """``bool`` for NOT, the operand's type for ``-``."""
        return "bool" if self.op == "NOT" else self.expr.dtype()

    def __repr__(self) -> str:
        return f"~{self.expr!r}" if self.op == "NOT" else f"-{self.expr!r}"


@dataclass(frozen=True, eq=False)
class Postfix(Expr):
    """``x IS NULL`` / ``x IS NOT NULL``."""

    expr: Expr
    op: str

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The operand resolved."""
        return Postfix(self.expr.resolve(scope, call), self.op)

    def sql(self, qualify: bool) -> str:
        """``(x IS NULL)``."""
        return f"{operand(self.expr, qualify, 5)} {self.op}"

    def precedence(self) -> int:
        """As a comparison."""
        return 4

    def output_name(self) -> str | None:
        """The operand's name."""
        return self.expr.output_name()

    def dtype(self) -> str:
        """A condition."""
        return "bool"

    def __repr__(self) -> str:
        method = "is_null" if self.op == "IS NULL" else "is_not_null"
        return f"{self.expr!r}.{method}()"


@dataclass(frozen=True, eq=False)
class InList(Expr):
    """``x IN (v1, v2, …)``."""

    expr: Expr
    values: tuple[Expr, ...]

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The operand resolved; every value must have its type."""
        inner = self.expr.resolve(scope, call)
        if not self.values:
            refuse(call, f"{self!r} lists no values.", fix="give at least one value to is_in.")
        for value in self.values:
            Binary("=", inner, value).check(call)
        return InList(inner, self.values)

    def sql(self, qualify: bool) -> str:
        """``(x IN (…))``."""
        items = ", ".join(v.sql(qualify) for v in self.values)
        return f"{operand(self.expr, qualify, 5)} IN ({items})"

    def precedence(self) -> int:
        """As a comparison."""
        return 4

    def output_name(self) -> str | None:
        """The operand's name."""
        return self.expr.output_name()

    def dtype(self) -> str:
        """A condition."""
        return "bool"

    def __repr__(self) -> str:
        return f"{self.expr!r}.is_in({list(self.values)!r})"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A scalar function of the catalog's registry (``ABS``, ``ROUND``, ``COALESCE``…)."""

    name: str
    args: tuple[Expr, ...]
    method: str

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The arguments resolved; their types checked by the function's own rule."""
        out = replace(self, args=tuple(a.resolve(scope, call) for a in self.args))
        out.dtype_or(_failing(call, repr(self)))
        return out

    def output_name(self) -> str | None:
        """The first argument's name, as in Polars (``col("age").clip(20, 60)`` is ``age``)."""
        return self.args[0].output_name()

    def dtype_or(self, fail: Callable[[str, str], Exception] | None) -> str:
        """The result type by the registry's rule (refusing bad argument types with ``fail``)."""
        return FUNCTIONS[self.name].result([a.dtype() for a in self.args], fail)

    def sql(self, qualify: bool) -> str:
        """``NAME(args)``."""
        return f"{self.name}({', '.join(a.sql(qualify) for a in self.args)})"

    def dtype(self) -> str:
        """The registry's result type."""
        return self.dtype_or(None)

    def __repr__(self) -> str:
        return f"{self.args[0]!r}.{self.method}"


def _failing(call: str, text: str) -> Callable[[str, str], Exception]:
    def fail(what: str, fix: str) -> Exception:
        return QueryError(f"{text}: {what}", clause=call, fix=fix)

    return fail


@dataclass(frozen=True, eq=False)
class Case(Expr):
    """``when(c).then(x).otherwise(y)``: SQL's ``CASE WHEN``."""

    branches: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr | None

    def resolve(self, scope: Scope, call: str) -> Expr:
        """Conditions and values resolved; conditions must be conditions, values of one type."""
        branches = tuple((c.resolve(scope, call), v.resolve(scope, call)) for c, v in self.branches)
        other = self.otherwise.resolve(scope, call) if self.otherwise is not None else None
        for cond, _ in branches:
            if cond.dtype() not in ("bool", "null"):
                refuse(call, f"when({cond!r}) is not a condition.", fix="compare a column.")
        out = Case(branches, other)
        common_type(out.value_types(), _failing(call, repr(self)))
        return out

    def value_types(self) -> list[str]:
        """The types of the values it may take."""
        out = [v.dtype() for _, v in self.branches]
        return out + ([self.otherwise.dtype()] if self.otherwise is not None else [])

    def sql(self, qualify: bool) -> str:
        """``CASE WHEN … THEN … [ELSE …] END``."""
        parts = [f"WHEN {c.sql(qualify)} THEN {v.sql(qualify)}" for c, v in self.branches]
        if self.otherwise is not None:
            parts.append(f"ELSE {self.otherwise.sql(qualify)}")
        return f"CASE {' '.join(parts)} END"

    def dtype(self) -> str:
        """The values' common type."""
        return common_type(self.value_types(), None)

    def __repr__(self) -> str:
        text = "".join(
            f"{'when' if i == 0 else '.when'}({c!r}).then({v!r})"
            for i, (c, v) in enumerate(self.branches)
        )
        return text + (f".otherwise({self.otherwise!r})" if self.otherwise is not None else "")


class When:
    """``when(condition)``: waits for its ``.then(value)``."""

    def __init__(self, condition: Any, done: tuple[tuple[Expr, Expr], ...] = ()) -> None:
        self._condition = as_expr(condition)
        self._done = done

    def then(self, value: Any) -> Then:
        """The value where the condition holds."""
        return Then(Case((*self._done, (self._condition, as_expr(value))), None))


class Then(Expr):
    """A ``CASE`` that may take another ``.when`` or its ``.otherwise`` (else ``NULL``)."""

    def __init__(self, case: Case) -> None:
        self._case = case

    def when(self, condition: Any) -> When:
        """Another condition, tried when the earlier ones do not hold."""
        return When(condition, self._case.branches)

    def otherwise(self, value: Any) -> Expr:
        """The value where no condition holds."""
        return Case(self._case.branches, as_expr(value))

    def resolve(self, scope: Scope, call: str) -> Expr:
        """The ``CASE`` without ``ELSE``, resolved."""
        return self._case.resolve(scope, call)

    def __repr__(self) -> str:
        return repr(self._case)


def when(condition: Any) -> When:
    """Start a conditional value: ``when(col("age") < 30).then("young").otherwise("older")``."""
    return When(condition)
