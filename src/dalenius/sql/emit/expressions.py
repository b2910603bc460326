"""Plan expressions, relations and measurements written as SQL (:class:`Compiler`).

Every relation becomes a subquery whose columns are the plan's unique field ids. Expressions are
made total: arithmetic in DOUBLE (no overflow), NULL-safe division, integer division truncating
toward zero, so the query cannot fail on particular rows; measurements are clipped, centred and
rounded to their grid (:mod:`.numeric`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from sqlglot import exp

from dalenius.core.dialect import DUCKDB, Dialect, as_dialect
from dalenius.core.unit import stored_name
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
)
from dalenius.plan.functions import FUNCTIONS
from dalenius.plan.nodes import (
    AggCall,
    Field,
    Filter,
    Join,
    Measurement,
    Project,
    ReachedUnit,
    Relation,
    Scan,
    SemiJoin,
    UnitAggregate,
    output_fields,
)
from dalenius.plan.sensitivity import SCALED_LIMIT
from dalenius.sql.emit.dialects import double_arithmetic, exact_sum, modulo, round_half
from dalenius.sql.emit.numeric import (
    _SQUARE_SPAN,
    _SUM_SPAN,
    _bigint_bounds,
    _clip,
    _double,
    _double_literal,
    _log2,
    _nearest,
    _number,
    _rounding_below,
    _scaled,
    _wide,
)
from dalenius.sql.emit.truncation import key_frequency, truncated_side
from dalenius.sql.emit.writing import _col, _negated, _quoted

_BINARY: dict[str, type[exp.Binary]] = {
    "=": exp.EQ,
    "<>": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
    "+": exp.Add,
    "-": exp.Sub,
    "*": exp.Mul,
    "AND": exp.And,
    "OR": exp.Or,
    "||": exp.DPipe,
}


_FUNCS: dict[str, type[exp.Func]] = {
    spec.name: getattr(exp, spec.sqlglot) for spec in FUNCTIONS.values()
}
"""sqlglot's class of each registered function (:data:`dalenius.plan.functions.FUNCTIONS`),
which writes it in each dialect; the cases of :meth:`Compiler.expression` add guards."""


LOOKUP_BRANCHES = 8
"""The fewest branches of a CASE that maps a column's values to constants written as a map
lookup where the dialect asks for it (:attr:`~dalenius.core.dialect.Dialect.map_lookup`)."""

VALUES_BRANCHES = 1024
"""The fewest branches of such a CASE written as a subquery over ``VALUES`` where the dialect
asks for it (:attr:`~dalenius.core.dialect.Dialect.values_lookup`). In DuckDB, on TPC-H Q17's
outer statement at SF 10, the CASE was the faster form up to 512 branches (1.18 s against
1.31 s) and the slower at 2,044 (2.24 s against 1.38 s)."""


def _square_top(m: Measurement, whole: Fraction) -> int:
    """The most one row adds to a BIGINT sum of squares: the square is largest at a bound.

    The summed value is ``(x − whole)²`` on a grid of 1, ``(2x − 2c)²`` on a grid of 1/4.
    """
    assert m.bounds is not None
    if m.granularity == 1:
        ends = [b - whole for b in m.bounds]
    else:
        ends = [2 * (b - m.center) for b in m.bounds]
    return int(max(e * e for e in ends))


def _bare_join(select: exp.Select) -> bool:
    """Whether ``select`` is a join of two sides and nothing else (``SELECT * FROM l JOIN r``).

    A filter over such a join is written as the join's own ``WHERE``, not as a query around it:
    the rows are the same, and DuckDB derives a filter for each side's scan from a disjunction
    over both sides only when the ``WHERE`` sits on the join. Around it (TPC-H Q19's three
    branches over ``lineitem`` and ``part``) the quantity ranges reached the lines' scan as one
    disjunction of every comparison, which keeps seven times as many lines for the join.
    """
    return (
        bool(select.args.get("joins"))
        and len(select.expressions) == 1
        and isinstance(select.expressions[0], exp.Star)
        and not any(
            select.args.get(part)
            for part in ("where", "group", "having", "qualify", "order", "limit", "distinct")
        )
    )


class Compiler:
    """Compiles plan expressions, relations and measurements, knowing each field's type."""

    def __init__(
        self,
        fields: Mapping[str, FieldInfo],
        dialect: Dialect | str = DUCKDB,
        *,
        read: frozenset[str] | None = None,
        salt: int = 0,
    ) -> None:
        self.fields = dict(fields)
        self.dialect = as_dialect(dialect)
        self.read = read
        self.salt = salt
        """Keys the hash that truncates the sides of a private join (drawn per query)."""
        self.truncated = 0
        """How many join sides have been truncated (names their rank columns apart)."""
        self.frequencies: list[exp.Select] = []
        """Per side of an elastic join, the statement of its largest key frequency."""
        """The names the query reads (:func:`read_names`): a scan projects only these fields
        (all of them when ``None``)."""
        self.computed: set[str] = set()
        """Field ids computed from an expression other than a column (a projection's, a
        per-unit aggregate's)."""
        self.supplies: dict[str, str] = {}
        """Field ids of a unit column a scan also reads under another id: the unit of a table
        read as stored that the join above takes from this row (:class:`ReachedUnit`)."""
        self.scanned: dict[str, set[str]] = {}
        """The columns each scanned table is read for, by table name (filled as scans are
        compiled)."""

    def hash_kinds(self, names: list[str]) -> dict[str, str]:
        """How :func:`~dalenius.sql.emit.dialects.keyed_hash` reads each field id in ``names``: its
        type, except that an integer a projection computes (in the engine's double arithmetic)
        is a double in the SQL, and is hashed as one.
        """
        return {
            name: "float"
            if name in self.computed and self.fields[name].type == "int"
            else self.fields[name].type
            for name in names
        }

    def reads(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The tables scanned so far, each with the columns read of it (:attr:`ExactSQL.reads`)."""
        return tuple((t, tuple(sorted(cs))) for t, cs in sorted(self.scanned.items()))

    # -- relations --------------------------------------------------------------------------------

    def relation(self, relation: Relation) -> exp.Select:
        """A SELECT whose columns are the relation's field ids."""
        match relation:
            case Scan(table=table, fields=fs, stored=stored):
                return self._scan(table, fs, stored)
            case Filter(child=child, predicate=predicate):
                # Every tree here is fresh: the builders need not copy what they wrap.
                inner = self.relation(child)
                if _bare_join(inner):
                    return inner.where(self.expression(predicate), copy=False)
                return (
                    exp.select(exp.Star())
                    .from_(inner.subquery("__f", copy=False), copy=False)
                    .where(self.expression(predicate), copy=False)
                )
            case Project(child=child, fields=fs, exprs=exprs):
                inner = self.relation(child)
                self._learn(child)
                cols = [
                    exp.alias_(self.expression(e), f.id, quoted=True, copy=False)
                    for f, e in zip(fs, exprs, strict=True)
                ]
                self.computed.update(
                    f.id for f, e in zip(fs, exprs, strict=True) if not isinstance(e, Col)
                )
                return exp.select(*cols).from_(inner.subquery("__p", copy=False), copy=False)
            case Join(left=left, right=right, left_key=lk, right_key=rk, kind=kind):
                reached = relation.reached
                if reached is not None:
                    # The other table's scan reads its unit a second time, under the stored
                    # side's unit id: no projection above the join, which would keep the
                    # engine from reordering the joins around it.
                    self.supplies[reached.source] = reached.unit
                lsql, rsql = self.relation(left), self.relation(right)
                if relation.truncation is not None:
                    lsql, rsql = self._truncated(relation, lsql, rsql)
                on: exp.Expr = exp.EQ(this=_col(lk), expression=_col(rk))
                if reached is not None:
                    on = self._supplied_on(reached, lk, rk)
                return (
                    exp.select(exp.Star())
                    .from_(lsql.subquery("__l", copy=False), copy=False)
                    .join(
                        rsql.subquery("__r", copy=False),
                        on=on,
                        join_type="LEFT" if kind == "left" else "INNER",
                        copy=False,
                    )
                )
            case SemiJoin():
                return self._semi_join(relation)
            case UnitAggregate():
                return self._unit_aggregate(relation)
        raise AssertionError(f"unknown relation {relation!r}")

    @staticmethod
    def _supplied_on(reached: ReachedUnit, lk: str, rk: str) -> exp.Expr:
        """The ON condition of a join that supplies a stored side's unit: the two tables' keys
        equated, and the written equality with the unit read from the joined row. Where that
        reads the supplying column itself, it says only that the unit is not NULL: written as
        an equality of a column with itself, DuckDB would estimate it keeps almost no row and
        join the largest tables first.
        """
        keys = exp.EQ(this=_col(reached.key), expression=_col(reached.ref_key))
        other = rk if lk == reached.unit else lk
        written: exp.Expr = (
            exp.Not(this=exp.Is(this=_col(other), expression=exp.Null()))
            if other == reached.source
            else exp.EQ(this=_col(reached.source), expression=_col(other))
        )
        return exp.and_(keys, written, copy=False)

    def _truncated(
        self, join: Join, lsql: exp.Select, rsql: exp.Select
    ) -> tuple[exp.Select, exp.Select]:
        """Both sides of a truncated join, each bounded before joining (:mod:`.truncation`)."""
        t = join.truncation
        assert t is not None
        sides = []
        for side, sql, key, per_key, unit, rows in (
            (join.left, lsql, join.left_key, t.left_per_key, t.left_unit, t.left_rows),
            (join.right, rsql, join.right_key, t.right_per_key, t.right_unit, t.right_rows),
        ):
            self._learn(side)
            columns = [f.id for f in output_fields(side) if self.read is None or f.id in self.read]
            tag = str(self.truncated)
            self.truncated += 1
            kept = truncated_side(
                sql,
                columns=columns,
                types=self.hash_kinds(columns),
                key=key,
                per_key=per_key,
                unit=unit,
                unit_rows=rows,
                dialect=self.dialect,
                salt=self.salt,
                tag=tag,
            )
            if per_key is None:
                self.frequencies.append(key_frequency(kept.copy(), key))
            sides.append(kept)
        return sides[0], sides[1]

    def _semi_join(self, relation: SemiJoin) -> exp.Select:
        """``child`` kept where ``[NOT] EXISTS`` / ``[NOT] IN`` holds; the correlated condition
        sits in the subquery's own WHERE (field ids are unique, so the outer ones resolve to
        ``__s``), which every engine accepts, where a derived table could not see them.
        """
        inner = self.relation(relation.child)
        right = self.relation(relation.right)
        if self.dialect.semi_join and _hashed_either_way(relation):
            return self._explicit_semi_join(relation, inner, right)
        picked: exp.Expr = (
            _col(relation.column) if relation.column is not None else exp.Literal.number(1)
        )
        sub = exp.select(picked).from_(right.subquery("__e", copy=False), copy=False)
        if relation.condition is not None:
            sub = sub.where(self.expression(relation.condition), copy=False)
        test: exp.Expr
        if relation.operand is not None:
            test = exp.In(this=self.expression(relation.operand), query=sub.subquery(copy=False))
        else:
            test = exp.Exists(this=sub)
        if relation.negated:
            test = exp.Not(this=exp.Paren(this=test))
        return (
            exp.select(exp.Star())
            .from_(inner.subquery("__s", copy=False), copy=False)
            .where(test, copy=False)
        )

    def _explicit_semi_join(
        self, relation: SemiJoin, inner: exp.Select, right: exp.Select
    ) -> exp.Select:
        """``EXISTS`` as ``SEMI JOIN``, ``NOT EXISTS`` as ``ANTI JOIN`` (where
        :func:`_hashed_either_way`, on a dialect with
        :attr:`~dalenius.core.dialect.Dialect.semi_join`).

        The same rows: a semi join keeps a row of ``__s`` once when some row of ``__e`` meets
        the condition, an anti join when none does, and neither adds ``__e``'s columns.
        """
        on = self.expression(relation.condition) if relation.condition is not None else None
        return (
            exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("__s")))
            .from_(inner.subquery("__s", copy=False), copy=False)
            .join(
                right.subquery("__e", copy=False),
                on=on,
                join_type="ANTI" if relation.negated else "SEMI",
                copy=False,
            )
        )

    def _unit_aggregate(self, relation: UnitAggregate) -> exp.Select:
        """One row per unit (and key): the unit, its keys and its aggregates."""
        unit, fs, aggs, keys = (
            relation.unit_field,
            relation.fields,
            relation.aggregates,
            relation.keys,
        )
        inner = self.relation(relation.child)
        self._learn(relation.child)
        unit_out, *rest = fs
        key_fields, value_fields = rest[: len(keys)], rest[len(keys) :]
        cols = [exp.alias_(_col(unit), unit_out.id, quoted=True)]
        cols += [
            exp.alias_(self.expression(k), f.id, quoted=True)
            for f, k in zip(key_fields, keys, strict=True)
        ]
        cols += [
            exp.alias_(self.unit_aggregate(a), f.id, quoted=True)
            for f, a in zip(value_fields, aggs, strict=True)
        ]
        # Per-unit aggregates and key expressions are computed (an integer one may be a double
        # in the SQL): hashed as doubles (hash_kinds).
        self.computed.update(f.id for f in value_fields)
        self.computed.update(
            f.id for f, k in zip(key_fields, keys, strict=True) if not isinstance(k, Col)
        )
        group = [_col(unit), *[self.expression(k) for k in keys]]
        q = (
            exp.select(*cols)
            .from_(inner.subquery("__u"))
            .where(exp.Not(this=exp.Is(this=_col(unit), expression=exp.Null())))
        )
        return q.group_by(*group)

    def _scan(self, table: str, fs: tuple[Field, ...], stored: bool = False) -> exp.Select:
        read = self.read
        # A table read as stored has no unit column: the join above supplies it (ReachedUnit).
        fs = tuple(f for f in fs if not f.unit) if stored else fs
        # Only the columns the query reads: each projected column is one more conversion the
        # engine binds and plans (a third of a tiny COUNT's time in DuckDB). A SELECT needs one
        # column, so a query reading none keeps the first.
        supplies = self.supplies
        kept = (
            fs
            if read is None
            else tuple(f for f in fs if f.id in read or f.id in supplies) or fs[:1]
        )
        self.scanned.setdefault(table, set()).update(f.name for f in kept)
        cols = [exp.alias_(_col(f.name), f.id, quoted=True, copy=False) for f in kept]
        # A unit this table supplies to a table read as stored (ReachedUnit), under its id.
        cols += [
            exp.alias_(_col(f.name), supplies[f.id], quoted=True, copy=False)
            for f in kept
            if f.id in supplies
        ]
        source = stored_name(table) if stored else table
        return exp.select(*cols).from_(exp.to_table(_quoted(source)), copy=False)

    def _learn(self, relation: Relation) -> None:
        for f in output_fields(relation):
            self.fields.setdefault(f.id, FieldInfo(f.type, f.bounds, f.keys, f.nullable))

    def unit_aggregate(self, agg: AggCall) -> exp.Expr:
        """A per-unit aggregate, clamped to its bounds so the outer query sees bounded values."""
        arg = self.clipped_arg(agg.arg) if agg.arg is not None else None
        if agg.func == "count":
            value: exp.Expr = exp.Count(this=exp.Star() if arg is None else arg)
        elif agg.func == "sum":
            assert agg.arg is not None and arg is not None
            value = (
                exact_sum(arg, self.dialect, bigint=False)
                if self._is_int(agg.arg)
                else exp.Sum(this=arg)
            )
        elif agg.func == "avg":
            value = exp.Avg(this=_double(arg)) if arg is not None else exp.Null()
        elif agg.func == "min":
            value = exp.Min(this=arg)
        else:
            value = exp.Max(this=arg)
        assert agg.bounds is not None
        return _clip(value, agg.bounds[0], agg.bounds[1], self.dialect)

    # -- measurements -----------------------------------------------------------------------------

    def clipped_arg(self, arg: Expr) -> exp.Expr:
        """An aggregate's argument with every bounded column clipped to its bounds first."""
        return self.expression(arg, clip=True)

    def bounded_arg(self, arg: Expr, low: Fraction, high: Fraction) -> exp.Expr:
        """``arg`` (columns clipped) clipped to ``[low, high]`` — once, for a plain bounded column."""
        if isinstance(arg, Col):
            info = self.fields.get(arg.name)
            if info is not None and info.bounds == (low, high):
                return self.clipped_arg(arg)
        return _clip(self.clipped_arg(arg), low, high, self.dialect)

    def measurement(self, m: Measurement) -> exp.Expr:
        """The exact aggregate for one measurement (an integer in grid units).

        Every step is total over the clipped values: integers stay within BIGINT (bounds within
        its range, centres subtracted before any product, counts widened before multiplying),
        doubles are scaled by powers of two split so that no factor overflows, and every double
        is clipped to the measurement's range in grid units *before* it is cast to BIGINT. Which
        arithmetic is used is decided from the bounds alone (see
        :func:`dalenius.plan.sensitivity.grid_problem`).
        """
        if m.kind == "count":
            return exp.Count(this=exp.Star() if m.arg is None else self.expression(m.arg))
        if m.kind == "count_distinct":
            assert m.arg is not None
            return exp.Count(this=exp.Distinct(expressions=[self.expression(m.arg)]))
        clip = m.clip
        assert clip is not None
        clipped = self.bounded_arg(clip.expr, clip.low, clip.high)
        if m.kind == "sum":
            return self._sum(m, clipped)
        return self._sum_of_squares(m, clipped)

    def _sum(self, m: Measurement, clipped: exp.Expr) -> exp.Expr:
        assert m.bounds is not None
        scale = 1 / m.granularity
        offset = m.center / m.granularity
        if _bigint_bounds(m) and scale.denominator == 1 and offset.denominator == 1:
            # Σ (x·scale − offset) = scale·Σx − offset·n, exactly, in integers: the engine
            # then does no arithmetic per row (DuckDB sums a column twice as fast as an
            # expression). With no rows, SUM is NULL, read as 0. The count is widened before
            # the product, which can pass 2^63 (a centre near 2^62 times a few rows).
            top = int(max(abs(m.bounds[0]), abs(m.bounds[1])))
            units: exp.Expr = exact_sum(
                exp.cast(clipped, exp.DataType.Type.BIGINT), self.dialect, bound=top
            )
            if scale != 1:
                units = exp.Mul(this=units, expression=_number(scale))
            if offset:
                # COUNT(clip(col)) is COUNT(col): the clip maps NULL, and only NULL, to NULL.
                # Counting the column itself spares the engine a second CASE per row.
                counted = self.expression(m.arg) if isinstance(m.arg, Col) else clipped.copy()
                count = _wide(exp.Count(this=counted))
                units = exp.Sub(
                    this=units, expression=exp.Mul(this=_number(offset), expression=count)
                )
            return units
        # x·2^-k − offset: the value times a power of two is exact and, from the bounds, below
        # 2^1000 (the plan refuses bounds where it would not be), so it is finite.
        scaled = _scaled(_double(clipped), -_log2(m.granularity), self.dialect)
        # Subtracting 0 changes no double (not even -0.0): a centre of 0 is left out, which
        # spares the engine an operation per row (a function call on PostgreSQL).
        shifted = exp.Sub(this=scaled, expression=_double_literal(offset)) if offset else scaled
        if _rounding_below(m, _SUM_SPAN):
            # Provably within ±row_units after rounding (see _rounding_below): no clamp.
            return exact_sum(_nearest(shifted, self.dialect), self.dialect, bound=m.row_units)
        units_bound = Fraction(m.row_units)
        return exact_sum(
            _nearest(_clip(shifted, -units_bound, units_bound, self.dialect), self.dialect),
            self.dialect,
            bound=m.row_units,
        )

    def _sum_of_squares(self, m: Measurement, clipped: exp.Expr) -> exp.Expr:
        """Σ round((clip(x) − centre)² / granularity), never overflowing or underflowing."""
        assert m.bounds is not None
        if (
            _bigint_bounds(m)
            and (2 * m.center).denominator == 1
            and m.granularity in (1, Fraction(1, 4))
        ):
            # (x − c)², or (2x − 2c)² in quarters for a half-integer centre, in BIGINT: the
            # integer part of the centre is subtracted first, so nothing passes 2^63.
            whole = Fraction(math.floor(m.center))
            diff: exp.Expr = exp.Paren(
                this=exp.Sub(
                    this=exp.cast(clipped, exp.DataType.Type.BIGINT), expression=_number(whole)
                )
            )
            if m.granularity == Fraction(1, 4):
                diff = exp.Paren(
                    this=exp.Sub(
                        this=exp.Mul(this=diff, expression=exp.Literal.number(2)),
                        expression=_number(2 * (m.center - whole)),
                    )
                )
            squared = exp.Mul(this=diff, expression=diff.copy())
            return exact_sum(squared, self.dialect, bound=_square_top(m, whole))
        # (x − c)² / 2^k = ((x − c)·2^a)² · 2^b with −k = 2a + b: the scaled difference is at
        # most about 2^16, so its square cannot overflow.
        wide = max(abs(m.bounds[0]), abs(m.bounds[1])) > SCALED_LIMIT
        centred = (
            double_arithmetic("-", _double(clipped), _double_literal(m.center), self.dialect)
            if wide
            else exp.Sub(this=_double(clipped), expression=_double_literal(m.center))
        )
        a, b = divmod(-_log2(m.granularity), 2)
        scaled = _scaled(exp.Paren(this=centred), a, self.dialect)
        if not self.dialect.ieee_doubles:
            # PostgreSQL raises when a product underflows to zero; a difference this small
            # squares to less than 1/16 of a grid step and rounds to 0 either way.
            scaled = exp.Case(
                ifs=[
                    exp.If(
                        this=exp.LT(
                            this=exp.Abs(this=scaled.copy()), expression=exp.Literal.number("0.25")
                        ),
                        true=_double(exp.Literal.number(0)),
                    )
                ],
                default=scaled.copy(),
            )
        square: exp.Expr = exp.Mul(
            this=exp.Paren(this=scaled), expression=exp.Paren(this=scaled.copy())
        )
        if b:
            square = exp.Mul(this=square, expression=exp.Literal.number(2))
        if not wide and _rounding_below(m, _SQUARE_SPAN):
            return exact_sum(_nearest(square, self.dialect), self.dialect, bound=m.row_units)
        units_bound = Fraction(m.row_units)
        return exact_sum(
            _nearest(_clip(square, Fraction(0), units_bound, self.dialect), self.dialect),
            self.dialect,
            bound=m.row_units,
        )

    def bin_index(self, m: Measurement) -> exp.Expr:
        """The bin of a histogram measurement each row falls in (0 … bins − 1).

        In doubles, the index is clipped to the bins before it is cast to BIGINT; bounds wider
        than 2^1020 are scaled by 1/4 first so that ``x − low`` cannot overflow.
        """
        clip = m.clip
        assert clip is not None
        low, high = clip.low, clip.high
        clipped = self.bounded_arg(clip.expr, low, high)
        bins = len(m.edges) - 1
        width = m.edges[1] - m.edges[0]
        if width == 1 and m.arg_type == "int" and _bigint_bounds(m):
            index: exp.Expr = exp.Sub(
                this=exp.cast(clipped, exp.DataType.Type.BIGINT), expression=_number(low)
            )
            return _clip(index, Fraction(0), Fraction(bins - 1))
        value = _double(clipped)
        if high - low > Fraction(2**1020):
            value, low, width = _scaled(value, -2, self.dialect), low / 4, width / 4
        scaled = double_arithmetic(
            "/",
            double_arithmetic("-", value, _double_literal(low), self.dialect),
            _double_literal(width),
            self.dialect,
        )
        floor = _clip(exp.Floor(this=scaled), Fraction(0), Fraction(bins - 1))
        return exp.cast(floor, exp.DataType.Type.BIGINT)

    # -- expressions ------------------------------------------------------------------------------

    def expression(self, expr: Expr, *, clip: bool = False) -> exp.Expr:  # noqa: C901, PLR0912  # one arm per expression node
        """Compile a plan expression (total: it never fails on a row).

        With ``clip``, every column that has public bounds is clipped to them (inside aggregates).

        Long because it has one arm per plan expression node, each writing that node's total
        (never-failing) SQL, plus the guards some functions need on some engines; plain calls are
        written from the registry of functions.
        """

        def sub(e: Expr) -> exp.Expr:
            return self.expression(e, clip=clip)

        match expr:
            case Col(name=name):
                info = self.fields.get(name)
                if (
                    clip
                    and info is not None
                    and info.bounds is not None
                    and info.type in ("int", "float")
                ):
                    return _clip(_col(name), info.bounds[0], info.bounds[1])
                return _col(name)
            case Lit(value=None):
                return exp.Null()
            case Lit(value=bool(v)):
                return exp.Boolean(this=v)
            case Lit(value=str(v)):
                return exp.Literal.string(v)
            case Lit(value=int(v)):
                return exp.Literal.number(v)
            case Lit(value=float(v)):
                return exp.Literal.number(repr(v))
            case BinOp(op="/", left=left, right=right):
                quotient = double_arithmetic(
                    "/",
                    _double(sub(left)),
                    exp.Nullif(this=_double(sub(right)), expression=exp.Literal.number(0)),
                    self.dialect,
                )
                if self._is_int(left) and self._is_int(right):
                    # Integer division truncates toward zero (PostgreSQL semantics).
                    return exp.Case(
                        ifs=[
                            exp.If(
                                this=exp.GTE(this=quotient, expression=exp.Literal.number(0)),
                                true=exp.Floor(this=quotient.copy()),
                            )
                        ],
                        default=exp.Ceil(this=quotient.copy()),
                    )
                return quotient
            case BinOp(op="%", left=left, right=right):
                # x % -1 is 0, like x % 1, but INT64_MIN % -1 overflows: use 1 (same answers).
                divisor = sub(right)
                safe = exp.Case(
                    ifs=[
                        exp.If(
                            this=exp.EQ(this=divisor.copy(), expression=exp.Literal.number(-1)),
                            true=exp.Literal.number(1),
                        )
                    ],
                    default=divisor.copy(),
                )
                return modulo(
                    sub(left),
                    exp.Nullif(this=safe, expression=exp.Literal.number(0)),
                    self.dialect,
                    floats=not (self._is_int(left) and self._is_int(right)),
                )
            case BinOp(op=op, left=left, right=right) if op in ("+", "-", "*"):
                return double_arithmetic(op, _double(sub(left)), _double(sub(right)), self.dialect)
            case BinOp(op=op, left=left, right=right):
                return exp.Paren(this=_BINARY[op](this=sub(left), expression=sub(right)))
            case Not(operand=o):
                return exp.Not(this=exp.Paren(this=sub(o)))
            case Neg(operand=o):
                return exp.Neg(this=exp.Paren(this=_double(sub(o))))
            case IsNull(operand=o, negated=neg):
                is_null = exp.Is(this=sub(o), expression=exp.Null())
                return exp.Paren(this=exp.Not(this=is_null) if neg else is_null)
            case InList(operand=o, items=items, negated=neg):
                in_list = exp.In(this=sub(o), expressions=[sub(i) for i in items])
                return _negated(in_list) if neg else exp.Paren(this=in_list)
            case Between(operand=o, low=lo, high=hi, negated=neg):
                between = exp.Between(this=sub(o), low=sub(lo), high=sub(hi))
                return _negated(between) if neg else exp.Paren(this=between)
            case Like(operand=o, pattern=p, negated=neg, case_insensitive=ci):
                like: exp.Expr = (exp.ILike if ci else exp.Like)(this=sub(o), expression=sub(p))
                return _negated(like) if neg else exp.Paren(this=like)
            case Func(name="ABS", args=args):
                return exp.Abs(this=_double(sub(args[0])))
            case Func(name="ROUND", args=(Col() | Lit() as whole, Lit(value=int(digits)))) if (
                digits < 0 and self._is_int(whole)
            ):
                # ROUND(INT64_MAX, -1) is 2^63 + 2: BIGINT would overflow, so an integer is
                # rounded in DECIMAL(38, 0), where every rounded BIGINT fits.
                return round_half(
                    _wide(sub(whole)), exp.Literal.number(digits), self.dialect, floats=False
                )
            case Func(name="ROUND", args=args):
                return round_half(
                    sub(args[0]),
                    sub(args[1]) if len(args) > 1 else None,
                    self.dialect,
                    floats=not self._is_int(args[0]),
                )
            case Func(name="FLOOR" | "CEIL" as name, args=args) if (
                self.dialect.floor_of_double_is_bigint and not self._is_int(args[0])
            ):
                # Spark's FLOOR and CEIL of a double return a BIGINT, which overflows (an error)
                # beyond 2^63; doubles from 2^52 on are whole already, and stay as they are.
                operand = _double(sub(args[0]))
                floored = exp.cast(_FUNCS[name](this=operand.copy()), exp.DataType.Type.DOUBLE)
                small = exp.LT(
                    this=exp.Abs(this=operand.copy()), expression=_number(Fraction(2**52))
                )
                return exp.Case(ifs=[exp.If(this=small, true=floored)], default=operand)
            case Func(name="SUBSTRING", args=(text, start, *length)):
                return exp.Substring(
                    this=sub(text), start=sub(start), length=sub(length[0]) if length else None
                )
            case Func(name=name, args=args) if FUNCTIONS[name].max_args > 1:
                # Variadic (COALESCE, LEAST, GREATEST): the first argument, then the rest.
                return _FUNCS[name](this=sub(args[0]), expressions=[sub(a) for a in args[1:]])
            case Func(name=name, args=args):
                call: exp.Expr = _FUNCS[name](this=sub(args[0]))
                return call
            case Case(whens=whens, default=default):
                lookup = self._lookup(expr)
                if lookup is not None:
                    return lookup
                # Built at once: Case.when copies the whole CASE per branch (quadratic in the
                # branches, and a correlated subquery's values are a branch per key).
                ifs = [exp.If(this=sub(cond), true=sub(value)) for cond, value in whens]
                return exp.Case(ifs=ifs, default=None if default is None else sub(default))
        raise AssertionError(f"unknown expression node {expr!r}")

    def _lookup(self, case: Case) -> exp.Expr | None:
        """``case`` as a lookup when it maps values of one column to numeric constants
        (``CASE x WHEN k1 THEN v1 … END``, no ELSE) and the dialect asks for one: a map,
        ``TRY_ELEMENT_AT(MAP(k1, v1, …), x)``, with at least :data:`LOOKUP_BRANCHES` branches
        (:attr:`~dalenius.core.dialect.Dialect.map_lookup`), or a scalar subquery over ``VALUES``
        with at least :data:`VALUES_BRANCHES` (:attr:`~dalenius.core.dialect.Dialect.values_lookup`);
        else ``None``.

        Spark's whole-stage code generation of a long CASE is slow beyond use (a correlated
        subquery's 204 values per part: 18 s for a query the lookup answers in 1.5 s); DuckDB
        plans and evaluates a CASE of thousands of branches in about half a second, and joins
        the same values in a tenth of that. Either lookup gives what the CASE gives: the first
        branch of a key (later ones never match, and are not written), NULL for a key not listed
        and for a NULL subject (``TRY_`` raises nothing; ``NULL = k`` holds for no row), each
        value cast to the CASE's type.
        """
        if self.dialect.map_lookup:
            fewest = LOOKUP_BRANCHES
        elif self.dialect.values_lookup:
            fewest = VALUES_BRANCHES
        else:
            return None
        if case.default is not None or len(case.whens) < fewest:
            return None
        kind = type_of(case, self.fields)
        subject = case.whens[0][0].left if isinstance(case.whens[0][0], BinOp) else None
        if kind not in ("int", "float") or not isinstance(subject, Col):
            return None
        key_kind = type_of(subject, self.fields)
        pairs: dict[int | str, Lit] = {}
        for condition, value in case.whens:
            if not (
                isinstance(condition, BinOp)
                and condition.op == "="
                and condition.left == subject
                and isinstance(condition.right, Lit)
                and isinstance(value, Lit)
                and isinstance(condition.right.value, int | str)
                and not isinstance(condition.right.value, bool)
                and key_kind == ("str" if isinstance(condition.right.value, str) else "int")
            ):
                return None
            pairs.setdefault(condition.right.value, value)
        typed = exp.DataType.Type.DOUBLE if kind == "float" else exp.DataType.Type.BIGINT
        # A VALUES list types its key column from its literals (INTEGER or BIGINT, compared
        # with the BIGINT column alike); a MAP needs its keys typed as the column.
        entries: list[tuple[exp.Expr, exp.Expr]] = [
            (
                exp.Literal.string(key)
                if isinstance(key, str)
                else exp.Literal.number(key)
                if self.dialect.values_lookup
                else exp.cast(exp.Literal.number(key), exp.DataType.Type.BIGINT),
                # Built as nodes (exp.cast copies and inspects each one: thousands of entries).
                exp.Cast(this=self.expression(value), to=exp.DataType(this=typed)),
            )
            for key, value in pairs.items()
        ]
        if self.dialect.values_lookup:
            return _values_lookup(entries, self.expression(subject))
        table = exp.Anonymous(this="MAP", expressions=[e for entry in entries for e in entry])
        return exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[table, self.expression(subject)])

    def _is_int(self, expr: Expr) -> bool:
        try:
            return type_of(expr, self.fields) in ("int", "null")
        except KeyError:
            return False


