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
    granularity = power_of_two_grid(reach)
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
    granularity = power_of_two_grid(top)
    return granularity, math.ceil(top / granularity)


def power_of_two_grid(reach: Fraction) -> Fraction:
    """The smallest power of two ``g`` with ``reach / g <= FLOAT_GRID_STEPS`` (``reach > 0``).

    Computed exactly from the numerator's and denominator's bit lengths: the bounds may be far
    outside the range of a double (a sum of squares of values near 1e300 reaches 1e600), where a
    floating-point logarithm would overflow or underflow.

    Example:
        >>> power_of_two_grid(Fraction(2**40))
        Fraction(1024, 1)
        >>> power_of_two_grid(Fraction(1, 10**600)) == Fraction(1, 2**2023)
        True
    """
    ratio = reach / FLOAT_GRID_STEPS
    exponent = ratio.numerator.bit_length() - ratio.denominator.bit_length()
    granularity = Fraction(2) ** exponent
    while ratio > granularity:
        granularity *= 2
    while ratio <= granularity / 2:
        granularity /= 2
    return granularity


DOUBLE_MAX = Fraction(2**1024 - 2**971)
"""The largest finite double, exactly."""

SCALED_LIMIT = Fraction(2**1000)
"""A clipped value times its grid scale, and the centre in grid units, stay below this: the
engine computes them in doubles, which must neither overflow nor lose the grid to rounding."""


def grid_problem(kind: str, bounds: tuple[Fraction, Fraction], granularity: Fraction) -> str | None:
    """Why a measurement's fixed-point grid cannot be computed in doubles, or ``None`` if it can.

    Decided from the bounds alone, at planning time, so that the exact aggregate can never fail
    (or depend on a row) at execution time. Every clipped value must be a finite double; for a sum
    its value in grid units (``value / granularity``) must stay below :data:`SCALED_LIMIT`.

    Example:
        >>> grid_problem("sum", (Fraction(0), Fraction(10)), Fraction(1, 2**26)) is None
        True
        >>> grid_problem("sum", (Fraction(0), Fraction(10**400)), Fraction(1)) is not None
        True
    """
    low, high = bounds
    magnitude = max(abs(low), abs(high))
    if magnitude > DOUBLE_MAX:
        return (
            f"the bounds reach {float(min(magnitude, DOUBLE_MAX)):.3g} or beyond, "
            "outside the range of a double"
        )
    if kind == "sum_sq" and ((high - low) / 2) ** 2 > DOUBLE_MAX:
        return "the spread of the bounds squared (a variance) exceeds the largest double"
    if kind == "sum" and magnitude / granularity >= SCALED_LIMIT:
        return "the bounds are too narrow for their magnitude: a fixed-point grid cannot hold them"
    return None
