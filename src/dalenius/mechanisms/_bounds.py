"""Certified rational bounds on the irrational numbers that noise and calibration depend on.

Noise distributions and calibration formulas involve e^x, ln x, √x, π and the normal CDF Φ, none
of which is rational. Dalenius never lets a floating-point approximation of them decide anything
that affects privacy: it computes an interval ``[lo, hi]`` of exact rationals that is guaranteed to
contain the true value, and then uses the end that is safe (the larger noise, the larger loss).

Where the bounds come from:

* ``exp`` and ``ln`` use :mod:`decimal`, whose ``exp`` and ``ln`` are documented to be correctly
  rounded; the argument is rounded down and up, and the result is widened by one unit in the last
  place, so the interval is rigorous.
* ``sqrt`` uses :func:`math.isqrt` on scaled integers (exact).
* π is a 100-digit constant, widened by one unit in its last digit.
* Φ uses a positive power series or the Laplace continued fraction of the Mills ratio, both with
  explicit truncation bounds.

Fixed-point variants (integers scaled by ``2**bits``) serve the samplers' tables, where thousands of
bounds are needed and exact fractions would be slow.

Example:
    >>> lo, hi = exp_bounds(Fraction(1))
    >>> lo < hi and float(lo) == float(hi) == math.e
    True
    >>> exp_neg_fixed(Fraction(0), 8)
    (256, 256)
"""

from __future__ import annotations

import math
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction

Interval = tuple[Fraction, Fraction]
"""A closed interval ``(lo, hi)`` of exact rationals known to contain a real number."""

_PI_TEXT = (
    "3.14159265358979323846264338327950288419716939937510"
    "58209749445923078164062862089986280348253421170679"
)
PI_BOUNDS: Interval = (
    Fraction(_PI_TEXT) - Fraction(1, 10**100),
    Fraction(_PI_TEXT) + Fraction(1, 10**100),
)
"""Rational bounds on π, 100 correct digits."""


def _context(digits: int, rounding: str | None = None) -> Context:
    ctx = Context(prec=digits, Emax=MAX_EMAX, Emin=MIN_EMIN)
    if rounding is not None:
        ctx.rounding = rounding
    return ctx


def _int_digits(x: Fraction) -> int:
    """Decimal digits of the integer part of ``|x|`` (at least 1)."""
    return len(str(abs(x.numerator) // x.denominator))


def _decimal_bounds(x: Fraction, digits: int) -> tuple[Decimal, Decimal]:
    """Decimals ``lo <= x <= hi`` with ``digits`` significant digits after the integer part."""
    prec = digits + _int_digits(x) + 2
    num, den = Decimal(x.numerator), Decimal(x.denominator)
    lo = _context(prec, ROUND_FLOOR).divide(num, den)
    hi = _context(prec, ROUND_CEILING).divide(num, den)
    return lo, hi


def exp_bounds(x: Fraction, digits: int = 40) -> Interval:
    """Bounds on ``e**x`` with relative width about ``10**-digits`` (times ``1 + |x|``).

    Example:
        >>> lo, hi = exp_bounds(Fraction(-1, 2), digits=30)
        >>> float(lo) == float(hi) == 0.6065306597126334
        True
    """
    x_lo, x_hi = _decimal_bounds(x, digits)
    ctx = _context(digits + 5)
    # Decimal.exp is correctly rounded (half-even): one ulp of widening makes the bound rigorous.
    lo = ctx.next_minus(ctx.exp(x_lo))
    hi = ctx.next_plus(ctx.exp(x_hi))
    return Fraction(lo), Fraction(hi)


def ln_bounds(x: Fraction, digits: int = 40) -> Interval:
    """Bounds on the natural logarithm of ``x > 0``.

    Example:
        >>> lo, hi = ln_bounds(Fraction(2))
        >>> lo < hi and float(lo) == float(hi) == math.log(2)
        True
    """
    if x <= 0:
        raise ValueError(f"ln is defined for x > 0, got {x}")
    x_lo, x_hi = _decimal_bounds(x, digits + _int_digits(1 / x))
    ctx = _context(digits + 5)
    lo = ctx.next_minus(ctx.ln(x_lo))
    hi = ctx.next_plus(ctx.ln(x_hi))
    return Fraction(lo), Fraction(hi)


def sqrt_bounds(x: Fraction, bits: int = 128) -> Interval:
    """Bounds on ``√x`` for ``x >= 0`` with absolute width ``2**-bits`` (exact integer square roots).

    Example:
        >>> sqrt_bounds(Fraction(9, 4))
        (Fraction(3, 2), Fraction(3, 2))
    """
    if x < 0:
        raise ValueError(f"sqrt is defined for x >= 0, got {x}")
    scale = 1 << (2 * bits)
    low_int = (x.numerator * scale) // x.denominator
    high_int = -((-x.numerator * scale) // x.denominator)
    root_low = math.isqrt(low_int)
    root_high = math.isqrt(high_int)
    if root_high * root_high != high_int:
        root_high += 1
    return Fraction(root_low, 1 << bits), Fraction(root_high, 1 << bits)


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


def round_up(x: Fraction, bits: int = 48) -> Fraction:
    """The smallest multiple of a power of two >= ``x``, keeping about ``bits`` significant bits.

    Used when a rational has huge terms: rounding a noise scale *up* only adds noise, so it is safe.
    Rationals whose terms already fit in 62 bits are returned unchanged.

    Example:
        >>> round_up(Fraction(1, 3))
        Fraction(1, 3)
        >>> round_up(Fraction(10**30 + 1, 10**30)) > 1
        True
    """
    if abs(x.numerator) < 1 << 62 and x.denominator < 1 << 62:
        return x
    shift = bits - _floor_log2(abs(x))
    return Fraction(math.ceil(x * Fraction(2) ** shift)) / Fraction(2) ** shift


def round_down(x: Fraction, bits: int = 48) -> Fraction:
    """The largest multiple of a power of two <= ``x`` with about ``bits`` significant bits.

    Example:
        >>> round_down(Fraction(2, 3)) == Fraction(2, 3)
        True
    """
    return -round_up(-x, bits)


def _floor_log2(x: Fraction) -> int:
    """``floor(log2(x))`` for ``x > 0``, exactly."""
    guess = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** guess > x:
        guess -= 1
    return guess


def floor_log2(x: Fraction) -> int:
    """``floor(log2(x))`` for a positive rational, computed exactly.

    Example:
        >>> floor_log2(Fraction(1, 3)), floor_log2(Fraction(8))
        (-2, 3)
    """
    if x <= 0:
        raise ValueError(f"x must be > 0, got {x}")
    return _floor_log2(x)


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