def _values_lookup(entries: list[tuple[exp.Expr, exp.Expr]], subject: exp.Expr) -> exp.Expr:
    """``(SELECT __v FROM (VALUES (k1, v1), …) AS __lookup(__k, __v) WHERE __k = subject)``:
    the value of ``subject``'s entry, NULL when it has none or is NULL (the keys are distinct,
    so the subquery returns at most one row).
    """
    rows = exp.Values(
        expressions=[exp.Tuple(expressions=[key, value]) for key, value in entries],
        alias=exp.TableAlias(
            this=exp.to_identifier("__lookup"),
            columns=[exp.to_identifier("__k"), exp.to_identifier("__v")],
        ),
    )
    # Built as nodes: the builders copy their arguments, here thousands of rows.
    select = exp.Select(
        expressions=[exp.column("__v", table="__lookup")],
        from_=exp.From(this=rows),
        where=exp.Where(this=exp.EQ(this=exp.column("__k", table="__lookup"), expression=subject)),
    )
    return exp.Subquery(this=select)


def _hashed_either_way(relation: SemiJoin) -> bool:
    """Whether an ``[NOT] EXISTS`` is written as an explicit semi or anti join: its correlation
    is equalities of an outer and an inner column alone, and its subquery reads a table's
    filtered rows (no per-unit aggregate). DuckDB then hashes whichever side it estimates
    smaller, where inside the bounded input's CTE it planned ``NOT EXISTS`` as a MARK join
    hashing every row of the subquery (TPC-H Q22: 15 million orders for 190,000 customers).
    The others keep ``EXISTS``: TPC-H Q18's per-order totals over 300 (a few hundred rows,
    estimated as millions) were hashed on the orders' side as a join and took 1.3 times the
    time, and Q21, correlated by ``<>`` too, twice the time.
    """
    if relation.operand is not None or relation.condition is None:
        return False
    if any(isinstance(r, UnitAggregate | Join | SemiJoin) for r in _relations(relation.right)):
        return False
    return all(
        isinstance(c, BinOp)
        and c.op == "="
        and isinstance(c.left, Col)
        and isinstance(c.right, Col)
        for c in _conjuncts(relation.condition)
    )


def _relations(relation: Relation) -> list[Relation]:
    """``relation`` and every relation below it."""
    match relation:
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c):
            return [relation, *_relations(c)]
        case Join(left=left, right=right) | SemiJoin(child=left, right=right):
            return [relation, *_relations(left), *_relations(right)]
    return [relation]


def _conjuncts(condition: Expr) -> list[Expr]:
    """The terms of a condition joined by ``AND``."""
    if isinstance(condition, BinOp) and condition.op.upper() == "AND":
        return [*_conjuncts(condition.left), *_conjuncts(condition.right)]
    return [condition]
