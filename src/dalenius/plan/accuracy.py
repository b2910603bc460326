"""Accuracy first: the smallest ε whose error bars meet an analyst's targets.

An analyst thinks in error: "COUNT(*) within ±50, 95% of the time". A COUNT or SUM is one noisy
measurement released with discrete Laplace noise of scale ``t = s/ε_m`` (``s`` its sensitivity in
grid units, ``ε_m`` its share of ε); its error bar at confidence ``c`` is ``g·h(ε_m)``, where ``g``
is the grid step and ``h(ε_m)`` the smallest integer ``h`` whose exact tail bound
``P(|Z| > h) = 2q^(h+1)/(1+q)`` (``q = e^(−ε_m/s)``) is at most ``β = 1 − c``
(:func:`dalenius.mechanisms.laplace.integer_laplace_error_bar`, the very function explain and the
released intervals use).

A target ``e`` is met exactly when ``h(ε_m) <= H = ⌊e/g⌋``, that is when the tail bound at ``H``
is at most ``β``. The tail grows with the scale, so the shares that meet the target form a ray
``[ε*, ∞)``. :func:`min_share` finds ``ε*`` on the decimal grid of :data:`GRID_DIGITS` significant
digits: a closed-form float guess (solving ``2q^(H+1) = β(1+q)`` for ``q``), then a bisection over
grid points in which every step is the exact rational check. The result meets the target and the
grid point below it does not, so any ε more than one grid step (10⁻⁵ relative) smaller misses.

:func:`allocate` gives each noisy measurement of a query the smallest share meeting the tightest
target on it; the query's ε is their exact sum (sequential composition). That split minimises the
total, because the constraints are separate: any split with a smaller total gives some measurement
less than its own minimum. :func:`allocate_batch` does the same for several queries, or, given a
total ε, minimises the worst error relative to each target (see ``docs/accuracy.md``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dalenius.core.errors import ConfigurationError, PrivacyRefusal
from dalenius.core.loss import as_fraction
from dalenius.mechanisms._dlaplace import MAX_SCALE
from dalenius.mechanisms.laplace import integer_laplace_error_bar
from dalenius.plan.expr import AggRef
from dalenius.plan.nodes import DPQuery, Measurement

GRID_DIGITS = 6
"""ε shares are chosen on decimals of this many significant digits (rounded up, never down)."""

MAX_TARGET_EPSILON = Fraction(10**4)
"""A target that would need a larger ε per measurement is refused (it asks for an exact answer)."""

_HUGE_UNITS = 2**62


@dataclass(frozen=True)
class Targets:
    """What the analyst asks: one error for every COUNT and SUM, or one per output column.

    Attributes:
        everywhere: the absolute half-width asked of every COUNT and SUM, or ``None``.
        by_output: absolute half-widths by output column name.
        how: how the targets were stated, for explain (``±50`` or ``5% of 30000``).
    """

    everywhere: Fraction | None = None
    by_output: Mapping[str, Fraction] = field(default_factory=dict)
    how: Mapping[str, str] = field(default_factory=dict)


def _positive(value: Any, name: str) -> Fraction:
    number = as_fraction(value, name)
    if number > 10**30:
        raise ConfigurationError(
            f"{name} = {value!r} is too large to mean anything.",
            fix=f"give {name} below 1e30.",
        )
    return number


def parse_targets(
    target_error: Any = None, target_relative: Any = None, expected: Any = None
) -> Targets | None:
    """Read the analyst's targets; ``None`` when none was given.

    ``target_error`` is a number (every COUNT and SUM) or a mapping from output column to number.
    ``target_relative`` is a fraction such as 0.05, relative to ``expected``: the magnitude the
    analyst expects (a number for every aggregate, or a mapping by output column). The magnitude
    must come from the analyst: the true value is private, and reading it would cost budget.

    Raises:
        ConfigurationError: for both kinds of target at once, a relative target without expected
            magnitudes, or a bad number.
    """
    if target_error is None and target_relative is None:
        if expected is not None:
            raise ConfigurationError(
                "expected is given without target_relative.",
                fix="add target_relative=0.05 (for example), or drop expected.",
            )
        return None
    if target_error is not None and target_relative is not None:
        raise ConfigurationError(
            "Both target_error and target_relative are given.",
            fix="give one kind of target: an absolute error, or a relative one with expected.",
        )
    if target_error is not None:
        if isinstance(target_error, Mapping):
            by = {str(k): _positive(v, f"target_error[{k}]") for k, v in target_error.items()}
            return Targets(by_output=by, how={k: f"±{_g(v)}" for k, v in by.items()})
        value = _positive(target_error, "target_error")
        return Targets(everywhere=value, how={"*": f"±{_g(value)}"})
    relative = _positive(target_relative, "target_relative")
    if expected is None:
        raise ConfigurationError(
            "target_relative needs the magnitude you expect (expected=...).",
            why="the true value is private: Dalenius cannot look at it to choose ε without "
            "spending budget, so a relative error is relative to a magnitude you state.",
            fix="pass expected=30000 (for example), or give an absolute target_error.",
        )
    if isinstance(expected, Mapping):
        by = {
            str(k): relative * _positive(abs(float(v)), f"expected[{k}]")
            for k, v in expected.items()
        }
        how = {
            str(k): f"{_g(relative * 100)}% of {_g(Fraction(repr(float(v))))}"
            for k, v in expected.items()
        }
        return Targets(by_output=by, how=how)
    magnitude = _positive(abs(float(expected)), "expected")
    return Targets(
        everywhere=relative * magnitude, how={"*": f"{_g(relative * 100)}% of {_g(magnitude)}"}
    )


def error_at(m: Measurement, share: Fraction, confidence: float) -> Fraction:
    """The error bar (value units) of measurement ``m`` released with ε share ``share``."""
    if m.sensitivity_units == 0:
        return Fraction(0)
    return integer_laplace_error_bar(m.sensitivity_units, share, confidence) * m.granularity


def _meets(sensitivity: int, units: int, confidence: float) -> Callable[[Fraction], bool]:
    def check(epsilon: Fraction) -> bool:
        return integer_laplace_error_bar(sensitivity, epsilon, confidence) <= units

    return check


def _guess(sensitivity: int, units: int, beta: float) -> float:
    """Float solution of 2q^(H+1)/(1+q) = β for q, as ε = −s·ln q (a starting point only)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        q = (lo + hi) / 2
        if q <= 0:
            break
        value = (units + 1) * math.log(q) + math.log(2) - math.log1p(q) - math.log(beta)
        lo, hi = (q, hi) if value < 0 else (lo, q)
    q = (lo + hi) / 2
    return -sensitivity * math.log(q) if 0 < q < 1 else float(sensitivity)


