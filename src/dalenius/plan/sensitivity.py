"""Sensitivity: the most one privacy unit can change an exact aggregate.

Counts change by one per row. Sums are computed over values clipped to the column's public bounds,
shifted by a centre and rounded to a fixed-point grid, so one row moves a sum by at most
``row_units`` grid steps whatever the data hold; the grid is a power of two so the engine's sum is
an exact integer (no floating-point summation whose error could exceed the charged sensitivity).
A privacy unit with several rows multiplies the per-row change by its row cap.

Example:
    >>> from fractions import Fraction as F
    >>> sum_grid((F(17), F(90)), F(0), "int")
    (Fraction(1, 1), 90)
    >>> sum_grid((F(17), F(90)), F(107, 2), "int")
    (Fraction(1, 2), 73)
"""

from __future__ import annotations

import math
from fractions import Fraction

FLOAT_GRID_STEPS = 2**30
"""For float columns, a row's value spans at most this many grid steps: fine enough that rounding
bias is negligible, coarse enough that an exact 64-bit integer sum cannot overflow below 2^33 rows."""


def sum_grid(
    bounds: tuple[Fraction, Fraction], center: Fraction, col_type: str
) -> tuple[Fraction, int]:
    """Choose the fixed-point grid of a clipped, centred sum and the per-row bound in grid steps.

    Args:
        bounds: the column's public clipping bounds.
        center: subtracted from each clipped value before summing.
        col_type: ``int`` or ``float``.

    Returns:
        ``(granularity, row_units)``: a power-of-two grid and the most one row contributes,
        in grid steps, after clipping and rounding.
    """
    low, high = bounds
    reach = max(abs(low - center), abs(high - center))
    if col_type == "int" and all(v.denominator == 1 for v in bounds):
        # Integer data: a grid of 1 (or 1/2 when the centre is a half-integer) is exact.
        granularity = Fraction(1) if center.denominator == 1 else Fraction(1, 2)
        units = reach / granularity
        if units.denominator != 1:
            units = Fraction(math.ceil(units))
        return granularity, int(units)
    if reach == 0:
        return Fraction(1), 0
    # Smallest power of two g with reach / g <= FLOAT_GRID_STEPS.
    exponent = math.ceil(math.log2(reach / FLOAT_GRID_STEPS))
    granularity = Fraction(2) ** exponent
    while reach / granularity > FLOAT_GRID_STEPS:
        granularity *= 2
    while reach / (granularity / 2) <= FLOAT_GRID_STEPS:
        granularity /= 2
    return granularity, math.ceil(reach / granularity)


def sum_sq_grid(
    bounds: tuple[Fraction, Fraction], center: Fraction, col_type: str
) -> tuple[Fraction, int]:
    """The grid of a clipped, centred sum of squares ``Σ (clip(x) − center)²`` (for variances).

    Each row contributes a value in ``[0, reach²]``. For integer data with an integer or
    half-integer centre the squares are exact multiples of 1 or 1/4; otherwise a power-of-two grid
    keeps each row within :data:`FLOAT_GRID_STEPS` steps.

    Example:
        >>> from fractions import Fraction as F
        >>> sum_sq_grid((F(0), F(10)), F(5), "int")
        (Fraction(1, 1), 25)
    """
    low, high = bounds
    reach = max(abs(low - center), abs(high - center))
    top = reach * reach
    if (
        col_type == "int"
        and all(v.denominator == 1 for v in bounds)
        and (2 * center).denominator == 1
    ):
        granularity = Fraction(1) if center.denominator == 1 else Fraction(1, 4)
        units = top / granularity
        if units.denominator == 1 and units <= 2**52:
            return granularity, int(units)
    if top == 0:
        return Fraction(1), 0
    exponent = math.ceil(math.log2(top / FLOAT_GRID_STEPS))
    granularity = Fraction(2) ** exponent
    while top / granularity > FLOAT_GRID_STEPS:
        granularity *= 2
    while top / (granularity / 2) <= FLOAT_GRID_STEPS:
        granularity /= 2
    return granularity, math.ceil(top / granularity)
