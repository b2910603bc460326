"""The noise step: the privacy boundary of a SQL query, to be audited in one sitting.

Everything a privacy reviewer must check about a query's release is in this module:

1. :func:`build_mechanisms` builds, from the plan, every mechanism the release will use: a
   discrete Laplace mechanism per noisy measurement and a permute-and-flip selection per quantile
   (MEDIAN, MIN, MAX). These objects, and no others, draw the noise.
2. :func:`audited_loss` recomputes the loss *bottom-up* from those mechanisms, independently of
   the ε split the planner assigned top-down: each measurement's sensitivity is recomputed from the
   privacy unit's caps (:class:`~dalenius.plan.nodes.BoundContributions`: rows and groups per
   unit, join multiplicities) and from its clipping (:class:`~dalenius.plan.nodes.Clip`, the
   per-row reach in grid units); a mechanism calibrated to a smaller sensitivity than that costs
   proportionally more (``ε · Δ_true / Δ_calibrated``); the selections' ε and the partition
   selection's δ are added (basic composition), and the selection threshold is re-derived (for
   weighted Gaussian selection: its whole calibration, from the plan's ε share, δ and caps).
3. the audited loss is the query's privacy map (:class:`~dalenius.engine.query_release.
   QueryRelease`): the session's one spending sequence refuses — as a defect, before anything is
   reserved — a plan whose audited loss exceeds what it would reserve, and the ledger keeps the
   audit line (:meth:`~dalenius.engine.session.Session.spend`).
4. :func:`add_noise` is the only function that reads exact values: it adds the noise, applies
   the private partition selection, then the catalog's ``min_people`` rule (on noisy counts
   only: post-processing, see :mod:`dalenius.plan.min_people`), and runs the quantile
   selections. Its result — noisy integers,
   released group keys and chosen bins — is what the ledger records.

Everything before (parsing, planning, the exact SQL) and after (post-processing, in
:mod:`dalenius.engine.postprocess`) costs no privacy by itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.catalog import Key
from dalenius.core.loss import ZCDP, ApproxDP, PureDP
from dalenius.mechanisms.exponential import PermuteAndFlip
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.mechanisms.partition_selection import (
    SelectionCalibration,
    select_groups,
    truncated_selection,
)
from dalenius.mechanisms.weighted_selection import WeightedCalibration, select_weighted
from dalenius.plan.nodes import VECTOR_KINDS, DPQuery, Measurement, Statistic
from dalenius.plan.noise import NoiseMechanism, mechanism_for
from dalenius.plan.protocol import LossDefect, rho_of, scaled_rho
from dalenius.plan.selection import weighted_calibration

GroupKeyTuple = tuple[Key | None, ...]


@dataclass
class Exact:
    """Exact per-group values, as the engine computed them (never leaves this module unnoised)."""

    groups: list[GroupKeyTuple]
    scalars: dict[str, npt.NDArray[np.int64]]
    histograms: dict[str, npt.NDArray[np.int64]]


@dataclass
class Noisy:
    """What is released and recorded: noisy measurements of released groups, chosen bins."""

    groups: list[GroupKeyTuple]
    values: dict[str, list[int]]
    bins: dict[str, list[int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form for the ledger."""
        return {"groups": [list(g) for g in self.groups], "values": self.values, "bins": self.bins}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Noisy:
        """Rebuild from :meth:`to_json`."""
        return cls(
            groups=[tuple(g) for g in doc["groups"]],
            values={k: [int(x) for x in v] for k, v in doc["values"].items()},
            bins={k: [int(x) for x in v] for k, v in doc.get("bins", {}).items()},
        )


@dataclass(frozen=True)
class Mechanisms:
    """The mechanisms one release uses.

    Attributes:
        laplace: per noisy measurement name, its discrete Laplace mechanism — or discrete
            Gaussian, for a measurement the planner gave a share of ρ — (``None`` for a
            measurement of sensitivity zero, which is data-independent and released as is).
        selections: per statistic index, the permute-and-flip selection of a quantile's bin.
        weighted: the weighted Gaussian partition selection, when the plan uses one.
    """

    laplace: Mapping[str, NoiseMechanism | None]
    selections: Mapping[int, PermuteAndFlip]
    weighted: WeightedCalibration | None = None


