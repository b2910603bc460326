"""Calibration both ways — loss → noise scale and noise scale → loss — exact, rounding toward safety.

Rules: a noise scale computed from an irrational formula is rounded *up* to a rational (more noise
is always safe); a loss computed from a scale is rounded *up* (never under-charge); an accuracy
lower bound is rounded *down* (it stays a true lower bound). Irrational quantities are bounded by
certified intervals (:mod:`dalenius.core.exact`), never by a bare float.

Formulas (Δ is the sensitivity; the derivations are in ``docs/mechanisms/``):

* Laplace, pure ε: ``b = Δ/ε``; ``ε = Δ/b`` (Dwork & Roth 2014, Thm 3.6).
* Laplace, (ε, δ) for record perturbation (course document 004): ``b >= diam/(ε − ln(1−δ))``, and
  the tight ``b >= diam/(ε − 2·ln(1−δ))``, which is exactly where the Laplace privacy profile
  ``δ(ε) = 1 − exp((ε − Δ/b)/2)`` meets δ.
* Gaussian, ρ-zCDP: ``σ² = Δ²/(2ρ)``; ``ρ = Δ²/(2σ²)`` (Bun & Steinke 2016; exact for the discrete
  Gaussian too, Canonne, Kamath & Steinke 2020).
* Gaussian, classic (ε, δ) with ε < 1: ``σ = Δ·√(2 ln(1.25/δ))/ε`` (Dwork & Roth 2014, Thm A.1).
* Gaussian, analytic (ε, δ) (Balle & Wang 2018, Thm 8): the smallest σ with
  ``Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) <= δ``.
* Discrete Gaussian, exact (ε, δ) (CKS 2020, Thm 7):
  ``δ = P[Y > εσ²/Δ − Δ/2] − e^ε·P[Y > εσ²/Δ + Δ/2]`` for ``Y ~ N_ℤ(0, σ²)``.
* Accuracy lower bounds (course document 004, Thms 4 and 5): any (ε, δ)-DP mechanism on a domain
  of diameter ``diam`` has worst expected error ``γ >= (1−δ)·diam/(2(1+e^ε))``; on ``m+1`` points at
  least ``κ`` apart, ``γ >= (1−δ)·κ·m/(m + e^ε)``.

Example:
    >>> laplace_scale(1, Fraction(1, 2))
    Fraction(2, 1)
    >>> gaussian_sigma2_zcdp(1, Fraction(1, 2))
    Fraction(1, 1)
    >>> round(float(gaussian_sigma_classic(1, Fraction(1, 2), Fraction(1, 10**5))), 4)
    9.6896
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import SupportsFloat

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds, ln_bounds, round_down, round_up, sqrt_bounds
from dalenius.core.loss import Number, as_fraction
from dalenius.mechanisms._bounds import normal_cdf_bounds
from dalenius.mechanisms._dgauss import at_least_bounds
from dalenius.mechanisms._validate import positive_fraction

Value = Number | SupportsFloat

_RELATIVE_STEP = Fraction(1, 2**24)
"""Certified calibrations sit at most about this far (relative) above the floating-point guess."""


def _delta(value: Value) -> Fraction:
    delta = as_fraction(value, "delta")
    if not 0 < delta < 1:
        raise ConfigurationError(
            f"delta must be strictly between 0 and 1, got {value!r}.",
            why="δ = 0 needs no Gaussian tail bound and δ >= 1 promises nothing.",
            fix="use a δ far below 1/n, such as 1e-6.",
        )
    return delta


def _delta_or_zero(value: Value) -> Fraction:
    delta = as_fraction(value, "delta", allow_zero=True)
    if not delta < 1:
        raise ConfigurationError(f"delta must be below 1, got {value!r}.")
    return delta


def _sqrt_up(x: Fraction) -> Fraction:
    return round_up(sqrt_bounds(x, bits=64)[1])


# Laplace -----------------------------------------------------------------------------------------


def laplace_scale(sensitivity: Value, epsilon: Value) -> Fraction:
    """Noise scale ``b = Δ/ε`` for pure ε-DP (exact).

    Example:
        >>> laplace_scale(3, "0.1")
        Fraction(30, 1)
    """
    return positive_fraction(sensitivity, "sensitivity") / as_fraction(epsilon, "epsilon")


def laplace_epsilon(sensitivity: Value, scale: Value) -> Fraction:
    """The ε spent by Laplace noise of scale ``b``: ``Δ/b`` (exact).

    Example:
        >>> laplace_epsilon(1, 4)
        Fraction(1, 4)
    """
    return positive_fraction(sensitivity, "sensitivity") / positive_fraction(scale, "scale")


def _log_one_minus(delta: Fraction) -> tuple[Fraction, Fraction]:
    """Bounds on ``−ln(1 − δ) >= 0``."""
    if delta == 0:
        return Fraction(0), Fraction(0)
    lo, hi = ln_bounds(1 - delta)
    return -hi, -lo


def laplace_scale_approx(
    diameter: Value, epsilon: Value, delta: Value, *, tight: bool = False
) -> Fraction:
    """Scale for (ε, δ)-DP Laplace perturbation of values in a domain of diameter ``diam``.

    ``b = diam/(ε − ln(1−δ))`` as in course document 004, or with ``tight=True`` the exact
    threshold ``diam/(ε − 2·ln(1−δ))``. Rounded up.

    Example:
        >>> laplace_scale_approx(10, 1, 0) == 10
        True
        >>> laplace_scale_approx(10, 1, "0.1", tight=True) < laplace_scale_approx(10, 1, "0.1")
        True
    """
    diam = positive_fraction(diameter, "diameter")
    eps = as_fraction(epsilon, "epsilon")
    low, _ = _log_one_minus(_delta_or_zero(delta))
    return round_up(diam / (eps + (2 if tight else 1) * low))


def laplace_epsilon_approx(
    diameter: Value, scale: Value, delta: Value, *, tight: bool = False
) -> Fraction:
    """The ε (rounded up) that Laplace perturbation with scale ``b`` satisfies at a given δ.

    Inverts :func:`laplace_scale_approx`: ``ε = diam/b + ln(1−δ)`` (or ``+ 2·ln(1−δ)`` if tight);
    0 when δ alone covers the whole loss.

    Example:
        >>> laplace_epsilon_approx(10, 10, 0)
        Fraction(1, 1)
    """
    diam = positive_fraction(diameter, "diameter")
    b = positive_fraction(scale, "scale")
    # Subtracting a *lower* bound on −ln(1−δ) keeps ε an upper bound.
    low, _ = _log_one_minus(_delta_or_zero(delta))
    return max(Fraction(0), round_up(diam / b - (2 if tight else 1) * low))


def laplace_delta(sensitivity: Value, scale: Value, epsilon: Value) -> Fraction:
    """Tight δ(ε) of continuous Laplace noise: ``max(0, 1 − exp((ε − Δ/b)/2))``, rounded up.

    Example:
        >>> laplace_delta(1, 1, 1)
        Fraction(0, 1)
        >>> 0 < laplace_delta(2, 1, 1) < 1
        True
    """
    shift = positive_fraction(sensitivity, "sensitivity") / positive_fraction(scale, "scale")
    eps = as_fraction(epsilon, "epsilon", allow_zero=True)
    if eps >= shift:
        return Fraction(0)
    low, _ = exp_bounds((eps - shift) / 2)
    return round_up(1 - low)


# Gaussian: zCDP ----------------------------------------------------------------------------------


def gaussian_sigma2_zcdp(sensitivity: Value, rho: Value) -> Fraction:
    """Variance parameter ``σ² = Δ²/(2ρ)`` for ρ-zCDP (exact, no square root needed).

    Example:
        >>> gaussian_sigma2_zcdp(2, Fraction(1, 8))
        Fraction(16, 1)
    """
    delta_ = positive_fraction(sensitivity, "sensitivity")
    return delta_ * delta_ / (2 * as_fraction(rho, "rho"))


def gaussian_sigma_zcdp(sensitivity: Value, rho: Value) -> Fraction:
    """``σ = Δ/√(2ρ)``, rounded up to a rational.

    Example:
        >>> gaussian_sigma_zcdp(1, Fraction(1, 2))
        Fraction(1, 1)
    """
    return _sqrt_up(gaussian_sigma2_zcdp(sensitivity, rho))


def gaussian_rho(sensitivity: Value, sigma: Value) -> Fraction:
    """The ρ of Gaussian noise with standard deviation parameter σ: ``Δ²/(2σ²)`` (exact).

    Example:
        >>> gaussian_rho(1, 2)
        Fraction(1, 8)
    """
    delta_ = positive_fraction(sensitivity, "sensitivity")
    s = positive_fraction(sigma, "sigma")
    return delta_ * delta_ / (2 * s * s)


# Gaussian: classic (ε, δ) --------------------------------------------------------------------------


def _classic_factor(delta: Fraction) -> Fraction:
    """An upper bound on ``√(2 ln(1.25/δ))``."""
    _, ln_hi = ln_bounds(Fraction(5, 4) / delta)
    return sqrt_bounds(2 * ln_hi, bits=64)[1]


def _check_classic_epsilon(eps: Fraction) -> None:
    if not 0 < eps < 1:
        raise ConfigurationError(
            f"the classic Gaussian bound needs 0 < epsilon < 1, got {float(eps):.6g}.",
            why="Dwork & Roth's Theorem A.1 is proved only for ε < 1.",
            fix="use the analytic Gaussian calibration (gaussian_sigma_analytic) instead.",
        )


def gaussian_sigma_classic(sensitivity: Value, epsilon: Value, delta: Value) -> Fraction:
    """``σ = Δ·√(2 ln(1.25/δ))/ε`` for (ε, δ)-DP with ε < 1, rounded up."""
    eps = as_fraction(epsilon, "epsilon")
    _check_classic_epsilon(eps)
    delta_ = positive_fraction(sensitivity, "sensitivity")
    return round_up(delta_ * _classic_factor(_delta(delta)) / eps)


def gaussian_epsilon_classic(sensitivity: Value, sigma: Value, delta: Value) -> Fraction:
    """The ε (rounded up) that the classic bound gives σ at δ: ``Δ·√(2 ln(1.25/δ))/σ``.

    Example:
        >>> e = gaussian_epsilon_classic(1, gaussian_sigma_classic(1, "0.5", "1e-5"), "1e-5")
        >>> Fraction(1, 2) - Fraction(1, 10**6) < e <= Fraction(1, 2)
        True
    """
    delta_ = positive_fraction(sensitivity, "sensitivity")
    s = positive_fraction(sigma, "sigma")
    eps = round_up(delta_ * _classic_factor(_delta(delta)) / s)
    _check_classic_epsilon(eps)
    return eps


# Gaussian: analytic (ε, δ) ---------------------------------------------------------------------------


def gaussian_delta_analytic(sensitivity: Value, sigma: Value, epsilon: Value) -> Fraction:
    """An upper bound on the exact δ(ε) of continuous Gaussian noise (Balle & Wang 2018, Thm 8).

    Example:
        >>> 2.9e-6 < float(gaussian_delta_analytic(1, 4, 1)) < 3.0e-6
        True
    """
    delta_ = positive_fraction(sensitivity, "sensitivity")
    s = positive_fraction(sigma, "sigma")
    eps = as_fraction(epsilon, "epsilon", allow_zero=True)
    return _analytic_delta(delta_, s, eps)


def _analytic_delta(sensitivity: Fraction, sigma: Fraction, epsilon: Fraction) -> Fraction:
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    _, first_hi = normal_cdf_bounds(a - b, digits=25)
    second_lo, _ = normal_cdf_bounds(-a - b, digits=25)
    e_lo, _ = exp_bounds(epsilon, digits=30)
    return max(Fraction(0), round_up(first_hi - e_lo * second_lo))


def _analytic_delta_float(sensitivity: float, sigma: float, epsilon: float) -> float:
    """Floating-point δ(ε) of the Gaussian mechanism: only to *guess* a scale, never to certify."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    first = 0.5 * math.erfc((b - a) / math.sqrt(2))
    second = 0.5 * math.erfc((a + b) / math.sqrt(2))
    return first - math.exp(min(epsilon, 700.0)) * second