def _grid_step(value: float) -> Fraction:
    exponent = math.floor(math.log10(value)) - (GRID_DIGITS - 1)
    return Fraction(10) ** exponent


def min_share(m: Measurement, target: Fraction, confidence: float, label: str = "") -> Fraction:
    """The smallest ε share (on the decimal grid) whose error bar for ``m`` is at most ``target``.

    Raises:
        PrivacyRefusal: when the target needs more than :data:`MAX_TARGET_EPSILON`.
    """
    s = m.sensitivity_units
    if s == 0:
        return Fraction(0)  # data-independent: no noise, no cost
    units_exact = target / m.granularity
    units = _HUGE_UNITS if units_exact >= _HUGE_UNITS else math.floor(units_exact)
    share = _search(s, units, confidence)
    if share is None:
        raise _too_tight(m, target, label)
    return share


@functools.lru_cache(maxsize=4096)
def _search(s: int, units: int, confidence: float) -> Fraction | None:
    """The smallest grid share whose error bar is at most ``units`` grid steps; ``None`` if none.

    It depends only on the sensitivity, the allowed whole units and the confidence, so targets
    that round to the same units (as a batch's search meets again and again) share one answer.
    """
    floor_share = Fraction(s) / MAX_SCALE  # below it the noise scale is refused anyway
    step = _grid_step(float(floor_share))
    lowest = math.ceil(floor_share / step) * step
    if units >= _HUGE_UNITS:
        return lowest
    check = _meets(s, units, confidence)
    if check(lowest):
        return lowest
    guess = max(_guess(s, units, 1 - confidence), float(lowest))
    if guess > MAX_TARGET_EPSILON * 2:
        return None
    step = _grid_step(guess)
    hi = math.ceil(Fraction(guess * 1.01) / step)
    lo = max(1, math.floor(Fraction(guess * 0.99) / step))
    while not check(hi * step):
        hi *= 2
        if hi * step > MAX_TARGET_EPSILON:
            return None
    while lo > 1 and check(lo * step):
        lo //= 2
    if check(lo * step):
        return max(lo * step, lowest)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if check(mid * step) else (mid, hi)
    if hi * step > MAX_TARGET_EPSILON:
        return None
    return max(hi * step, lowest)


