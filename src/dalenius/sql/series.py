"""The exact statement of a continual release: kept rows per day, each unit's first rows in time.

A continual release (``dalenius.releases.continual``) bounds each privacy unit to its first ``R``
rows **in time order** over the whole horizon: rows are ranked by their day, and rows of one unit
on one day by a keyed hash of the row (the series' own key, kept in its record so that every
publication ranks alike), then by the value. Ranking by time first is what makes the bound hold
across publications: rows of a period that closed earlier always precede rows of a later one, so
a later publication never brings back rows an earlier one had dropped, and the rows a unit has in
all the nodes of one level number at most ``R`` (see ``docs/releases/continual.md``).

The statement returns, per day from ``first_day`` (inclusive) to ``end_day`` (exclusive), the
number of kept rows and, with a value column, the sum of their values clipped to the column's
public bounds — integers, summed exactly on every engine. Rows before ``first_day`` are ranked
(they use up their unit's quota) but not returned; rows from ``end_day`` on are not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from dalenius.core.dialect import Dialect
from dalenius.sql.emit.dialects import exact_sum, keyed_hash
from dalenius.sql.emit.writing import _col, _sql


@dataclass(frozen=True)
class SeriesColumns:
    """What the statement reads: the table, its time column (a date), the unit and the value.

    Attributes:
        unit: the privacy unit's id column and its type, or ``None`` when a row is the unit.
        value: an int column to sum, with its public bounds, or ``None`` for counts only.
    """

    table: str
    time: str
    unit: tuple[str, str] | None
    value: tuple[str, Fraction, Fraction] | None


def kept_per_day(
    columns: SeriesColumns,
    dialect: Dialect,
    *,
    start_day: int,
    first_day: int,
    end_day: int,
    max_rows: int,
    key: int,
) -> str:
    """``SELECT day, kept rows[, clipped sum] … GROUP BY day`` for days in ``[first_day, end_day)``.

    Days are counted from 1970-01-01 (the dialect's own day arithmetic). Each unit keeps its first
    ``max_rows`` rows from ``start_day`` on, in (day, keyed hash, value) order.

    Example:
        >>> from dalenius.core.dialect import DUCKDB
        >>> cols = SeriesColumns("t", "day", None, None)
        >>> print(kept_per_day(cols, DUCKDB, start_day=0, first_day=3, end_day=7, max_rows=1, key=5))
        SELECT __d, COUNT(*) AS __n FROM (SELECT DATE_DIFF('DAY', CAST('1970-01-01' AS DATE), "day") AS __d FROM "t" WHERE NOT "day" IS NULL AND DATE_DIFF('DAY', CAST('1970-01-01' AS DATE), "day") >= 0 AND DATE_DIFF('DAY', CAST('1970-01-01' AS DATE), "day") < 7) AS __rows WHERE __d >= 3 GROUP BY __d
    """
    days: exp.Expr = exp.maybe_parse(
        dialect.epoch_days.format(dialect.quote(columns.time)), dialect=dialect.name
    )
    where = exp.and_(
        exp.Not(this=exp.Is(this=_col(columns.time), expression=exp.Null())),
        exp.GTE(this=days.copy(), expression=exp.Literal.number(start_day)),
        exp.LT(this=days.copy(), expression=exp.Literal.number(end_day)),
        copy=False,
    )
    fields: list[exp.Expr] = [exp.alias_(days.copy(), "__d")]
    if columns.unit is not None:
        fields.insert(0, exp.alias_(_col(columns.unit[0]), "__u"))
        where = exp.and_(
            exp.Not(this=exp.Is(this=_col(columns.unit[0]), expression=exp.Null())), where
        )
    if columns.value is not None:
        fields.append(exp.alias_(_clipped(columns.value), "__v"))
    rows = (
        exp.select(*fields)
        .from_(exp.to_table(dialect.quote(columns.table), dialect=dialect.name))
        .where(where)
    )
    source: exp.Expr = rows.subquery("__rows")
    keep: exp.Expr = exp.GTE(this=exp.column("__d"), expression=exp.Literal.number(first_day))
    if columns.unit is not None:
        source = _ranked(rows, columns, dialect, key).subquery("__ranked")
        keep = exp.and_(
            exp.LTE(this=exp.column("__r"), expression=exp.Literal.number(max_rows)), keep
        )
    outputs: list[exp.Expr] = [exp.column("__d"), exp.alias_(exp.Count(this=exp.Star()), "__n")]
    if columns.value is not None:
        outputs.append(exp.alias_(exact_sum(exp.column("__v"), dialect), "__s"))
    statement = exp.select(*outputs).from_(source).where(keep).group_by(exp.column("__d"))
    return _sql(statement, dialect)


def _clipped(value: tuple[str, Fraction, Fraction]) -> exp.Expr:
    """The value clamped to its public bounds, as a BIGINT (NULL stays NULL: summed as nothing)."""
    name, low, high = value
    column = _col(name)
    lo, hi = exp.Literal.number(int(low)), exp.Literal.number(int(high))
    clamped = exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=column.copy(), expression=lo.copy()), true=lo.copy()),
            exp.If(this=exp.GT(this=column.copy(), expression=hi.copy()), true=hi.copy()),
        ],
        default=column.copy(),
    )
    return exp.cast(clamped, exp.DataType.Type.BIGINT)


def _ranked(rows: exp.Select, columns: SeriesColumns, dialect: Dialect, key: int) -> exp.Select:
    """Every row with ``__r``, its rank among its unit's rows in (day, hash, value) order."""
    assert columns.unit is not None
    order: list[exp.Expr] = [exp.Ordered(this=exp.column("__d"))]
    if columns.value is not None:
        # Rows of one unit on one day are told apart by their value only (a count does not
        # care which of them is kept): hashed with the series' key, so which rows a unit over
        # its cap keeps favours no value, and is the same at every publication.
        hashed = [(exp.column("__u"), columns.unit[1]), (exp.column("__v"), "int")]
        order.append(exp.Ordered(this=keyed_hash(dialect, key, hashed)))
        order.append(exp.Ordered(this=exp.column("__v"), nulls_first=False))
    rank = exp.Window(
        this=exp.Anonymous(this="ROW_NUMBER"),
        partition_by=[exp.column("__u")],
        order=exp.Order(expressions=order),
    )
    fields = ["__d", *(["__v"] if columns.value is not None else [])]
    return exp.select(*fields, exp.alias_(rank, "__r")).from_(rows.subquery("__rows"))