def _float_search(ok: Callable[[float], bool], lo: float, hi: float) -> float:
    """Smallest float in ``[lo, hi]`` (to ~1e-12 relative) where the monotone ``ok`` holds."""
    for _ in range(200):
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def _certify_up(ok: Callable[[Fraction], bool], guess: float) -> Fraction:
    """Round a floating-point guess up until the exact check ``ok`` certifies it."""
    candidate = round_up(Fraction(guess) * (1 + _RELATIVE_STEP), bits=40)
    while not ok(candidate):
        candidate = round_up(candidate * (1 + 256 * _RELATIVE_STEP), bits=40)
    return candidate


def gaussian_sigma_analytic(sensitivity: Value, epsilon: Value, delta: Value) -> Fraction:
    """The smallest σ with analytic δ(ε) <= δ, within a relative 2**-24, rounded up.

    A floating-point search finds the candidate; the exact check with certified bounds on Φ then
    decides, moving the candidate up until it passes.

    Example:
        >>> s = gaussian_sigma_analytic(1, 1, "1e-5")
        >>> 3.7306 < float(s) < 3.7307
        True
    """
    delta_ = positive_fraction(sensitivity, "sensitivity")
    eps = as_fraction(epsilon, "epsilon")
    target = _delta(delta)
    d, e, t = float(delta_), float(eps), float(target)
    guess = _float_search(lambda s: _analytic_delta_float(d, s, e) <= t, d * 1e-9, d * 1e9)
    return _certify_up(lambda s: _analytic_delta(delta_, s, eps) <= target, guess)


