"""Every certified bound of :mod:`dalenius.core.exact` is on its promised side of the true value.

Two references, both independent of how the module computes:

* :mod:`decimal` at 100 significant digits (correctly rounded ``sqrt``, ``ln`` and ``exp``), for
  the one-sided bounds on the 2⁻¹²⁸ grid and their tightness;
* exact rational arithmetic (:mod:`fractions` and integers): Taylor series of ``e^x`` and the
  ``atanh`` series of ``ln x`` with their tails bounded and every rounding directed outward, at
  2⁻⁴⁰⁰, which must lie *inside* every interval the module returns — a proof, for that argument,
  that the interval holds the true value.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dalenius.core.exact import (
    PI_BOUNDS,
    PRECISION,
    exp_bounds,
    exp_down,
    exp_up,
    floor_log2,
    grid_down,
    grid_up,
    ln_bounds,
    ln_down,
    ln_up,
    round_down,
    round_up,
    sqrt_bounds,
    sqrt_down,
    sqrt_up,
)

DIGITS = 100
GRID = Fraction(1, 2**PRECISION)
REFERENCE_BITS = 400


def reference(function: str, x: Fraction) -> tuple[Fraction, Fraction]:
    """An interval [lo, hi] that contains function(x), from 100-digit decimal arithmetic."""
    with localcontext() as context:
        context.prec = DIGITS + 10
        # x itself is rounded to 110 digits here; its relative error is far below the slack.
        value = Decimal(x.numerator) / Decimal(x.denominator)
        context.prec = DIGITS
        result = getattr(value, function)()
    exact = Fraction(result)
    slack = abs(exact) * Fraction(1, 10 ** (DIGITS - 5)) + Fraction(1, 10**DIGITS)
    return exact - slack, exact + slack


# -- the exact rational references -----------------------------------------------------------------


def _floor(x: Fraction, bits: int = REFERENCE_BITS) -> int:
    return math.floor(x * 2**bits)


def _ceil(x: Fraction, bits: int = REFERENCE_BITS) -> int:
    return math.ceil(x * 2**bits)


def exp_reference(x: Fraction) -> tuple[Fraction, Fraction]:
    """``e**x`` bracketed in exact arithmetic: the Taylor series at ``r = x/2**k`` (``|r| <= 1/4``),
    whose tail from term ``n`` on is at most ``|r**n/n!|·4/3``, then ``k`` squarings rounded
    outward (both ends are positive, so squaring keeps the order).
    """
    r, k = Fraction(x), 0
    while abs(r) > Fraction(1, 4):
        r, k = r / 2, k + 1
    total, term, n = Fraction(0), Fraction(1), 0
    while abs(term) >= Fraction(1, 2 ** (REFERENCE_BITS + 40)):
        total += term
        n += 1
        term = term * r / n
    tail = 2 * abs(term)
    one = 1 << REFERENCE_BITS
    lo, hi = _floor(total - tail), _ceil(total + tail)
    for _ in range(k):
        lo, hi = lo * lo // one, -(-hi * hi // one)
    return Fraction(lo, one), Fraction(hi, one)


def _atanh_reference(z: Fraction) -> tuple[int, int]:
    """``atanh(z)·2**W`` bracketed for ``0 <= z <= 1/3`` (``W = REFERENCE_BITS + 32``): positive
    terms ``z**(2j+1)/(2j+1)``, each rounded outward, and the tail ``<= 9/8·z**(2J+1)/(2J+1)``."""
    w = REFERENCE_BITS + 32
    one = 1 << w
    z_lo, z_hi = _floor(z, w), _ceil(z, w)
    sq_lo, sq_hi = z_lo * z_lo // one, -(-z_hi * z_hi // one)
    p_lo, p_hi, lo, hi, j = z_lo, z_hi, 0, 0, 0
    while p_hi > 0 and p_hi.bit_length() > 8:
        lo += p_lo // (2 * j + 1)
        hi += -(-p_hi // (2 * j + 1))
        p_lo, p_hi = p_lo * sq_lo // one, -(-p_hi * sq_hi // one)
        j += 1
    hi += -(-9 * p_hi // (8 * (2 * j + 1)))
    return lo, hi


def ln_reference(x: Fraction) -> tuple[Fraction, Fraction]:
    """``ln x = e·ln 2 + 2·atanh((m−1)/(m+1))`` for ``x = m·2**e``, ``1 <= m < 2``, bracketed."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    m = x / Fraction(2) ** e
    if m < 1:
        e, m = e - 1, m * 2
    a_lo, a_hi = _atanh_reference((m - 1) / (m + 1))
    l_lo, l_hi = _atanh_reference(Fraction(1, 3))
    if e < 0:
        l_lo, l_hi = l_hi, l_lo
    scale = 1 << (REFERENCE_BITS + 32)
    return Fraction(e * 2 * l_lo + 2 * a_lo, scale), Fraction(e * 2 * l_hi + 2 * a_hi, scale)


