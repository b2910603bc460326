"""The DP aggregations of a private frame: ``count()``, ``mean("age")``, ``quantile("age", 0.9)``…

Each aggregation is one SQL aggregate the binder already answers (``COUNT``, ``COUNT(DISTINCT)``,
``SUM``, ``AVG``, ``VAR_SAMP``/``VAR_POP``, ``STDDEV_SAMP``/``STDDEV_POP``, ``QUANTILE``,
``MEDIAN``, ``MIN``, ``MAX``): its mechanism, sensitivity and error bar are the SQL path's. What
this module adds is checked when the frame's ``.agg(...)`` is called, before any SQL: the column
exists (with the closest name when it does not), the aggregation suits its type, the quantile is
in [0, 1], and the output column name, which is also the SQL alias, is known.

An aggregation may carry its own error target (:meth:`Agg.target_error`): accuracy first, per
aggregation — the smallest ε split meeting every target is chosen by the planner
(``docs/accuracy.md``), as for ``Session.query(target_error={...})``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import as_fraction
from dalenius.frames.expr import Col, Expr, Scope, quote, refuse, show
from dalenius.plan.functions import NUMERIC

FUNCS = (
    "count",
    "count_distinct",
    "sum",
    "mean",
    "var",
    "std",
    "quantile",
    "median",
    "min",
    "max",
)
"""The aggregations a frame offers, by their Python names."""

_NUMERIC_ONLY = ("sum", "mean", "var", "std", "quantile", "median", "min", "max")
_RANKED = ("quantile", "median", "min", "max")
"""Released by private selection over bins: a rank error, no interval columns."""


@dataclass(frozen=True, eq=False)
class Agg:
    """One aggregation of a frame: what it computes, its output name and its optional target."""

    func: str
    input: Expr | None = None
    q: float | None = None
    ddof: int = 1
    name: str | None = None
    target: Fraction | None = None

    def alias(self, name: str) -> Agg:
        """The output column's name (also ``<name>_low`` and ``<name>_high`` of its interval)."""
        if not isinstance(name, str) or not name:
            refuse(f"{self!r}.alias({name!r})", "a column name must be a non-empty string.")
        return replace(self, name=name)

    def target_error(self, half_width: Any) -> Agg:
        """Ask this aggregate for an error bar of at most ``half_width`` (value units) instead of
        giving ε: the release spends the smallest ε split meeting every target. COUNT and SUM only
        (the planner refuses targets it cannot meet in advance, such as AVG's).
        """
        try:
            value = as_fraction(half_width, "target_error")
        except ConfigurationError as exc:
            refuse(f"{self!r}.target_error({half_width!r})", exc.what, fix=exc.fix)
        return replace(self, target=value)

    def output(self) -> str:
        """The output column's name: the alias, else ``<func>_<column>`` (``count`` alone)."""
        if self.name is not None:
            return self.name
        if self.input is None:
            return self.func
        column = self.input.output_name()
        if column is None:
            refuse(
                f".agg({self!r})",
                "an aggregation of an expression needs a name.",
                fix=f"add .alias(...): {self!r}.alias('x').",
            )
        return f"{self.func}_{column}"

    def resolve(self, scope: Scope, call: str) -> Agg:
        """The aggregation over ``scope``'s columns, its input's type checked."""
        if self.input is None:
            return self
        inner = self.input.resolve(scope, call)
        kind = inner.dtype()
        if self.func in _NUMERIC_ONLY and kind not in NUMERIC | {"bool"}:
            refuse(
                call,
                f"{self.func} needs a numeric column; {self.input!r} is {kind}.",
                fix="aggregate a numeric column, or use count() / n_unique() on this one.",
            )
        if self.func == "quantile" and (
            isinstance(self.q, bool) or not isinstance(self.q, int | float) or not 0 <= self.q <= 1
        ):
            refuse(call, f"the quantile must be between 0 and 1, got {self.q!r}.", fix="0.5")
        if self.ddof not in (0, 1):
            refuse(call, f"ddof must be 0 or 1, got {self.ddof!r}.", fix="ddof=1 (sample).")
        return replace(self, input=inner, name=self.output())

    def sql(self, qualify: bool) -> str:
        """The SQL aggregate of a resolved aggregation."""
        if self.input is None:
            return "COUNT(*)"
        arg = self.input.sql(qualify)
        if self.func == "count_distinct":
            return f"COUNT(DISTINCT {arg})"
        if self.func == "quantile":
            return f"QUANTILE({arg}, {self.q!r})"
        if self.func in ("var", "std"):
            name = {"var": "VAR", "std": "STDDEV"}[self.func]
            return f"{name}_{'SAMP' if self.ddof == 1 else 'POP'}({arg})"
        name = {"count": "COUNT", "sum": "SUM", "mean": "AVG"}.get(self.func, self.func.upper())
        return f"{name}({arg})"

    def select(self, qualify: bool) -> str:
        """``AGG(x) AS "name"``."""
        return f"{self.sql(qualify)} AS {quote(self.output())}"

    def dtype(self) -> str:
        """The released value's type: counts are ints, sums keep ints, moments are floats."""
        if self.func in ("count", "count_distinct"):
            return "int"
        kind = self.input.dtype() if self.input is not None else "int"
        if self.func == "sum":
            return "float" if kind == "float" else "int"
        if self.func in ("mean", "var", "std"):
            return "float"
        return "int" if kind == "bool" else kind

    def has_interval(self) -> bool:
        """Whether the result carries ``<name>_low``/``<name>_high`` (ranked ones carry a rank
        error instead).
        """
        return self.func not in _RANKED

    def __repr__(self) -> str:
        if self.input is None:
            text = "count()"
        else:
            arg = show(self.input.name) if isinstance(self.input, Col) else repr(self.input)
            extra = f", {self.q!r}" if self.func == "quantile" else ""
            extra += f", ddof={self.ddof}" if self.func in ("var", "std") and self.ddof != 1 else ""
            text = f"{self.func}({arg}{extra})"
        if self.name is not None:
            text += f".alias({show(self.name)})"
        if self.target is not None:
            text += f".target_error({float(self.target):g})"
        return text


