"""Weighted Gaussian partition selection, for privacy units that contribute several groups.

Each privacy unit holds ``d`` distinct groups after contribution bounding (``1 <= d <= k``, the
unit's group cap). It gives each of them the weight ``1/√d``, so its weight vector has L2 norm at
most 1 whatever ``d`` is (Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin, *Differentially
private set union*, ICML 2020, the weighted Gaussian baseline). A group's weight is the sum of its
units' weights; discrete Gaussian noise is added to it and the group is released iff the noisy
weight reaches a threshold. A unit with one group weighs 1 there, where the uniform scheme
(:mod:`dalenius.mechanisms.partition_selection` with ``G = k``) scales every unit's noise as if it
touched ``k`` groups.

Everything is exact integers: weights live on a grid of ``S`` steps per unit of weight
(``S`` a power of two), the weight of a unit of degree ``d`` is ``q_d = ⌊S/√d⌋`` steps (rounded
*down*, so ``d·q_d² <= S²``), a group's weight is ``Σ_d c_d·q_d`` for its counts ``c_d`` of units by
degree, and the noise is the exact discrete Gaussian of :mod:`dalenius.mechanisms._dgauss` (OS
randomness). Engines return the integer counts ``c_d``, so every engine gives the same weights.

This module calibrates the threshold for a given zCDP parameter ``ρ`` of the Gaussian step and a
δ for the threshold's tail; turning an (ε, δ) request into those two numbers needs the
zCDP-to-(ε, δ) conversion of :mod:`dalenius.accounting` and lives in
:mod:`dalenius.plan.selection`. The proof is in ``docs/mechanisms/partition_selection.md``.

Example:
    >>> from fractions import Fraction
    >>> cal = calibrate_weighted(Fraction(1, 50), Fraction(1, 2 * 10**6), max_groups=5)
    >>> cal.weights
    (128, 90, 73, 64, 57)
    >>> cal.tail <= Fraction(1, 2 * 10**6)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import round_up
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._dgauss import at_least_bounds, gaussian_sampler

MAX_GRID = 128
"""Steps per unit of weight at most (``q_d`` then loses under 2.5% to rounding for ``d <= 10``,
and the threshold's certified tail costs a few hundredths of a second)."""

MAX_SIGMA_STEPS = 3072
"""The grid is made coarser so that σ stays within this many steps (the sampler's table)."""


def grid_weights(max_groups: int, grid: int) -> tuple[int, ...]:
    """``q_d = ⌊grid/√d⌋`` for ``d = 1..max_groups``, exactly (integer square roots).

    ``⌊√⌊g²/d⌋⌋ = ⌊g/√d⌋`` for integers, and ``d·q_d² <= g²``: a unit's weight vector never
    exceeds L2 norm ``grid``.

    Example:
        >>> grid_weights(4, 256)
        (256, 181, 147, 128)
    """
    if max_groups < 1 or grid < 1:
        raise ConfigurationError("max_groups and grid must be positive.")
    return tuple(math.isqrt(grid * grid // d) for d in range(1, max_groups + 1))


@dataclass(frozen=True)
class WeightedCalibration:
    """How weighted Gaussian selection runs.

    Attributes:
        max_groups: ``k``, the most groups one unit holds (its degree is at most this).
        grid: ``S``, weight steps per unit of weight (a power of two).
        weights: ``q_d`` for ``d = 1..k``, in steps.
        sigma2: the discrete Gaussian's σ², in steps (``S²/(2σ²) <= rho``).
        threshold: a group is released iff its weight plus noise is at least this (in steps).
        rho: the zCDP parameter of the Gaussian step the calibration was asked for.
        tail: certified upper bound on ``max_d d·P(Z >= threshold − q_d)``: the probability that a
            unit's own groups (held by no one else) show up.
    """

    max_groups: int
    grid: int
    weights: tuple[int, ...]
    sigma2: Fraction
    threshold: int
    rho: Fraction
    tail: Fraction

    def group_weights(self, degree_counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each group's weight in steps from its counts of units by degree (columns ``d = 1..k``)."""
        counts = np.asarray(degree_counts, dtype=np.int64).reshape(-1, self.max_groups)
        return counts @ np.asarray(self.weights, dtype=np.int64)

    def median_units(self) -> Fraction:
        """Units of full degree ``k`` a group needs to be released with probability 1/2.

        The noise is symmetric, so that is ``threshold / q_k``: the public figure the planner
        compares with the uniform scheme's threshold (see :mod:`dalenius.plan.selection`).
        """
        return Fraction(self.threshold, max(1, self.weights[-1]))


def choose_grid(rho: Fraction) -> int:
    """The largest power of two ``S <= MAX_GRID`` whose σ (``S/√(2ρ)``) is within the table."""
    sigma = 1 / math.sqrt(2 * float(rho))
    grid = MAX_GRID
    while grid > 1 and grid * sigma > MAX_SIGMA_STEPS:
        grid //= 2
    return grid


def _tail_bits(tail: Fraction) -> int:
    return 40 + max(0, math.ceil(math.log2(1 / float(tail))))


def _tails(
    sigma2: Fraction, weights: tuple[int, ...], thresholds: range, bits: int
) -> list[Fraction]:
    """Certified upper bounds on ``max_d d·P(Z >= T − q_d)`` for each ``T`` in ``thresholds``."""
    ms = tuple(sorted({t - q for t in thresholds for q in weights}))
    upper = dict(zip(ms, (hi for _, hi in at_least_bounds(sigma2, ms, bits)), strict=True))
    return [max(d * upper[t - q] for d, q in enumerate(weights, start=1)) for t in thresholds]


@lru_cache(maxsize=256)
def calibrate_weighted(rho: Fraction, tail: Fraction, *, max_groups: int) -> WeightedCalibration:
    """Threshold and noise of weighted Gaussian selection.

    Args:
        rho: the zCDP parameter of the Gaussian step (σ² = S²/(2ρ) in steps, rounded up).
        tail: the probability allowed for a unit's own groups to appear (part of δ).
        max_groups: ``k``, the most groups one unit holds.

    The threshold is the smallest integer ``T`` whose certified tail bound is at most ``tail``.
    """
    if rho <= 0 or not 0 < tail < 1 or max_groups < 1:
        raise ConfigurationError(
            f"weighted selection needs rho > 0, 0 < tail < 1 and max_groups >= 1, got rho={rho}, "
            f"tail={tail}, max_groups={max_groups}."
        )
    grid = choose_grid(rho)
    weights = grid_weights(max_groups, grid)
    sigma2 = round_up(Fraction(grid * grid) / (2 * rho))
    bits = _tail_bits(tail)
    sigma = math.sqrt(float(sigma2))
    # max_d d·P(Z >= T − q_d) <= tail, first in floating point, then certified around the guess.
    quantile = NormalDist().inv_cdf(1 - float(tail) / max_groups)
    guess = max(weights[0] + math.ceil(sigma * quantile) - 2, 1)
    low = guess
    while True:
        window = range(max(low - 8, 1), low + 9)
        bounds = _tails(sigma2, weights, window, bits)
        if bounds[0] <= tail and window.start > 1:
            low = window.start - 8  # the guess was too high: look lower
            continue
        for t, bound in zip(window, bounds, strict=True):
            if bound <= tail:
                return WeightedCalibration(
                    max_groups=max_groups,
                    grid=grid,
                    weights=weights,
                    sigma2=sigma2,
                    threshold=t,
                    rho=rho,
                    tail=bound,
                )
        low = window.stop + 8


def select_weighted(
    degree_counts: npt.NDArray[np.int64],
    calibration: WeightedCalibration,
    rng: RandomSource | None = None,
) -> npt.NDArray[np.bool_]:
    """The release mask of weighted Gaussian selection over groups' counts of units by degree.

    ``degree_counts`` has one row per observed group and ``k`` columns: how many of its units hold
    1, 2, …, ``k`` groups. Each group gets independent exact discrete Gaussian noise (OS
    randomness unless a test passes ``rng``) and is released iff its noisy weight reaches the
    threshold.
    """
    source = rng or system_random()
    weights = calibration.group_weights(degree_counts)
    if weights.size == 0:
        return np.zeros(0, dtype=np.bool_)
    noise = gaussian_sampler(calibration.sigma2).sample(weights.size, source)
    return weights + noise >= calibration.threshold
