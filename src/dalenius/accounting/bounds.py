"""Rational lower and upper bounds for √x, ln x and eˣ, where accounting meets irrational numbers.

Privacy arithmetic in Dalenius is exact, but some conversions (zCDP → (ε, δ), advanced
composition) involve square roots, logarithms and exponentials. A float there could round the
wrong way and under-charge a budget. These functions instead return a
:class:`~fractions.Fraction` on the 2⁻¹²⁸ grid that is *provably* on the requested side of the true
value: every intermediate step is integer fixed-point arithmetic with directed rounding, and
truncated series carry an explicit bound on their tail. Callers round what is spent up and what
remains down by picking ``*_up`` or ``*_down``.

Example:
    >>> sqrt_down(Fraction(2)) ** 2 < 2 < sqrt_up(Fraction(2)) ** 2
    True
    >>> ln_up(Fraction(1)) == ln_down(Fraction(1)) == 0
    True
"""

from __future__ import annotations

import math
from fractions import Fraction

PRECISION = 128
"""Bits after the binary point of every bound returned here (the result grid is 2⁻¹²⁸)."""

_GUARD = 24  # extra working bits so the rounding of many series terms stays below one result ulp


def _floor_scaled(x: Fraction, bits: int) -> int:
    """``floor(x · 2**bits)``."""
    return (x.numerator << bits) // x.denominator