def _too_tight(m: Measurement, target: Fraction, label: str) -> PrivacyRefusal:
    return PrivacyRefusal(
        f"an error of at most {_g(target)} for {label or m.name} would need ε above "
        f"{_g(MAX_TARGET_EPSILON)}.",
        clause="SELECT",
        why="the target asks for a practically exact answer, which no sensible ε can promise "
        f"(one person can change this aggregate by {_g(m.sensitivity)}).",
        fix="ask for a larger error, or a lower confidence.",
    )


@dataclass(frozen=True)
class AggregateTarget:
    """One targeted aggregate: what was asked, the share chosen and the error bar it gives."""

    output: str
    label: str
    measurement: str
    asked: str
    target: Fraction
    epsilon: Fraction
    error: Fraction
    error_below: Fraction | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "output": self.output,
            "aggregate": self.label,
            "measurement": self.measurement,
            "asked": self.asked,
            "target": float(self.target),
            "epsilon": float(self.epsilon),
            "epsilon_exact": f"{self.epsilon.numerator}/{self.epsilon.denominator}",
            "error": float(self.error),
            # None at the noise floor: 1% less ε would need a noise scale above 2**40.
            "error_at_99_percent_of_epsilon": (
                None if self.error_below is None else float(self.error_below)
            ),
        }


@dataclass(frozen=True)
class Allocation:
    """The ε split that meets every target at least cost.

    Attributes:
        epsilon: the query's total ε, the exact sum of ``shares``.
        shares: the ε of each noisy measurement, by name.
        confidence: the confidence the targets are met at.
        targets: one line per targeted aggregate.
        notes: extra parts that cost ε without a target (a private group selection).
    """

    epsilon: Fraction
    shares: Mapping[str, Fraction]
    confidence: float
    targets: tuple[AggregateTarget, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "epsilon": float(self.epsilon),
            "epsilon_exact": f"{self.epsilon.numerator}/{self.epsilon.denominator}",
            "confidence": self.confidence,
            "targets": [t.to_dict() for t in self.targets],
            "notes": list(self.notes),
        }


def _error_below(m: Measurement, share: Fraction, confidence: float) -> Fraction | None:
    """The error bar at 99% of ``share``; ``None`` when that ε is below the noise floor."""
    less = share * Fraction(99, 100)
    if m.sensitivity_units == 0 or Fraction(m.sensitivity_units) / less > MAX_SCALE:
        return None
    return error_at(m, less, confidence)


def _outputs_by_aggregate(plan: DPQuery) -> dict[int, str]:
    """Output column name of each aggregate shown as it is (``SELECT COUNT(*) AS n``)."""
    out: dict[int, str] = {}
    for column in plan.query.outputs:
        if isinstance(column.expr, AggRef):
            out.setdefault(column.expr.index, column.name)
    return out


def _refuse_kind(label: str, kind: str) -> PrivacyRefusal:
    why = (
        "its error is a rank, not an interval around the value"
        if kind == "quantile"
        else "its error bar depends on the noisy count, which is not known before the release"
    )
    return PrivacyRefusal(
        f"an error target cannot be met for {label}: {why}.",
        clause="SELECT",
        why="accuracy first chooses ε from error bars that are known in advance: those of COUNT "
        "and SUM.",
        fix=f"give epsilon for this query, or ask COUNT and SUM with targets (AVG = SUM / COUNT), "
        f"or give per-column targets that leave {label} out of the query.",
    )


