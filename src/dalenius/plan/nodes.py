"""Plan nodes: the logical query an analyst asked, and the DP plan that answers it.

Both are trees of frozen dataclasses, so a plan can be hashed (a ledger entry names exactly what
spent the budget) and rewritten by returning new trees.

* A **relation** is a table read (:class:`Scan`), possibly filtered, projected to derived columns,
  joined, or aggregated per privacy unit. Every relation exposes :class:`Field` s with unique ids
  (the names used in generated SQL) and the public metadata of each column.
* :class:`Query` is what the SQL says, resolved against the catalog: a relation, its privacy unit
  (:class:`UnitSpec`), group keys, aggregate calls, and output columns computed from them, plus
  HAVING, ORDER BY and LIMIT (all post-processing).
* :class:`DPQuery` is what will run: :class:`Measurement` s (noisy counts, clipped fixed-point sums,
  exact per-bin counts feeding a private selection), each with its sensitivity and share of ε,
  one :class:`Statistic` per aggregate saying how it is computed from the measurements, and, for
  groups without public keys, the :class:`Selection` that decides which groups are released.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from fractions import Fraction
from typing import Any, Literal, final

from dalenius.core.loss import ZCDP, ApproxDP, PureDP
from dalenius.plan.derive import GroupKeys
from dalenius.plan.expr import AggRef, Col, Expr, KeyRef, render
from dalenius.plan.functions import Bounds

# -- relations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """A column a relation exposes.

    Attributes:
        id: unique name inside the compiled SQL (``alias__column``).
        name: the name analysts use.
        qualifier: the table alias that qualifies it (``a`` in ``a.age``), if any.
        type: ``int``, ``float``, ``str``, ``bool`` or ``date``.
        bounds: public bounds of a numeric column.
        keys: public key list of a categorical column.
        nullable: whether it may hold NULL.
        unit: whether it is the privacy unit's id.
        join_rows_per_key: the catalog's truncation of a private join on this column, if any.
        per_unit: the catalog says the column holds one value per privacy unit. It only chooses
            how the engine bounds units (never which rows are kept), so it is left out of
            comparisons and of the plan's fingerprint.
    """

    id: str
    name: str
    qualifier: str | None
    type: str
    bounds: Bounds | None = None
    keys: GroupKeys | None = None
    nullable: bool = True
    unit: bool = False
    join_rows_per_key: int | None = field(default=None, metadata={"omit_none": True})
    per_unit: bool = field(default=False, compare=False, metadata={"derived": True})


@dataclass(frozen=True)
class Scan:
    """Every row of a catalog table, its declared columns renamed to field ids.

    ``stored``: the table's rows as stored, without the unit it reaches through another table's
    key (``privacy_unit.through``); only a :class:`Join` with :attr:`Join.reached` reads a table
    so, and supplies that unit itself from the row it joins.
    """

    table: str
    alias: str
    fields: tuple[Field, ...]
    stored: bool = field(default=False, metadata={"omit_if_zero": True})


@dataclass(frozen=True)
class Filter:
    """The rows of ``child`` for which ``predicate`` is true (NULL counts as false)."""

    child: Relation
    predicate: Expr


@dataclass(frozen=True)
class Project:
    """Derived columns computed row by row (a subquery's or CTE's SELECT list).

    The privacy unit's id is always carried along, even when the SELECT list drops it, so each
    row keeps its link to its unit.
    """

    child: Relation
    fields: tuple[Field, ...]
    exprs: tuple[Expr, ...]


@dataclass(frozen=True)
class Truncation:
    """How each side of a join of two private tables on a key other than the unit is bounded.

    Before joining, an ``id`` side keeps at most ``*_rows`` rows per unit (``*_unit``), then
    each side keeps at most ``*_per_key`` rows per value of its join key, both ranked by a keyed
    hash of the row. One unit then changes at most
    ``2·(R_left·τ_right + R_right·τ_left)`` joined rows, where ``R`` is a side's ``*_rows`` (its
    enforced cap) or, for a side whose rows are units (``*_unit`` ``None``), the rows one unit
    has there (:func:`truncated_stability`; derivation in docs/mechanisms/join_truncation.md).

    Without ``*_per_key`` (a key the catalog caps nowhere) no side is truncated per key: the
    join is bounded by elastic sensitivity instead (:mod:`dalenius.plan.elastic`), from the
    data's key frequencies after the unit caps.
    """

    left_unit: str | None
    left_rows: int | None
    left_per_key: int | None
    right_unit: str | None
    right_rows: int | None
    right_per_key: int | None

    @property
    def elastic(self) -> bool:
        """Whether the join is bounded by elastic sensitivity (no key truncation)."""
        return self.left_per_key is None or self.right_per_key is None


@dataclass(frozen=True)
class ReachedUnit:
    """How an inner join supplies the unit of a table read as stored (:attr:`Scan.stored`).

    The table reaches its unit through a key of another table (``lineitem.l_orderkey`` →
    ``orders.o_orderkey``, whose ``o_custkey`` is the line's customer), and the join reads that
    other table and equates the two keys beside the unit: the row it joins is the row that gives
    the unit, so the join takes ``unit`` from ``source`` on that row instead of the engine
    joining the other table twice. In the exact SQL the other table's scan reads ``source`` a
    second time under ``unit``'s id, and the join matches ``key`` with ``ref_key`` and the
    written equality with ``unit`` read as ``source`` (docs/privacy.md, "A unit reached through
    a key").

    Attributes:
        unit: the field id of the stored table's unit.
        source: the field id of the other table's unit column on the joined row.
        key: the field id of the stored table's key column.
        ref_key: the field id of the other table's key.
    """

    unit: str
    source: str
    key: str
    ref_key: str


@dataclass(frozen=True)
class Join:
    """An inner or left join on one equality ``left_key = right_key``.

    ``multiplicity`` is the most rows of ``right`` one row of ``left`` can match (known for a
    public right side; the engine measures it on the public table before planning).
    ``truncation`` is set on a join of two private tables on a key other than their unit: each
    side is bounded before joining, and the joined rows' stability follows from it.
    ``reached`` is set where one side is a table read as stored whose unit the join supplies
    (:class:`ReachedUnit`).
    """

    left: Relation
    right: Relation
    left_key: str
    right_key: str
    kind: Literal["inner", "left"]
    multiplicity: int = 1
    truncation: Truncation | None = field(default=None, metadata={"omit_none": True})
    reached: ReachedUnit | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True)
class SemiJoin:
    """The rows of ``child`` for which some row of ``right`` meets ``condition`` (none, when
    ``negated``): SQL's ``[NOT] EXISTS (SELECT 1 FROM right WHERE condition)``, or, with an
    ``operand``, ``operand [NOT] IN (SELECT column FROM right WHERE condition)``.

    It only drops rows of ``child``, never repeats one, and the binder admits it only where
    whether a row is kept depends on that row and on public data, or on rows of the row's own
    privacy unit (``condition`` equates ``right``'s unit with ``child``'s): removing one unit
    then changes no other unit's rows, and the sensitivity is ``child``'s.

    Attributes:
        child: the rows filtered.
        right: the subquery's rows (its uncorrelated conditions applied).
        condition: the conditions reading both sides (``None``: none).
        negated: ``NOT EXISTS`` / ``NOT IN``.
        operand: ``IN``'s outer value (``None`` for ``EXISTS``).
        column: ``IN``'s field of ``right``.
        on_unit: whether ``right`` is private, correlated on the unit.
    """

    child: Relation
    right: Relation
    condition: Expr | None
    negated: bool
    operand: Expr | None = None
    column: str | None = None
    on_unit: bool = False


@dataclass(frozen=True)
class UnitAggregate:
    """Per-unit aggregation: ``SELECT unit, keys..., agg(...) ... GROUP BY unit, keys...``.

    Its output has one row per privacy unit (and per group, with ``keys``); each aggregate is
    clamped to its ``bounds``, so the outer query sees bounded per-unit values. ``fields`` lists
    the unit, then one field per key, then one per aggregate.
    """

    child: Relation
    unit_field: str
    fields: tuple[Field, ...]
    aggregates: tuple[AggCall, ...]
    keys: tuple[Expr, ...] = ()


Relation = Scan | Filter | Project | Join | SemiJoin | UnitAggregate


def output_fields(relation: Relation) -> tuple[Field, ...]:
    """The fields a relation exposes."""
    match relation:
        case Scan(fields=fs) | Project(fields=fs) | UnitAggregate(fields=fs):
            return fs
        case Filter(child=child) | SemiJoin(child=child):
            return output_fields(child)
        case Join(left=left, right=right):
            return output_fields(left) + output_fields(right)
    raise AssertionError(f"unknown relation {relation!r}")


def all_fields(relation: Relation) -> list[Field]:
    """Every field of a relation and of the relations inside it (each id once)."""
    seen: dict[str, Field] = {}
    for part in _all_relations(relation):
        for f in output_fields(part):
            seen.setdefault(f.id, f)
    for f in output_fields(relation):
        seen.setdefault(f.id, f)
    return list(seen.values())


def display_names(relation: Relation) -> dict[str, str]:
    """Field id → the name analysts use, qualified where two tables share a column name."""
    all_fields = [f for scan in _all_relations(relation) for f in output_fields(scan)]
    counts: dict[str, int] = {}
    for f in {f.id: f for f in all_fields}.values():
        counts[f.name.lower()] = counts.get(f.name.lower(), 0) + 1
    out = {}
    for f in all_fields:
        qualified = counts[f.name.lower()] > 1 and f.qualifier
        out[f.id] = f"{f.qualifier}.{f.name}" if qualified else f.name
    return out


def _all_relations(relation: Relation) -> list[Relation]:
    match relation:
        case Scan():
            return [relation]
        case Filter(child=c):
            return _all_relations(c)
        case Project(child=c) | UnitAggregate(child=c):
            return [*_all_relations(c), relation]
        case Join(left=left, right=right) | SemiJoin(child=left, right=right):
            return _all_relations(left) + _all_relations(right)
    raise AssertionError(f"unknown relation {relation!r}")


def depth_first(relation: Relation, visit: Callable[[Relation], Relation]) -> Relation:
    """Rebuild ``relation`` bottom-up: each node's children first, then ``visit`` on the node.

    The one tree walk the plan rules (:mod:`dalenius.plan.rewrite`) share. A node whose children
    come back unchanged is passed to ``visit`` as it is (the same object), so a rule that changes
    nothing returns the very tree it was given.

    Example:
        >>> t = Scan("t", "t", ())
        >>> depth_first(Filter(t, Col("x")), lambda r: r) == Filter(t, Col("x"))
        True
    """
    match relation:
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c):
            child = depth_first(c, visit)
            if child is not c:
                relation = replace(relation, child=child)
        case Join(left=left, right=right):
            new_left, new_right = depth_first(left, visit), depth_first(right, visit)
            if new_left is not left or new_right is not right:
                relation = replace(relation, left=new_left, right=new_right)
        case SemiJoin(child=c, right=right):
            child, new_right = depth_first(c, visit), depth_first(right, visit)
            if child is not c or new_right is not right:
                relation = replace(relation, child=child, right=new_right)
    return visit(relation)


def with_fields(relation: Relation, exposed: Sequence[Field]) -> Relation:
    """The same relation exposing ``exposed`` (marks a LEFT JOIN's right side nullable)."""
    match relation:
        case Scan() | Project() | UnitAggregate():
            return replace(relation, fields=tuple(exposed))
        case Filter(child=child) | SemiJoin(child=child):
            return replace(relation, child=with_fields(child, exposed))
    return relation


def scans(relation: Relation) -> tuple[Scan, ...]:
    """Every table a relation reads."""
    match relation:
        case Scan():
            return (relation,)
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c):
            return scans(c)
        case Join(left=left, right=right) | SemiJoin(child=left, right=right):
            return scans(left) + scans(right)
    raise AssertionError(f"unknown relation {relation!r}")


@dataclass(frozen=True)
class UnitSpec:
    """The privacy unit as the aggregate sees it, and the caps that bound its contribution.

    Attributes:
        kind: ``row`` (each row of the private table is a unit; no bounding needed unless a join
            multiplies rows), ``id`` (rows sharing ``field`` are one unit: the engine keeps at most
            ``max_rows`` rows in at most ``max_groups`` groups per unit before aggregating), or
            ``aggregated`` (a per-unit subquery already produced one row per unit).
        field: the id of the unit column (``id`` and ``aggregated`` kinds).
        max_rows: the most rows one unit contributes to the aggregate.
        max_groups: the most groups one unit contributes to.
        description: one line for explain output.
        groups_asked: ``max_groups`` was asked for in the query (``max_groups_contributed``),
            not taken from the catalog: the planner then keeps it as asked (see
            :func:`dalenius.plan.compile.to_dp` on caps that no sensitivity depends on).
    """

    kind: Literal["row", "id", "aggregated"]
    field: str | None
    max_rows: int
    max_groups: int
    description: str
    groups_asked: bool = False


@dataclass(frozen=True)
class BoundContributions:
    """The contribution bounding that sensitivities rest on: each privacy unit contributes at most
    ``max_rows`` rows of ``child``, in at most ``max_groups`` groups.

    Placed over the query's relation by the rule
    :func:`dalenius.plan.rewrite.bound_contributions.bound_contributions` (as
    :attr:`Query.bounding`) and shown by explain. For
    an ``id`` unit the engine enforces the caps (it ranks each unit's groups and rows by a keyed
    hash and keeps the first, see :func:`dalenius.sql.emit.bounding.bounded`); for a ``row`` unit they
    follow from the joins' multiplicities; an ``aggregated`` unit has one row per unit already.

    Attributes:
        child: the relation whose rows are bounded.
        unit: the id of the unit column (``None`` when each row is its own unit).
        max_rows: the most rows one unit contributes to the aggregate (``R``).
        max_groups: the most groups one unit contributes to (``G``).
        kind: the privacy unit's kind (:class:`UnitSpec`).
    """

    child: Relation
    unit: str | None
    max_rows: int
    max_groups: int
    kind: Literal["row", "id", "aggregated"]

    @property
    def enforced(self) -> bool:
        """Whether the engine must cap each unit's rows and groups (an ``id`` unit)."""
        return self.kind == "id"


@dataclass(frozen=True)
class Clip:
    """``expr`` clipped to ``[low, high]`` before it is aggregated (its public bounds)."""

    expr: Expr
    low: Fraction
    high: Fraction


def truncates(relation: Relation) -> bool:
    """Whether ``relation`` truncates the sides of a join (its SQL then needs a hash key)."""
    match relation:
        case Join(left=left, right=right, truncation=t):
            return t is not None or truncates(left) or truncates(right)
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c):
            return truncates(c)
        case SemiJoin(child=c, right=right):
            return truncates(c) or truncates(right)
    return False


def truncated_stability(truncation: Truncation, left_rows: int, right_rows: int) -> int:
    """The most joined rows one unit changes in a truncated join (:class:`Truncation`).

    ``left_rows`` and ``right_rows`` are the most rows one unit changes on each side (its cap,
    or what the side's own joins multiply one row into). Removing a unit removes its kept rows
    of a key and lets at most as many rows of others in (the next in the hash order), so each
    side's kept rows change by at most ``2·R``; each changed row meets at most ``τ`` kept rows
    of the other side.

    Example:
        >>> t = Truncation("a__pid", 3, 2, "b__pid", 5, 4)
        >>> truncated_stability(t, 3, 5)
        44
    """
    if truncation.left_per_key is None or truncation.right_per_key is None:
        # Elastic: the data decides the noise (dalenius.plan.elastic); this is its floor, each
        # key value held once, and never calibrates noise.
        return left_rows * right_rows
    return 2 * (left_rows * truncation.right_per_key + right_rows * truncation.left_per_key)


# -- the logical query --------------------------------------------------------------------------

DERIVED = {"derived": True}
"""Field metadata of a node's field that a rule derives from its other fields: not hashed."""


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY expression; ``keys`` is its public key list, or ``None`` if it has none.

    ``from_table`` names the public table whose column's values the keys are (read before
    planning, :mod:`dalenius.plan.rewrite.public_table_keys`): every row of the query holds one
    of them, so the engine needs no filter on the list (the catalog's lists still get one).
    With ``keys`` ``None`` it names the public table whose column held too many values to list.
    ``listed``: the keys are the literals the query's ``WHERE`` lists for the expression (``expr
    IN ('a', 'b')``, :func:`dalenius.plan.derive.listed_keys`), which it has no public domain for.
    """

    name: str
    expr: Expr
    type: str
    keys: GroupKeys | None
    from_table: str | None = None
    listed: bool = False


AggFunc = Literal[
    "count",
    "count_distinct",
    "sum",
    "avg",
    "var_pop",
    "var_samp",
    "stddev_pop",
    "stddev_samp",
    "quantile",
    "min",
    "max",
]


@dataclass(frozen=True)
class AggCall:
    """An aggregate of the query.

    Attributes:
        func: which aggregate.
        arg: its argument (``None`` for ``COUNT(*)``), over the relation's field ids.
        arg_type: ``int`` or ``float`` for numeric aggregates.
        bounds: public clipping bounds of ``arg`` (numeric aggregates).
        q: the quantile for ``quantile`` (MEDIAN is 0.5).
        label: how explain and default column names show it (``AVG(age)``).
        hidden: computed for HAVING or ORDER BY only, not output (it still costs budget).
        distinct_unit: ``COUNT(DISTINCT unit)``.
    """

    func: AggFunc
    arg: Expr | None
    arg_type: str
    bounds: Bounds | None
    q: Fraction | None
    label: str
    hidden: bool = False
    distinct_unit: bool = False


@dataclass(frozen=True)
class OutputColumn:
    """An output column: an expression over :class:`KeyRef` s and :class:`AggRef` s."""

    name: str
    expr: Expr


@dataclass(frozen=True)
class OrderItem:
    """One ORDER BY term, over the same key and aggregate references as outputs."""

    expr: Expr
    descending: bool
    nulls_first: bool = False


@final
@dataclass(frozen=True)
class Query:
    """The logical query: what the analyst asked for, before any privacy decision.

    ``bounding`` is the one node a rule adds: the :class:`BoundContributions` over ``relation``,
    placed by :func:`dalenius.plan.rewrite.bound_contributions.bound_contributions` once every
    join's multiplicity is known (``None`` before). It follows from ``relation`` and ``unit``, so
    it is left out of comparisons and of the plan's fingerprint (:data:`DERIVED`): fingerprints,
    and the ledger's answer cache keyed by them, are what they were before the node existed.
    """

    relation: Relation
    unit: UnitSpec
    group_by: tuple[GroupKey, ...]
    aggregates: tuple[AggCall, ...]
    outputs: tuple[OutputColumn, ...]
    having: Expr | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: int | None = None
    offset: int = 0
    bounding: BoundContributions | None = field(
        default=None, compare=False, repr=False, metadata=DERIVED
    )


def key_ref(i: int) -> str:
    """The post-processing column holding group key ``i`` (what :class:`KeyRef` reads)."""
    return KeyRef.of(i).name


def agg_ref(i: int) -> str:
    """The post-processing column holding aggregate ``i`` (what :class:`AggRef` reads)."""
    return AggRef.of(i).name


# -- the DP plan --------------------------------------------------------------------------------

MeasurementKind = Literal["count", "count_distinct", "sum", "sum_sq", "histogram", "degrees"]

VECTOR_KINDS = ("histogram", "degrees")
"""Measurements computed as a vector of counts per group and never released with Laplace noise:
per-bin counts for quantiles, and units per degree for weighted partition selection."""


@dataclass(frozen=True)
class Measurement:
    """One exact per-group quantity the engine computes, released with noise or by selection.

    Integer valued: counts, or ``Σ round((clip(x) − center) / granularity)`` (``sum``), or
    ``Σ round((clip(x) − center)² / granularity)`` (``sum_sq``), or per-bin counts (``histogram``,
    never released itself: a private selection picks a bin).

    Attributes:
        name: short identifier (``m0``, ``m1``, …), the SQL alias of the exact aggregate.
        kind: see above.
        arg: what is counted or summed (``None`` for ``COUNT(*)``).
        arg_type: ``int`` or ``float``.
        bounds: public clipping bounds of ``arg``.
        center: subtracted from each clipped value before summing.
        granularity: the fixed-point grid of the per-row value (a power of two, or 1).
        row_units: the most one row contributes, in grid units.
        sensitivity_units: the most one privacy unit changes the L1 norm over all groups, in grid
            units (``row_units`` times the unit's row cap).
        epsilon: this measurement's share of ε (for a histogram: of each selection made from it).
        edges: bin edges of a histogram.
        distinct_unit: counts distinct privacy units (``COUNT(DISTINCT unit)``, and selection).
        rho: when positive, the measurement is released with discrete Gaussian noise calibrated
            to this share of ρ (zCDP) instead of Laplace noise at ``epsilon``
            (``docs/mechanisms/gaussian_sql.md``).
    """

    name: str
    kind: MeasurementKind
    arg: Expr | None
    arg_type: str
    bounds: Bounds | None
    center: Fraction
    granularity: Fraction
    row_units: int
    sensitivity_units: int
    epsilon: Fraction
    edges: tuple[Fraction, ...] = ()
    distinct_unit: bool = False
    # Left out of the plan's fingerprint while zero, so Laplace plans keep theirs.
    rho: Fraction = field(default=Fraction(0), metadata={"omit_if_zero": True})

    @property
    def gaussian(self) -> bool:
        """Whether the measurement is released with discrete Gaussian noise."""
        return self.rho > 0

    @property
    def sensitivity(self) -> Fraction:
        """L1 sensitivity in the value's own units."""
        return self.sensitivity_units * self.granularity

    @property
    def clip(self) -> Clip | None:
        """The clipping of the argument (sums and histograms; ``None`` for counts)."""
        if self.bounds is None or self.arg is None or self.kind in ("count", "count_distinct"):
            return None
        return Clip(self.arg, self.bounds[0], self.bounds[1])

    def describe(self, names: Mapping[str, str] | None = None) -> str:
        """A short label for explain output; ``names`` maps field ids to analysts' names."""
        arg = render(self.arg, names) if self.arg is not None else "*"
        if self.kind == "count":
            return f"COUNT({arg})"
        if self.kind == "count_distinct":
            return f"COUNT(DISTINCT {arg})"
        if self.kind == "histogram":
            return f"bins of {arg} ({len(self.edges) - 1})"
        if self.kind == "degrees":
            return f"units by groups held (1..{len(self.edges) - 1})"
        shifted = f"{arg} - {_num(self.center)}" if self.center else arg
        if self.kind == "sum_sq":
            return f"SUM(({shifted})^2)"
        return f"SUM({shifted})"


@dataclass(frozen=True)
class Statistic:
    """How one aggregate is computed from measurements (post-processing, except selections).

    Attributes:
        kind: ``count``, ``sum``, ``avg``, ``var``, ``quantile``.
        inputs: measurement names: count → (count,); sum → (sum,); avg → (sum, count);
            var → (sum, sum_sq, count); quantile → (histogram,).
        bounds: the argument's bounds (avg, var, quantile clamp their answers to them).
        sample: variance with the n − 1 denominator.
        sqrt: standard deviation rather than variance.
        q: target quantile; for MIN/MAX a target rank is used instead (see ``rank``).
        rank: ``low``/``high`` for MIN/MAX: the selection aims at a small public rank from the
            bottom or top rather than at the extreme itself.
        epsilon: the selection's share of ε (quantiles only).
    """

    kind: Literal["count", "sum", "avg", "var", "quantile"]
    inputs: tuple[str, ...]
    bounds: Bounds | None = None
    sample: bool = False
    sqrt: bool = False
    q: Fraction | None = None
    rank: Literal["low", "high"] | None = None
    epsilon: Fraction = Fraction(0)


@dataclass(frozen=True)
class Selection:
    """Private partition selection: release a group only if its noisy count reaches a threshold.

    Truncated selection (:mod:`dalenius.mechanisms.partition_selection`): each group draws, with
    probability ``mix``, the threshold ``threshold`` and noise truncated to ``±(threshold − 1)``,
    otherwise ``threshold + 1`` and noise truncated to ``±threshold``.

    Weighted Gaussian selection (:mod:`dalenius.mechanisms.weighted_selection`), when the
    measurement is of kind ``degrees``: a group is released when its weight (in grid steps) plus
    discrete Gaussian noise is at least ``threshold``; ``mix`` is 1 and ``shared`` false.

    Attributes:
        measurement: the noisy count used (of distinct units, or of rows for a row unit).
        threshold: the smallest noisy count released, calibrated (with ``mix``) so that the
            whole release is (ε, δ)-DP.
        delta: the δ the selection is calibrated to.
        shared: whether the measurement is also an output (``COUNT(*)`` reused, at no extra cost).
        mix: the probability a group uses ``threshold`` rather than ``threshold + 1``.
    """

    measurement: str
    threshold: int
    delta: Fraction
    shared: bool
    mix: Fraction


@dataclass(frozen=True)
class MinPeople:
    """The catalog's minimum-frequency rule: a cell is released only if its noisy people count
    reaches ``threshold``.

    The decision reads only the noisy count of privacy units per cell (a measurement the plan
    charges, or the partition selection's own count), so it is post-processing and costs no
    privacy; ``failure`` is not a δ but the rule's own guarantee: a cell of fewer than ``people``
    units is released with probability at most ``failure`` (see ``docs/sql.md``).

    Attributes:
        measurement: the noisy count of privacy units per cell (of rows, for a row unit).
        people: the catalog's ``min_people``.
        threshold: the smallest noisy count released.
        failure: the certified bound on the probability that a cell of fewer than ``people``
            units is released.
    """

    measurement: str
    people: int
    threshold: int
    failure: Fraction


@final
@dataclass(frozen=True)
class MeasuredQuery:
    """A query's measurements before ε is split: the plan the measurement rules rewrite.

    :func:`dalenius.plan.compile.to_dp` builds it with one measurement for every input of every
    statistic (and one for a private selection), in the order the aggregates ask for them, each
    with its sensitivity and a zero share of ε; the rule
    :func:`dalenius.plan.rewrite.share_measurements.share_measurements` then merges identical
    ones; ``to_dp`` splits ε over those left and calibrates the selection.

    Attributes:
        query: the logical query, with its contribution bounding placed.
        measurements: the measurements, named ``m0``, ``m1``, … (each ``epsilon`` is 0).
        statistics: one per aggregate, over the measurements' names (a quantile's ``epsilon``
            is 0).
        selection: the measurement counting units per group for a private partition selection,
            or ``None`` when every group key has public keys.
        people: the measurement counting units per group for the catalog's ``min_people`` rule
            (the selection's own when there is one), or ``None`` without the rule.
    """

    query: Query
    measurements: tuple[Measurement, ...]
    statistics: tuple[Statistic, ...]
    selection: str | None = None
    people: str | None = None


@dataclass(frozen=True)
class Elastic:
    """How a count over a join bounded by elastic sensitivity is released
    (:mod:`dalenius.plan.elastic`).

    Attributes:
        left_rows, right_rows: each side's row cap per unit (``R``).
        bound_epsilon: the ε that releases the two noisy key frequencies (for the intervals).
        delta: each count's share of δ.
        beta: the smoothness each count's bound is computed with.
    """

    left_rows: int
    right_rows: int
    bound_epsilon: Fraction
    delta: Fraction
    beta: Fraction


@dataclass(frozen=True)
class DPQuery:
    """A query ready to run privately: measurements, statistics, selection, and the total loss."""

    query: Query
    measurements: tuple[Measurement, ...]
    statistics: tuple[Statistic, ...]
    selection: Selection | None
    loss: PureDP | ApproxDP | ZCDP
    min_people: MinPeople | None = field(default=None, metadata={"omit_none": True})
    elastic: Elastic | None = field(default=None, metadata={"omit_none": True})

    @property
    def group_by(self) -> tuple[GroupKey, ...]:
        """The group keys."""
        return self.query.group_by

    @property
    def public_groups(self) -> bool:
        """Whether every group key has a public key list (every group is answered)."""
        return all(k.keys is not None for k in self.query.group_by)

    @property
    def bounding(self) -> BoundContributions:
        """The contribution bounding the sensitivities rest on (:attr:`Query.bounding`)."""
        bounding = self.query.bounding
        if bounding is None:
            raise AssertionError("contribution bounding was not placed before compiling")
        return bounding

    def measurement(self, name: str) -> Measurement:
        """The measurement called ``name``."""
        for m in self.measurements:
            if m.name == name:
                return m
        raise KeyError(name)

    @functools.cached_property
    def fingerprint_value(self) -> str:
        """The plan's hash, computed once (plans are immutable)."""
        payload = json.dumps(_jsonable(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    def fingerprint(self) -> str:
        """A stable hash of the whole plan (names what spent the budget in the ledger)."""
        return self.fingerprint_value


def _jsonable(value: Any) -> Any:
    """Serialise a plan tree with each node's class name, so distinct trees never collide."""
    if isinstance(value, Col) and type(value) is not Col:
        # A typed reference hashes as the named column it reads, so plans keep the fingerprints
        # (and the ledger's answer cache its keys) they had before references were typed.
        value = Col(value.name)
    if is_dataclass(value) and not isinstance(value, type):
        out = {
            f.name: _jsonable(getattr(value, f.name))
            for f in fields(value)
            if not f.metadata.get("derived")
            and not (f.metadata.get("omit_if_zero") and getattr(value, f.name) == 0)
            # A field added later is left out while unset, so older plans keep their fingerprints.
            and not (f.metadata.get("omit_none") and getattr(value, f.name) is None)
        }
        out["@"] = type(value).__name__
        return out
    if isinstance(value, bool | None):
        return value
    if isinstance(value, int | float):
        return [type(value).__name__, repr(value)]
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # Plain ints and texts inline (a public table's key list holds 100,000), as below.
        return [
            ["int", repr(v)] if type(v) is int else v if type(v) is str else _jsonable(v)
            for v in value
        ]
    return value


def _num(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"
