"""Which partition selection a GROUP BY without public keys uses, and its (ε, δ) calibration.

Two mechanisms are available for units that hold up to ``k`` groups:

* truncated selection (:mod:`dalenius.mechanisms.partition_selection`) on the count of distinct
  units per group, calibrated as if every unit touched ``k`` groups (the uniform L0-capped
  scheme: noise scale ``k/ε``);
* weighted Gaussian selection (:mod:`dalenius.mechanisms.weighted_selection`): a unit holding
  ``d`` groups gives each the weight ``1/√d``.

:func:`weighted_calibration` turns an (ε, δ) into the weighted mechanism's parameters: δ is split
between the Gaussian step (``δ_g``) and the threshold's tail (``δ_t``); the Gaussian step gets the
zCDP parameter ``ρ`` whose Rényi conversion (Canonne, Kamath & Steinke 2020, Cor. 13;
:func:`dalenius.accounting.rho_for_approx`) is ``(ε − δ_t/(1 − δ_t), δ_g)``. The proof that the
whole release is then (ε, δ)-DP is in ``docs/mechanisms/partition_selection.md``.

:func:`prefer_weighted` is the planner's choice, from public numbers only (ε, δ, ``k``): the
mechanism that releases a group with fewer units, when each of those units holds ``k`` groups
(the model least favourable to weighting; real units holding fewer groups favour it more).

Example:
    >>> from fractions import Fraction
    >>> delta = Fraction(1, 10**6)
    >>> prefer_weighted(Fraction(1, 2), delta, 1), prefer_weighted(Fraction(1, 2), delta, 5)
    (False, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist

from dalenius.accounting.renyi import rho_for_approx
from dalenius.core.errors import ConfigurationError
from dalenius.mechanisms.partition_selection import truncated_selection
from dalenius.mechanisms.weighted_selection import (
    MAX_GRID,
    WeightedCalibration,
    calibrate_weighted,
    grid_weights,
)

TAIL_SHARES = (Fraction(3, 8), Fraction(1, 2))
"""The candidate shares of δ given to the threshold's tail (the rest goes to the Gaussian step)."""


@dataclass(frozen=True)
class WeightedPlan:
    """A weighted selection calibrated to (ε, δ).

    Attributes:
        epsilon, delta: what the selection costs.
        tail_delta: the part of δ for the tail (``calibration.tail`` is at most this).
        calibration: the mechanism's parameters.
    """

    epsilon: Fraction
    delta: Fraction
    tail_delta: Fraction
    calibration: WeightedCalibration


def gaussian_epsilon(epsilon: Fraction, tail: Fraction) -> Fraction:
    """The ε left to the Gaussian step: ``ε − t/(1 − t)``, since ``ln(1/(1 − t)) <= t/(1 − t)``."""
    return epsilon - tail / (1 - tail)


@lru_cache(maxsize=256)
def weighted_calibration(epsilon: Fraction, delta: Fraction, max_groups: int) -> WeightedPlan:
    """The weighted selection for (ε, δ) and ``k = max_groups``: the δ split of smallest median.

    Every candidate in :data:`TAIL_SHARES` is a valid calibration; the one releasing a group
    with the fewest full-degree units (:meth:`WeightedCalibration.median_units`) is kept.
    """
    if epsilon <= 0 or not 0 < delta < 1:
        raise ConfigurationError(
            f"weighted selection needs epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}."
        )
    best: WeightedPlan | None = None
    for share in TAIL_SHARES:
        tail = delta * share
        eps_g = gaussian_epsilon(epsilon, tail)
        if eps_g <= 0:
            continue
        rho = rho_for_approx(eps_g, delta - tail)
        if rho <= 0:
            continue
        cal = calibrate_weighted(rho, tail, max_groups=max_groups)
        if best is None or cal.median_units() < best.calibration.median_units():
            best = WeightedPlan(epsilon, delta, tail, cal)
    if best is None:
        raise ConfigurationError(
            f"epsilon = {float(epsilon):g} is too small for weighted selection at delta = "
            f"{float(delta):g}.",
            fix="spend a larger epsilon on the selection.",
        )
    return best


def _zcdp_rho(epsilon: float, delta: float) -> float:
    """The ρ whose Rényi conversion (CKS 2020, Cor. 13) gives (ε, δ), in floating point."""
    log = math.log(1 / delta)

    def eps_of(rho: float) -> float:
        # ε(ρ) = min over α > 1 of αρ + (L + (α−1)ln(α−1) − α ln α)/(α−1), on a log grid of α − 1.
        return min(
            (1 + a1) * rho + (log + a1 * math.log(a1) - (1 + a1) * math.log(1 + a1)) / a1
            for a1 in (math.exp(i / 8) for i in range(-80, 81))
        )

    lo, hi = 0.0, epsilon
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if eps_of(mid) <= epsilon else (lo, mid)
    return lo


def model_median(epsilon: Fraction, delta: Fraction, max_groups: int) -> float:
    """:meth:`WeightedCalibration.median_units` estimated in floating point (no certification).

    Used only to choose a mechanism (a utility question); the mechanism chosen is then
    calibrated with certified bounds.
    """
    best = math.inf
    weights = grid_weights(max_groups, MAX_GRID)
    normal = NormalDist()
    for share in TAIL_SHARES:
        tail = float(delta * share)
        rho = _zcdp_rho(float(gaussian_epsilon(epsilon, delta * share)), float(delta) - tail)
        if rho <= 0:
            continue
        sigma = MAX_GRID / math.sqrt(2 * rho)
        threshold = max(
            q + sigma * normal.inv_cdf(1 - tail / d) for d, q in enumerate(weights, start=1)
        )
        best = min(best, threshold / weights[-1])
    return best


@lru_cache(maxsize=1024)
def prefer_weighted(epsilon: Fraction, delta: Fraction, max_groups: int) -> bool:
    """Whether weighted selection beats the uniform scheme at group cap ``k`` (public model).

    Uniform: truncated selection on distinct-unit counts at scale ``k/ε``, ``k`` groups per unit;
    a group is released with probability about 1/2 at its threshold. Weighted: about 1/2 at
    :meth:`WeightedCalibration.median_units` units of degree ``k`` (estimated by
    :func:`model_median`, a millisecond, so that queries which keep truncated selection pay no
    certified calibration). The smaller one wins.
    """
    if max_groups <= 1 or epsilon <= 0:
        return False  # one group per unit: truncated selection is optimal (the ceiling)
    uniform = truncated_selection(Fraction(max_groups) / epsilon, delta, groups=max_groups)
    return model_median(epsilon, delta, max_groups) < uniform.threshold
