"""Certified bounds the samplers and the Gaussian need: fixed-point e^-x tables, the normal tail.

Built on :mod:`dalenius.core.exact` (rational bounds on e^x, ln x, √x and π, shared with the
accountants and the local protocols). Here:

* Fixed-point variants (integers scaled by ``2**bits``) serve the samplers' tables, where
  thousands of bounds are needed and exact fractions would be slow.
* Φ, the standard normal CDF, uses a positive power series or the Laplace continued fraction of
  the Mills ratio, both with explicit truncation bounds.

Example:
    >>> exp_neg_fixed(Fraction(0), 8)
    (256, 256)
"""

from __future__ import annotations

import math
from fractions import Fraction

from dalenius.core.exact import PI_BOUNDS, Interval, exp_bounds, sqrt_bounds


def exp_neg_fixed(x: Fraction, bits: int) -> tuple[int, int]:
    """Integers ``lo <= e**-x * 2**bits <= hi`` for ``x >= 0``; ``hi - lo`` is at most 2.

    Example:
        >>> exp_neg_fixed(Fraction(1000), 32)
        (0, 1)
    """
    if x < 0:
        raise ValueError(f"x must be >= 0, got {x}")
    if x == 0:
        return 1 << bits, 1 << bits
    # Below 2**-bits the value only needs the trivial bound; skipping it avoids huge rationals.
    if x > (bits + 2) * Fraction(7, 10):
        return 0, 1
    lo, hi = exp_bounds(-x, digits=bits * 31 // 100 + 12)
    scaled_lo = lo * (1 << bits)
    scaled_hi = hi * (1 << bits)
    return math.floor(scaled_lo), math.ceil(scaled_hi)


def fixed_to_fraction(value: tuple[int, int], bits: int) -> Interval:
    """Turn fixed-point bounds scaled by ``2**bits`` back into a rational interval."""
    return Fraction(value[0], 1 << bits), Fraction(value[1], 1 << bits)


_CF_THRESHOLD = 6
"""Below it the power series is faster; above it the continued fraction is."""


def _normal_sf_series(x: Fraction, tol: Fraction) -> Interval:
    """Bounds on ``S = sum x^(2n+1)/(2n+1)!!`` for ``x >= 0`` (so ``Φ(x) = 1/2 + φ(x)·S``)."""
    term = x
    total = Fraction(0)
    n = 0
    x2 = x * x
    while True:
        total += term
        ratio = x2 / (2 * n + 3)
        nxt = term * ratio
        if ratio <= Fraction(1, 2) and nxt <= tol:
            # Later terms shrink by at least half each time, so they sum to at most 2·nxt.
            return total, total + 2 * nxt
        term = nxt
        n += 1


def _mills_ratio(x: Fraction, tol: Fraction) -> Interval:
    """Bounds on the Mills ratio ``(1 - Φ(x))/φ(x)`` for ``x >= 6`` (where it converges fast).

    Uses Laplace's continued fraction ``1/(x + 1/(x + 2/(x + 3/(x + ...))))``: its partial
    denominators are positive, so successive convergents bracket the value.
    """
    # Convergents A_n/B_n of b0 + K(a_n/b_n) with b0 = 0, a_1 = 1, a_n = n - 1 (n >= 2), b_n = x.
    a_prev, a_cur = Fraction(1), Fraction(0)
    b_prev, b_cur = Fraction(0), Fraction(1)
    previous: Fraction | None = None
    n = 1
    while True:
        a_n = 1 if n == 1 else n - 1
        a_prev, a_cur = a_cur, x * a_cur + a_n * a_prev
        b_prev, b_cur = b_cur, x * b_cur + a_n * b_prev
        current = a_cur / b_cur
        if previous is not None and abs(current - previous) <= tol * current:
            return min(previous, current), max(previous, current)
        previous = current
        n += 1
        if n > 100_000:
            raise ArithmeticError(f"Mills ratio continued fraction did not converge at x={x}")


def normal_sf_bounds(x: Fraction, digits: int = 30) -> Interval:
    """Bounds on ``1 - Φ(x)``, the standard normal upper tail, with relative width ~``10**-digits``.

    Example:
        >>> lo, hi = normal_sf_bounds(Fraction(0))
        >>> lo <= Fraction(1, 2) <= hi
        True
        >>> lo, hi = normal_sf_bounds(Fraction(1))
        >>> f"{float(lo):.12f} {float(hi):.12f}"
        '0.158655253931 0.158655253931'
    """
    if x < 0:
        lo, hi = normal_sf_bounds(-x, digits)
        return 1 - hi, 1 - lo
    tol = Fraction(1, 10 ** (digits + 5))
    # φ(x) = e^{-x²/2} / √(2π)
    e_lo, e_hi = exp_bounds(-x * x / 2, digits + 5)
    root_lo, _ = sqrt_bounds(2 * PI_BOUNDS[0], bits=4 * digits + 20)
    _, root_hi = sqrt_bounds(2 * PI_BOUNDS[1], bits=4 * digits + 20)
    phi_lo, phi_hi = e_lo / root_hi, e_hi / root_lo
    if x >= _CF_THRESHOLD:
        m_lo, m_hi = _mills_ratio(x, tol)
        return phi_lo * m_lo, phi_hi * m_hi
    s_lo, s_hi = _normal_sf_series(x, tol)
    return Fraction(1, 2) - phi_hi * s_hi, Fraction(1, 2) - phi_lo * s_lo


def normal_cdf_bounds(x: Fraction, digits: int = 30) -> Interval:
    """Bounds on ``Φ(x)``, the standard normal CDF.

    Example:
        >>> lo, hi = normal_cdf_bounds(Fraction(-5))
        >>> f"{float(lo):.10e} {float(hi):.10e}"
        '2.8665157188e-07 2.8665157188e-07'
    """
    return normal_sf_bounds(-x, digits)