def test_the_references_agree_with_known_values() -> None:
    # Published digits, truncated: the true value is within one unit of the last digit above.
    e_digits = Fraction(Decimal("2.718281828459045235360287471352662497757"))
    lo, hi = exp_reference(Fraction(1))
    assert e_digits <= lo <= hi <= e_digits + Fraction(1, 10**39)
    assert hi - lo < Fraction(1, 2**380)
    ln2_digits = Fraction(Decimal("0.693147180559945309417232121458176568"))
    lo, hi = ln_reference(Fraction(2))
    assert ln2_digits <= lo <= hi <= ln2_digits + Fraction(1, 10**36)
    assert hi - lo < Fraction(1, 2**380)
    assert exp_reference(Fraction(0)) == (1, 1) and ln_reference(Fraction(1)) == (0, 0)


# -- strategies ------------------------------------------------------------------------------------

positive = st.fractions(
    min_value=Fraction(1, 10**12), max_value=Fraction(10**12), max_denominator=10**15
)
non_negative = st.one_of(st.just(Fraction(0)), positive)
exponents = st.fractions(min_value=-60, max_value=60, max_denominator=10**9)
digits = st.integers(min_value=5, max_value=80)


# -- the intervals ---------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(exponents, digits)
def test_exp_bounds_contain_the_exact_reference(x: Fraction, d: int) -> None:
    lo, hi = exp_bounds(x, d)
    ref_lo, ref_hi = exp_reference(x)
    assert lo <= ref_lo and ref_hi <= hi
    assert hi - lo <= ref_hi * Fraction(1 + abs(x).__ceil__(), 10 ** (d - 2))


@settings(max_examples=150, deadline=None)
@given(positive, digits)
def test_ln_bounds_contain_the_exact_reference(x: Fraction, d: int) -> None:
    lo, hi = ln_bounds(x, d)
    ref_lo, ref_hi = ln_reference(x)
    assert lo <= ref_lo and ref_hi <= hi
    assert hi - lo <= max(abs(ref_hi), Fraction(1)) * Fraction(1, 10 ** (d - 2))


@settings(max_examples=150, deadline=None)
@given(non_negative, st.integers(min_value=1, max_value=200))
def test_sqrt_bounds_square_around_the_argument(x: Fraction, bits: int) -> None:
    lo, hi = sqrt_bounds(x, bits)
    assert lo**2 <= x <= hi**2  # exact, no reference needed
    assert hi - lo <= Fraction(1, 2**bits)


def test_exact_arguments_give_exact_intervals() -> None:
    assert exp_bounds(Fraction(0)) == (1, 1)
    assert ln_bounds(Fraction(1)) == (0, 0)
    lo, hi = ln_bounds(Fraction(1) + Fraction(1, 10**30))
    assert 0 < lo < hi


def test_pi_bounds_contain_pi() -> None:
    """Machin's π = 16·atan(1/5) − 4·atan(1/239); a partial sum of the alternating series of atan
    with an odd number of terms is above it, with an even number below."""

    def atan(x: Fraction, terms: int) -> Fraction:
        return sum(
            (Fraction((-1) ** k, 2 * k + 1) * x ** (2 * k + 1) for k in range(terms)), Fraction(0)
        )

    upper = 16 * atan(Fraction(1, 5), 81) - 4 * atan(Fraction(1, 239), 40)
    lower = 16 * atan(Fraction(1, 5), 80) - 4 * atan(Fraction(1, 239), 41)
    assert PI_BOUNDS[0] <= lower < upper <= PI_BOUNDS[1]


