"""Certified exact arithmetic: rational bounds on e^x, ln x, √x and π, rounded toward safety.

Noise distributions, calibration formulas, accounting conversions and local protocols all involve
numbers that are not rational. Dalenius never lets a floating-point approximation of them decide
anything that affects privacy: each function here returns exact rationals on a known side of the
true value, and the caller picks the side that is safe (the larger noise, the larger loss, the
smaller remaining budget). Mechanisms, accounting and local protocols are sibling layers that may
not import one another, so the one copy of this arithmetic lives here, below all of them.

Where the bounds come from:

* ``exp`` and ``ln`` use :mod:`decimal`, whose ``exp`` and ``ln`` are documented to be correctly
  rounded (to nearest). The argument is rounded down and up, and each result widened by one unit
  in its last place unless the operation was exact (the ``Inexact`` flag is clear, which happens
  only for ``e**0`` and ``ln 1``), so the interval is rigorous: both functions are increasing.
* ``sqrt`` uses :func:`math.isqrt` on scaled integers (exact).
* π is a 100-digit constant, widened by one unit in its last digit.

Two families of rounding keep the rationals small, each in the direction the caller names:
:func:`grid_up`/:func:`grid_down` to a multiple of ``2**-bits`` (absolute; the one-sided
``*_up``/``*_down`` bounds are on the ``2**-PRECISION`` grid), and :func:`round_up`/
:func:`round_down` to about ``bits`` significant bits (relative, for noise scales of any size).

Example:
    >>> lo, hi = exp_bounds(Fraction(1))
    >>> lo < hi and float(lo) == float(hi) == math.e
    True
    >>> sqrt_down(Fraction(2)) ** 2 < 2 < sqrt_up(Fraction(2)) ** 2
    True
    >>> ln_up(Fraction(1)) == ln_down(Fraction(1)) == 0
    True
"""

from __future__ import annotations

import math
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Context, Decimal, Inexact
from fractions import Fraction

Interval = tuple[Fraction, Fraction]
"""A closed interval ``(lo, hi)`` of exact rationals known to contain a real number."""

PRECISION = 128
"""Bits after the binary point of the one-sided bounds (``exp_up``, ``ln_down``, ...): their grid
is ``2**-128``."""

_ONE_SIDED_DIGITS = 45
"""Decimal digits behind the one-sided bounds: their intervals are far narrower than ``2**-128``
(about ``3e-39``), so rounding onto the grid decides the result."""

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


def _increasing(
    function: str, x_lo: Decimal, x_hi: Decimal, digits: int
) -> tuple[Decimal, Decimal]:
    """Bounds on ``function(x)`` for ``x_lo <= x <= x_hi``, ``function`` increasing and correctly
    rounded in :mod:`decimal` (``exp`` or ``ln``).

    A correctly rounded result is within half a unit in the last place of the true value, so one
    step outward (``next_minus``/``next_plus``) passes it; an exact result needs no step.
    """
    ctx = _context(digits + 5)
    lo = getattr(ctx, function)(x_lo)
    if ctx.flags[Inexact]:
        lo = ctx.next_minus(lo)
    ctx.clear_flags()
    hi = getattr(ctx, function)(x_hi)
    if ctx.flags[Inexact]:
        hi = ctx.next_plus(hi)
    return lo, hi


def exp_bounds(x: Fraction, digits: int = 40) -> Interval:
    """Bounds on ``e**x`` with relative width about ``10**-digits`` (times ``1 + |x|``).

    Example:
        >>> lo, hi = exp_bounds(Fraction(-1, 2), digits=30)
        >>> float(lo) == float(hi) == 0.6065306597126334
        True
        >>> exp_bounds(Fraction(0))
        (Fraction(1, 1), Fraction(1, 1))
    """
    x = Fraction(x)
    x_lo, x_hi = _decimal_bounds(x, digits)
    lo, hi = _increasing("exp", x_lo, x_hi, digits)
    # e**x > 0: a lower bound stepped below zero (after underflow) is replaced by zero.
    return Fraction(max(lo, Decimal(0))), Fraction(hi)


