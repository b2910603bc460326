"""The Gaussian mechanism, exact and float-safe: discrete Gaussian noise under zCDP or (ε, δ).

Noise ``Z ~ N_ℤ(0, σ²)`` with ``P(z) ∝ exp(−z²/(2σ²))`` on the integers (Canonne, Kamath &
Steinke 2020). For an integer query of L2 sensitivity Δ it satisfies

* ρ-zCDP with ``ρ = Δ²/(2σ²)`` exactly as the continuous Gaussian does (CKS 2020, Thm 4), and
* (ε, δ)-DP with the exact ``δ = P[Z > εσ²/Δ − Δ/2] − e^ε·P[Z > εσ²/Δ + Δ/2]`` (CKS 2020, Thm 7),
  which Dalenius evaluates with certified bounds when it calibrates σ² for a requested (ε, δ).

:class:`IntegerGaussian` releases integers; :class:`GridGaussian` releases reals on a power-of-two
grid (the same construction as :class:`~dalenius.mechanisms.laplace.GridLaplace`, with the
sensitivity in grid units ``ceil(Δ/g)``). σ above 3072 for integer queries is served on a coarser
power-of-two integer grid, so the sampler's table stays small. The derivation is in
``docs/mechanisms/gaussian.md``.

Example:
    >>> from dalenius.core.loss import ZCDP
    >>> m = IntegerGaussian(1, ZCDP(Fraction(1, 2)))
    >>> m.sigma2, m.sigma, m.loss
    (Fraction(1, 1), Fraction(1, 1), ZCDP(rho=Fraction(1, 2)))
    >>> m.error_bar(0.95)
    2
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import SupportsFloat

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import round_up, sqrt_bounds
from dalenius.core.loss import ZCDP, ApproxDP, Number
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._dgauss import MAX_SIGMA2, at_least_bounds, gaussian_sampler
from dalenius.mechanisms._grid import (
    EXACT_UNITS,
    GridRelease,
    ceil_power_of_two,
    check_granularity,
    choose_granularity,
    float_up,
    grid_sensitivity,
)
from dalenius.mechanisms._validate import confidence_fraction, draw_count, positive_fraction
from dalenius.mechanisms.calibration import discrete_gaussian_sigma2, gaussian_sigma2_zcdp

GaussianLoss = ZCDP | ApproxDP
"""The losses a Gaussian mechanism can be calibrated to."""

GRID_UNITS = 1024
"""Automatic grids aim at 1024 steps per σ and per Δ (rounding adds at most 1/1024 to σ)."""

MAX_UNITS = 3072
"""...but never more than this many steps per σ, so the sampler's table stays small."""

_INT_LIMIT = 1 << 62


def discrete_gaussian(
    sigma2: Fraction, size: int, rng: RandomSource | None = None
) -> npt.NDArray[np.int64]:
    """Exact discrete Gaussian draws: P(k) ∝ exp(−k²/(2σ²)), k ∈ ℤ.

    Args:
        sigma2: the rational parameter ``σ² > 0``, at most ``4096²``.
        size: number of independent draws.
        rng: the random source; leave it ``None`` in production (the OS generator is used).

    Example:
        >>> discrete_gaussian(Fraction(4), 3).shape
        (3,)
    """
    s2 = positive_fraction(sigma2, "sigma2")
    if s2 > MAX_SIGMA2:
        raise ConfigurationError(
            f"sigma2 = {float(s2):.6g} exceeds the direct sampler's maximum 4096**2.",
            fix="use IntegerGaussian or GridGaussian, which put large noise on a coarser grid.",
        )
    return gaussian_sampler(round_up(s2)).sample(draw_count(size), rng or system_random())


def _check_loss(loss: GaussianLoss) -> GaussianLoss:
    if isinstance(loss, ZCDP):
        if loss.rho <= 0:
            raise ConfigurationError(f"rho must be > 0, got {loss.rho}.", fix="pass ZCDP(rho>0).")
        return loss
    if isinstance(loss, ApproxDP):
        if loss.epsilon <= 0 or loss.delta <= 0:
            raise ConfigurationError(
                f"a Gaussian mechanism needs epsilon > 0 and delta > 0, got {loss}.",
                why="with δ = 0 Gaussian noise gives no finite ε; use the Laplace mechanism.",
                fix="pass ApproxDP(epsilon, delta) with a small positive delta such as 1e-6.",
            )
        return loss
    raise ConfigurationError(
        f"a Gaussian mechanism is calibrated to ZCDP or ApproxDP, got {type(loss).__name__}.",
        fix="pass ZCDP(rho) or ApproxDP(epsilon, delta); for pure ε use the Laplace mechanism.",
    )


def _rough_sigma(sensitivity: Fraction, loss: GaussianLoss) -> Fraction:
    """An approximate σ, used only to choose a grid (never to calibrate)."""
    if isinstance(loss, ZCDP):
        sigma2 = gaussian_sigma2_zcdp(sensitivity, loss.rho)
    else:
        factor = math.sqrt(2 * math.log(1.25 / float(loss.delta)))
        sigma2 = Fraction((float(sensitivity) * factor / float(loss.epsilon)) ** 2)
    return sqrt_bounds(sigma2, bits=32)[1]


