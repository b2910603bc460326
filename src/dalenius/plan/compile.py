"""Compile a logical :class:`~dalenius.plan.nodes.Query` into a :class:`~dalenius.plan.nodes.DPQuery`.

Steps, in order (each visible in explain output):

1. **Unit caps.** How many rows (R) and groups (G) one privacy unit can contribute: the catalog's
   caps for an id unit (enforced in the engine), 1 for a row, or the join multiplicity for a row
   joined to a public table (measured on the public table), 1 after per-unit aggregation. The rule
   :mod:`dalenius.plan.rewrite.bound_contributions` places them in the plan (``Query.bounding``).
2. **Measurements.** ``COUNT`` → a noisy count; ``SUM(x)`` → a noisy sum of ``x`` clipped to its
   bounds; ``AVG(x)`` → a noisy sum of ``clip(x) − midpoint`` and a noisy ``COUNT(x)``; variance
   and standard deviation add a noisy sum of squares; quantiles, MEDIAN, MIN and MAX → exact
   per-bin counts over the bounds, from which a private selection picks a bin. The rule
   :mod:`dalenius.plan.rewrite.share_measurements` then merges identical measurements
   (``COUNT(*), AVG(age)`` with a non-nullable ``age`` uses one count).
3. **Sensitivity.** Each measurement's L1 sensitivity over all groups: per-row bound times R
   (a distinct-unit count: min(R, G)).
4. **Selection.** Groups without public keys are released only above a noisy threshold
   calibrated to δ (truncated selection, spending δ exactly); the selection's noisy count is the query's ``COUNT(*)`` when that counts
   units, otherwise an extra count of distinct units. When a unit id may hold several groups
   and the selection has a count of its own, weighted Gaussian selection (each unit weighs
   ``1/√d`` in each of its ``d`` groups) replaces it where the public model of
   :func:`dalenius.plan.selection.prefer_weighted` says it releases more groups.
5. **Minimum frequency.** With the catalog's ``min_people = k``, each cell's noisy count of
   units (the selection's, or a count added for the rule and charged like any measurement) must
   reach a threshold, chosen by :mod:`dalenius.plan.min_people`, for the cell to be released.
6. **ε split.** ε is split equally across the noisy measurements and selections (sequential
   composition); each covers all groups at once (parallel composition).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction

from dalenius.core.errors import InternalError, InvalidLossError, PrivacyRefusal
from dalenius.core.loss import MAX_QUERY_EPSILON, ZCDP, ApproxDP, PureDP, epsilon_too_large
from dalenius.mechanisms._dlaplace import MAX_SCALE
from dalenius.mechanisms.exponential import PermuteAndFlip
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.mechanisms.partition_selection import truncated_selection
from dalenius.plan.cost import split_equally
from dalenius.plan.elastic import elastic_joins, elastic_plan
from dalenius.plan.expr import Col, Expr
from dalenius.plan.functions import Bounds
from dalenius.plan.min_people import min_people_rule
from dalenius.plan.nodes import (
    VECTOR_KINDS,
    AggCall,
    BoundContributions,
    DPQuery,
    MeasuredQuery,
    Measurement,
    MeasurementKind,
    Query,
    Selection,
    Statistic,
)
from dalenius.plan.noise import error_units, mechanism_for
from dalenius.plan.rewrite import Context, rewrite
from dalenius.plan.selection import prefer_weighted, weighted_calibration
from dalenius.plan.sensitivity import grid_problem, sum_grid, sum_sq_grid

MAX_INT_BINS = 4096
"""An int argument whose bounds span at most this many values gets one bin per value."""

FLOAT_BINS = 1024
"""Otherwise the bounds are cut into this many equal bins."""

RANK_CONFIDENCE = Fraction(95, 100)
"""MIN and MAX aim at the rank the selection can reliably reach at this confidence."""


def caps(query: Query) -> tuple[int, int]:
    """``(R, G)``: the most rows and the most groups one privacy unit contributes."""
    bounding = _bounded(query).bounding
    assert bounding is not None
    return bounding.max_rows, bounding.max_groups


def _bounded(query: Query) -> Query:
    """``query`` after the rules, its contribution bounding placed.

    A query built or changed by hand gets it here; one from the binder or the session already has
    it and comes back unchanged.
    """
    query = rewrite(query, Context())
    if query.bounding is None:
        raise AssertionError("join multiplicity was not measured before compiling")
    return query


MAX_EPSILON = MAX_QUERY_EPSILON
"""Largest ε a query may spend (:data:`dalenius.core.loss.MAX_QUERY_EPSILON`)."""

MIN_DELTA = Fraction(1, 10**60)
"""Smallest positive δ a query may use (thresholds grow with log(1/δ))."""


def check_loss(epsilon: Fraction, delta: Fraction | None) -> None:
    """Refuse an ε or δ outside what can be planned in bounded time, naming the parameter."""
    if epsilon > MAX_EPSILON:
        raise epsilon_too_large(f"{float(epsilon):g}")
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
    min_people: int | None = None,
    *,
    zcdp: bool = False,
) -> DPQuery:
    """Turn a validated logical query into measurements, statistics and an ε split.

    The query's measurements are built one per need and rewritten by the plan rules
    (:mod:`dalenius.plan.rewrite`: identical ones are shared) before ε is split over them.

    Args:
        query: the validated logical query.
        epsilon: the query's total ε.
        delta: the δ of a private group selection, if the query needs one.
        shares: an explicit split (accuracy first, :mod:`dalenius.plan.accuracy`): the ε of each
            noisy measurement and quantile selection by name (``m0``…, ``q0``…), adding up to
            ``epsilon`` exactly. Without it ε is split equally.
        min_people: the catalog's minimum-frequency rule, if any: every cell (group, or the
            whole table) is released only when its noisy count of units reaches a threshold.
        zcdp: the dataset is accounted in ρ-zCDP, where ε costs ρ = ε²/2: the measurements may
            then be released with discrete Gaussian noise at that ρ instead, when its expected
            errors are smaller (:func:`gaussian_variant`).

    Raises:
        PrivacyRefusal: when groups without public keys need a δ and none was given.
    """
    check_loss(epsilon, delta)
    query = _bounded(query)
    private = [k.name for k in query.group_by if k.keys is None]
    crowded = [k for k in query.group_by if k.keys is None and k.from_table is not None]
    if private and not delta:
        message = (
            f"GROUP BY {', '.join(private)}: the public table {crowded[0].from_table} holds "
            f"more values of {crowded[0].name} than can each be answered, so the groups must be "
            "selected privately, which needs a delta."
            if crowded
            else f"GROUP BY {', '.join(private)} has no public key list, so its groups must be "
            "selected privately, which needs a delta."
        )
        raise PrivacyRefusal(
            message,
            clause="GROUP BY",
            why=(
                "a group that exists because of one person would otherwise reveal them; a noisy "
                "threshold releases such a group only with probability delta."
            ),
            fix="pass delta (for example 1e-6), or group by columns with public keys.",
        )
    needs = _Needs(query).measured(select=bool(private), people=min_people is not None)
    uncapped = _groups_uncapped(query, needs)
    if uncapped is not query:
        query = uncapped
        needs = _Needs(query).measured(select=False, people=False)
    measured = rewrite(needs, Context())
    plan = _priced(measured, epsilon, delta, shares, min_people)
    if elastic_joins(query.relation):
        if zcdp or shares is not None:
            raise PrivacyRefusal(
                "a join without join_rows_per_key is planned at a given epsilon and delta only.",
                clause="JOIN",
                fix="give epsilon and delta (not a target error, and not on a zCDP dataset), or "
                "ask the custodian to declare join_rows_per_key on both join keys.",
            )
        return elastic_plan(plan, epsilon, delta)
    if zcdp and shares is None:
        gaussian = gaussian_variant(plan, epsilon)
        if gaussian is not None and _smaller_errors(gaussian, plan):
            return gaussian
    return plan


def _groups_uncapped(query: Query, measured: MeasuredQuery) -> Query:
    """``query`` with its group cap raised to its row cap where no sensitivity depends on it.

    The group cap ``G`` enters a sensitivity in two places only: a count of distinct units (one
    unit adds one to at most ``min(R, G)`` groups) and a private partition selection (it must
    cover every group one unit can create). Every other measurement (a count of rows, a clipped
    sum, a histogram) changes by at most ``R`` rows' worth in L1, whichever groups those rows
    fall in (``dalenius.engine.noise.required_sensitivity``). Without those two, a cap ``G < R``
    buys no privacy: it only drops rows (a bias), and the engine must rank every unit with rows
    in more than one group, which on a table whose units span several groups is every row
    (TPC-H's Q1: each customer has lines in about four of its four groups). So the cap becomes
    ``G = R``, which any ``R`` rows meet: the engine then checks each unit's row count only
    (``dalenius.sql.emit.bounding``). A cap the query asked for itself
    (``max_groups_contributed``) stays as asked.

    Example:
        >>> from dalenius.plan.nodes import Scan, UnitSpec
        >>> unit = UnitSpec("id", "t__pid", 5, 1, "a person")
        >>> q = _bounded(Query(Scan("t", "t", ()), unit, (), (), ()))
        >>> _groups_uncapped(q, MeasuredQuery(q, (), ())).bounding.max_groups
        5
        >>> asked = _bounded(Query(Scan("t", "t", ()), replace(unit, groups_asked=True), (), (), ()))
        >>> _groups_uncapped(asked, MeasuredQuery(asked, (), ())).bounding.max_groups
        1
    """
    bounding = query.bounding
    if (
        bounding is None
        or not bounding.enforced
        or bounding.max_groups >= bounding.max_rows
        or query.unit.groups_asked
        or measured.selection is not None
        or measured.people is not None
        or any(m.distinct_unit for m in measured.measurements)
    ):
        return query
    return replace(query, bounding=replace(bounding, max_groups=bounding.max_rows))


GAUSSIAN_COMPARED_AT = 0.95
"""The confidence at which the Laplace and Gaussian plans' error bars are compared."""


def gaussian_variant(plan: DPQuery, epsilon: Fraction) -> DPQuery | None:
    """The plan with its noisy measurements released by the discrete Gaussian where it can be,
    at the ρ its Laplace form is charged on a zCDP dataset (``ρ = ε²/2``); ``None`` when the plan
    has parts the Gaussian does not replace (a private group selection, a quantile's selection,
    a histogram) or no measurement can take it.

    A measurement whose Gaussian would round to a coarse grid (σ above the exact sampler's range
    releases one answer per call, and a GROUP BY releases many) keeps its Laplace noise and its
    ε share; the others split what is left, ``ρ = (ε² − ε_L²)/2`` for the Laplace part's total
    ``ε_L``, equally. The loss is ``ZCDP(ε²/2)``: the Gaussian shares plus the Laplace part as
    ``ε_L²/2``; each Gaussian is calibrated to the measurement's sensitivity over all groups,
    which bounds its L2 sensitivity (``docs/mechanisms/gaussian_sql.md``).
    """
    if plan.selection is not None or any(s.kind == "quantile" for s in plan.statistics):
        return None
    if plan.min_people is not None:
        return None  # the rule's failure probability is derived for Laplace noise
    if any(m.kind in VECTOR_KINDS for m in plan.measurements):
        return None
    noisy = [m.name for m in plan.measurements if m.sensitivity_units > 0]
    laplace: set[str] = set()
    while len(laplace) < len(noisy):
        laplace_epsilon = sum(
            (m.epsilon for m in plan.measurements if m.name in laplace), Fraction(0)
        )
        share = (epsilon * epsilon - laplace_epsilon * laplace_epsilon) / 2
        share /= len(noisy) - len(laplace)
        measurements = tuple(
            replace(m, epsilon=Fraction(0), rho=share)
            if m.name in noisy and m.name not in laplace
            else m
            for m in plan.measurements
        )
        coarse = {
            m.name
            for m in measurements
            if m.gaussian
            and isinstance(mechanism := mechanism_for(m), IntegerGaussian)
            and mechanism.granularity != 1
        }
        if not coarse:
            return replace(plan, measurements=measurements, loss=ZCDP(epsilon * epsilon / 2))
        laplace |= coarse
    return None


def _smaller_errors(gaussian: DPQuery, laplace: DPQuery) -> bool:
    """Whether the Gaussian plan's error bars are smaller, summed as squares relative to each
    measurement's sensitivity (so no measurement's units dominate).
    """

    def total(plan: DPQuery) -> Fraction:
        return sum(
            (
                Fraction(error_units(m, GAUSSIAN_COMPARED_AT), m.sensitivity_units) ** 2
                for m in plan.measurements
                if m.sensitivity_units > 0
            ),
            Fraction(0),
        )

    return total(gaussian) < total(laplace)


def _priced(
    measured: MeasuredQuery,
    epsilon: Fraction,
    delta: Fraction | None,
    given: Mapping[str, Fraction] | None,
    min_people: int | None = None,
) -> DPQuery:
    """The DP plan: ε split over ``measured``'s measurements, the selection calibrated."""
    split = _split(measured, epsilon, given)
    measurements = [
        _checked(_coarsened(replace(m, epsilon=split.get(m.name, Fraction(0)))))
        for m in measured.measurements
    ]
    statistics = [
        replace(s, epsilon=split[f"q{i}"]) if s.kind == "quantile" else s
        for i, s in enumerate(measured.statistics)
    ]
    selection = None
    loss: PureDP | ApproxDP = PureDP(epsilon)
    if measured.selection is not None:
        assert delta is not None
        outputs = {name for s in statistics if s.kind != "quantile" for name in s.inputs}
        at = next(i for i, x in enumerate(measurements) if x.name == measured.selection)
        selection, measurements[at] = _selection(
            measurements[at], delta, outputs, measured.query, allow_weighted=min_people is None
        )
        loss = ApproxDP(epsilon, delta)
    _check_mechanisms(measurements, statistics)
    rule = None
    if min_people is not None:
        assert measured.people is not None
        people = next(x for x in measurements if x.name == measured.people)
        rule = min_people_rule(people, min_people, _per_group(people, measured.query), selection)
    return DPQuery(
        query=measured.query,
        measurements=tuple(measurements),
        statistics=tuple(statistics),
        selection=selection,
        loss=loss,
        min_people=rule,
    )


def _per_group(m: Measurement, query: Query) -> int:
    """The most one unit adds to one group's count ``m`` (1 for distinct units, else its rows)."""
    bounding = query.bounding
    assert bounding is not None
    return 1 if m.distinct_unit or query.unit.kind == "aggregated" else bounding.max_rows


def _split(
    measured: MeasuredQuery, epsilon: Fraction, given: Mapping[str, Fraction] | None
) -> dict[str, Fraction]:
    """Each noisy measurement's and quantile selection's share of ε (``given``, else equal)."""
    noisy = [m.name for m in measured.measurements if m.kind != "histogram"]
    quantile_ids = [f"q{i}" for i, s in enumerate(measured.statistics) if s.kind == "quantile"]
    if given is not None:
        names = set(noisy) | set(quantile_ids)
        if set(given) != names or sum(given.values()) != epsilon:
            raise InternalError(
                f"an explicit ε split must give every part ({sorted(names)}) a share adding "
                f"up to ε, got {dict(given)}."
            )
        return dict(given)
    parts = [*noisy, *quantile_ids]
    return dict(zip(parts, split_equally(epsilon, len(parts)), strict=True))


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
    m: Measurement, delta: Fraction, outputs: set[str], query: Query, *, allow_weighted: bool = True
) -> tuple[Selection, Measurement]:
    """The selection, and its measurement (a count, or units by degree for weighted selection).

    ``outputs`` names the measurements the query's statistics also release. Without
    ``allow_weighted`` the selection is truncated: the ``min_people`` rule reads its noisy count, which
    weighted selection does not have.
    """
    bounding = query.bounding
    assert bounding is not None
    k = min(bounding.max_rows, bounding.max_groups)
    if (
        allow_weighted
        and bounding.enforced
        and m.distinct_unit
        and m.name not in outputs
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
    per_group = _per_group(m, query)
    calibration = truncated_selection(
        scale,
        delta,
        groups=k,
        max_count=per_group,
        sensitivity=int(m.sensitivity_units),
    )
    selection = Selection(
        measurement=m.name,
        threshold=calibration.threshold,
        delta=delta,
        shared=m.name in outputs,
        mix=calibration.mix,
    )
    return selection, m


class _Needs:
    """Builds one measurement for every input of every statistic, in the order they are asked for.

    Named ``m0``, ``m1``, …; the rule ``share_measurements`` merges identical ones.
    """

    def __init__(self, query: Query) -> None:
        bounding = query.bounding
        assert bounding is not None
        self.query = query
        self.bounding: BoundContributions = bounding
        self.measurements: list[Measurement] = []

    def measured(self, *, select: bool, people: bool = False) -> MeasuredQuery:
        """The query's measurements and statistics; with ``select``, a count for the selection;
        with ``people``, a count of units for the ``min_people`` rule (the selection's, if any).
        """
        statistics = tuple(self.statistic(agg) for agg in self.query.aggregates)
        units = self.selection() if select or people else None
        return MeasuredQuery(
            self.query,
            tuple(self.measurements),
            statistics,
            units if select else None,
            units if people else None,
        )

    def need(
        self,
        kind: MeasurementKind,
        arg: Expr | None,
        bounds: Bounds | None = None,
        center: Fraction = Fraction(0),
        distinct_unit: bool = False,
        *,
        arg_type: str = "int",
    ) -> str:
        if kind in ("count", "count_distinct"):
            arg_type = "int"
        name = f"m{len(self.measurements)}"
        self.measurements.append(
            _measurement(name, kind, arg, bounds, center, distinct_unit, arg_type, self.bounding)
        )
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
            s = self.need("sum", agg.arg, agg.bounds, mid, arg_type=t)
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
        h = self.need("histogram", agg.arg, agg.bounds, arg_type=t)
        if func == "quantile":
            return Statistic("quantile", (h,), bounds=agg.bounds, q=agg.q)
        return Statistic(
            "quantile", (h,), bounds=agg.bounds, rank="low" if func == "min" else "high"
        )

    def selection(self) -> str:
        """The measurement counting units per group (shared with a COUNT(*) counting units)."""
        unit = self.query.unit
        if unit.kind in ("row", "aggregated"):
            return self.need("count", None)
        return self.need("count_distinct", Col(unit.field or ""), distinct_unit=True)


def _measurement(
    name: str,
    kind: MeasurementKind,
    arg: Expr | None,
    bounds: Bounds | None,
    center: Fraction,
    distinct_unit: bool,
    arg_type: str,
    bounding: BoundContributions,
) -> Measurement:
    """One measurement with its grid and sensitivity, and no share of ε yet."""
    rows = bounding.max_rows
    edges: tuple[Fraction, ...] = ()
    if kind in ("count", "count_distinct"):
        granularity, row_units = Fraction(1), 1
        sensitivity = min(rows, bounding.max_groups) if distinct_unit else rows
    elif kind == "histogram":
        assert bounds is not None
        edges = _edges(bounds, integer=_int_bounds(bounds) and arg_type == "int")
        granularity, row_units = Fraction(1), 1
        sensitivity = rows
    else:
        assert bounds is not None
        if kind == "sum":
            granularity, row_units = sum_grid(bounds, center, arg_type)
        else:
            granularity, row_units = sum_sq_grid(bounds, center, arg_type)
        sensitivity = row_units * rows
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
        epsilon=Fraction(0),
        edges=edges,
        distinct_unit=distinct_unit,
    )


