"""Elastic sensitivity's arithmetic and its (ε, δ) guarantee, checked exactly.

* the smooth bound is the maximum over d of ``e^{−βd}·ES(d)`` (brute force), never below it;
* it is β-smooth: frequencies that differ by at most one unit's rows (``R``) give bounds within
  a factor ``e^β`` (with the rounding margin), for the β the plan uses;
* the discrete Laplace at the smooth scale is (ε, δ)-DP: for the worst neighbour pairs the
  condition allows (shift ``S``, scale ratio ``e^{±β}``), the hockey-stick divergence of the two
  exact output distributions stays below δ; a planted defect (β twice as large) breaks it.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from dalenius.core.exact import exp_up
from dalenius.plan.elastic import (
    SCALE_MARGIN,
    interval_frequencies,
    smooth_bound,
    smoothness,
)


def _brute(rows: tuple[int, int], mf: tuple[int, int], beta: Fraction) -> float:
    (ra, rb), (fa, fb) = rows, mf
    return max(
        math.exp(-float(beta) * d) * (ra * fb + rb * fa + ra * rb * (2 * d + 1))
        for d in range(20_000)
    )


@pytest.mark.parametrize("seed", range(6))
def test_the_smooth_bound_is_the_maximum_over_every_distance(seed: int) -> None:
    rng = random.Random(seed)  # test inputs only
    rows = (rng.randint(1, 300), rng.randint(1, 50))
    mf = (rng.randint(0, 5000), rng.randint(0, 50))
    beta = smoothness(Fraction(rng.choice([1, 5, 9]), 10), Fraction(1, 10 ** rng.randint(3, 9)))
    bound = smooth_bound(rows, mf, beta)
    brute = _brute(rows, mf, beta)
    assert float(bound) >= brute
    assert float(bound) <= brute * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_neighbouring_frequencies_give_bounds_within_e_to_the_beta(seed: int) -> None:
    """One unit changes each side's largest key frequency by at most its R: the bound moves by
    at most the factor the privacy condition allows (β plus the rounding margin)."""
    rng = random.Random(100 + seed)  # test inputs only
    rows = (rng.randint(1, 40), rng.randint(1, 40))
    beta = smoothness(Fraction(1, 2), Fraction(1, 10**6))
    factor = exp_up(beta + SCALE_MARGIN)
    for _ in range(50):
        mf = (rng.randint(0, 2000), rng.randint(0, 2000))
        # Each side's own frequency moves by at most that side's R.
        near = (
            max(mf[0] + rng.randint(-rows[0], rows[0]), 0),
            max(mf[1] + rng.randint(-rows[1], rows[1]), 0),
        )
        a, b = smooth_bound(rows, mf, beta), smooth_bound(rows, near, beta)
        assert a <= factor * b and b <= factor * a


def _dlaplace(t: float, z: int) -> float:
    a = math.exp(-1 / t)
    return (1 - a) / (1 + a) * a ** abs(z)


def _hockey_stick(f: int, t: float, f2: int, t2: float, epsilon: float) -> float:
    """``Σ_y max(0, P[f + Z_t = y] − e^ε P[f2 + Z_t2 = y])`` over every y with mass."""
    reach = int(60 * max(t, t2)) + abs(f - f2) + 10
    total = 0.0
    for y in range(min(f, f2) - reach, max(f, f2) + reach):
        total += max(0.0, _dlaplace(t, y - f) - math.exp(epsilon) * _dlaplace(t2, y - f2))
    return total


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(Fraction(1, 2), Fraction(1, 10**4)), (Fraction(1), Fraction(1, 1000))]
)
def test_the_smooth_scale_discrete_laplace_is_epsilon_delta_private(
    epsilon: Fraction, delta: Fraction
) -> None:
    """The worst cases the proof covers: at x the bound S (scale t = 2S/ε) and the answer f; at
    its neighbour the answer moved by S and the scale t·e^{±β}. Each pair's divergence, both
    ways, stays below δ; with eight times β (a planted defect) the shrinking case exceeds it.
    """
    beta = float(smoothness(epsilon, delta))
    eps = float(epsilon)
    worst = 0.0
    for s in (7, 40):
        t = 2 * s / eps
        for ratio in (math.exp(beta), math.exp(-beta)):
            t2 = t * ratio
            for f2 in (s, -s):
                worst = max(
                    worst, _hockey_stick(0, t, f2, t2, eps), _hockey_stick(f2, t2, 0, t, eps)
                )
    assert worst <= float(delta)
    broken = 0.0
    for s in (7, 40):
        t = 2 * s / eps
        broken = max(broken, _hockey_stick(0, t, s, t * math.exp(-8 * beta), eps))
    assert broken > float(delta)


def test_released_frequencies_raised_by_their_margin_bound_the_true_ones() -> None:
    """The margin is the discrete Laplace's one-sided tail: adding it to a frequency drawn with
    noise of scale R/(ε_b/2) falls below the truth with probability at most failure/2."""
    rows, eps_b, failure = (3, 2), Fraction(1, 10), Fraction(1, 20)
    up = interval_frequencies((100, 100), rows, eps_b, failure)
    for r, bound in zip(rows, up, strict=True):
        t = r / float(eps_b / 2)
        margin = bound - 100
        # P(Z <= -margin) for the discrete Laplace of scale t
        a = math.exp(-1 / t)
        assert a**margin / (1 + a) <= float(failure) / 2
