"""Calibration both ways: exactness, rounding direction, monotonicity, and the course's tables."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dalenius.core.errors import ConfigurationError, InvalidLossError
from dalenius.mechanisms import calibration as cal

epsilons = st.fractions(Fraction(1, 100), Fraction(10), max_denominator=1000)
deltas = st.fractions(Fraction(1, 10**9), Fraction(1, 2), max_denominator=10**9)
sensitivities = st.fractions(Fraction(1, 10), Fraction(1000), max_denominator=100)


def test_laplace_is_exact_both_ways() -> None:
    assert cal.laplace_scale(3, Fraction(1, 10)) == 30
    assert cal.laplace_epsilon(3, 30) == Fraction(1, 10)
    assert cal.laplace_scale(2, 0.5) == 4  # a float is read through its decimal form


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(InvalidLossError):
        cal.laplace_scale(1, 0)
    with pytest.raises(ConfigurationError):
        cal.laplace_epsilon(1, -1)
    with pytest.raises(ConfigurationError, match="delta"):
        cal.gaussian_sigma_analytic(1, 1, 0)
    with pytest.raises(ConfigurationError, match="analytic"):
        cal.gaussian_sigma_classic(1, 2, Fraction(1, 10**5))
    with pytest.raises(ConfigurationError, match="integer sensitivity"):
        cal.discrete_gaussian_delta(Fraction(3, 2), 4, 1)
    with pytest.raises(ConfigurationError, match="positive integer"):
        cal.discrete_accuracy_lower_bound(1, 0, 1)


@settings(max_examples=40, deadline=None)
@given(diameter=sensitivities, epsilon=epsilons, delta=deltas)
def test_laplace_approx_rounds_toward_safety_and_round_trips(
    diameter: Fraction, epsilon: Fraction, delta: Fraction
) -> None:
    for tight in (False, True):
        scale = cal.laplace_scale_approx(diameter, epsilon, delta, tight=tight)
        factor = 2 if tight else 1
        exact = float(diameter) / (float(epsilon) - factor * math.log1p(-float(delta)))
        assert float(scale) >= exact * (1 - 1e-12)
        assert float(scale) <= exact * (1 + 1e-9)
        back = cal.laplace_epsilon_approx(diameter, scale, delta, tight=tight)
        assert back <= epsilon * (1 + Fraction(1, 2**40))
    assert cal.laplace_scale_approx(diameter, epsilon, delta, tight=True) < (
        cal.laplace_scale_approx(diameter, epsilon, delta)
    )


@settings(max_examples=30, deadline=None)
@given(epsilon=epsilons, delta=deltas)
def test_laplace_scale_approx_is_monotone(epsilon: Fraction, delta: Fraction) -> None:
    base = cal.laplace_scale_approx(1, epsilon, delta)
    assert cal.laplace_scale_approx(1, epsilon * 2, delta) < base
    assert cal.laplace_scale_approx(1, epsilon, delta / 2) > base
    assert cal.laplace_scale_approx(1, epsilon, 0) == 1 / epsilon


def test_tight_laplace_scale_meets_the_exact_profile() -> None:
    scale = cal.laplace_scale_approx(1, Fraction(1, 2), Fraction(1, 10), tight=True)
    delta = cal.laplace_delta(1, scale, Fraction(1, 2))
    # δ is itself rounded up to 48 significant bits, the only slack at the exact threshold.
    assert delta <= Fraction(1, 10) * (1 + Fraction(1, 2**46))
    assert float(delta) > 0.1 * (1 - 1e-9)


@pytest.mark.parametrize(
    ("shift", "scale", "epsilon"), [(1, 0.5, 0.5), (2, 1.0, 0.3), (5, 3.0, 1.0)]
)
def test_laplace_delta_matches_numerical_integration(
    shift: int, scale: float, epsilon: float
) -> None:
    def integrand(x: float) -> float:
        p = stats.laplace.pdf(x, scale=scale)
        q = stats.laplace.pdf(x, loc=shift, scale=scale)
        return max(0.0, p - math.exp(epsilon) * q)

    numeric, _ = integrate.quad(
        integrand, -60 * scale, 60 * scale + shift, points=[0, shift], limit=200
    )
    exact = cal.laplace_delta(shift, Fraction(repr(scale)), Fraction(repr(epsilon)))
    assert float(exact) == pytest.approx(numeric, rel=1e-7, abs=1e-12)


def test_course_004_tables_are_reproduced() -> None:
    """Course document 004, Tables 2, 4 and 7 (domain 1504..4500; 48 states, so m = 47)."""
    diameter = 4500 - 1504
    for (eps, delta), b in zip(
        [("0.1", "0.1"), ("2", "0.5"), ("11", "0.7")], [14589, 1112, 245], strict=True
    ):
        assert round(float(cal.laplace_scale_approx(diameter, eps, delta))) == b
    for (eps, delta), gamma in zip(
        [("0.1", "0.1"), ("2", "0.5"), ("11", "0.7")], [640, 89, 0.0075], strict=True
    ):
        assert float(cal.accuracy_lower_bound(diameter, eps, delta)) == pytest.approx(
            gamma, rel=0.01
        )
    for (eps, delta), gamma in zip(
        [("0.1", "0.1"), ("2", "0.5"), ("7", "0.6")], [0.879, 0.432, 0.016], strict=True
    ):
        assert float(cal.discrete_accuracy_lower_bound(1, 47, eps, delta)) == pytest.approx(
            gamma, abs=6e-4
        )


def test_lower_bounds_round_down() -> None:
    bound = cal.accuracy_lower_bound(1, 1, 0)
    assert float(bound) <= 1 / (2 * (1 + math.e))
    assert float(bound) == pytest.approx(1 / (2 * (1 + math.e)), rel=1e-12)


def test_zcdp_is_exact_both_ways() -> None:
    assert cal.gaussian_sigma2_zcdp(3, Fraction(1, 2)) == 9
    assert cal.gaussian_rho(3, 3) == Fraction(1, 2)
    sigma = cal.gaussian_sigma_zcdp(1, Fraction(1, 3))
    assert sigma * sigma >= Fraction(3, 2)
    assert float(sigma) == pytest.approx(math.sqrt(1.5), rel=1e-12)


def test_classic_gaussian_rounds_up_and_round_trips() -> None:
    sigma = cal.gaussian_sigma_classic(2, Fraction(1, 2), Fraction(1, 10**6))
    exact = 2 * math.sqrt(2 * math.log(1.25e6)) / 0.5
    assert exact <= float(sigma) <= exact * (1 + 1e-12)
    eps = cal.gaussian_epsilon_classic(2, sigma, Fraction(1, 10**6))
    assert eps <= Fraction(1, 2)
    assert float(eps) == pytest.approx(0.5, rel=1e-12)


def analytic_delta_float(sensitivity: float, sigma: float, epsilon: float) -> float:
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(stats.norm.cdf(a - b) - math.exp(epsilon) * stats.norm.cdf(-a - b))


@pytest.mark.parametrize(
    ("epsilon", "delta"), [("0.1", "1e-6"), ("1", "1e-5"), ("3", "1e-9"), ("0.5", "0.01")]
)
def test_analytic_gaussian_is_certified_and_nearly_minimal(epsilon: str, delta: str) -> None:
    sigma = cal.gaussian_sigma_analytic(1, epsilon, delta)
    assert cal.gaussian_delta_analytic(1, sigma, epsilon) <= Fraction(delta)
    assert analytic_delta_float(1, float(sigma) * (1 - 1e-5), float(epsilon)) > float(delta)
    eps_back = cal.gaussian_epsilon_analytic(1, sigma, delta)
    assert float(eps_back) <= float(epsilon) * (1 + 1e-6)
    assert cal.gaussian_delta_analytic(1, sigma, eps_back) <= Fraction(delta)


def test_analytic_beats_classic_and_is_monotone() -> None:
    classic = cal.gaussian_sigma_classic(1, Fraction(1, 2), Fraction(1, 10**5))
    analytic = cal.gaussian_sigma_analytic(1, Fraction(1, 2), Fraction(1, 10**5))
    assert analytic < classic
    sigmas = [
        cal.gaussian_sigma_analytic(1, eps, Fraction(1, 10**5)) for eps in ("0.2", "0.5", "1", "2")
    ]
    assert sigmas == sorted(sigmas, reverse=True)
    by_delta = [cal.gaussian_sigma_analytic(1, 1, d) for d in ("1e-9", "1e-6", "1e-3")]
    assert by_delta == sorted(by_delta, reverse=True)


@pytest.mark.parametrize(
    ("shift", "sigma2", "epsilon"), [(1, 16, 1), (3, 50, Fraction(1, 2)), (2, Fraction(9, 4), 2)]
)
def test_discrete_gaussian_delta_matches_brute_force(
    shift: int, sigma2: Fraction, epsilon: Fraction
) -> None:
    support = np.arange(-2000, 2001)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * float(sigma2)))
    pmf = weights / weights.sum()
    shifted = np.exp(-((support - shift).astype(float) ** 2) / (2 * float(sigma2))) / weights.sum()
    brute = float(np.maximum(0, pmf - math.exp(float(epsilon)) * shifted).sum())
    certified = cal.discrete_gaussian_delta(shift, sigma2, epsilon)
    assert float(certified) >= brute * (1 - 1e-9)
    assert float(certified) == pytest.approx(brute, rel=1e-9, abs=1e-15)


def test_discrete_gaussian_calibration_is_certified() -> None:
    sigma2 = cal.discrete_gaussian_sigma2(2, Fraction(1, 2), Fraction(1, 10**7))
    assert cal.discrete_gaussian_delta(2, sigma2, Fraction(1, 2)) <= Fraction(1, 10**7)
    assert cal.discrete_gaussian_delta(2, sigma2 * Fraction(99, 100), Fraction(1, 2)) > Fraction(
        1, 10**7
    )
