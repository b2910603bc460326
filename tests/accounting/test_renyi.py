"""The Rényi-DP (Canonne–Kamath–Steinke) conversion of ρ-zCDP to (ε, δ): valid, tight, rounded up."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from scipy import stats

from dalenius.accounting.convert import approx_to_zcdp_cap, zcdp_to_approx
from dalenius.accounting.renyi import (
    _best_order,
    cks_epsilon,
    rho_for_approx,
    zcdp_to_approx_tight,
)
from dalenius.core.exact import ln_up

CASES = [
    (Fraction(1, 10**6), Fraction(1, 10**9)),
    (Fraction(1, 1000), Fraction(1, 10**6)),
    (Fraction(1, 50), Fraction(1, 10**6)),
    (Fraction(1, 2), Fraction(1, 10**6)),
    (Fraction(3), Fraction(1, 10**5)),
    (Fraction(40), Fraction(1, 100)),
]


def decimal_bound(rho: Fraction, delta: Fraction, alpha: Fraction) -> Decimal:
    """The bound at order α in 60-digit decimal arithmetic (an independent evaluation)."""
    with localcontext() as ctx:
        ctx.prec = 60
        a = Decimal(alpha.numerator) / Decimal(alpha.denominator)
        r = Decimal(rho.numerator) / Decimal(rho.denominator)
        big_l = (Decimal(delta.denominator) / Decimal(delta.numerator)).ln()
        a1 = a - 1
        return a * r + (big_l + a1 * a1.ln() - a * a.ln()) / a1


def gaussian_delta(rho: float, epsilon: float) -> float:
    """The exact privacy profile of the Gaussian mechanism with ρ = μ²/2 (Balle & Wang 2018)."""
    mu = math.sqrt(2 * rho)
    first = stats.norm.logcdf(-epsilon / mu + mu / 2)
    second = epsilon + stats.norm.logcdf(-epsilon / mu - mu / 2)
    return math.exp(first) - math.exp(second)


@pytest.mark.parametrize(("rho", "delta"), CASES)
def test_the_tight_epsilon_is_valid_tighter_and_never_below_its_formula(
    rho: Fraction, delta: Fraction
) -> None:
    tight = zcdp_to_approx_tight(rho, delta).epsilon
    classic = zcdp_to_approx(rho, delta).epsilon
    assert tight <= classic
    alpha = _best_order(float(rho), float(ln_up(1 / delta)))
    exact_at_alpha = decimal_bound(rho, delta, alpha)
    # rounded toward safety: never below the exact value of the formula at the order used …
    # (the decimal evaluation is good to about 1e-58; the upward rounding adds more)
    assert tight >= Fraction(exact_at_alpha) - Fraction(1, 10**55) or tight == classic
    # … and, being the infimum's value up to the search, within 1e-9 of a fine grid's minimum
    grid = [1 + math.exp(t / 100) for t in range(-2500, 4000)]
    lowest = min(float(decimal_bound(rho, delta, Fraction(a))) for a in grid[::20])
    assert float(tight) <= lowest * (1 + 1e-9) + 1e-12
    # valid: the Gaussian mechanism is ρ-zCDP, and its exact δ at this ε is at most δ
    assert gaussian_delta(float(rho), float(tight)) <= float(delta)


def test_the_gain_over_bun_steinke_is_real() -> None:
    """At ε = 1, δ = 10⁻⁶ the Rényi conversion allows about 39% more ρ than Bun–Steinke."""
    delta = Fraction(1, 10**6)
    tight = rho_for_approx(Fraction(1), delta)
    classic = approx_to_zcdp_cap(Fraction(1), delta).rho
    assert 1.3 < tight / classic < 1.5


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [
        (Fraction(1, 100), Fraction(1, 10**10)),
        (Fraction(1), Fraction(1, 10**9)),
        (Fraction(9), Fraction(1, 10**5)),
    ],
)
def test_rho_for_approx_is_the_largest_rho_that_fits(epsilon: Fraction, delta: Fraction) -> None:
    rho = rho_for_approx(epsilon, delta)
    assert zcdp_to_approx_tight(rho, delta).epsilon <= epsilon
    assert zcdp_to_approx_tight(rho * Fraction(1_000_01, 1_000_00), delta).epsilon > epsilon
    assert cks_epsilon(
        rho, ln_up(1 / delta), _best_order(float(rho), float(ln_up(1 / delta)))
    ) <= epsilon or (zcdp_to_approx(rho, delta).epsilon <= epsilon)