def _coarsened(m: Measurement) -> Measurement:
    """A sum whose noise would exceed the samplers' largest scale (2^40 grid steps), on a grid
    coarse enough that it does not.

    The grid is chosen from the bounds alone (each row within 2^30 steps); with a large row cap
    and a small ε share the noise in those steps can pass 2^40 (a money column summed over 280
    rows per person at ε = 0.01). Coarsening the grid by 2^k divides the per-row bound, and so
    the scale, by about 2^k; the rounding it adds per row (half a step) stays below 2^-30 of the
    noise's scale. The per-row bound is recomputed from the bounds, so the sensitivity charged is
    still the most one row can move the sum.
    """
    if m.kind not in ("sum", "sum_sq") or m.epsilon <= 0 or m.bounds is None:
        return m
    if Fraction(m.sensitivity_units) / m.epsilon <= MAX_SCALE:
        return m
    low, high = m.bounds
    reach = max(abs(low - m.center), abs(high - m.center))
    top = reach if m.kind == "sum" else reach * reach
    rows = m.sensitivity_units // m.row_units
    granularity = m.granularity
    row_units = m.row_units
    # At most log2(row_units) doublings: a row of one step cannot be coarsened further, and a
    # scale still too large then is refused when the mechanism is built, as before.
    while row_units > 1 and Fraction(row_units * rows) / m.epsilon > MAX_SCALE:
        granularity *= 2
        row_units = math.ceil(top / granularity)
    return replace(
        m, granularity=granularity, row_units=row_units, sensitivity_units=row_units * rows
    )


def _checked(m: Measurement) -> Measurement:
    """``m``, unless its bounds cannot be summed exactly (refused before any data is read)."""
    if m.kind in ("sum", "sum_sq") and m.row_units > 2**52:
        raise PrivacyRefusal(
            "the bounds are too wide for an exact sum.",
            clause="SELECT",
            fix="ask the custodian for tighter bounds.",
        )
    problem = grid_problem(m.kind, m.bounds, m.granularity) if m.bounds is not None else None
    if problem is not None:
        raise PrivacyRefusal(
            f"the bounds of the aggregate's argument cannot be computed exactly: {problem}.",
            clause="SELECT",
            why="the engine would overflow or round away the value, and a failure or a "
            "wrong result could depend on one row.",
            fix="aggregate a column (or an expression) whose declared bounds lie within "
            "±1e300, or ask the custodian for other bounds.",
        )
    return m


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
