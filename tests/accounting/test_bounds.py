"""The rational bounds for √x, ln x and eˣ are on the promised side of the true value, and tight.

The reference values come from :mod:`decimal` at 100 significant digits, whose ``sqrt``, ``ln``
and ``exp`` are correctly rounded (error below one unit in the 100th digit), an implementation
independent of the integer series in :mod:`dalenius.accounting.bounds`.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dalenius.accounting.bounds import (
    PRECISION,
    exp_down,
    exp_up,
    ln_down,
    ln_up,
    round_down,
    round_up,
    sqrt_down,
    sqrt_up,
)

DIGITS = 100
GRID = Fraction(1, 2**PRECISION)


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


positive = st.fractions(
    min_value=Fraction(1, 10**12), max_value=Fraction(10**12), max_denominator=10**15
)
non_negative = st.one_of(st.just(Fraction(0)), positive)
exponents = st.fractions(min_value=-60, max_value=60, max_denominator=10**9)


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


@settings(max_examples=200, deadline=None)
@given(exponents)
def test_exp_bounds_bracket_the_exponential(x: Fraction) -> None:
    lo, hi = reference("exp", x)
    assert exp_down(x) <= hi
    assert exp_up(x) >= lo
    assert exp_up(x) - exp_down(x) <= max(Fraction(1), lo) * 2 * GRID * 2**12


def test_exact_points() -> None:
    assert sqrt_down(Fraction(9, 4)) == sqrt_up(Fraction(9, 4)) == Fraction(3, 2)
    assert ln_down(1) == ln_up(1) == 0
    assert exp_down(0) == 1 <= exp_up(0)
    assert ln_down(Fraction(1, 2)) < 0 < ln_up(2)


def test_rounding_helpers_round_outward() -> None:
    third = Fraction(1, 3)
    assert round_down(third) < third < round_up(third)
    assert round_up(third) - round_down(third) == GRID
    assert round_up(Fraction(1, 4)) == round_down(Fraction(1, 4)) == Fraction(1, 4)


@pytest.mark.parametrize("function", [sqrt_down, sqrt_up])
def test_sqrt_refuses_negative_numbers(function) -> None:
    with pytest.raises(ValueError):
        function(Fraction(-1))


@pytest.mark.parametrize("function", [ln_down, ln_up])
@pytest.mark.parametrize("x", [Fraction(0), Fraction(-2)])
def test_ln_refuses_non_positive_numbers(function, x: Fraction) -> None:
    with pytest.raises(ValueError):
        function(x)