def build_mechanisms(plan: DPQuery) -> Mechanisms:
    """Every mechanism the release of ``plan`` draws from (built once, before the data gate)."""
    laplace = {m.name: mechanism_for(m) for m in plan.measurements if m.kind not in VECTOR_KINDS}
    selections = {
        i: PermuteAndFlip(plan.measurement(s.inputs[0]).sensitivity_units, s.epsilon)
        for i, s in enumerate(plan.statistics)
        if s.kind == "quantile"
    }
    weighted = None
    sel = plan.selection
    if sel is not None and plan.measurement(sel.measurement).kind == "degrees":
        m = plan.measurement(sel.measurement)
        weighted = weighted_calibration(m.epsilon, sel.delta, len(m.edges) - 1).calibration
    return Mechanisms(laplace=laplace, selections=selections, weighted=weighted)


# -- the bottom-up audit ------------------------------------------------------------------------


def required_sensitivity(plan: DPQuery, m: Measurement) -> int:
    """The most one privacy unit can change ``m`` (L1 over all groups, grid units), recomputed.

    From the plan's contribution bounding (rows ``R`` and groups ``G`` per unit) and, for sums,
    from the clipping: a row moves a sum by at most ``ceil(reach / granularity)`` grid steps, where
    ``reach`` is the farthest clipping bound from the centre (its square for a sum of squares).
    A count of distinct units changes by one in at most ``min(R, G)`` groups.
    """
    bounding = plan.bounding
    rows, groups = bounding.max_rows, bounding.max_groups
    if m.kind in ("count", "count_distinct"):
        return min(rows, groups) if m.distinct_unit else rows
    if m.kind == "histogram":
        return rows
    clip = m.clip
    if clip is None:
        raise LossDefect(f"the sum {m.name} has no clipping bounds")
    reach = max(abs(clip.low - m.center), abs(clip.high - m.center))
    per_row = reach if m.kind == "sum" else reach * reach
    return math.ceil(per_row / m.granularity) * rows


def _scaled(epsilon: Fraction, required: int, calibrated: Fraction, what: str) -> Fraction:
    """The actual ε of a mechanism calibrated to ``calibrated`` for a change of ``required``."""
    if required == 0:
        return Fraction(0)
    if calibrated <= 0:
        raise LossDefect(f"{what} is released without noise, yet one unit can change it")
    return epsilon * required / calibrated


def audited_loss(plan: DPQuery, mechanisms: Mechanisms) -> PureDP | ApproxDP | ZCDP:
    """The query's loss composed bottom-up from ``mechanisms`` and the partition selection.

    Laplace-type parts add up in ε; discrete Gaussian parts in ρ, each scaled by the square of
    the ratio of the sensitivity one unit has to the one the mechanism was calibrated for (an L1
    sensitivity bounds the L2 one). A plan with Gaussian parts is charged in zCDP: its pure part,
    if any, joins as ρ = ε²/2.

    Raises:
        LossDefect: a measurement has no mechanism although one unit can change it, or the
            partition selection's threshold is below what its δ needs.
    """
    epsilon = Fraction(0)
    rho = Fraction(0)
    gaussian = False
    for m in plan.measurements:
        if m.kind == "histogram":
            continue
        if m.kind == "degrees":
            epsilon += _weighted_epsilon(plan, m, mechanisms)
            continue
        if m.name not in mechanisms.laplace:
            raise LossDefect(f"the measurement {m.name} has no mechanism")
        mech = mechanisms.laplace[m.name]
        required = required_sensitivity(plan, m)
        if mech is None:
            epsilon += _scaled(Fraction(0), required, Fraction(0), f"the measurement {m.name}")
        elif isinstance(mech, IntegerGaussian):
            gaussian = True
            rho += scaled_rho(rho_of(mech.loss), mech.sensitivity, required)
        else:
            epsilon += _scaled(mech.epsilon, required, mech.sensitivity, m.name)
    for i, stat in enumerate(plan.statistics):
        if stat.kind != "quantile":
            continue
        if i not in mechanisms.selections:
            raise LossDefect(f"the quantile of statistic {i} has no selection mechanism")
        selection = mechanisms.selections[i]
        required = required_sensitivity(plan, plan.measurement(stat.inputs[0]))
        epsilon += _scaled(selection.epsilon, required, selection.sensitivity, f"quantile {i}")
    _check_min_people(plan, mechanisms)
    if gaussian:
        if plan.selection is not None:
            raise LossDefect("a plan with Gaussian noise has a private group selection")
        return ZCDP(rho + epsilon * epsilon / 2)
    if plan.selection is None:
        return PureDP(epsilon)
    if plan.measurement(plan.selection.measurement).kind != "degrees":
        _check_threshold(plan, mechanisms)
    return ApproxDP(epsilon, plan.selection.delta)


