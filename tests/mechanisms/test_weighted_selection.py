"""Weighted Gaussian partition selection: weights, calibration, and exact privacy on tiny data.

The exact check computes, with the discrete Gaussian's probabilities summed over its support, the
distribution of the released key set for tiny datasets of units holding one to three keys, and
for the same dataset without each unit; the hockey-stick divergence at ``e^ε`` in both directions
must be at most the δ the selection is calibrated to. A deliberately lowered threshold must fail
the same check, so the check can fail.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from scipy import stats

from dalenius.accounting.renyi import zcdp_to_approx_tight
from dalenius.core.errors import ConfigurationError
from dalenius.mechanisms.weighted_selection import (
    WeightedCalibration,
    _tails,
    calibrate_weighted,
    grid_weights,
    select_weighted,
)
from dalenius.plan.selection import gaussian_epsilon, prefer_weighted, weighted_calibration

ALPHA = 1e-6


@pytest.mark.parametrize("grid", [1, 2, 16, 256])
def test_weights_are_the_largest_integers_keeping_the_unit_within_norm_one(grid: int) -> None:
    for d, q in enumerate(grid_weights(12, grid), start=1):
        assert d * q * q <= grid * grid < d * (q + 1) ** 2


def test_the_threshold_is_the_smallest_whose_certified_tail_is_within_its_share() -> None:
    tail = Fraction(1, 10**6)
    cal = calibrate_weighted(Fraction(1, 40), tail, max_groups=4)
    bits = 60
    below, at = _tails(cal.sigma2, cal.weights, range(cal.threshold - 1, cal.threshold + 1), bits)
    assert cal.tail <= tail
    assert at <= tail < below
    # Floating-point check of the same quantity: max_d d·P(Z >= T − q_d).
    assert max(d * _upper_tail(cal, cal.threshold - q) for d, q in _degrees(cal)) <= float(tail)


def test_the_gaussian_step_and_the_tail_add_up_to_the_requested_loss() -> None:
    for epsilon, k in [(Fraction(1), 5), (Fraction(1, 2), 3), (Fraction(2), 8)]:
        delta = Fraction(1, 10**6)
        plan = weighted_calibration(epsilon, delta, k)
        cal = plan.calibration
        rho = Fraction(cal.grid**2) / (2 * cal.sigma2)  # what the noise really gives
        assert rho <= cal.rho
        gauss = zcdp_to_approx_tight(rho, delta - plan.tail_delta)
        assert gauss.epsilon <= gaussian_epsilon(epsilon, plan.tail_delta)
        assert cal.tail <= plan.tail_delta


def test_refuses_parameters_it_cannot_calibrate() -> None:
    with pytest.raises(ConfigurationError, match="weighted selection"):
        calibrate_weighted(Fraction(0), Fraction(1, 10**6), max_groups=2)
    with pytest.raises(ConfigurationError, match="weighted selection"):
        weighted_calibration(Fraction(1), Fraction(0), 2)


def test_the_planner_keeps_truncated_selection_for_one_group_and_weights_many() -> None:
    delta = Fraction(1, 10**6)
    assert not prefer_weighted(Fraction(1), delta, 1)
    assert not prefer_weighted(Fraction(1), delta, 2)
    assert prefer_weighted(Fraction(1), delta, 8)


# -- exact privacy on tiny data -------------------------------------------------------------------


def _degrees(cal: WeightedCalibration) -> list[tuple[int, int]]:
    return list(enumerate(cal.weights, start=1))


@cache
def _pmf(sigma2: Fraction) -> tuple[int, np.ndarray]:
    s2 = float(sigma2)
    radius = int(12 * math.sqrt(s2)) + 2
    z = np.arange(-radius, radius + 1, dtype=np.float64)
    mass = np.exp(-(z * z) / (2 * s2))
    return radius, mass / mass.sum()


def _upper_tail(cal: WeightedCalibration, m: int) -> float:
    """P(Z >= m) for the calibration's discrete Gaussian (floating point, tail beyond 12σ ignored)."""
    radius, pmf = _pmf(cal.sigma2)
    start = min(max(m + radius, 0), pmf.size)
    return float(pmf[start:].sum())


def _release_distribution(
    units: list[tuple[int, ...]], keys: int, cal: WeightedCalibration, threshold: int
) -> dict[frozenset[int], float]:
    weight = [0] * keys
    present = [False] * keys
    for held in units:
        for key in held:
            weight[key] += cal.weights[len(held) - 1]
            present[key] = True
    p = [_upper_tail(cal, threshold - weight[k]) if present[k] else 0.0 for k in range(keys)]
    out = {}
    for mask in itertools.product([False, True], repeat=keys):
        prob = 1.0
        for k, on in enumerate(mask):
            prob *= p[k] if on else 1 - p[k]
        out[frozenset(k for k, on in enumerate(mask) if on)] = prob
    return out


def _hockey(p: dict[frozenset[int], float], q: dict[frozenset[int], float], e: float) -> float:
    return sum(max(0.0, p[o] - e * q[o]) for o in p)


DATASETS = [
    [(0,)],
    [(0, 1)],
    [(0, 1, 2)],
    [(0,), (0, 1)],
    [(0, 1), (1, 2)],
    [(0, 1, 2), (2,)],
]


def _worst(cal: WeightedCalibration, epsilon: float, threshold: int) -> float:
    worst = 0.0
    for units in DATASETS:
        full = _release_distribution(units, 3, cal, threshold)
        for i in range(len(units)):
            rest = _release_distribution(units[:i] + units[i + 1 :], 3, cal, threshold)
            e = math.exp(epsilon)
            worst = max(worst, _hockey(full, rest, e), _hockey(rest, full, e))
    return worst


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(Fraction(1), Fraction(1, 10**3)), (Fraction(1, 2), Fraction(1, 100))]
)
def test_released_keys_are_epsilon_delta_private_on_every_tiny_neighbour_pair(
    epsilon: Fraction, delta: Fraction
) -> None:
    cal = weighted_calibration(epsilon, delta, 3).calibration
    assert _worst(cal, float(epsilon), cal.threshold) <= float(delta)
    # The check can fail: without the threshold's margin a one-unit key shows far too often.
    assert _worst(cal, float(epsilon), cal.weights[0]) > float(delta)


@pytest.mark.statistical
def test_a_key_held_by_one_unit_appears_as_often_as_the_exact_tail_says() -> None:
    """The production sampler (OS randomness) against the exact release probability."""
    plan = weighted_calibration(Fraction(1), Fraction(1, 5), 2)
    cal = plan.calibration
    # Row 0: a key held by one unit of degree 1; row 1: by one unit of degree 2.
    counts = np.array([[1, 0], [0, 1]], dtype=np.int64)
    runs = 20_000
    seen = np.zeros(2, dtype=np.int64)
    for _ in range(runs // 1000):
        masks = select_weighted(np.tile(counts, (1000, 1)), cal).reshape(1000, 2)
        seen += masks.sum(axis=0)
    for row, (d, q) in enumerate(_degrees(cal)):
        exact = _upper_tail(cal, cal.threshold - q)
        # (the float sum agrees with the certified bound to rounding error)
        assert d * exact <= float(cal.tail) * (1 + 1e-9)
        assert cal.tail <= plan.tail_delta
        interval = stats.binomtest(int(seen[row]), runs).proportion_ci(confidence_level=1 - ALPHA)
        assert interval.low <= exact <= interval.high, (row, seen[row], exact)
