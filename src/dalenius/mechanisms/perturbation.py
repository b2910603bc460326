"""Laplace perturbation of numeric records (course document 004): publish every value, noised.

Each record ``d`` in a public interval ``D = [low, high]`` is released as ``d + L``. Course
document 004 shows the release of all records is (ε, δ)-DP for *any* later query when the
Laplace scale satisfies ``b >= diam(D)/(ε − ln(1 − δ))``; the exact privacy profile of Laplace
noise, ``δ(ε) = 1 − exp((ε − diam/b)/2)``, gives the tight ``b >= diam(D)/(ε − 2·ln(1 − δ))``.

Float safety: records are clamped to ``D``, rounded to a power-of-two grid ``g`` and perturbed by
exact discrete Laplace noise in grid units. Grid rounding moves the endpoints of ``D`` at most
``k`` grid steps apart (computed exactly from the rounded endpoints), and the guarantee is
*certified for the discrete noise actually used*: Dalenius evaluates the exact δ(ε) of discrete
Laplace noise at shift ``k``,

``δ = [1 − e^(ε − k/t) + (1 − q^M)(q − e^ε·q^(k−M))] / (1 + q)``, ``q = e^(−1/t)``,
``M = ⌈(k − ε·t)/2⌉ − 1``,

with rational bounds, and raises the scale until it is at most the δ requested (smaller shifts
have smaller δ because the discrete Laplace is log-concave). The derivation is in
``docs/mechanisms/perturbation.md``.

Example:
    >>> m = RecordPerturbation(0, 100, Fraction(1))
    >>> m.loss
    PureDP(epsilon=Fraction(1, 1))
    >>> float(m.scale) >= 100
    True
    >>> m.release([5.0, 50.0, 95.0]).shape
    (3,)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds, round_up
from dalenius.core.loss import ApproxDP, Number, PureDP, as_fraction
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._dlaplace import MAX_SCALE, laplace_sampler
from dalenius.mechanisms._grid import (
    as_float_array,
    check_granularity,
    choose_granularity,
    float_up,
    from_grid,
    to_grid,
)
from dalenius.mechanisms._validate import confidence_fraction
from dalenius.mechanisms.calibration import laplace_scale_approx
from dalenius.mechanisms.laplace import laplace_error_bar

GRID_UNITS = 1024
"""Automatic grids have at least 1024 steps per noise scale and per domain diameter."""


def discrete_laplace_delta(shift: int, scale: Fraction, epsilon: Fraction) -> Fraction:
    """An upper bound on the exact δ(ε) of discrete Laplace noise of scale ``t`` at shift ``k``.

    Example:
        >>> discrete_laplace_delta(1, Fraction(1), Fraction(1))
        Fraction(0, 1)
        >>> 0 < discrete_laplace_delta(4, Fraction(1), Fraction(1)) < 1
        True
    """
    if shift / scale <= epsilon:
        return Fraction(0)
    digits = 40
    q_lo, q_hi = exp_bounds(-1 / scale, digits)
    a_lo, _ = exp_bounds(epsilon - shift / scale, digits)
    first = 1 - a_lo
    middle_terms = math.ceil((shift - epsilon * scale) / 2) - 1
    middle = Fraction(0)
    if middle_terms >= 1:
        qm_lo, _ = exp_bounds(-Fraction(middle_terms) / scale, digits)
        e_lo, _ = exp_bounds(epsilon, digits)
        qkm_lo, _ = exp_bounds(-Fraction(shift - middle_terms) / scale, digits)
        # Each factor is non-negative; lower bounds where subtracted keep the result an upper bound.
        middle = max(Fraction(0), (1 - qm_lo) * (q_hi - e_lo * qkm_lo))
    return round_up((first + middle) / (1 + q_lo))


class RecordPerturbation:
    """(ε, δ)-DP release of every numeric record in a public interval by grid Laplace noise.

    Args:
        low: lower end of the public domain ``D``.
        high: upper end of ``D`` (``high > low``).
        epsilon: the ε of the guarantee.
        delta: the δ of the guarantee (0 for pure ε-DP).
        tight: calibrate with the tight ``diam/(ε − 2·ln(1−δ))`` instead of the course's
            ``diam/(ε − ln(1−δ))`` (both are then certified for the discrete noise).
        granularity: the output grid step (a power of two), chosen automatically by default.

    Attributes:
        scale: the Laplace scale actually used, in the records' units.
        loss: ``PureDP(ε)`` or ``ApproxDP(ε, δ)``.
        granularity: the output grid step.
        grid_shift: ``k``, how many grid steps apart two records can be after rounding.
    """

    def __init__(
        self,
        low: Number,
        high: Number,
        epsilon: Number,
        delta: Number = 0,
        *,
        tight: bool = False,
        granularity: Fraction | None = None,
    ) -> None:
        self.low = Fraction(repr(low)) if isinstance(low, float) else Fraction(low)
        self.high = Fraction(repr(high)) if isinstance(high, float) else Fraction(high)
        if not self.high > self.low:
            raise ConfigurationError(
                f"the domain must have high > low, got [{low}, {high}].",
                fix="pass the public bounds of the records, such as low=0, high=100.",
            )
        self.epsilon = as_fraction(epsilon, "epsilon")
        self.delta = as_fraction(delta, "delta", allow_zero=True)
        if not self.delta < 1:
            raise ConfigurationError(f"delta must be below 1, got {delta!r}.")
        diameter = self.high - self.low
        target = laplace_scale_approx(diameter, self.epsilon, self.delta, tight=tight)
        if granularity is None:
            self.granularity = choose_granularity(min(target, diameter), GRID_UNITS)
        else:
            self.granularity = check_granularity(granularity)
        ends = to_grid(np.array([float(self.low), float(self.high)]), self.granularity)
        self.grid_shift = max(1, int(ends[1] - ends[0]))
        # The formula's scale, stretched by the grid's extra reach, then certified.
        unit_scale = round_up(target / diameter * self.grid_shift)
        if self.delta == 0:
            unit_scale = max(unit_scale, Fraction(self.grid_shift) / self.epsilon)
        while discrete_laplace_delta(self.grid_shift, unit_scale, self.epsilon) > self.delta:
            unit_scale = round_up(unit_scale * Fraction(1025, 1024))
        if unit_scale > MAX_SCALE:
            raise ConfigurationError(
                f"the noise would be {float(unit_scale):.6g} grid steps wide (maximum 2**40).",
                fix="use a coarser granularity or a larger epsilon.",
            )
        self.unit_scale = unit_scale
        self.scale = unit_scale * self.granularity
        self.loss: PureDP | ApproxDP = (
            PureDP(self.epsilon) if self.delta == 0 else ApproxDP(self.epsilon, self.delta)
        )
        self._sampler = laplace_sampler(unit_scale)

    def __repr__(self) -> str:
        return (
            f"RecordPerturbation(low={self.low}, high={self.high}, epsilon={self.epsilon}, "
            f"delta={self.delta})"
        )

    def release(
        self,
        records: npt.NDArray[np.float64] | Sequence[float],
        *,
        rng: RandomSource | None = None,
    ) -> npt.NDArray[np.float64]:
        """Every record clamped to ``[low, high]``, rounded to the grid and perturbed.

        Args:
            records: the numeric records (finite).
            rng: leave ``None`` in production; tests may pass a seeded source.
        """
        values = as_float_array(records, "RecordPerturbation.release")
        clamped = np.clip(values.ravel(), float(self.low), float(self.high))
        units = to_grid(clamped, self.granularity)
        noise = self._sampler.sample(units.size, rng or system_random())
        return from_grid(units + noise, self.granularity).reshape(values.shape)

    def error_bar(self, confidence: float | Fraction) -> float:
        """Per-record half-width covering the noise and the rounding (not the clamping)."""
        units = laplace_error_bar(self.unit_scale, confidence_fraction(confidence))
        return float_up(self.granularity * (units + Fraction(1, 2)))