def _check_min_people(plan: DPQuery, mechanisms: Mechanisms) -> None:
    """The ``min_people`` rule must read a noisy count, so that it is post-processing."""
    rule = plan.min_people
    if rule is None:
        return
    m = plan.measurement(rule.measurement)
    if m.kind not in ("count", "count_distinct") or mechanisms.laplace.get(m.name) is None:
        raise LossDefect(
            f"the min_people rule reads {m.name}, which is not a noisy count: its decision "
            "would depend on exact values"
        )


def _weighted_epsilon(plan: DPQuery, m: Measurement, mechanisms: Mechanisms) -> Fraction:
    """The ε of a weighted Gaussian selection, after checking it against a fresh calibration.

    The degree cap is recomputed from the contribution bounding (``min(R, G)`` for an enforced
    id unit); the mechanism must cover at least that many groups per unit and use exactly the
    grid, weights and noise of the calibration for the plan's ε share and δ, and a threshold no
    lower. Then it is (ε share, δ)-DP (``docs/mechanisms/partition_selection.md``).
    """
    sel = plan.selection
    used = mechanisms.weighted
    bounding = plan.bounding
    if sel is None or sel.measurement != m.name or used is None or not bounding.enforced:
        raise LossDefect(f"the units-by-degree measurement {m.name} has no weighted selection")
    required = min(bounding.max_rows, bounding.max_groups)
    needed = weighted_calibration(m.epsilon, sel.delta, required).calibration
    if (
        used.max_groups < required
        or (used.grid, used.weights, used.sigma2) != (needed.grid, needed.weights, needed.sigma2)
        or min(used.threshold, sel.threshold) < needed.threshold
        or len(m.edges) - 1 != used.max_groups
    ):
        raise LossDefect(
            f"the weighted selection on {m.name} is not calibrated for {required} groups per "
            f"unit at ε = {m.epsilon}, δ = {sel.delta}"
        )
    return m.epsilon


def _check_threshold(plan: DPQuery, mechanisms: Mechanisms) -> None:
    """The partition selection's threshold and mix keep its δ: recalibrated from the mechanism.

    Truncated selection uses the threshold ``k + 1`` with probability ``mix`` and ``k + 2``
    otherwise; a higher ``k``, or the same ``k`` with a smaller ``mix``, spends less δ.
    """
    selection = plan.selection
    assert selection is not None
    m = plan.measurement(selection.measurement)
    mech = mechanisms.laplace.get(m.name)
    required = required_sensitivity(plan, m)
    if not isinstance(mech, IntegerLaplace) or mech.sensitivity < required:
        raise LossDefect(
            f"the partition selection's count {m.name} is calibrated to a sensitivity below "
            f"{required}"
        )
    bounding = plan.bounding
    per_group = 1 if m.distinct_unit or bounding.kind == "aggregated" else bounding.max_rows
    needed = _calibration(
        mech.scale,
        selection.delta,
        min(bounding.max_rows, bounding.max_groups),
        per_group,
        required,
    )
    truncation = selection.threshold - 1
    if truncation < needed.truncation or (
        truncation == needed.truncation and selection.mix > needed.mix
    ):
        raise LossDefect(
            f"the partition selection's threshold {selection.threshold} (mix {selection.mix}) "
            f"is below {needed.truncation + 1} (mix {needed.mix}), the least that keeps "
            f"δ = {selection.delta}"
        )


