"""The Laplace mechanism, exact and float-safe: integer Laplace for counts, grid Laplace for reals.

Pure ε-DP for a query of L1 sensitivity Δ comes from adding noise with density proportional to
``exp(−|z|·ε/Δ)`` (Dwork & Roth 2014, Thm 3.6). Dalenius uses the *discrete* Laplace
distribution (the two-sided geometric), ``P(z) ∝ exp(−|z|/t)`` on the integers, which gives the
same guarantee for integer-valued queries with ``t >= Δ/ε``: for neighbours whose answers differ
by at most Δ, every output's probability changes by a factor of at most ``exp(Δ/t) <= e^ε``.

* :class:`IntegerLaplace` adds it to integer answers (counts, fixed-point sums).
* :class:`GridLaplace` serves real answers: it rounds to a power-of-two grid, adds integer noise in
  grid units and returns grid points, so no output is possible under one input and impossible
  under a neighbour (see :mod:`dalenius.mechanisms._grid`).

Sampling is exact (certified tables plus lazy refinement of a uniform, with the CKS 2020
algorithms for rare tails) and draws only from :func:`dalenius.core.rng.system_random` unless a
test passes its own source. The derivation is in ``docs/mechanisms/laplace.md``.

Example:
    >>> mechanism = IntegerLaplace(1, Fraction(1, 2))
    >>> mechanism.scale, mechanism.loss
    (Fraction(2, 1), PureDP(epsilon=Fraction(1, 2)))
    >>> mechanism.error_bar(0.95)
    6
    >>> noisy = mechanism.release([10, 20, 30])
    >>> noisy.dtype, noisy.shape
    (dtype('int64'), (3,))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import SupportsFloat

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds, round_up
from dalenius.core.loss import Number, PureDP
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._dlaplace import MAX_SCALE, laplace_sampler
from dalenius.mechanisms._grid import (
    EXACT_UNITS,
    GridRelease,
    check_granularity,
    choose_granularity,
    float_up,
    grid_sensitivity,
)
from dalenius.mechanisms._validate import (
    confidence_fraction,
    draw_count,
    epsilon_fraction,
    positive_fraction,
)

GRID_UNITS = 1024
"""Automatic grids have at least 1024 steps per noise scale and per sensitivity, so rounding
adds at most 1/1024 to the noise; at ε = 1 that is 1024 to 2048 steps (two digit tables)."""

_INT_LIMIT = 1 << 62


def _checked_scale(scale: Fraction, what: str) -> Fraction:
    """Round a scale with huge terms up (more noise is safe) and refuse absurdly large ones."""
    scale = round_up(scale)
    if scale > MAX_SCALE:
        raise ConfigurationError(
            f"{what}: the noise scale {float(scale):.6g} exceeds the supported maximum 2**40.",
            why="such noise would swamp any answer and overflow 64-bit integers.",
            fix="raise epsilon, lower the sensitivity, or use a coarser granularity.",
        )
    return scale


def discrete_laplace(
    scale: Fraction, size: int, rng: RandomSource | None = None
) -> npt.NDArray[np.int64]:
    """Exact two-sided geometric: P(k) ∝ exp(-|k|/scale), k ∈ ℤ.

    Args:
        scale: the rational scale ``t > 0``; a rational with huge terms is rounded up to a
            nearby one with small terms (more noise, never less).
        size: number of independent draws.
        rng: the random source; leave it ``None`` in production (the OS generator is used).

    Returns:
        ``size`` independent int64 draws. At least 1024 draws are made per call and the extras
        discarded, so one draw takes as long as a batch.

    Example:
        >>> draws = discrete_laplace(Fraction(3), 5)
        >>> draws.shape, draws.dtype
        ((5,), dtype('int64'))
    """
    t = _checked_scale(positive_fraction(scale, "scale"), "discrete_laplace")
    count = draw_count(size)
    return laplace_sampler(t).sample(count, rng or system_random())


def laplace_tail(scale: Fraction, h: int, upper: bool) -> Fraction:
    """A bound on ``P(|Z| > h) = 2q^(h+1)/(1+q)``, ``q = exp(−1/scale)``, for integer ``h >= 0``.

    Returns an upper bound when ``upper`` is true and a lower bound otherwise.
    """
    q_lo, q_hi = exp_bounds(-1 / scale)
    e_lo, e_hi = exp_bounds(-Fraction(h + 1) / scale)
    if upper:
        return 2 * e_hi / (1 + q_lo)
    return 2 * e_lo / (1 + q_hi)


def laplace_error_bar(scale: Fraction, confidence: Fraction) -> int:
    """Smallest ``h`` with ``P(|Z| > h) <= 1 − confidence`` for discrete Laplace noise ``Z``.

    The candidate comes from the closed form and is then checked with rational bounds on the
    exact tail, moving up whenever the check cannot prove the tail small enough.
    """
    beta = 1 - confidence
    q = math.exp(-1 / float(scale))
    guess = float(scale) * math.log(2 / (float(beta) * (1 + q))) - 1
    h = max(0, math.ceil(guess))
    while h > 0 and laplace_tail(scale, h - 1, upper=True) <= beta:
        h -= 1
    while laplace_tail(scale, h, upper=True) > beta:
        h += 1
    return h


def integer_laplace_error_bar(
    sensitivity: Fraction | int, epsilon: Fraction, confidence: float | Fraction
) -> int:
    """``IntegerLaplace(sensitivity, epsilon).error_bar(confidence)``, without building a sampler.

    The same scale (``Δ/ε``, rounded up only if its terms are huge) and the same exact tail check,
    so the two always agree; building the mechanism certifies its sampling tables, which is what
    a search over ε (accuracy first) must not pay for at every step.

    Example:
        >>> integer_laplace_error_bar(1, Fraction(1, 2), 0.95)
        6
    """
    scale = _checked_scale(
        positive_fraction(sensitivity, "sensitivity") / epsilon_fraction(epsilon),
        "IntegerLaplace",
    )
    return laplace_error_bar(scale, confidence_fraction(confidence))


class IntegerLaplace:
    """Pure ε-DP for integer-valued queries (counts, fixed-point sums) by discrete Laplace noise.

    Args:
        sensitivity: the L1 sensitivity Δ of everything released in one call (an integer or a
            rational; for a vector, the most one privacy unit can change its L1 norm).
        epsilon: the privacy loss of one release.

    Attributes:
        scale: the noise scale actually used, ``Δ/ε`` (rounded up only if its terms are huge).
        loss: what one release costs, ``PureDP(epsilon)``.

    Example:
        >>> IntegerLaplace(2, Fraction(1, 10)).scale
        Fraction(20, 1)
    """

    def __init__(self, sensitivity: Fraction | int, epsilon: Fraction) -> None:
        self.sensitivity = positive_fraction(sensitivity, "sensitivity")
        self.epsilon = epsilon_fraction(epsilon)
        self.scale = _checked_scale(self.sensitivity / self.epsilon, "IntegerLaplace")
        self.loss = PureDP(self.epsilon)
        self._sampler = laplace_sampler(self.scale)

    def __repr__(self) -> str:
        return f"IntegerLaplace(sensitivity={self.sensitivity}, epsilon={self.epsilon})"

    def release(
        self,
        exact: npt.NDArray[np.int64] | Sequence[int],
        *,
        rng: RandomSource | None = None,
    ) -> npt.NDArray[np.int64]:
        """Add independent discrete Laplace noise to each exact integer answer.

        Exact values are clamped to ``±2**62`` first (a 1-Lipschitz map, so the guarantee holds).

        Args:
            exact: the exact integer answers.
            rng: leave ``None`` in production; tests may pass a seeded source.
        """
        values = np.asarray(exact)
        if values.size == 0:
            return np.zeros(values.shape, dtype=np.int64)
        if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
            raise ConfigurationError(
                f"IntegerLaplace releases integers, got values of type {values.dtype}.",
                fix="use GridLaplace for real-valued answers.",
            )
        clamped = np.clip(values.astype(np.int64), -_INT_LIMIT, _INT_LIMIT)
        noise = self._sampler.sample(clamped.size, rng or system_random())
        return clamped + noise.reshape(clamped.shape)

    def error_bar(self, confidence: float | Fraction) -> int:
        """Smallest h with P(|noise| > h) <= 1 - confidence, from the exact discrete tail.

        Example:
            >>> IntegerLaplace(1, Fraction(1)).error_bar(0.5)
            1
        """
        return laplace_error_bar(self.scale, confidence_fraction(confidence))


class GridLaplace(GridRelease):
    """Pure ε-DP for real-valued queries, float-safe: outputs lie on a power-of-two grid.

    Args:
        sensitivity: the L1 sensitivity Δ of everything released in one call.
        epsilon: the privacy loss of one release.
        granularity: the grid step ``g``, a power of two; by default the largest with both the
            noise scale and Δ at least 1024 steps (so rounding adds at most 1/1024 to the noise).
        answers: how many values one release holds (1 by default); each value's rounding can add
            one grid unit to the L1 sensitivity, which the noise then covers.

    Attributes:
        granularity: the output grid step.
        grid_sensitivity: the sensitivity in grid units after rounding: ``ceil(Δ/g)`` for one
            answer, ``ceil(Δ/g) + answers`` for several.
        scale: the noise scale actually used, ``g·ceil(Δ/g)/ε`` (at least ``Δ/ε``).
        loss: what one release costs, ``PureDP(epsilon)``.
        max_exact: exact values beyond ``±max_exact`` are clamped before rounding.

    Example:
        >>> m = GridLaplace(Fraction(1), Fraction(1), granularity=Fraction(1, 1024))
        >>> m.scale, m.grid_sensitivity
        (Fraction(1, 1), 1024)
        >>> out = GridLaplace(Fraction(1), Fraction(1), answers=2).release([0.1, 2.5])
        >>> bool(np.all(out * 1024 == np.round(out * 1024)))
        True
    """

    def __init__(
        self,
        sensitivity: Fraction | int,
        epsilon: Fraction,
        granularity: Fraction | None = None,
        answers: int = 1,
    ) -> None:
        self.sensitivity = positive_fraction(sensitivity, "sensitivity")
        self.epsilon = epsilon_fraction(epsilon)
        if granularity is None:
            size = min(self.sensitivity / self.epsilon, self.sensitivity)
            self.granularity = choose_granularity(size, GRID_UNITS)
        else:
            self.granularity = check_granularity(granularity)
        self.answers = answers
        self.grid_sensitivity = grid_sensitivity(self.sensitivity, self.granularity, answers)
        self.unit_scale = _checked_scale(
            Fraction(self.grid_sensitivity) / self.epsilon, "GridLaplace"
        )
        self.scale = self.unit_scale * self.granularity
        self.loss = PureDP(self.epsilon)
        self.max_exact = EXACT_UNITS * self.granularity
        self._sampler = laplace_sampler(self.unit_scale)

    def __repr__(self) -> str:
        return (
            f"GridLaplace(sensitivity={self.sensitivity}, epsilon={self.epsilon}, "
            f"granularity={self.granularity})"
        )

    def check_range(self, bound: Number | SupportsFloat) -> None:
        """Refuse, before any data is read, a public bound on ``|exact|`` beyond ``max_exact``.

        Exact values above ``max_exact`` would be clamped; a caller that knows the declared
        bounds calls this to refuse such a query up front instead (refusing after looking at the
        data would itself leak information).
        """
        limit = positive_fraction(bound, "bound")
        if limit > self.max_exact:
            raise ConfigurationError(
                f"the answers may reach {float(limit):.6g}, beyond the grid's exact range "
                f"±{float(self.max_exact):.6g} (2**51 steps of {self.granularity}).",
                why="larger values cannot be rounded to the grid exactly in double precision.",
                fix="pass a coarser granularity or narrower bounds.",
            )

    def _noise_units(self, size: int, rng: RandomSource | None) -> npt.NDArray[np.int64]:
        return self._sampler.sample(size, rng or system_random())

    def error_bar(self, confidence: float | Fraction) -> float:
        """Half-width ``h`` with ``P(|released − exact| <= h) >= confidence`` (noise and rounding).

        Equal to ``g·(h_units + 1/2)``, where ``h_units`` is the exact discrete tail quantile and
        ``g/2`` covers the rounding to the grid; rounded up to a float.
        """
        units = laplace_error_bar(self.unit_scale, confidence_fraction(confidence))
        return float_up(self.granularity * (units + Fraction(1, 2)))