def ln_bounds(x: Fraction, digits: int = 40) -> Interval:
    """Bounds on the natural logarithm of ``x > 0``.

    Example:
        >>> lo, hi = ln_bounds(Fraction(2))
        >>> lo < hi and float(lo) == float(hi) == math.log(2)
        True
    """
    x = Fraction(x)
    if x <= 0:
        raise ValueError(f"ln is defined for x > 0, got {x}")
    x_lo, x_hi = _decimal_bounds(x, digits + _int_digits(1 / x))
    lo, hi = _increasing("ln", x_lo, x_hi, digits)
    return Fraction(lo), Fraction(hi)


def sqrt_bounds(x: Fraction, bits: int = PRECISION) -> Interval:
    """Bounds on ``√x`` for ``x >= 0`` with absolute width ``2**-bits`` (exact integer square roots).

    Example:
        >>> sqrt_bounds(Fraction(9, 4))
        (Fraction(3, 2), Fraction(3, 2))
    """
    x = Fraction(x)
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


# -- one-sided bounds on the 2**-PRECISION grid ----------------------------------------------------


def sqrt_down(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r <= √x``, within 2⁻¹²⁸ of it (exact for exact squares on the grid).

    Example:
        >>> sqrt_down(Fraction(9, 4))
        Fraction(3, 2)
    """
    return sqrt_bounds(Fraction(x))[0]


def sqrt_up(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r >= √x``, within 2⁻¹²⁸ of it.

    Example:
        >>> sqrt_up(Fraction(2)) ** 2 > 2
        True
    """
    return sqrt_bounds(Fraction(x))[1]


def ln_down(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r <= ln x``, within 2⁻¹²⁶ of it, for ``x > 0``.

    Example:
        >>> float(ln_down(Fraction(10**6)))
        13.815510557964274
    """
    return grid_down(ln_bounds(Fraction(x), _ONE_SIDED_DIGITS)[0])


def ln_up(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r >= ln x``, within 2⁻¹²⁶ of it, for ``x > 0``.

    Example:
        >>> ln_up(Fraction(2)) > Fraction(6931471805599453, 10**16)
        True
    """
    return grid_up(ln_bounds(Fraction(x), _ONE_SIDED_DIGITS)[1])


def exp_down(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r <= eˣ``, on the 2⁻¹²⁸ grid (relative error about 2⁻¹⁰⁰).

    Example:
        >>> exp_down(Fraction(0))
        Fraction(1, 1)
    """
    return grid_down(exp_bounds(Fraction(x), _ONE_SIDED_DIGITS)[0])


def exp_up(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r >= eˣ``, on the 2⁻¹²⁸ grid (relative error about 2⁻¹⁰⁰).

    Example:
        >>> exp_up(Fraction(1)) > Fraction(27182818284590452, 10**16)
        True
    """
    return grid_up(exp_bounds(Fraction(x), _ONE_SIDED_DIGITS)[1])


# -- rounding toward safety ------------------------------------------------------------------------


def grid_up(x: Fraction, bits: int = PRECISION) -> Fraction:
    """The smallest multiple of ``2**-bits`` that is ``>= x`` (what is spent is rounded up).

    Example:
        >>> grid_up(Fraction(1, 3)) > Fraction(1, 3)
        True
        >>> grid_up(Fraction(1, 3), 2)
        Fraction(1, 2)
    """
    x = Fraction(x)
    return Fraction(-((-x.numerator << bits) // x.denominator), 1 << bits)


def grid_down(x: Fraction, bits: int = PRECISION) -> Fraction:
    """The largest multiple of ``2**-bits`` that is ``<= x`` (what remains is rounded down).

    Example:
        >>> grid_down(Fraction(1, 3)) < Fraction(1, 3)
        True
        >>> grid_down(Fraction(1, 3), 2)
        Fraction(1, 4)
    """
    x = Fraction(x)
    return Fraction((x.numerator << bits) // x.denominator, 1 << bits)


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
