"""The 2^-32 grid of local protocols: probabilities that 32 uniform bits sample exactly.

A local protocol's probabilities (``e^ε/(e^ε+1)`` and the like) are irrational. Dalenius rounds
each one to a multiple of ``2**-32`` in the direction that keeps the ratio between outputs at most
``e^ε``, samples it exactly from 32 uniform bits, and recomputes the ε the rounded probabilities
actually give (rounded up, :func:`epsilon_up`). The bounds on ``e^x`` and ``ln x`` behind them are
:mod:`dalenius.core.exact`'s, shared with the mechanisms and the accountants.

Example:
    >>> grid_up(Fraction(1, 3)) - Fraction(1, 3) < Fraction(1, 2**32)
    True
"""

from __future__ import annotations

from fractions import Fraction

from dalenius.core import exact

GRID_BITS = 32
"""Probabilities are multiples of ``2**-32``: one 32-bit uniform word decides each trial exactly."""
GRID = 1 << GRID_BITS
EPSILON_BITS = 48
"""The ε a protocol's rounded probabilities give is rounded up to a multiple of ``2**-48``."""


def epsilon_up(ratio: Fraction) -> Fraction:
    """The ε a likelihood ``ratio`` gives: ``ln(ratio)`` rounded up to a multiple of ``2**-48``
    (0 when ``ratio <= 1``).

    Example:
        >>> 0 < epsilon_up(Fraction(3)) - Fraction(1.0986122886681098) < Fraction(1, 2**40)
        True
    """
    if ratio <= 1:
        return Fraction(0)
    return exact.grid_up(exact.ln_bounds(ratio)[1], EPSILON_BITS)


def grid_up(x: Fraction) -> Fraction:
    """The smallest multiple of ``2**-32`` that is ``>= x``."""
    return exact.grid_up(x, GRID_BITS)


def grid_down(x: Fraction) -> Fraction:
    """The largest multiple of ``2**-32`` that is ``<= x``."""
    return exact.grid_down(x, GRID_BITS)


def on_grid(x: Fraction) -> int:
    """The numerator of ``x`` over ``2**32`` (``x`` must be a multiple of ``2**-32``)."""
    scaled = x * GRID
    if scaled.denominator != 1:
        raise ValueError(f"{x} is not a multiple of 2**-32")
    return int(scaled)
