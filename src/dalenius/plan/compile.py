"""Compile a logical :class:`~dalenius.plan.nodes.Query` into a :class:`~dalenius.plan.nodes.DPQuery`.

Steps, in order (each visible in explain output):

1. **Unit caps.** How many rows (R) and groups (G) one privacy unit can contribute: the catalog's
   caps for an id unit (enforced in the engine), 1 for a row, or the join multiplicity for a row
   joined to a public table (measured on the public table), 1 after per-unit aggregation.
2. **Measurements.** ``COUNT`` → a noisy count; ``SUM(x)`` → a noisy sum of ``x`` clipped to its
   bounds; ``AVG(x)`` → a noisy sum of ``clip(x) − midpoint`` and a noisy ``COUNT(x)``; variance
   and standard deviation add a noisy sum of squares; quantiles, MEDIAN, MIN and MAX → exact
   per-bin counts over the bounds, from which a private selection picks a bin. Identical
   measurements are shared (``COUNT(*), AVG(age)`` with a non-nullable ``age`` uses one count).
3. **Sensitivity.** Each measurement's L1 sensitivity over all groups: per-row bound times R
   (a distinct-unit count: min(R, G)).
4. **Selection.** Groups without public keys are released only above a noisy threshold
   calibrated to δ (truncated selection, spending δ exactly); the selection's noisy count is the query's ``COUNT(*)`` when that counts
   units, otherwise an extra count of distinct units. When a unit id may hold several groups
   and the selection has a count of its own, weighted Gaussian selection (each unit weighs
   ``1/√d`` in each of its ``d`` groups) replaces it where the public model of
   :func:`dalenius.plan.selection.prefer_weighted` says it releases more groups.
5. **ε split.** ε is split equally across the noisy measurements and selections (sequential
   composition); each covers all groups at once (parallel composition).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from fractions import Fraction

from dalenius.core.errors import InternalError, InvalidLossError, PrivacyRefusal
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.mechanisms.exponential import PermuteAndFlip
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.mechanisms.partition_selection import truncated_selection
from dalenius.plan.cost import split_equally
from dalenius.plan.expr import Col, Expr
from dalenius.plan.functions import Bounds
from dalenius.plan.nodes import (
    VECTOR_KINDS,
    AggCall,
    DPQuery,
    Measurement,
    MeasurementKind,
    Query,
    Selection,
    Statistic,
    bound_contributions,
    output_fields,
)
from dalenius.plan.noise import mechanism_for
from dalenius.plan.selection import prefer_weighted, weighted_calibration
from dalenius.plan.sensitivity import grid_problem, sum_grid, sum_sq_grid

MAX_INT_BINS = 4096
"""An int argument whose bounds span at most this many values gets one bin per value."""

FLOAT_BINS = 1024
"""Otherwise the bounds are cut into this many equal bins."""

RANK_CONFIDENCE = Fraction(95, 100)
"""MIN and MAX aim at the rank the selection can reliably reach at this confidence."""

_Key = tuple[MeasurementKind, Expr | None, Bounds | None, Fraction, bool, str]


def caps(query: Query) -> tuple[int, int]:
    """``(R, G)``: the most rows and the most groups one privacy unit contributes."""
    bounding = bound_contributions(query)
    return bounding.max_rows, bounding.max_groups


MAX_EPSILON = Fraction(1000)
"""Largest ε a query may spend: past it the guarantee means nothing, and exact tail bounds of the
noise (``exp(-ε·k)`` as exact rationals) would take time growing with ε."""

MIN_DELTA = Fraction(1, 10**60)
"""Smallest positive δ a query may use (thresholds grow with log(1/δ))."""


def check_loss(epsilon: Fraction, delta: Fraction | None) -> None:
    """Refuse an ε or δ outside what can be planned in bounded time, naming the parameter."""
    if epsilon > MAX_EPSILON:
        raise InvalidLossError(
            f"epsilon = {float(epsilon):g} is above the largest accepted, {MAX_EPSILON}.",
            why="at such an epsilon the noise is negligible and the privacy guarantee meaningless.",
            fix="use epsilon <= 1000; typical values are 0.1 to 10.",
        )
    if delta and delta < MIN_DELTA:
        raise InvalidLossError(
            f"delta = {float(delta):g} is below the smallest accepted, 1e-60.",
            fix="use delta = 0 (no private group selection) or a delta such as 1e-9.",
        )


def to_dp(
    query: Query,
    epsilon: Fraction,
    delta: Fraction | None = None,
    shares: Mapping[str, Fraction] | None = None,
) -> DPQuery:
    """Turn a validated logical query into measurements, statistics and an ε split.

    Args:
        query: the validated logical query.
        epsilon: the query's total ε.
        delta: the δ of a private group selection, if the query needs one.
        shares: an explicit split (accuracy first, :mod:`dalenius.plan.accuracy`): the ε of each
            noisy measurement and quantile selection by name (``m0``…, ``q0``…), adding up to
            ``epsilon`` exactly. Without it ε is split equally.

    Raises:
        PrivacyRefusal: when groups without public keys need a δ and none was given.
    """
    check_loss(epsilon, delta)
    rows, groups = caps(query)
    nullable = {f.id: f.nullable for f in output_fields(query.relation)}
    builder = _Builder(rows, groups, nullable)
    statistics = [builder.statistic(agg) for agg in query.aggregates]
    selection_key: _Key | None = None
    if any(k.keys is None for k in query.group_by):
        if not delta:
            names = ", ".join(k.name for k in query.group_by if k.keys is None)
            raise PrivacyRefusal(
                f"GROUP BY {names} has no public key list, so its groups must be selected privately, "
                "which needs a delta.",
                clause="GROUP BY",
                why=(
                    "a group that exists because of one person would otherwise reveal them; a noisy "
                    "threshold releases such a group only with probability delta."
                ),
                fix="pass delta (for example 1e-6), or group by columns with public keys.",
            )
        selection_key = builder.selection_key(query)
    measurements, split = builder.finish(statistics, epsilon, shares)
    statistics = [
        Statistic(**{**s.__dict__, "epsilon": split[f"q{i}"]}) if s.kind == "quantile" else s
        for i, s in enumerate(statistics)
    ]
    selection = None
    loss: PureDP | ApproxDP = PureDP(epsilon)
    if selection_key is not None:
        assert delta is not None
        name = builder.names[selection_key]
        at = next(i for i, x in enumerate(measurements) if x.name == name)
        selection, measurements[at] = _selection(measurements[at], delta, builder, query)
        loss = ApproxDP(epsilon, delta)
    _check_mechanisms(measurements, statistics)
    return DPQuery(
        query=query,
        measurements=tuple(measurements),
        statistics=tuple(statistics),
        selection=selection,
        loss=loss,
    )


def _check_mechanisms(measurements: list[Measurement], statistics: list[Statistic]) -> None:
    """Build every mechanism now, so one that cannot be calibrated is refused before any charge."""
    for m in measurements:
        if m.kind not in VECTOR_KINDS:
            mechanism_for(m)
    for s in statistics:
        if s.kind == "quantile":
            m = next(x for x in measurements if x.name == s.inputs[0])
            PermuteAndFlip(m.sensitivity_units, s.epsilon)


def _selection(
    m: Measurement, delta: Fraction, builder: _Builder, query: Query
) -> tuple[Selection, Measurement]:
    """The selection, and its measurement (a count, or units by degree for weighted selection)."""
    k = builder.l0
    if (
        bound_contributions(query).enforced
        and m.distinct_unit
        and m.name not in builder.output_names
        and k > 1
        and m.epsilon > 0
        and prefer_weighted(m.epsilon, delta, k)
    ):
        weighted = weighted_calibration(m.epsilon, delta, k).calibration
        degrees = replace(m, kind="degrees", edges=tuple(Fraction(d) for d in range(1, k + 2)))
        selection = Selection(
            measurement=m.name,
            threshold=weighted.threshold,
            delta=delta,
            shared=False,
            mix=Fraction(1),
        )
        return selection, degrees
    scale = IntegerLaplace(m.sensitivity_units, m.epsilon).scale
    per_group = 1 if m.distinct_unit or query.unit.kind == "aggregated" else builder.rows
    calibration = truncated_selection(
        scale,
        delta,
        groups=builder.l0,
        max_count=per_group,
        sensitivity=int(m.sensitivity_units),
    )
    shared = m.name in builder.output_names
    selection = Selection(
        measurement=m.name,
        threshold=calibration.threshold,
        delta=delta,
        shared=shared,
        mix=calibration.mix,
    )
    return selection, m


class _Builder:
    """Collects measurements, sharing identical ones, in first-use order."""

    def __init__(self, rows: int, groups: int, nullable: dict[str, bool]) -> None:
        self.rows = rows
        self.groups = groups
        self.l0 = min(rows, groups)
        self.nullable = nullable
        self.specs: list[_Key] = []
        self.names: dict[_Key, str] = {}
        self.output_names: set[str] = set()
        self.quantiles = 0

    def need(
        self,
        kind: MeasurementKind,
        arg: Expr | None,
        bounds: Bounds | None = None,
        center: Fraction = Fraction(0),
        distinct_unit: bool = False,
        *,
        arg_type: str = "int",
        output: bool = True,
    ) -> str:
        if kind == "count" and isinstance(arg, Col) and not self.nullable.get(arg.name, True):
            arg = None  # COUNT of a never-NULL column is COUNT(*)
        if kind in ("count", "count_distinct"):
            arg_type = "int"
        key: _Key = (kind, arg, bounds, center, distinct_unit, arg_type)
        if key not in self.names:
            self.specs.append(key)
            self.names[key] = f"m{len(self.specs) - 1}"
        name = self.names[key]
        if output:
            self.output_names.add(name)
        return name

    def statistic(self, agg: AggCall) -> Statistic:
        func = agg.func
        if func == "count":
            return Statistic("count", (self.need("count", agg.arg),))
        if func == "count_distinct":
            return Statistic(
                "count", (self.need("count_distinct", agg.arg, distinct_unit=agg.distinct_unit),)
            )
        assert agg.bounds is not None and agg.arg is not None
        low, high = agg.bounds
        mid = (low + high) / 2
        t = agg.arg_type
        if func == "sum":
            return Statistic(
                "sum", (self.need("sum", agg.arg, agg.bounds, arg_type=t),), bounds=agg.bounds
            )
        if func == "avg":
            plain: _Key = ("sum", agg.arg, agg.bounds, Fraction(0), False, t)
            center = Fraction(0) if plain in self.names else mid
            s = self.need("sum", agg.arg, agg.bounds, center, arg_type=t)
            return Statistic("avg", (s, self.need("count", agg.arg)), bounds=agg.bounds)
        if func in ("var_pop", "var_samp", "stddev_pop", "stddev_samp"):
            s = self.need("sum", agg.arg, agg.bounds, mid, arg_type=t)
            s2 = self.need("sum_sq", agg.arg, agg.bounds, mid, arg_type=t)
            c = self.need("count", agg.arg)
            return Statistic(
                "var",
                (s, s2, c),
                bounds=agg.bounds,
                sample=func.endswith("samp"),
                sqrt=func.startswith("stddev"),
            )
        h = self.need("histogram", agg.arg, agg.bounds, arg_type=t, output=False)
        self.quantiles += 1
        if func == "quantile":
            return Statistic("quantile", (h,), bounds=agg.bounds, q=agg.q)
        return Statistic(
            "quantile", (h,), bounds=agg.bounds, rank="low" if func == "min" else "high"
        )

    def selection_key(self, query: Query) -> _Key:
        """The measurement counting units per group, reusing COUNT(*) where it counts units."""
        if query.unit.kind in ("row", "aggregated"):
            name = self.need("count", None, output=False)
        else:
            name = self.need(
                "count_distinct", Col(query.unit.field or ""), distinct_unit=True, output=False
            )
        return next(k for k, v in self.names.items() if v == name)

    def finish(
        self,
        statistics: list[Statistic],
        epsilon: Fraction,
        given: Mapping[str, Fraction] | None = None,
    ) -> tuple[list[Measurement], dict[str, Fraction]]:
        noisy = [key for key in self.specs if key[0] != "histogram"]
        quantile_ids = [f"q{i}" for i, s in enumerate(statistics) if s.kind == "quantile"]
        parts = len(noisy) + len(quantile_ids)
        shares: dict[str, Fraction] = {}
        if given is not None:
            names = {self.names[key] for key in noisy} | set(quantile_ids)
            if set(given) != names or sum(given.values()) != epsilon:
                raise InternalError(
                    f"an explicit ε split must give every part ({sorted(names)}) a share adding "
                    f"up to ε, got {dict(given)}."
                )
            shares = dict(given)
        else:
            iterator: Iterator[Fraction] = iter(split_equally(epsilon, parts))
            for key in noisy:
                shares[self.names[key]] = next(iterator)
            for qid in quantile_ids:
                shares[qid] = next(iterator)
        measurements = [
            self.measurement(key, shares.get(self.names[key], Fraction(0))) for key in self.specs
        ]
        return measurements, shares

    def measurement(self, key: _Key, epsilon: Fraction) -> Measurement:
        kind, arg, bounds, center, distinct_unit, arg_type = key
        name = self.names[key]
        edges: tuple[Fraction, ...] = ()
        if kind in ("count", "count_distinct"):
            granularity, row_units = Fraction(1), 1
            sensitivity = self.l0 if distinct_unit else self.rows
        elif kind == "histogram":
            assert bounds is not None
            edges = _edges(bounds, integer=_int_bounds(bounds) and arg_type == "int")
            granularity, row_units = Fraction(1), 1
            sensitivity = self.rows
        else:
            assert bounds is not None
            if kind == "sum":
                granularity, row_units = sum_grid(bounds, center, arg_type)
            else:
                granularity, row_units = sum_sq_grid(bounds, center, arg_type)
            sensitivity = row_units * self.rows
        if kind in ("sum", "sum_sq") and row_units > 2**52:
            raise PrivacyRefusal(
                "the bounds are too wide for an exact sum.",
                clause="SELECT",
                fix="ask the custodian for tighter bounds.",
            )
        problem = grid_problem(kind, bounds, granularity) if bounds is not None else None
        if problem is not None:
            raise PrivacyRefusal(
                f"the bounds of the aggregate's argument cannot be computed exactly: {problem}.",
                clause="SELECT",
                why="the engine would overflow or round away the value, and a failure or a "
                "wrong result could depend on one row.",
                fix="aggregate a column (or an expression) whose declared bounds lie within "
                "±1e300, or ask the custodian for other bounds.",
            )
        return Measurement(
            name=name,
            kind=kind,
            arg=arg,
            arg_type=arg_type,
            bounds=bounds,
            center=center,
            granularity=granularity,
            row_units=row_units,
            sensitivity_units=sensitivity,
            epsilon=epsilon,
            edges=edges,
            distinct_unit=distinct_unit,
        )


def _int_bounds(bounds: Bounds) -> bool:
    return all(b.denominator == 1 for b in bounds)


def _edges(bounds: Bounds, *, integer: bool) -> tuple[Fraction, ...]:
    low, high = bounds
    if integer and high - low + 1 <= MAX_INT_BINS:
        return tuple(Fraction(v) for v in range(int(low), int(high) + 2))
    if high == low:
        return (low, low + 1)
    width = (high - low) / FLOAT_BINS
    return tuple(low + i * width for i in range(FLOAT_BINS + 1))