def _unit_sigma2(units: int, loss: GaussianLoss) -> Fraction:
    """σ² in grid units for a query of integer sensitivity ``units``."""
    if isinstance(loss, ZCDP):
        return round_up(gaussian_sigma2_zcdp(units, loss.rho))
    return discrete_gaussian_sigma2(units, loss.epsilon, loss.delta)


def gaussian_error_bar(sigma2: Fraction, confidence: Fraction) -> int:
    """Smallest ``h`` with ``P(|Z| > h) <= 1 − confidence`` for ``Z ~ N_ℤ(0, σ²)`` (certified)."""
    beta = 1 - confidence
    bits = 40 + max(0, -math.floor(math.log2(beta)))
    guess = math.sqrt(float(sigma2)) * NormalDist().inv_cdf(1 - float(beta) / 2)
    h = max(0, math.floor(guess) - 1)

    def tail_upper(k: int) -> Fraction:
        ((_, upper_tail),) = at_least_bounds(sigma2, (k + 1,), bits)
        return 2 * upper_tail

    while h > 0 and tail_upper(h - 1) <= beta:
        h -= 1
    while tail_upper(h) > beta:
        h += 1
    return h


class _GaussianCore:
    """Calibration shared by the integer and grid Gaussian mechanisms."""

    def __init__(
        self,
        sensitivity: Fraction | int,
        loss: GaussianLoss,
        granularity: Fraction,
        answers: int = 1,
    ) -> None:
        self.sensitivity = positive_fraction(sensitivity, "sensitivity")
        self.loss = _check_loss(loss)
        self.granularity = granularity
        self.grid_sensitivity = grid_sensitivity(self.sensitivity, granularity, answers, norm=2)
        self.unit_sigma2 = _unit_sigma2(self.grid_sensitivity, self.loss)
        if self.unit_sigma2 > MAX_SIGMA2:
            raise ConfigurationError(
                f"the noise would be {math.sqrt(float(self.unit_sigma2)):.6g} grid steps of "
                f"{granularity} wide, more than the supported 4096.",
                why="the exact sampler tabulates σ in grid steps; the sensitivity "
                f"{self.sensitivity} is too small next to the noise for any coarser grid.",
                fix="pass a coarser granularity, or spend a larger loss on this query.",
            )
        self.sigma2 = self.unit_sigma2 * granularity * granularity
        self.sigma = round_up(sqrt_bounds(self.sigma2, bits=64)[1])
        self.sampler = gaussian_sampler(self.unit_sigma2)

    def noise(self, size: int, rng: RandomSource | None) -> npt.NDArray[np.int64]:
        return self.sampler.sample(size, rng or system_random())

    def unit_error_bar(self, confidence: float | Fraction) -> int:
        return gaussian_error_bar(self.unit_sigma2, confidence_fraction(confidence))