def gaussian_epsilon_analytic(sensitivity: Value, sigma: Value, delta: Value) -> Fraction:
    """The smallest ε with analytic δ(ε) <= δ for noise σ, within a relative 2**-24, rounded up.

    Example:
        >>> e = gaussian_epsilon_analytic(1, gaussian_sigma_analytic(1, 1, "1e-5"), "1e-5")
        >>> 0.9999 < float(e) <= 1.0001
        True
    """
    delta_ = positive_fraction(sensitivity, "sensitivity")
    s = positive_fraction(sigma, "sigma")
    target = _delta(delta)
    if _analytic_delta(delta_, s, Fraction(0)) <= target:
        return Fraction(0)
    d, sf, t = float(delta_), float(s), float(target)
    guess = _float_search(lambda e: _analytic_delta_float(d, sf, e) <= t, 0.0, 1e4)
    return _certify_up(lambda e: _analytic_delta(delta_, s, e) <= target, guess)


# Discrete Gaussian (ε, δ) ----------------------------------------------------------------------------


def _integer_sensitivity(sensitivity: Value) -> int:
    value = positive_fraction(sensitivity, "sensitivity")
    if value.denominator != 1:
        raise ConfigurationError(
            f"the discrete Gaussian bound needs an integer sensitivity, got {value}.",
            why="integer-valued queries differ by whole numbers; round the sensitivity up.",
            fix=f"pass sensitivity={math.ceil(value)}.",
        )
    return int(value)


