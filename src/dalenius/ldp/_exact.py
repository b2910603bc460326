"""Certified rational arithmetic for local protocols: bounds on e^x and ln x, and the 2^-32 grid.

A local protocol's probabilities (``e^ε/(e^ε+1)`` and the like) are irrational. Dalenius rounds
each one to a multiple of ``2**-32`` in the direction that keeps the ratio between outputs at most
``e^ε``, samples it exactly from 32 uniform bits, and recomputes the ε the rounded probabilities
actually give (rounded up). Bounds on ``e^x`` and ``ln x`` come from :mod:`decimal`, whose ``exp``
and ``ln`` are correctly rounded; one unit of widening in the last place makes them rigorous.

Example:
    >>> lo, hi = exp_bounds(Fraction(1))
    >>> lo < hi and abs(float(lo) - 2.718281828459045) < 1e-15
    True
"""

from __future__ import annotations

import math
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction

GRID_BITS = 32
"""Probabilities are multiples of ``2**-32``: one 32-bit uniform word decides each trial exactly."""
GRID = 1 << GRID_BITS
_DIGITS = 40


def _ctx(rounding: str | None = None) -> Context:
    ctx = Context(prec=_DIGITS + 10, Emax=MAX_EMAX, Emin=MIN_EMIN)
    if rounding is not None:
        ctx.rounding = rounding
    return ctx


def _dec(x: Fraction) -> tuple[Decimal, Decimal]:
    num, den = Decimal(x.numerator), Decimal(x.denominator)
    return _ctx(ROUND_FLOOR).divide(num, den), _ctx(ROUND_CEILING).divide(num, den)


def exp_bounds(x: Fraction) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= e**x <= hi`` (relative width about ``1e-40``)."""
    lo, hi = _dec(x)
    ctx = _ctx()
    return Fraction(ctx.next_minus(ctx.exp(lo))), Fraction(ctx.next_plus(ctx.exp(hi)))


def ln_bounds(x: Fraction) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= ln(x) <= hi`` for ``x > 0``."""
    if x <= 0:
        raise ValueError(f"ln is defined for x > 0, got {x}")
    lo, hi = _dec(x)
    ctx = _ctx()
    return Fraction(ctx.next_minus(ctx.ln(lo))), Fraction(ctx.next_plus(ctx.ln(hi)))


def ln_up(x: Fraction, bits: int = 48) -> Fraction:
    """An upper bound on ``ln(x)`` rounded up to a multiple of ``2**-bits`` (0 when ``x <= 1``).

    Example:
        >>> 0 < ln_up(Fraction(3)) - Fraction(1.0986122886681098) < Fraction(1, 2**40)
        True
    """
    if x <= 1:
        return Fraction(0)
    _, hi = ln_bounds(x)
    return Fraction(math.ceil(hi * 2**bits), 2**bits)


def grid_up(x: Fraction) -> Fraction:
    """The smallest multiple of ``2**-32`` that is ``>= x``."""
    return Fraction(math.ceil(x * GRID), GRID)


def grid_down(x: Fraction) -> Fraction:
    """The largest multiple of ``2**-32`` that is ``<= x``."""
    return Fraction(math.floor(x * GRID), GRID)


def on_grid(x: Fraction) -> int:
    """The numerator of ``x`` over ``2**32`` (``x`` must be a multiple of ``2**-32``)."""
    scaled = x * GRID
    if scaled.denominator != 1:
        raise ValueError(f"{x} is not a multiple of 2**-32")
    return int(scaled)