class IntegerGaussian:
    """ρ-zCDP or (ε, δ)-DP for integer-valued queries by discrete Gaussian noise.

    Args:
        sensitivity: the L2 sensitivity Δ of everything released in one call.
        loss: ``ZCDP(rho)`` (σ² = Δ²/(2ρ), exact) or ``ApproxDP(epsilon, delta)`` (σ² certified
            by the exact discrete bound).

    Attributes:
        sigma2: the variance parameter actually used, in output units.
        sigma: ``√σ²`` rounded up.
        granularity: 1, or a power of two when σ exceeds 3072 (outputs are then multiples of it).
        loss: what one release costs (the loss passed in).

    Example:
        >>> from dalenius.core.loss import ApproxDP
        >>> m = IntegerGaussian(1, ApproxDP(Fraction(1), Fraction(1, 10**5)))
        >>> 3.7 < float(m.sigma) < 3.8
        True
    """

    def __init__(self, sensitivity: Fraction | int, loss: GaussianLoss) -> None:
        checked = _check_loss(loss)
        delta_ = positive_fraction(sensitivity, "sensitivity")
        granularity = Fraction(1)
        rough = _rough_sigma(delta_, checked)
        if rough > MAX_UNITS:
            granularity = ceil_power_of_two(rough / MAX_UNITS)
        self._core = _GaussianCore(delta_, checked, granularity)
        self.sensitivity = self._core.sensitivity
        self.loss: GaussianLoss = self._core.loss
        self.granularity = self._core.granularity
        self.sigma2 = self._core.sigma2
        self.sigma = self._core.sigma

    def __repr__(self) -> str:
        return f"IntegerGaussian(sensitivity={self.sensitivity}, loss={self.loss!r})"

    def release(
        self,
        exact: npt.NDArray[np.int64] | Sequence[int],
        *,
        rng: RandomSource | None = None,
    ) -> npt.NDArray[np.int64]:
        """Add independent discrete Gaussian noise to each exact integer answer.

        Args:
            exact: the exact integer answers (clamped to ``±2**62``, a 1-Lipschitz map).
            rng: leave ``None`` in production; tests may pass a seeded source.
        """
        values = np.asarray(exact)
        if values.size == 0:
            return np.zeros(values.shape, dtype=np.int64)
        if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
            raise ConfigurationError(
                f"IntegerGaussian releases integers, got values of type {values.dtype}.",
                fix="use GridGaussian for real-valued answers.",
            )
        g = int(self.granularity)
        if g > 1 and values.size > 1:
            # Rounding each coordinate to the coarse grid can move every one of them by a whole
            # step, so the rounded vector's L2 sensitivity is not the scalar ⌈Δ/g⌉ charged.
            raise ConfigurationError(
                f"IntegerGaussian with σ above 3072 rounds to a grid {g} wide, which is safe for "
                f"one answer only; got {values.size} answers in one call.",
                why="per-coordinate rounding can move each answer by a grid step, more than the "
                "vector's sensitivity allows for.",
                fix="release the answers one call each (each charged separately), or spend a "
                "larger loss so that σ stays at most 3072.",
            )
        clamped = np.clip(values.astype(np.int64), -_INT_LIMIT, _INT_LIMIT)
        # floor(x/g + 1/2) in integers, as on the real grid (g is 1 or an even power of two).
        units = (clamped + g // 2) // g if g > 1 else clamped
        noise = self._core.noise(units.size, rng).reshape(units.shape)
        return (units + noise) * g

    def error_bar(self, confidence: float | Fraction) -> int:
        """Smallest h with P(|noise| > h) <= 1 − confidence (plus rounding when the grid is coarse).

        Example:
            >>> from dalenius.core.loss import ZCDP
            >>> IntegerGaussian(1, ZCDP(Fraction(1, 8))).error_bar(0.9)
            3
        """
        units = self._core.unit_error_bar(confidence)
        g = int(self.granularity)
        return units * g + g // 2


class GridGaussian(GridRelease):
    """ρ-zCDP or (ε, δ)-DP for real-valued queries, float-safe: outputs lie on a power-of-two grid.

    Args:
        sensitivity: the L2 sensitivity Δ of everything released in one call.
        loss: ``ZCDP(rho)`` or ``ApproxDP(epsilon, delta)``.
        granularity: the grid step ``g``, a power of two; by default the largest with σ and Δ
            at least 1024 steps, made coarser if σ would exceed 3072 steps.
        answers: how many values one release holds (1 by default); rounding each value can add
            up to ``ceil(√answers)`` grid units to the L2 sensitivity, which the noise covers.

    Attributes:
        granularity: the output grid step.
        grid_sensitivity: ``ceil(Δ/g)`` for one answer, ``ceil(Δ/g) + ceil(√answers)`` for several.
        sigma2: the variance parameter actually used, in output units (at least the requested).
        sigma: ``√σ²`` rounded up.
        loss: what one release costs.
        max_exact: exact values beyond ``±max_exact`` are clamped before rounding.

    Example:
        >>> from dalenius.core.loss import ZCDP
        >>> m = GridGaussian(Fraction(1), ZCDP(Fraction(1, 2)))
        >>> float(m.sigma) >= 1.0
        True
    """

    def __init__(
        self,
        sensitivity: Fraction | int,
        loss: GaussianLoss,
        granularity: Fraction | None = None,
        answers: int = 1,
    ) -> None:
        checked = _check_loss(loss)
        delta_ = positive_fraction(sensitivity, "sensitivity")
        if granularity is None:
            rough = _rough_sigma(delta_, checked)
            g = choose_granularity(min(rough, delta_), GRID_UNITS)
            if rough / g > MAX_UNITS:
                g = ceil_power_of_two(rough / MAX_UNITS)
        else:
            g = check_granularity(granularity)
        self.answers = answers
        self._core = _GaussianCore(delta_, checked, g, answers)
        self.sensitivity = self._core.sensitivity
        self.loss: GaussianLoss = self._core.loss
        self.granularity = g
        self.grid_sensitivity = self._core.grid_sensitivity
        self.sigma2 = self._core.sigma2
        self.sigma = self._core.sigma
        self.max_exact = EXACT_UNITS * g

    def __repr__(self) -> str:
        return (
            f"GridGaussian(sensitivity={self.sensitivity}, loss={self.loss!r}, "
            f"granularity={self.granularity})"
        )

    def check_range(self, bound: Number | SupportsFloat) -> None:
        """Refuse, before any data is read, a public bound on ``|exact|`` beyond ``max_exact``."""
        limit = positive_fraction(bound, "bound")
        if limit > self.max_exact:
            raise ConfigurationError(
                f"the answers may reach {float(limit):.6g}, beyond the grid's exact range "
                f"±{float(self.max_exact):.6g} (2**51 steps of {self.granularity}).",
                why="larger values cannot be rounded to the grid exactly in double precision.",
                fix="pass a coarser granularity or narrower bounds.",
            )

    def _noise_units(self, size: int, rng: RandomSource | None) -> npt.NDArray[np.int64]:
        return self._core.noise(size, rng)

    def error_bar(self, confidence: float | Fraction) -> float:
        """Half-width ``g·(h_units + 1/2)`` covering noise and rounding, rounded up to a float."""
        units = self._core.unit_error_bar(confidence)
        return float_up(self.granularity * (units + Fraction(1, 2)))