def _asked(plan: DPQuery, targets: Targets) -> dict[int, tuple[Fraction, str]]:
    """The absolute target of each aggregate index."""
    outputs = _outputs_by_aggregate(plan)
    by_name = {name: i for i, name in outputs.items()}
    asked: dict[int, tuple[Fraction, str]] = {}
    for name, target in targets.by_output.items():
        if name not in by_name:
            raise ConfigurationError(
                f"target for {name!r}, which is not an aggregate column of the query.",
                fix=f"name one of: {', '.join(by_name) or '(no aggregate columns)'}.",
            )
        asked[by_name[name]] = (target, targets.how.get(name, f"±{_g(target)}"))
    for i, agg in enumerate(plan.query.aggregates):
        stat = plan.statistics[i]
        if targets.everywhere is not None:
            if stat.kind not in ("count", "sum"):
                raise _refuse_kind(agg.label, stat.kind)
            asked[i] = (targets.everywhere, targets.how.get("*", f"±{_g(targets.everywhere)}"))
        elif i in asked and stat.kind not in ("count", "sum"):
            raise _refuse_kind(agg.label, stat.kind)
    return asked


def allocate(plan: DPQuery, targets: Targets, confidence: float) -> Allocation:
    """The cheapest ε split of ``plan``'s measurements meeting every target (see module doc).

    ``plan`` is the query compiled at any ε: only its structure (measurements, sensitivities,
    grids) is used, and none of those depends on ε.

    Raises:
        PrivacyRefusal: for an aggregate whose error cannot be targeted, or a part of the query
            without a target, or a target that needs an absurd ε.
        ConfigurationError: for a target on a column the query does not have.
    """
    asked = _asked(plan, targets)
    outputs = _outputs_by_aggregate(plan)
    need: dict[str, tuple[Fraction, int]] = {}
    for i, (target, _) in asked.items():
        name = plan.statistics[i].inputs[0]
        if name not in need or target < need[name][0]:
            need[name] = (target, i)
    shares: dict[str, Fraction] = {}
    lines: list[AggregateTarget] = []
    for name, (target, i) in need.items():
        label = plan.query.aggregates[i].label
        shares[name] = min_share(plan.measurement(name), target, confidence, label)
    for i, (target, how) in sorted(asked.items()):
        name = plan.statistics[i].inputs[0]
        m = plan.measurement(name)
        share = shares[name]
        lines.append(
            AggregateTarget(
                output=outputs.get(i, f"(hidden) {plan.query.aggregates[i].label}"),
                label=plan.query.aggregates[i].label,
                measurement=name,
                asked=how,
                target=target,
                epsilon=share,
                error=error_at(m, share, confidence),
                error_below=_error_below(m, share, confidence),
            )
        )
    notes = _untargeted(plan, shares)
    total = sum(shares.values(), Fraction(0))
    if total <= 0:
        raise PrivacyRefusal(
            "no part of this query depends on the data, so there is no ε to choose.",
            clause="SELECT",
            fix="give epsilon, or ask an aggregate of the data.",
        )
    return Allocation(total, shares, confidence, tuple(lines), notes)


def _untargeted(plan: DPQuery, shares: dict[str, Fraction]) -> tuple[str, ...]:
    """Give the private group selection, and the ``min_people`` count, (when counts of their own)
    the largest share.
    """
    notes: list[str] = []
    for m in plan.measurements:
        if m.kind == "histogram" or m.name in shares:
            continue
        selection = plan.selection
        if selection is not None and selection.measurement == m.name and shares:
            shares[m.name] = max(shares.values())
            notes.append(
                f"{m.name} (the noisy count that selects groups) has no error target; it gets "
                f"the largest share, ε = {_g(shares[m.name])}"
            )
            continue
        rule = plan.min_people
        if rule is not None and rule.measurement == m.name and shares:
            shares[m.name] = max(shares.values())
            notes.append(
                f"{m.name} (the noisy count of people the min_people rule thresholds) has no "
                f"error target; it gets the largest share, ε = {_g(shares[m.name])}"
            )
            continue
        users = [
            plan.query.aggregates[i].label
            for i, s in enumerate(plan.statistics)
            if m.name in s.inputs
        ]
        raise PrivacyRefusal(
            f"{', '.join(users) or m.name} has no error target.",
            clause="SELECT",
            why="every noisy measurement needs a share of ε; without a target there is no "
            "smallest one.",
            fix="give a target for every aggregate column (or one target for all).",
        )
    for stat_index, stat in enumerate(plan.statistics):
        if stat.kind == "quantile" and f"q{stat_index}" not in shares:
            raise _refuse_kind(plan.query.aggregates[stat_index].label, "quantile")
    return tuple(notes)