# -- the one-sided bounds on the 2**-128 grid ------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(non_negative)
def test_sqrt_bounds_bracket_the_root(x: Fraction) -> None:
    lo, hi = reference("sqrt", x)
    assert sqrt_down(x) <= hi and sqrt_up(x) >= lo
    assert sqrt_down(x) ** 2 <= x <= sqrt_up(x) ** 2  # exact check, no reference needed
    assert sqrt_up(x) - sqrt_down(x) <= GRID


@settings(max_examples=200, deadline=None)
@given(positive)
def test_ln_bounds_bracket_the_logarithm(x: Fraction) -> None:
    lo, hi = reference("ln", x)
    assert ln_down(x) <= hi
    assert ln_up(x) >= lo
    assert ln_up(x) - ln_down(x) <= 64 * GRID
    ref_lo, ref_hi = ln_reference(x)
    assert ln_down(x) <= ref_lo and ref_hi <= ln_up(x)


@settings(max_examples=200, deadline=None)
@given(exponents)
def test_exp_bounds_bracket_the_exponential(x: Fraction) -> None:
    lo, hi = reference("exp", x)
    assert exp_down(x) <= hi
    assert exp_up(x) >= lo
    assert exp_up(x) - exp_down(x) <= max(Fraction(1), lo) * 2 * GRID * 2**12
    ref_lo, ref_hi = exp_reference(x)
    assert exp_down(x) <= ref_lo and ref_hi <= exp_up(x)


def test_exact_points() -> None:
    assert sqrt_down(Fraction(9, 4)) == sqrt_up(Fraction(9, 4)) == Fraction(3, 2)
    assert ln_down(1) == ln_up(1) == 0
    assert exp_down(0) == 1 <= exp_up(0)
    assert ln_down(Fraction(1, 2)) < 0 < ln_up(2)


# -- rounding toward safety ------------------------------------------------------------------------


def test_rounding_helpers_round_outward() -> None:
    third = Fraction(1, 3)
    assert grid_down(third) < third < grid_up(third)
    assert grid_up(third) - grid_down(third) == GRID
    assert grid_up(Fraction(1, 4)) == grid_down(Fraction(1, 4)) == Fraction(1, 4)


rationals = st.fractions(min_value=-(10**40), max_value=10**40, max_denominator=10**40).filter(
    lambda x: x != 0
)


@settings(max_examples=300, deadline=None)
@given(rationals, st.integers(min_value=1, max_value=200))
def test_grid_rounding_is_the_nearest_grid_point_on_its_side(x: Fraction, bits: int) -> None:
    step = Fraction(1, 2**bits)
    up, down = grid_up(x, bits), grid_down(x, bits)
    assert down <= x <= up and up - down <= step
    assert (up / step).denominator == 1 and (down / step).denominator == 1


@settings(max_examples=300, deadline=None)
@given(rationals, st.integers(min_value=8, max_value=64))
def test_significant_bit_rounding_rounds_outward_and_keeps_the_bits(x: Fraction, bits: int) -> None:
    up, down = round_up(x, bits), round_down(x, bits)
    assert down <= x <= up
    # Within about 2**-bits of |x| (relative), and with a power-of-two denominator when changed.
    assert up - down <= abs(x) * Fraction(4, 2**bits)
    for rounded in (up, down):
        if rounded != x:
            assert rounded.denominator & (rounded.denominator - 1) == 0


@settings(max_examples=300, deadline=None)
@given(positive)
def test_floor_log2_is_exact(x: Fraction) -> None:
    k = floor_log2(x)
    assert Fraction(2) ** k <= x < Fraction(2) ** (k + 1)


@pytest.mark.parametrize("function", [sqrt_down, sqrt_up])
def test_sqrt_refuses_negative_numbers(function) -> None:
    with pytest.raises(ValueError):
        function(Fraction(-1))


@pytest.mark.parametrize("function", [ln_down, ln_up])
@pytest.mark.parametrize("x", [Fraction(0), Fraction(-2)])
def test_ln_refuses_non_positive_numbers(function, x: Fraction) -> None:
    with pytest.raises(ValueError):
        function(x)
