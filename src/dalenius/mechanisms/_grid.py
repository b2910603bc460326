"""The output grid that makes real-valued mechanisms float-safe.

Mironov (2012) showed that adding floating-point Laplace noise leaks the exact value through the
low-order bits of the output: some outputs are possible under one input and impossible under a
neighbouring one. Dalenius never adds noise in floating point. A real-valued release

1. clamps the exact value to ``±2**51·g`` (a 1-Lipschitz map, so sensitivity does not grow),
2. rounds it to the nearest multiple ``k·g`` of a power-of-two granularity ``g`` (half-integers
   round up), which is exact in binary floating point,
3. adds integer noise ``Z`` from an exact discrete sampler, and
4. returns ``(k + Z)·g``, clamped to ``±2**53·g`` so that it is an exactly representable float.

Rounding with ``floor(x/g + 1/2)`` moves values ``Δ`` apart to grid points at most ``ceil(Δ/g)``
steps apart, so the integer noise is calibrated to sensitivity ``ceil(Δ/g)`` grid units (at most
one unit more than ``Δ/g``). Every output lies on ``g·ℤ`` whatever the input, so the sets of
possible outputs under neighbouring inputs coincide.

Example:
    >>> units = to_grid(np.array([0.3, -0.75, 2.5]), Fraction(1, 2))
    >>> units.tolist()
    [1, -1, 5]
    >>> from_grid(units, Fraction(1, 2)).tolist()
    [0.5, -0.5, 2.5]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import floor_log2
from dalenius.core.rng import RandomSource

MIN_EXPONENT = -1000
"""Smallest allowed ``log2(g)``: keeps every nonzero output a normal float."""

MAX_EXPONENT = 900
"""Largest allowed ``log2(g)``: keeps ``2**53·g`` finite."""

EXACT_UNITS = 1 << 51
"""Exact values are clamped to ``±EXACT_UNITS·g``: below this, ``x/g + 1/2`` is exact."""

OUTPUT_UNITS = 1 << 53
"""Released values are clamped to ``±OUTPUT_UNITS·g``: every integer below it is a float."""


def choose_granularity(size: Fraction, units: int) -> Fraction:
    """The largest power of two ``g`` with ``size/g >= units`` (within the allowed exponents).

    Callers pass ``size = min(noise scale, sensitivity)``: a step at most 1/units of the noise
    keeps the grid invisible, and at most 1/units of the sensitivity keeps the rounding's extra
    sensitivity (at most one step) below ``1/units`` of the total.
    """
    exponent = floor_log2(size / units)
    exponent = min(max(exponent, MIN_EXPONENT), MAX_EXPONENT)
    return Fraction(2) ** exponent


def ceil_power_of_two(x: Fraction) -> Fraction:
    """The smallest power of two ``>= x`` (for ``x > 0``)."""
    exponent = floor_log2(x)
    power = Fraction(2) ** exponent
    return power if power == x else 2 * power


def check_granularity(granularity: Fraction) -> Fraction:
    """Accept a power of two between ``2**-1000`` and ``2**900``; refuse anything else."""
    g = Fraction(granularity)
    ok = g > 0 and (g.numerator == 1 or g.denominator == 1)
    if ok:
        exponent = floor_log2(g)
        ok = Fraction(2) ** exponent == g and MIN_EXPONENT <= exponent <= MAX_EXPONENT
    if not ok:
        raise ConfigurationError(
            f"granularity must be a power of two between 2**{MIN_EXPONENT} and "
            f"2**{MAX_EXPONENT}, got {granularity}.",
            why="only power-of-two grids are exact in binary floating point.",
            fix="pass granularity=Fraction(1, 1024) or leave it out to let Dalenius choose.",
        )
    return g


def grid_sensitivity(
    sensitivity: Fraction, granularity: Fraction, answers: int = 1, norm: int = 1
) -> int:
    """Sensitivity in grid units after rounding ``answers`` values, each to its nearest unit.

    One answer: ``ceil(Δ/g)`` exactly, since rounding is monotone and commutes with whole-unit
    shifts. Several: rounding can move each answer by one more unit than its exact change, so the
    rounded vector's L1 norm grows by at most ``answers`` and its L2 norm by at most
    ``√answers`` (triangle inequality): ``ceil(Δ/g) + answers`` or ``+ ceil(√answers)``.

    Example:
        >>> grid_sensitivity(Fraction(5, 2), Fraction(1), answers=4, norm=2)
        5
    """
    if isinstance(answers, bool) or not isinstance(answers, int) or answers < 1:
        raise ConfigurationError(
            f"answers must be a whole number of at least 1, got {answers!r}.",
            fix="pass how many values one release holds, e.g. answers=10.",
        )
    base = math.ceil(sensitivity / granularity)
    if answers == 1:
        return base
    root = math.isqrt(answers)
    return base + (answers if norm == 1 else root + (root * root < answers))


def check_answers(size: int, answers: int, what: str) -> None:
    """Refuse a release holding more values than the mechanism was calibrated for."""
    if size > answers:
        raise ConfigurationError(
            f"{what} got {size} values, but the mechanism was built for answers={answers}.",
            why="rounding each value to the grid adds to the sensitivity once per value, so the "
            "noise is calibrated for a fixed number of values per release.",
            fix=f"build the mechanism with answers={size} (or more), or release the values "
            "separately, each charged.",
        )


def as_float_array(exact: npt.ArrayLike | Sequence[float], what: str) -> npt.NDArray[np.float64]:
    """The exact answers as a float64 array; refuses NaN and infinities."""
    try:
        values = np.asarray(exact, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{what} needs numbers, got {exact!r}.") from None
    if values.size and not np.all(np.isfinite(values)):
        raise ConfigurationError(
            f"{what} got a NaN or infinite exact value.",
            why="noise cannot hide a value that is not a number; the caller must clip first.",
            fix="clip the aggregate to its declared bounds before releasing it.",
        )
    return values


def to_grid(values: npt.NDArray[np.float64], granularity: Fraction) -> npt.NDArray[np.int64]:
    """Clamp to ``±2**51·g`` and round to the nearest grid unit (halves round up)."""
    g = float(granularity)
    limit = float(EXACT_UNITS) * g
    scaled = np.clip(values, -limit, limit) / g
    return np.floor(scaled + 0.5).astype(np.int64)


def from_grid(units: npt.NDArray[np.int64], granularity: Fraction) -> npt.NDArray[np.float64]:
    """Grid units back to floats, clamped to ``±2**53`` units so every value is exact."""
    clipped = np.clip(units, -OUTPUT_UNITS, OUTPUT_UNITS)
    return clipped.astype(np.float64) * float(granularity)


def float_up(value: Fraction) -> float:
    """The smallest float that is ``>= value`` (error bars never round down).

    Example:
        >>> float_up(Fraction(1, 3)) > 1 / 3
        True
    """
    nearest = float(value)
    if Fraction(nearest) < value:
        return math.nextafter(nearest, math.inf)
    return nearest


class GridRelease:
    """The release steps shared by the grid mechanisms: round to ``g·ℤ``, add integer noise.

    A subclass sets ``granularity`` and ``answers`` and draws the noise in grid units.
    """

    granularity: Fraction
    answers: int

    def _noise_units(self, size: int, rng: RandomSource | None) -> npt.NDArray[np.int64]:
        raise NotImplementedError

    def release(
        self,
        exact: npt.NDArray[np.float64] | Sequence[float],
        *,
        rng: RandomSource | None = None,
    ) -> npt.NDArray[np.float64]:
        """Round each exact answer to the grid and add noise in grid units: one release.

        Args:
            exact: the exact real answers (finite), at most ``answers`` of them.
            rng: leave ``None`` in production; tests may pass a seeded source.

        Returns:
            Float64 values that are exact multiples of :attr:`granularity`.
        """
        what = f"{type(self).__name__}.release"
        values = as_float_array(exact, what)
        check_answers(values.size, self.answers, what)
        return self.release_each(values, rng=rng)

    def release_each(
        self,
        exact: npt.NDArray[np.float64] | Sequence[float],
        *,
        rng: RandomSource | None = None,
    ) -> npt.NDArray[np.float64]:
        """Release each value as a separate query: ``len(exact)`` releases, each costing ``loss``.

        For statistical tests and simulations that draw many independent releases at once; the
        caller accounts one ``loss`` per value. A single query of several values uses
        :meth:`release` with ``answers`` set instead.
        """
        values = as_float_array(exact, f"{type(self).__name__}.release_each")
        units = to_grid(values.ravel(), self.granularity)
        noise = self._noise_units(units.size, rng)
        return from_grid(units + noise, self.granularity).reshape(values.shape)