@functools.lru_cache(maxsize=1024)
def _calibration(
    scale: Fraction, delta: Fraction, groups: int, max_count: int, sensitivity: int
) -> SelectionCalibration:
    # A pure function of public numbers; certifying its tail bound takes about a millisecond.
    return truncated_selection(
        scale, delta, groups=groups, max_count=max_count, sensitivity=sensitivity
    )


# -- drawing the noise --------------------------------------------------------------------------


def add_noise(plan: DPQuery, exact: Exact, mechanisms: Mechanisms | None = None) -> Noisy:
    """Draw all noise and make all private selections (the only step that reads exact values).

    ``mechanisms`` are those the session audited (built here when not given).
    """
    mechs = mechanisms if mechanisms is not None else build_mechanisms(plan)
    noisy_all: dict[str, list[int]] = {}
    keep = list(range(len(exact.groups)))
    sel = plan.selection
    if mechs.weighted is not None and sel is not None:
        degrees = exact.histograms[sel.measurement]
        keep = [int(i) for i in np.flatnonzero(select_weighted(degrees, mechs.weighted))]
    for m in plan.measurements:
        if m.kind in VECTOR_KINDS:
            continue
        mech = mechs.laplace[m.name]
        exact_m = exact.scalars[m.name]
        if sel is not None and m.name == sel.measurement:
            assert isinstance(mech, IntegerLaplace), "a selection count has Laplace noise"
            calibration = SelectionCalibration(sel.threshold - 1, sel.mix, sel.delta)
            released, mask = select_groups(exact_m, mech.scale, calibration)
            keep = [int(i) for i in np.flatnonzero(mask)]
        else:
            released = exact_m if mech is None else mech.release(exact_m)
        noisy_all[m.name] = [int(v) for v in released]
    rule = plan.min_people
    if rule is not None:
        # Post-processing: the decision reads the noisy count of units, never an exact value.
        people = noisy_all[rule.measurement]
        keep = [i for i in keep if people[i] >= rule.threshold]
    groups = [exact.groups[i] for i in keep]
    values = {
        name: [vals[i] for i in keep]
        for name, vals in noisy_all.items()
        if plan.selection is None or name != plan.selection.measurement or plan.selection.shared
    }
    bins: dict[str, list[int]] = {}
    for s_index, stat in enumerate(plan.statistics):
        if stat.kind != "quantile":
            continue
        m = plan.measurement(stat.inputs[0])
        mechanism = mechs.selections[s_index]
        chosen = []
        for i in keep:
            counts = [int(c) for c in exact.histograms[m.name][i]]
            chosen.append(mechanism.select(selection_utilities(stat, m, counts)))
        bins[f"s{s_index}"] = chosen
    return Noisy(groups=groups, values=values, bins=bins)


def selection_utilities(stat: Statistic, m: Measurement, counts: Sequence[int]) -> list[Fraction]:
    """Utility of each bin: minus the distance from the target rank to the ranks the bin spans.

    The target is ``q·n`` for a quantile, and a small public rank ``r`` from the bottom (MIN) or the
    top (MAX), where ``r`` is what the selection reaches reliably; aiming at rank 0 instead would
    make every empty bin below the minimum as good as the minimum itself. One unit moves every
    utility by at most its row cap, the sensitivity the selection is calibrated to.
    """
    total = sum(counts)
    if stat.rank is not None:
        r = rank_target(stat, m)
        target = Fraction(r) if stat.rank == "low" else Fraction(total - r)
    else:
        assert stat.q is not None
        target = stat.q * total
    out, below = [], 0
    for count in counts:
        through = below + count
        out.append(-max(Fraction(0), below - target, target - through))
        below = through
    return out


def rank_target(stat: Statistic, m: Measurement) -> int:
    """The public rank MIN/MAX aim at: the selection's own rank error at 95%."""
    mechanism = PermuteAndFlip(m.sensitivity_units, stat.epsilon)
    return math.ceil(mechanism.utility_error_bar(len(m.edges) - 1, Fraction(95, 100)))
