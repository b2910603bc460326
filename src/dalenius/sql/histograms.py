"""Exact, contribution-bounded counts of a table's rows in public bins: the input of releases.

Releases that are not one SQL aggregate — a density curve, a multi-dimensional histogram — still
need what every query needs from the engine: the rows of one private table, filtered by an
analyst's ``WHERE``, each privacy unit capped to its declared rows, counted exactly. This module
builds that statement with the same binder and the same SQL compiler as a query (so bounding,
clipping and totality are the same code), for bins laid on the columns' public bounds.

A row's bin is an integer index computed in the engine from public constants only: per axis,
``FLOOR((clip(x) − low) / width)`` clipped to ``[0, bins − 1]`` (or ``clip(x) − low`` for an integer
column with unit bins), and for two axes ``index₀ · bins₁ + index₁``. Rows with a NULL in any axis
fall in no bin.

Example:
    >>> from dalenius.core.catalog import load_catalog
    >>> cat = load_catalog("tests/fixtures/adult.toml")
    >>> plan = binned_counts(cat, "adult", [Axis("age", Fraction(17), Fraction(80), 64)])
    >>> plan.bins, plan.max_rows
    (64, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import QueryError
from dalenius.core.loss import PureDP
from dalenius.plan.expr import BinOp, Col, Expr, Func, Lit
from dalenius.plan.nodes import DPQuery, Measurement, Query, output_fields
from dalenius.sql.bind import to_query
from dalenius.sql.emit import ExactSQL, exact_queries
from dalenius.sql.filters import product_filter

MAX_BINS = 1_000_000
"""At most this many bins in all (the engine returns one row per non-empty bin)."""


@dataclass(frozen=True)
class Axis:
    """One binned column: ``bins`` equal bins over the public ``[low, high]``."""

    column: str
    low: Fraction
    high: Fraction
    bins: int
    unit_bins: bool = False
    """One bin per integer value (an integer column with ``bins = high − low + 1``): set by the
    caller, never inferred, since a float column can have that many bins by chance."""

    @property
    def width(self) -> Fraction:
        """The width of one bin (for an integer column with unit bins: 1)."""
        return (self.high - self.low) / self.bins

    def centers(self) -> list[Fraction]:
        """The centre of each bin (for unit bins of an integer column: the integer itself)."""
        if self.unit_bins:
            return [self.low + i for i in range(self.bins)]
        return [self.low + (i + Fraction(1, 2)) * self.width for i in range(self.bins)]


@dataclass(frozen=True)
class BinnedCounts:
    """The exact statements of one binned count, and what bounds one unit's contribution.

    Attributes:
        plan: the plan whose exact SQL counts the rows (``m0``) and the rows per bin (``m1``).
        bins: the number of bins (the product over the axes).
        max_rows: the most rows one privacy unit contributes (its total over all bins).
        tables: the catalog tables the statement reads.
    """

    plan: DPQuery
    bins: int
    max_rows: int
    tables: tuple[Table, ...]

    def sql(self, dialect: Dialect | str, salt: int = 0) -> ExactSQL:
        """The exact statements for ``dialect``; ``salt`` keys the bounding hash (drawn per release)."""
        return exact_queries(self.plan, dialect, salt=salt)


def binned_counts(
    catalog: Catalog, table: str, axes: Sequence[Axis], where: str | None = None
) -> BinnedCounts:
    """The plan of an exact count of ``table``'s rows in the bins of ``axes``.

    Raises:
        QueryError: the table, a column or the ``WHERE`` clause cannot be used (before any data is read).

    Long because it validates the axes and the WHERE clause refusal by refusal (each with its fix)
    before building the one plan that counts the bins.
    """
    if not 1 <= len(axes) <= 2:
        raise QueryError(
            f"a binned count takes one or two columns, got {len(axes)}.",
            fix="bin one column, or two for a 2-D release.",
        )
    for axis in axes:
        if axis.unit_bins and axis.high - axis.low + 1 != axis.bins:
            raise QueryError(f"axis {axis.column!r}: unit bins need bins = high − low + 1.")
    quoted = '"' + table.replace('"', '""') + '"'
    # Rows with a NULL in an axis fall in no bin; they are left out of the count too, so the
    # count is exactly the rows binned (and NULL rows use up no unit's quota).
    present = " AND ".join('"' + a.column.replace('"', '""') + '" IS NOT NULL' for a in axes)
    # The filter is parsed alone and comes back parenthesised: it cannot reach the guard.
    parsed = product_filter(where)
    condition = f"{parsed} AND {present}" if parsed else present
    text = f"SELECT COUNT(*) FROM {quoted} WHERE {condition}"
    resolved = to_query(text, catalog)
    query = resolved.query
    fields = {f.name: f for f in output_fields(query.relation)}
    indices: list[Expr] = []
    total = 1
    for axis in axes:
        field = fields.get(axis.column)
        if field is None or field.type not in ("int", "float") or field.bounds is None:
            raise QueryError(
                f"column {axis.column!r} of {table!r} is not a numeric column with public bounds.",
                why="bins are laid on the column's public bounds, so one row cannot move them.",
                fix="choose a numeric column whose bounds the catalog declares.",
            )
        if axis.bins < 1 or not axis.low < axis.high:
            raise QueryError(f"axis {axis.column!r} needs at least one bin over a non-empty range.")
        total *= axis.bins
        indices.append(_index(Col(field.id), field.type, axis))
    if total > MAX_BINS:
        raise QueryError(
            f"{total} bins in all; at most {MAX_BINS} are supported.",
            fix="use wider bins.",
        )
    index = (
        indices[0]
        if len(indices) == 1
        else BinOp("+", BinOp("*", indices[0], Lit(axes[1].bins)), indices[1])
    )
    unit_rows = query.unit.max_rows
    count = Measurement(
        "m0", "count", None, "int", None, Fraction(0), Fraction(1), 1, unit_rows, Fraction(1)
    )
    histogram = Measurement(
        "m1",
        "histogram",
        index,
        "int",
        (Fraction(0), Fraction(total - 1)),
        Fraction(0),
        Fraction(1),
        1,
        unit_rows,
        Fraction(1),
        edges=tuple(Fraction(i) for i in range(total + 1)),
    )
    bare: Query = replace(query, group_by=(), having=None, order_by=(), limit=None, offset=0)
    plan = DPQuery(bare, (count, histogram), (), None, PureDP(Fraction(1)))
    return BinnedCounts(plan=plan, bins=total, max_rows=unit_rows, tables=resolved.tables)


def _index(column: Expr, kind: str, axis: Axis) -> Expr:
    """The bin index of ``column`` on ``axis``: an integer in ``[0, bins − 1]``, NULL for NULL."""
    low, high = Lit(_number(axis.low)), Lit(_number(axis.high))
    clipped: Expr = Func("LEAST", (Func("GREATEST", (column, low)), high))
    if kind == "int" and axis.unit_bins:
        return BinOp("-", clipped, low)
    scaled = BinOp("/", BinOp("-", clipped, low), Lit(_number(axis.width)))
    return Func("LEAST", (Func("FLOOR", (scaled,)), Lit(axis.bins - 1)))


def _number(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)