def _discrete_delta(shift: int, sigma2: Fraction, epsilon: Fraction, bits: int) -> Fraction:
    centre = epsilon * sigma2 / shift
    first = math.floor(centre - Fraction(shift, 2)) + 1
    second = math.floor(centre + Fraction(shift, 2)) + 1
    (_, p_first), (p_second, _) = at_least_bounds(sigma2, (first, second), bits)
    e_lo, _ = exp_bounds(epsilon, digits=bits * 31 // 100 + 10)
    return max(Fraction(0), round_up(p_first - e_lo * p_second))


def _delta_bits(delta: Fraction) -> int:
    return 48 + max(0, -math.floor(math.log2(delta)))


def discrete_gaussian_delta(sensitivity: Value, sigma2: Value, epsilon: Value) -> Fraction:
    """An upper bound on the exact δ(ε) of discrete Gaussian noise (CKS 2020, Thm 7).

    ``sensitivity`` must be an integer (the most an integer query moves between neighbours).
    The cost grows with σ (the tails are summed term by term).

    Example:
        >>> d = discrete_gaussian_delta(1, 16, 1)
        >>> 3.05e-6 < float(d) < 3.06e-6
        True
    """
    shift = _integer_sensitivity(sensitivity)
    s2 = positive_fraction(sigma2, "sigma2")
    eps = as_fraction(epsilon, "epsilon", allow_zero=True)
    return _discrete_delta(shift, s2, eps, 64)


@lru_cache(maxsize=256)
def _discrete_sigma2(shift: int, eps: Fraction, target: Fraction) -> Fraction:
    d, e, t = float(shift), float(eps), float(target)
    guess = _float_search(lambda s: _analytic_delta_float(d, s, e) <= t, d * 1e-9, d * 1e9)
    bits = _delta_bits(target)
    return _certify_up(lambda s2: _discrete_delta(shift, s2, eps, bits) <= target, guess * guess)


def discrete_gaussian_sigma2(sensitivity: Value, epsilon: Value, delta: Value) -> Fraction:
    """A σ² (rounded up) with discrete Gaussian δ(ε) <= δ, certified by the exact CKS bound.

    The candidate is the analytic continuous calibration, which CKS show is nearly identical; it
    is raised until the exact discrete bound is certified. The cost grows with σ.

    Example:
        >>> 13.9 < float(discrete_gaussian_sigma2(1, 1, "1e-5")) < 14.0
        True
    """
    shift = _integer_sensitivity(sensitivity)
    return _discrete_sigma2(shift, as_fraction(epsilon, "epsilon"), _delta(delta))


# Accuracy lower bounds ----------------------------------------------------------------------------


def accuracy_lower_bound(diameter: Value, epsilon: Value, delta: Value = 0) -> Fraction:
    """``(1−δ)·diam/(2(1+e^ε))``: no (ε, δ)-DP mechanism has a smaller worst expected error.

    Course document 004, Theorem 4. Rounded down.

    Example:
        >>> float(accuracy_lower_bound(1, "0.1", "0.1")) > 0.21
        True
    """
    diam = positive_fraction(diameter, "diameter")
    eps = as_fraction(epsilon, "epsilon")
    d = _delta_or_zero(delta)
    _, e_hi = exp_bounds(eps)
    return round_down((1 - d) * diam / (2 * (1 + e_hi)))


def discrete_accuracy_lower_bound(
    min_distance: Value, others: int, epsilon: Value, delta: Value = 0
) -> Fraction:
    """``(1−δ)·κ·m/(m + e^ε)`` for a domain of ``m + 1`` points at least ``κ`` apart (rounded down).

    Course document 004, Theorem 5 (with κ = 1 it bounds the rate of wrong answers).

    Example:
        >>> float(discrete_accuracy_lower_bound(1, 49, "0.1", "0.1")) > 0.87
        True
    """
    kappa = positive_fraction(min_distance, "min_distance")
    if isinstance(others, bool) or not isinstance(others, int) or others < 1:
        raise ConfigurationError(f"others (m) must be a positive integer, got {others!r}.")
    eps = as_fraction(epsilon, "epsilon")
    d = _delta_or_zero(delta)
    _, e_hi = exp_bounds(eps)
    return round_down((1 - d) * kappa * others / (others + e_hi))