def _column(column: str | Expr) -> Expr:
    return Col(column) if isinstance(column, str) else column


def count(column: str | Expr | None = None) -> Agg:
    """The noisy number of rows (``COUNT(*)``), or of rows where ``column`` is present."""
    return Agg("count") if column is None else Agg("count", _column(column))


def count_distinct(column: str | Expr) -> Agg:
    """The noisy number of distinct values of ``column`` (of people, on the privacy unit)."""
    return Agg("count_distinct", _column(column))


def sum(column: str | Expr) -> Agg:
    """The noisy sum of ``column``, each value clipped to the public bounds."""
    return Agg("sum", _column(column))


def mean(column: str | Expr) -> Agg:
    """The noisy mean of ``column`` (a noisy sum over a noisy count)."""
    return Agg("mean", _column(column))


def var(column: str | Expr, ddof: int = 1) -> Agg:
    """The noisy variance of ``column`` (``ddof=1``: sample; ``ddof=0``: population)."""
    return Agg("var", _column(column), ddof=ddof)


def std(column: str | Expr, ddof: int = 1) -> Agg:
    """The noisy standard deviation of ``column`` (``ddof`` as in :func:`var`)."""
    return Agg("std", _column(column), ddof=ddof)


def quantile(column: str | Expr, q: float) -> Agg:
    """A private ``q``-quantile of ``column`` (0 ≤ q ≤ 1), released with a rank error."""
    return Agg("quantile", _column(column), q=q)


def median(column: str | Expr) -> Agg:
    """The private median of ``column``, released with a rank error."""
    return Agg("median", _column(column))


def min(column: str | Expr) -> Agg:
    """A private minimum of ``column`` (a low rank over the public bounds)."""
    return Agg("min", _column(column))


def max(column: str | Expr) -> Agg:
    """A private maximum of ``column`` (a high rank over the public bounds)."""
    return Agg("max", _column(column))
