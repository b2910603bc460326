"""Explain a DP plan before it runs: what is measured, with which sensitivity, noise and ε.

Explain reads no data and spends nothing; ``query`` later charges exactly the total shown here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dalenius.core.loss import ZCDP, ApproxDP, PureDP
from dalenius.mechanisms.calibration import accuracy_lower_bound
from dalenius.mechanisms.exponential import PermuteAndFlip
from dalenius.mechanisms.gaussian import IntegerGaussian, gaussian_error_bar
from dalenius.plan.accuracy import Allocation
from dalenius.plan.expr import AggRef, Expr, KeyRef, render
from dalenius.plan.hints import combined_notes, query_hints
from dalenius.plan.lower_bound import BASIS, measurement_floor
from dalenius.plan.nodes import (
    BoundContributions,
    Clip,
    DPQuery,
    Elastic,
    Filter,
    Join,
    Measurement,
    MinPeople,
    Project,
    Query,
    Relation,
    SemiJoin,
    Statistic,
    UnitAggregate,
    agg_ref,
    display_names,
    key_ref,
    scans,
)
from dalenius.plan.noise import error_units, mechanism_for
from dalenius.plan.selection import weighted_calibration


@dataclass(frozen=True)
class MeasurementCost:
    """One noisy measurement as explain shows it."""

    name: str
    label: str
    sensitivity: Fraction
    epsilon: Fraction
    scale: Fraction
    error: float
    mechanism: str
    rho: Fraction = Fraction(0)
    lower_bound: Fraction | None = None
    """γ: no (ε, δ)-DP mechanism beats it (see :mod:`dalenius.plan.lower_bound`); ``None`` when
    the theorem does not apply to the line (a selection's rank error)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (a Gaussian measurement also gives its share of ρ; its
        ``noise_scale`` is the Gaussian's σ).
        """
        out = {
            "name": self.name,
            "aggregate": self.label,
            "sensitivity": float(self.sensitivity),
            "epsilon": float(self.epsilon),
            "epsilon_exact": f"{self.epsilon.numerator}/{self.epsilon.denominator}",
            "noise_scale": float(self.scale),
            "error": self.error,
            "lower_bound": None if self.lower_bound is None else float(self.lower_bound),
            "mechanism": self.mechanism,
        }
        if self.rho:
            out["rho"] = float(self.rho)
            out["rho_exact"] = f"{self.rho.numerator}/{self.rho.denominator}"
        return out


@dataclass(frozen=True)
class Explanation:
    """Everything an analyst should know before spending budget on a query."""

    table: str
    unit: str
    filters: tuple[str, ...]
    groups: tuple[tuple[str, int | None], ...]
    measurements: tuple[MeasurementCost, ...]
    outputs: tuple[tuple[str, str], ...]
    loss: PureDP | ApproxDP | ZCDP
    confidence: float
    exact_sql: str
    notes: tuple[str, ...] = ()
    accuracy: Allocation | None = None
    bounding: str = ""
    clips: tuple[str, ...] = ()
    min_people: MinPeople | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        extra = {} if self.accuracy is None else {"accuracy": self.accuracy.to_dict()}
        if self.min_people is not None:
            rule = self.min_people
            extra["min_people"] = {
                "people": rule.people,
                "measurement": rule.measurement,
                "threshold": rule.threshold,
                "failure": float(rule.failure),
                "failure_exact": f"{rule.failure.numerator}/{rule.failure.denominator}",
            }
        return extra | {
            "table": self.table,
            "privacy_unit": self.unit,
            "filters": list(self.filters),
            "bounding": self.bounding,
            "clips": list(self.clips),
            "groups": [{"column": c, "keys": n, "public": n is not None} for c, n in self.groups],
            "measurements": [m.to_dict() for m in self.measurements],
            "outputs": [{"name": n, "computed_as": f} for n, f in self.outputs],
            "loss": loss_json(self.loss),
            "notes": list(self.notes),
            "confidence": self.confidence,
            "exact_sql": self.exact_sql,
            "lower_bound_basis": BASIS,
        }

    def __str__(self) -> str:
        """The explanation as the CLI prints it.

        Long because it writes each section in reading order (filters, bounding, groups, the
        measurements' table, outputs, accuracy, total), each a few lines.
        """
        pct = f"{self.confidence:.0%}"
        lines = [f"Query on {self.table} — privacy unit: {self.unit}"]
        for f in self.filters:
            lines.append(f"  filter:   {f}")
        if self.bounding:
            lines.append(f"  bound:    {self.bounding}")
        for c in self.clips:
            lines.append(f"  clip:     {c}")
        for column, n in self.groups:
            if n is None:
                lines.append(
                    f"  group by: {column} (no public keys: groups are selected privately)"
                )
            elif self.min_people is not None:
                lines.append(
                    f"  group by: {column} ({n} public keys; a key is answered when it passes the "
                    "min_people rule below; groups are disjoint, so each measurement's ε covers "
                    "all of them)"
                )
            else:
                lines.append(
                    f"  group by: {column} ({n} public keys; every key is answered, empty ones too; "
                    "groups are disjoint, so each measurement's ε covers all of them)"
                )
        lines.append("")
        gaussian = any(m.rho for m in self.measurements)
        if gaussian:
            lines.append(
                "Noisy measurements (the dataset is accounted in zCDP, where this ε costs "
                "ρ = ε²/2; exact discrete Gaussian noise where its errors are smaller than "
                "discrete Laplace noise at the same cost, and the exact sampler's range allows):"
            )
        else:
            lines.append(
                "Noisy measurements and selections ("
                + (
                    "ε split to meet the targets"
                    if self.accuracy is not None
                    else "ε split equally"
                )
                + "; counts and sums get exact discrete Laplace noise):"
            )
        width = max([28, *(len(m.label) + 2 for m in self.measurements)])
        names = max([4, *(len(m.name) + 1 for m in self.measurements)])
        share, scale = ("share", "scale/σ") if gaussian else ("ε", "scale")
        header = (
            f"  {'':{names}}{'aggregate':<{width}}{'sensitivity':>12}{share:>12}{scale:>12}"
            f"{pct + ' error':>14}{'floor γ':>12}"
        )
        lines.append(header)
        for m in self.measurements:
            part = _g(m.epsilon)
            if gaussian:
                part = f"ρ {_g(m.rho)}" if m.rho else f"ε {_g(m.epsilon)}"
            floor = "—" if m.lower_bound is None else "±" + _g(m.lower_bound)
            lines.append(
                f"  {m.name:<{names}}{m.label:<{width}}{_g(m.sensitivity):>12}{part:>12}"
                f"{_g(m.scale):>12}{'±' + _g(m.error):>14}{floor:>12}"
            )
        lines.append("")
        lines.append("Outputs (post-processing, free):")
        for name, formula in self.outputs:
            lines.append(f"  {name:<28} = {formula}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        lines.extend(_accuracy_lines(self.accuracy, pct))
        lines.append("")
        lines.append(f"Total cost: {self.loss} (sequential composition of the measurements).")
        lines.append(
            "Errors cover the noise only, not bias from clipping values to the public bounds."
        )
        lines.append(BASIS)
        return "\n".join(lines)


def _accuracy_lines(allocation: Allocation | None, pct: str) -> list[str]:
    """How ε was chosen from the analyst's error targets (accuracy first)."""
    if allocation is None:
        return []
    lines = ["", f"ε chosen for accuracy (the smallest meeting every target at {pct}):"]
    for t in allocation.targets:
        lines.append(
            f"  {t.output:<28} target {t.asked:<18} → ε {_g(t.epsilon):>10}, error ±{_g(t.error)}"
            + (
                f" (ε − 1% gives ±{_g(t.error_below)})"
                if t.error_below is not None
                else " (at the noise floor: less ε is not drawn)"
            )
        )
    for note in allocation.notes:
        lines.append(f"  note: {note}")
    return lines


def loss_json(loss: PureDP | ApproxDP | ZCDP) -> dict[str, Any]:
    """A loss as JSON: floats for people, exact fractions for machines."""
    out: dict[str, Any] = {}
    for name in ("epsilon", "delta", "rho"):
        value = getattr(loss, name, None)
        if value is not None:
            out[name] = float(value)
            out[f"{name}_exact"] = f"{value.numerator}/{value.denominator}"
    return out


def _weighted_cost(
    plan: DPQuery, m: Measurement, names: Mapping[str, str], confidence: float
) -> MeasurementCost:
    """The weighted selection's line: its ε, the noise σ and error bar in units of weight."""
    assert plan.selection is not None
    cal = weighted_calibration(m.epsilon, plan.selection.delta, len(m.edges) - 1).calibration
    sigma = Fraction(math.isqrt(math.ceil(cal.sigma2)) + 1, cal.grid)
    error = Fraction(gaussian_error_bar(cal.sigma2, Fraction(repr(confidence))), cal.grid)
    return MeasurementCost(
        name=m.name,
        label=m.describe(names) + " [selection]",
        sensitivity=Fraction(1),
        epsilon=m.epsilon,
        scale=sigma,
        error=float(error),
        mechanism="weighted discrete Gaussian (L2 sensitivity 1)",
        # One unit moves one group's weight by at most 1 (a unit holding a single group).
        lower_bound=accuracy_lower_bound(1, m.epsilon, plan.selection.delta),
    )


def _weighted_note(plan: DPQuery) -> str:
    sel = plan.selection
    assert sel is not None
    m = plan.measurement(sel.measurement)
    cal = weighted_calibration(m.epsilon, sel.delta, len(m.edges) - 1).calibration
    return (
        f"groups are selected privately by weight: a privacy unit holding d groups (at most "
        f"{cal.max_groups}) weighs 1/sqrt(d) in each; a group is released when its weight plus "
        f"discrete Gaussian noise (sigma {math.sqrt(float(cal.sigma2)) / cal.grid:.3g}) is at "
        f"least {cal.threshold / cal.grid:.4g}; a group held by one privacy unit appears with "
        f"probability <= {float(sel.delta):g}"
    )


def _noise_cost(
    plan: DPQuery, m: Measurement, names: dict[str, str], confidence: float
) -> MeasurementCost:
    """One noisy measurement's line: its mechanism, share, noise scale, error bar and γ."""
    mech = mechanism_for(m)
    if isinstance(mech, IntegerGaussian):
        scale = mech.sigma * mech.granularity * m.granularity
    else:
        scale = mech.scale * m.granularity if mech is not None else Fraction(0)
    error = error_units(m, confidence) * m.granularity
    label = m.describe(names)
    selects = plan.selection is not None and m.name == plan.selection.measurement
    if selects and plan.selection is not None and not plan.selection.shared:
        label += " [selection]"
    elif (
        not selects
        and plan.min_people is not None
        and m.name == plan.min_people.measurement
        and not any(m.name in s.inputs for s in plan.statistics)
    ):
        label += " [min_people]"
    kind = "truncated discrete Laplace" if selects else "discrete Laplace"
    if m.gaussian:
        kind = "discrete Gaussian (L2 sensitivity at most the L1 shown)"
    # The truncated noise of a selection is (ε, δ)-DP; plain discrete Laplace is pure ε.
    delta = plan.selection.delta if selects and plan.selection is not None else Fraction(0)
    return MeasurementCost(
        name=m.name,
        label=label,
        sensitivity=m.sensitivity,
        epsilon=m.epsilon,
        scale=scale,
        error=float(error),
        mechanism=kind if mech is not None else "none (sensitivity 0)",
        rho=m.rho,
        # γ is stated for (ε, δ) mechanisms; a Gaussian measurement's ρ share shows none.
        lower_bound=None if m.gaussian else measurement_floor(m, delta),
    )


def explain(
    plan: DPQuery, confidence: float, exact_sql: str = "", accuracy: Allocation | None = None
) -> Explanation:
    """Describe ``plan``: measurements and selections with sensitivity, ε, noise and error.

    ``accuracy`` is how ε was chosen when the analyst gave error targets instead of ε.

    Long because it walks the plan once and writes each part of the explanation in reading order
    (measurements, selections, statistics, outputs, HAVING, ORDER BY); each part is a short loop
    over the same plan and names.
    """
    query = plan.query
    names = display_names(query.relation)
    costs = []
    for m in plan.measurements:
        if m.kind == "histogram":
            continue
        if m.kind == "degrees":
            costs.append(_weighted_cost(plan, m, names, confidence))
            continue
        costs.append(_noise_cost(plan, m, names, confidence))
    for i, stat in enumerate(plan.statistics):
        if stat.kind != "quantile":
            continue
        m = plan.measurement(stat.inputs[0])
        from_release = _rank_error(stat, m, confidence)
        target = (
            f"q={_g(stat.q)}"
            if stat.q is not None
            else ("near MIN" if stat.rank == "low" else "near MAX")
        )
        costs.append(
            MeasurementCost(
                name=f"s{i}",
                label=f"select a bin of {m.describe(names)}, {target}",
                sensitivity=m.sensitivity,
                epsilon=stat.epsilon,
                scale=Fraction(0),
                error=float(from_release),
                mechanism="permute-and-flip (rank error)",
            )
        )
    outputs = []
    labels = {agg_ref(i): a.label for i, a in enumerate(query.aggregates)}
    labels.update({key_ref(i): k.name for i, k in enumerate(query.group_by)})
    for out in query.outputs:
        outputs.append((out.name, _describe_output(out.expr, plan, labels, confidence)))
    for i, agg in enumerate(query.aggregates):
        if agg.hidden:
            outputs.append((f"(hidden) {agg.label}", _describe_stat(plan, i)))
    notes = []
    if (
        plan.selection is not None
        and plan.measurement(plan.selection.measurement).kind == "degrees"
    ):
        notes.append(_weighted_note(plan))
    elif plan.selection is not None:
        sel = plan.selection
        notes.append(
            f"groups are selected privately: a group is released when its noisy {sel.measurement} "
            f">= {sel.threshold}, with noise truncated to ±{sel.threshold - 1} (for each group "
            f"with probability {float(sel.mix):.4g}; otherwise >= {sel.threshold + 1} and "
            f"±{sel.threshold}); a group held by one privacy unit appears with probability "
            f"<= {float(sel.delta):g}"
        )
    if plan.min_people is not None:
        notes.append(min_people_note(plan.min_people))
    if query.having is not None:
        notes.append(f"HAVING {_describe_refs(query.having, labels)} on the noisy answers (free)")
    if query.order_by:
        notes.append(
            "ORDER BY "
            + ", ".join(
                _describe_refs(o.expr, labels) + (" DESC" if o.descending else "")
                for o in query.order_by
            )
            + " (free)"
        )
    if query.limit is not None or query.offset:
        notes.append(f"LIMIT {query.limit} OFFSET {query.offset} (free)")
    if plan.elastic is not None:
        notes.append(elastic_note(plan.elastic))
    notes.extend(
        f"{k.name}'s {len(k.keys or ()):,} keys are the values of the public table {k.from_table}"
        " (its rows that pass the query's conditions on it alone), read before planning: every"
        " row joined to it holds one"
        for k in query.group_by
        if k.from_table is not None
    )
    notes.extend(
        f"{k.name}'s {len(k.keys or ()):,} keys are the values the WHERE lists for it (a row with"
        " any other value is filtered out), every one answered"
        for k in query.group_by
        if k.listed
    )
    notes.extend(f"hint: {h}" for h in query_hints(query))
    notes.extend(combined_notes(query))
    return Explanation(
        table=", ".join(dict.fromkeys(s.table for s in scans(query.relation))),
        unit=_unit_line(query),
        filters=tuple(_filters(query.relation, names)),
        groups=tuple((k.name, len(k.keys) if k.keys is not None else None) for k in query.group_by),
        measurements=tuple(costs),
        outputs=tuple(outputs),
        loss=plan.loss,
        confidence=confidence,
        exact_sql=exact_sql,
        notes=tuple(notes),
        accuracy=accuracy,
        bounding=describe_bounding(plan.bounding, names, query.relation),
        clips=tuple(dict.fromkeys(describe_clip(c, names) for c in _clips(plan))),
        min_people=plan.min_people,
    )


def min_people_note(rule: MinPeople) -> str:
    """The catalog's minimum-frequency rule as explain states it, its guarantee exactly."""
    return (
        f"min_people = {rule.people} (catalog): a cell is released only when its noisy "
        f"{rule.measurement} >= {rule.threshold}; a cell of fewer than {rule.people} people is "
        f"released with probability <= {float(rule.failure):.3g} (the rule's failure "
        "probability per cell, not a privacy δ: the decision reads only the noisy count, so it "
        "is post-processing and costs nothing beyond that count's ε)"
    )


def _unit_line(query: Query) -> str:
    """The privacy unit as the catalog declares it, and the group cap this query lifted."""
    bounding = query.bounding
    if bounding is None or not bounding.enforced or bounding.max_groups <= query.unit.max_groups:
        return query.unit.description
    return (
        f"{query.unit.description}; here {bounding.max_rows} rows in any groups, since no "
        "sensitivity of this query depends on the number of groups"
    )


def describe_bounding(
    bounding: BoundContributions, names: dict[str, str], relation: Relation | None = None
) -> str:
    """The contribution bounding as explain shows it (the caps every sensitivity rests on), with
    the truncated joins of ``relation`` that a row unit's caps come from.
    """
    caps = f"rows <= {bounding.max_rows}, groups <= {bounding.max_groups}"
    if bounding.kind == "id":
        unit = names.get(bounding.unit or "", bounding.unit or "")
        if bounding.max_groups >= bounding.max_rows:
            # Any max_rows rows meet the group cap (and to_dp lifts a catalog's lower group
            # cap to the row cap where no sensitivity depends on it).
            return (
                f"BoundContributions(unit={unit}, rows <= {bounding.max_rows}): each unit's "
                "rows ranked by a keyed hash; the first are kept"
            )
        return (
            f"BoundContributions(unit={unit}, {caps}): each unit's groups and rows "
            "ranked by a keyed hash; the first are kept"
        )
    if bounding.kind == "aggregated":
        return f"BoundContributions({caps}): one row per unit from the per-unit subquery"
    truncated = [describe_truncation(j, names) for j in _truncated_joins(relation)]
    if truncated and "Elastic(" in truncated[-1]:
        return truncated[-1]
    if truncated:
        return (
            f"BoundContributions({caps}): the joined rows one unit can change, after "
            + "; ".join(truncated)
        )
    return f"BoundContributions({caps}): each row is a unit (joins multiply its rows)"


def elastic_note(elastic: Elastic) -> str:
    """What explain says of a count over a join bounded by elastic sensitivity."""
    return (
        "elastic sensitivity (FLEX): each count's noise scale is 2·S/ε_m, S = max over d of "
        "e^(−βd)·(R₁·mf₂ + R₂·mf₁ + R₁·R₂·(2d+1)) with mf the largest number of rows sharing "
        f"one key value on each side (after the unit caps R₁ = {elastic.left_rows}, "
        f"R₂ = {elastic.right_rows}), β = {float(elastic.beta):.4g}, δ_m = "
        f"{float(elastic.delta):.3g}; it depends on the data, so the sensitivity and errors above "
        "are its floor (every key value held once). The interval is computed from the two mf "
        f"released with ε = {float(elastic.bound_epsilon):.3g} of the query's loss "
        "(docs/mechanisms/join_truncation.md)"
    )


def describe_truncation(join: Join, names: dict[str, str]) -> str:
    """A truncated join as explain shows it: each side's caps and the stability they give."""
    t = join.truncation
    assert t is not None
    if t.elastic:
        caps = [
            f"<= {rows} rows per {names.get(unit, unit)}"
            for unit, rows in ((t.left_unit, t.left_rows), (t.right_unit, t.right_rows))
            if unit and rows
        ]
        keys = f"{names.get(join.left_key, join.left_key)} = {names.get(join.right_key, join.right_key)}"
        return (
            f"Elastic({'; '.join([*caps, f'no cap per key on {keys}'])}): the noise is "
            "calibrated to the data's key frequencies (see the note)"
        )
    sides = []
    for key, per_key, unit, rows in (
        (join.left_key, t.left_per_key, t.left_unit, t.left_rows),
        (join.right_key, t.right_per_key, t.right_unit, t.right_rows),
    ):
        first = f"<= {rows} rows per {names.get(unit, unit)}, then " if unit and rows else ""
        sides.append(f"{first}<= {per_key} rows per {names.get(key, key)}")
    return (
        f"Truncate({'; '.join(sides)}) before the join, each ranked by a keyed hash: one unit "
        "changes at most 2·(R_left·τ_right + R_right·τ_left) joined rows "
        "(docs/mechanisms/join_truncation.md)"
    )


def _truncated_joins(relation: Relation | None) -> list[Join]:
    """Every join of ``relation`` whose sides are truncated, innermost first."""
    match relation:
        case Join(left=left, right=right, truncation=t):
            inner = _truncated_joins(left) + _truncated_joins(right)
            return [*inner, relation] if t is not None else inner
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c) | SemiJoin(child=c):
            return _truncated_joins(c)
    return []


def describe_clip(clip: Clip, names: dict[str, str]) -> str:
    """A clipping as explain shows it."""
    return f"Clip({render(clip.expr, names)}, {_g(clip.low)}, {_g(clip.high)})"


def _clips(plan: DPQuery) -> list[Clip]:
    return [c for m in plan.measurements if (c := m.clip) is not None]


def _rank_error(stat: Statistic, m: Measurement, confidence: float) -> int:
    mechanism = PermuteAndFlip(m.sensitivity_units, stat.epsilon)
    bar: Fraction = mechanism.utility_error_bar(len(m.edges) - 1, Fraction(repr(confidence)))
    return math.ceil(bar)


def _describe_stat(plan: DPQuery, i: int, confidence: float | None = None) -> str:
    stat = plan.statistics[i]
    names = ", ".join(stat.inputs)
    if stat.kind in ("count", "sum"):
        return names
    if stat.kind == "avg":
        s = plan.measurement(stat.inputs[0])
        prefix = f"{_g(s.center)} + " if s.center else ""
        assert stat.bounds is not None
        described = f"{prefix}{stat.inputs[0]} / {stat.inputs[1]}, clamped to [{_g(stat.bounds[0])}, {_g(stat.bounds[1])}]"
        if confidence is not None:
            described += _average_error(plan, i, confidence)
        return described
    if stat.kind == "var":
        what = "standard deviation" if stat.sqrt else "variance"
        return f"{what} from {names}" + (" (n - 1)" if stat.sample else "")
    return f"bin chosen by s{i}"


AVERAGE_ERROR_AT = (100, 1_000, 10_000)
"""Group sizes at which explain evaluates an average's error bar (it depends on the size)."""


def _average_error(plan: DPQuery, i: int, confidence: float) -> str:
    """An average's error bar before any data is read, as a function of its group's size.

    The released interval is that of (s ± h_s)/(n ± h_c), each measurement at confidence
    1 − β/2 (as post-processing computes it). With every value within R of the centre,
    |s| <= R·n, so its half-width is at most (h_s + R·h_c)/(n − h_c) for a group of n rows.
    """
    stat = plan.statistics[i]
    s_m, c_m = plan.measurement(stat.inputs[0]), plan.measurement(stat.inputs[1])
    assert stat.bounds is not None
    level = 1 - (1 - confidence) / 2
    hs = error_units(s_m, level) * s_m.granularity
    hc = error_units(c_m, level)
    reach = max(abs(stat.bounds[0] - s_m.center), abs(stat.bounds[1] - s_m.center))
    at = [
        f"±{_g(float((hs + reach * hc) / (n - hc)))} at n = {n:,}"
        for n in AVERAGE_ERROR_AT
        if n > hc
    ]
    pct = f"{confidence:.0%}"
    return (
        f"; {pct} error at most ±({_g(hs)} + {_g(reach)}·{hc})/(n − {hc}) for a group of n "
        "rows" + (": " + ", ".join(at) if at else "")
    )


def _describe_output(
    expr: Expr, plan: DPQuery, labels: dict[str, str], confidence: float | None = None
) -> str:
    if isinstance(expr, KeyRef):
        return "group key"
    if isinstance(expr, AggRef):
        return _describe_stat(plan, expr.index, confidence)
    return f"{_describe_refs(expr, labels)} (post-processing)"


def _describe_refs(expr: Expr, labels: dict[str, str]) -> str:
    return render(expr, labels)


def _filters(relation: Relation, names: dict[str, str]) -> list[str]:
    match relation:
        case Filter(child=c, predicate=p):
            return [*_filters(c, names), render(p, names)]
        case Project(child=c) | UnitAggregate(child=c):
            return _filters(c, names)
        case Join(left=left, right=right):
            return _filters(left, names) + _filters(right, names)
        case SemiJoin(child=c, right=right, condition=cond, negated=neg, operand=op, column=col):
            tables = ", ".join(s.table for s in scans(right))
            if op is not None:
                test = f"{render(op, names)} {'NOT IN' if neg else 'IN'} {names.get(col or '', col)} of {tables}"
            else:
                test = f"{'NOT EXISTS' if neg else 'EXISTS'} a row of {tables}"
            where = [*_filters(right, names), *([render(cond, names)] if cond is not None else [])]
            return [*_filters(c, names), test + (f" where {' AND '.join(where)}" if where else "")]
    return []


def _g(x: Fraction | float | None) -> str:
    if x is None:
        return "?"
    value = float(x)
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.3e}"