@dataclass(frozen=True)
class BatchItem:
    """One query of a batch with its allocation (its targets are absolute, after any scaling)."""

    sql: str
    targets: Targets
    allocation: Allocation


@dataclass(frozen=True)
class BatchPlan:
    """An optimal split of ε over several queries.

    Attributes:
        items: each query with its allocation.
        epsilon: the total, the exact sum of the queries' ε.
        scale: in the fixed-budget mode, the factor every target was multiplied by (the worst
            error relative to its target); 1 when each query simply got its smallest ε.
        budget: the total ε that was to be split (fixed-budget mode), else ``None``.
    """

    items: tuple[BatchItem, ...]
    epsilon: Fraction
    scale: Fraction
    budget: Fraction | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "epsilon": float(self.epsilon),
            "epsilon_exact": f"{self.epsilon.numerator}/{self.epsilon.denominator}",
            "scale": float(self.scale),
            "budget": None if self.budget is None else float(self.budget),
            "queries": [{"sql": item.sql, **item.allocation.to_dict()} for item in self.items],
        }


def scaled(targets: Targets, factor: Fraction) -> Targets:
    """The same targets, each multiplied by ``factor``."""
    return Targets(
        everywhere=None if targets.everywhere is None else targets.everywhere * factor,
        by_output={k: v * factor for k, v in targets.by_output.items()},
        how={k: f"{v} × {_g(factor)}" if factor != 1 else v for k, v in targets.how.items()},
    )


def allocate_batch(
    plans: Sequence[tuple[str, DPQuery, Targets]],
    confidence: float,
    budget: Fraction | None = None,
) -> BatchPlan:
    """Split ε over several queries with targets.

    Without ``budget``: every query gets its smallest ε (the total is then the smallest possible,
    since the queries' constraints are separate). With ``budget``: the smallest factor ``r`` such
    that every error is at most ``r`` × its target within the budget — minimising the worst
    error relative to its target (a relative error when the targets are ``expected`` magnitudes
    times one fraction). The total spent is the exact sum of the chosen shares, never above the
    budget.

    Raises:
        PrivacyRefusal: when even very loose targets do not fit the budget.
    """

    def solve(factor: Fraction) -> tuple[BatchItem, ...]:
        return tuple(
            BatchItem(sql, scaled(t, factor), allocate(plan, scaled(t, factor), confidence))
            for sql, plan, t in plans
        )

    if budget is None:
        items = solve(Fraction(1))
        return BatchPlan(items, _total(items), Fraction(1), None)

    def fits(factor: Fraction) -> bool:
        try:
            return _total(solve(factor)) <= budget
        except PrivacyRefusal:  # a target so tight it needs an absurd ε: does not fit
            return False

    lo, hi = Fraction(1, 2**40), Fraction(1)
    while not fits(hi):
        hi *= 4
        if hi > 2**60:
            raise PrivacyRefusal(
                f"the batch cannot fit in ε = {_g(budget)} whatever the error.",
                clause="SELECT",
                fix="raise the budget, or ask fewer queries.",
            )
    # Bisection on the factor in log space to 1e-6 relative; every step is exact.
    for _ in range(80):
        if hi / lo < Fraction(1_000_001, 1_000_000):
            break
        mid = Fraction(math.sqrt(lo * hi)).limit_denominator(10**12)
        if not lo < mid < hi:
            mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    items = solve(hi)
    return BatchPlan(items, _total(items), hi, budget)


def _total(items: Sequence[BatchItem]) -> Fraction:
    return sum((item.allocation.epsilon for item in items), Fraction(0))


def _g(x: Fraction | float) -> str:
    value = float(x)
    return f"{value:.6g}"
