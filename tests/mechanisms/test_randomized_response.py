"""Randomized response: calibration of p, the DP condition, validation and estimators."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.seeded import SeededRandom

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.mechanisms import RandomizedResponse


@settings(max_examples=60, deadline=None)
@given(
    categories=st.integers(2, 50),
    epsilon=st.fractions(Fraction(1, 100), Fraction(8), max_denominator=100),
    delta=st.one_of(st.just(Fraction(0)), st.fractions(Fraction(1, 10**6), Fraction(1, 2))),
)
def test_calibrated_p_satisfies_the_exact_condition(
    categories: int, epsilon: Fraction, delta: Fraction
) -> None:
    rr = RandomizedResponse(categories, epsilon=epsilon, delta=delta)
    m = categories - 1
    _, e_hi = exp_bounds(epsilon)
    # (ε, δ)-DP exactly when 1 − m·p <= e^ε·p + δ; the bound on e^ε makes the check rigorous.
    lo_e, _ = exp_bounds(epsilon)
    assert rr.keep <= lo_e * rr.p + delta
    assert rr.p <= Fraction(1, categories)
    # and p is at most one 2**-32 step above the threshold
    assert rr.p - (1 - delta) / (m + e_hi) <= Fraction(1, 2**32) + Fraction(1, 10**30)
    assert rr.loss == (PureDP(epsilon) if delta == 0 else ApproxDP(epsilon, delta))


def test_p_given_derives_epsilon_rounded_up() -> None:
    rr = RandomizedResponse(2, p=Fraction(1, 4))
    assert float(rr.epsilon) >= math.log(3)
    assert float(rr.epsilon) == pytest.approx(math.log(3), rel=1e-12)
    assert RandomizedResponse(3, p=Fraction(1, 3)).epsilon == 0
    k_ary = RandomizedResponse(5, p=Fraction(1, 20), delta=Fraction(1, 10))
    assert float(k_ary.epsilon) == pytest.approx(math.log((1 - 4 / 20 - 0.1) / (1 / 20)), rel=1e-12)


def test_validation() -> None:
    with pytest.raises(ConfigurationError, match="exactly one"):
        RandomizedResponse(2)
    with pytest.raises(ConfigurationError, match="exactly one"):
        RandomizedResponse(2, p=Fraction(1, 4), epsilon=1)
    with pytest.raises(ConfigurationError, match="1/2"):
        RandomizedResponse(2, p=Fraction(3, 4))
    with pytest.raises(ConfigurationError, match="categories"):
        RandomizedResponse(1, epsilon=1)
    rr = RandomizedResponse(3, epsilon=1)
    with pytest.raises(ConfigurationError, match=r"0\.\.2"):
        rr.privatize([0, 3])
    with pytest.raises(ConfigurationError):
        rr.privatize([0.5])
    with pytest.raises(ConfigurationError, match="no information"):
        RandomizedResponse(2, epsilon=0).estimate_counts([0, 1])


def test_warner_is_the_binary_form() -> None:
    rr = RandomizedResponse.warner(Fraction(1, 2))
    assert rr.categories == 2
    reports = rr.privatize(np.array([0, 1] * 500), rng=SeededRandom(1))
    assert set(np.unique(reports)) <= {0, 1}


def test_privatize_preserves_shape() -> None:
    rr = RandomizedResponse(4, epsilon=2)
    out = rr.privatize(np.zeros((3, 7), dtype=np.int64), rng=SeededRandom(2))
    assert out.shape == (3, 7) and out.min() >= 0 and out.max() < 4


def test_estimators_are_exact_on_a_constructed_sample() -> None:
    rr = RandomizedResponse(3, p=Fraction(1, 10))
    # 100 reports: counts 50, 30, 20
    reports = np.array([0] * 50 + [1] * 30 + [2] * 20)
    estimate = rr.estimate_counts(reports)
    expected = (np.array([50, 30, 20]) - 100 * 0.1) / (1 - 0.3)
    assert np.allclose(estimate, expected)
    assert estimate.sum() == pytest.approx(100)
    variance = rr.variance([60, 30, 10])
    f = np.array([60, 30, 10])
    assert np.allclose(variance, (f * 0.8 * 0.2 + (100 - f) * 0.1 * 0.9) / 0.49)
    assert np.all(rr.estimated_variance(reports) > 0)


def test_error_bar_is_hoeffding_rounded_up() -> None:
    rr = RandomizedResponse(2, p=Fraction(1, 4))
    bar = rr.error_bar(10_000, 0.95)
    assert bar >= math.sqrt(10_000 * math.log(2 / 0.05) / 2) / 0.5
    assert bar == pytest.approx(math.sqrt(10_000 * math.log(40) / 2) / 0.5, rel=1e-12)