def _ceil_scaled(x: Fraction, bits: int) -> int:
    """``ceil(x · 2**bits)``."""
    return -((-x.numerator << bits) // x.denominator)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _result(scaled: int, bits: int, *, up: bool) -> Fraction:
    """Round the fixed-point value ``scaled / 2**bits`` outward onto the 2⁻PRECISION grid."""
    shift = bits - PRECISION
    if shift <= 0:
        return Fraction(scaled << -shift, 1 << PRECISION)
    value = _ceil_div(scaled, 1 << shift) if up else scaled >> shift
    return Fraction(value, 1 << PRECISION)


def _check_non_negative(x: Fraction, name: str) -> Fraction:
    x = Fraction(x)
    if x < 0:
        raise ValueError(f"{name} needs a non-negative argument, got {x}")
    return x


def sqrt_down(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r <= √x``, within 2⁻¹²⁸ of it (exact for exact squares on the grid).

    Example:
        >>> sqrt_down(Fraction(9, 4))
        Fraction(3, 2)
    """
    value = _check_non_negative(Fraction(x), "sqrt_down")
    return Fraction(math.isqrt(_floor_scaled(value, 2 * PRECISION)), 1 << PRECISION)


def sqrt_up(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r >= √x``, within 2⁻¹²⁸ of it.

    Example:
        >>> sqrt_up(Fraction(2)) ** 2 > 2
        True
    """
    value = _check_non_negative(Fraction(x), "sqrt_up")
    n = _ceil_scaled(value, 2 * PRECISION)
    root = math.isqrt(n)
    if root * root < n:
        root += 1
    return Fraction(root, 1 << PRECISION)


def _atanh_scaled(z: Fraction, bits: int, *, up: bool) -> int:
    """A bound on ``atanh(z) · 2**bits`` for ``0 <= z <= 1/2``, from its odd power series.

    ``atanh z = Σ z^(2k+1)/(2k+1)``; every term is positive, so a truncated sum with terms rounded
    down is a lower bound, and terms rounded up plus the tail bound
    ``z^(2k+1) / ((2k+1)(1 - z²))`` is an upper bound.
    """
    one = 1 << bits
    zz = _ceil_scaled(z, bits) if up else _floor_scaled(z, bits)
    square = (zz * zz + (one - 1 if up else 0)) >> bits
    power = zz
    total = 0
    k = 0
    while power > 0:
        term = _ceil_div(power, 2 * k + 1) if up else power // (2 * k + 1)
        total += term
        k += 1
        power = _ceil_div(power * square, one) if up else (power * square) >> bits
        if power >> 8 == 0:
            # The tail below is < 2**-bits·2**9/(2k+1) <= 2**(9-bits): invisible after rounding
            # to PRECISION = bits - _GUARD bits, yet still added to the upper bound.
            break
    if up:
        # Tail bound power/((2k+1)(1 - z²)) with 1 - z² >= 3/4 because z <= 1/2.
        total += _ceil_div(4 * power, 3 * (2 * k + 1)) + k  # + k: one unit per rounded term
    return total


_LN2_BITS = PRECISION + _GUARD


def _ln2_scaled(*, up: bool) -> int:
    """A bound on ``ln 2 · 2**_LN2_BITS`` (ln 2 = 2·atanh(1/3))."""
    return 2 * _atanh_scaled(Fraction(1, 3), _LN2_BITS, up=up)


def _ln_scaled(x: Fraction, *, up: bool) -> int:
    """A bound on ``ln x · 2**_LN2_BITS`` for ``x > 0``."""
    exponent = x.numerator.bit_length() - x.denominator.bit_length()
    mantissa = x / Fraction(2) ** exponent
    if mantissa < 1:
        exponent -= 1
        mantissa *= 2
    # 1 <= mantissa < 2, so z = (m-1)/(m+1) lies in [0, 1/3) where the series converges fast.
    z = (mantissa - 1) / (mantissa + 1)
    log_mantissa = 2 * _atanh_scaled(z, _LN2_BITS, up=up)
    # A negative exponent multiplies ln 2, so the opposite bound of ln 2 keeps the direction.
    ln2 = _ln2_scaled(up=up if exponent >= 0 else not up)
    return exponent * ln2 + log_mantissa


def ln_down(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r <= ln x``, within 2⁻¹²⁶ of it, for ``x > 0``.

    Example:
        >>> float(ln_down(Fraction(10**6)))
        13.815510557964274
    """
    value = Fraction(x)
    if value <= 0:
        raise ValueError(f"ln_down needs a positive argument, got {value}")
    return _result(_ln_scaled(value, up=False), _LN2_BITS, up=False)


def ln_up(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r >= ln x``, within 2⁻¹²⁶ of it, for ``x > 0``.

    Example:
        >>> ln_up(Fraction(2)) > Fraction(6931471805599453, 10**16)
        True
    """
    value = Fraction(x)
    if value <= 0:
        raise ValueError(f"ln_up needs a positive argument, got {value}")
    return _result(_ln_scaled(value, up=True), _LN2_BITS, up=True)


def _exp_scaled(x: Fraction, *, up: bool) -> tuple[int, int]:
    """A bound on ``eˣ`` for ``x >= 0`` as ``(scaled, bits)``, meaning ``scaled / 2**bits``.

    Halves ``x`` until it is at most 1/2, sums the Taylor series there (positive terms: truncation
    bounds from below; the tail is at most twice the first omitted term), then squares back,
    rounding every product in the same direction.
    """
    halvings = 0
    reduced = x
    while reduced > Fraction(1, 2):
        reduced /= 2
        halvings += 1
    bits = PRECISION + _GUARD + halvings  # each squaring doubles the relative error
    one = 1 << bits
    y = _ceil_scaled(reduced, bits) if up else _floor_scaled(reduced, bits)
    term = one
    total = 0
    k = 0
    while term > 0:
        total += term
        k += 1
        term = _ceil_div(term * y, one * k) if up else (term * y) // (one * k)
        if term >> 8 == 0:
            break
    if up:
        total += 2 * term + k  # the tail (y <= 1/2 makes it <= 2·term) and one unit per term
    for _ in range(halvings):
        total = _ceil_div(total * total, one) if up else (total * total) >> bits
    return total, bits


def exp_down(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r <= eˣ``, on the 2⁻¹²⁸ grid (relative error about 2⁻¹⁰⁰).

    Example:
        >>> exp_down(Fraction(0))
        Fraction(1, 1)
    """
    value = Fraction(x)
    if value >= 0:
        scaled, bits = _exp_scaled(value, up=False)
        return _result(scaled, bits, up=False)
    scaled, bits = _exp_scaled(-value, up=True)
    return _round_down(Fraction(1 << bits, scaled))


def exp_up(x: Fraction | int) -> Fraction:
    """A rational ``r`` with ``r >= eˣ``, on the 2⁻¹²⁸ grid (relative error about 2⁻¹⁰⁰).

    Example:
        >>> exp_up(Fraction(1)) > Fraction(27182818284590452, 10**16)
        True
    """
    value = Fraction(x)
    if value >= 0:
        scaled, bits = _exp_scaled(value, up=True)
        return _result(scaled, bits, up=True)
    scaled, bits = _exp_scaled(-value, up=False)
    return _round_up(Fraction(1 << bits, scaled))


def _round_down(x: Fraction) -> Fraction:
    return Fraction(_floor_scaled(x, PRECISION), 1 << PRECISION)


def _round_up(x: Fraction) -> Fraction:
    return Fraction(_ceil_scaled(x, PRECISION), 1 << PRECISION)


def round_up(x: Fraction) -> Fraction:
    """The smallest multiple of 2⁻¹²⁸ that is ``>= x`` (keeps denominators of charged losses small).

    Example:
        >>> round_up(Fraction(1, 3)) > Fraction(1, 3)
        True
    """
    return _round_up(Fraction(x))


def round_down(x: Fraction) -> Fraction:
    """The largest multiple of 2⁻¹²⁸ that is ``<= x``.

    Example:
        >>> round_down(Fraction(1, 3)) < Fraction(1, 3)
        True
    """
    return _round_down(Fraction(x))
