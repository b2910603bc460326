"""The vectorised exact discrete Gaussian sampler and certified discrete Gaussian probabilities.

Target: ``P(Z = z) = exp(−z²/(2σ²)) / N`` on the integers, ``N = Σ_z exp(−z²/(2σ²))``, for a
rational ``σ²``.

Probabilities are bounded in fixed point (integers scaled by ``2**P``): ``E(y) = exp(−y²/(2σ²))``
by the exact recurrence ``E(y+1) = E(y)·A·B^y`` with ``A = exp(−1/(2σ²))`` and
``B = exp(−1/σ²)``, rounding the lower chain down and the upper chain up; suffix sums
``R(m) = Σ_{y>=m} E(y)`` stop where the rest is below ``E(M+1)·(1 + σ²/(M+1))`` (a geometric bound,
since successive terms shrink by at least ``exp(−(M+1)/σ²)``).

Sampling: one :class:`~dalenius.mechanisms._inversion.InversionTable` over the window
``−K..K`` with ``K ≈ 7.45σ`` (each tail has mass about ``2**-40``), fed 32 random bits per draw.
A draw in a tail is completed exactly by :func:`~dalenius.mechanisms._exact.gaussian_tail_one`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dalenius.core.rng import RandomSource
from dalenius.mechanisms._bounds import exp_neg_fixed
from dalenius.mechanisms._exact import gaussian_tail_one
from dalenius.mechanisms._inversion import InversionTable
from dalenius.mechanisms._uniform import MIN_BATCH

MAX_SIGMA2 = Fraction(4096**2)
"""Largest σ² served by a direct table; larger noise is sampled on a coarser integer grid."""

TAIL_BITS = 40
"""The table window leaves about ``2**-TAIL_BITS`` of mass in each tail."""


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def window(sigma2: Fraction, bits: int) -> int:
    """Smallest ``K >= 1`` with ``exp(−K²/(2σ²)) <= 2**-bits`` (so each tail is about that small)."""
    return max(1, math.ceil(math.sqrt(2 * bits * math.log(2) * float(sigma2))) + 1)


class GaussianSums:
    """Fixed-point bounds on discrete Gaussian probabilities at internal precision ``2**-bits``.

    Args:
        sigma2: the rational parameter σ².
        bits: internal fixed-point precision.
        reach: the largest ``y`` whose term is summed explicitly (the rest is bounded).
    """

    def __init__(self, sigma2: Fraction, bits: int, reach: int) -> None:
        self.sigma2 = sigma2
        self.bits = bits
        one = 1 << bits
        a_lo, a_hi = exp_neg_fixed(1 / (2 * sigma2), bits)
        b_lo, b_hi = exp_neg_fixed(1 / sigma2, bits)
        e_lo, e_hi = [one], [one]
        c_lo, c_hi = a_lo, a_hi
        for _ in range(reach + 1):
            e_lo.append(e_lo[-1] * c_lo >> bits)
            e_hi.append(_ceil_div(e_hi[-1] * c_hi, one))
            c_lo = c_lo * b_lo >> bits
            c_hi = _ceil_div(c_hi * b_hi, one)
        # e_*[reach + 1] bounds E(reach+1); the rest of the series is at most E·(1 + σ²/(reach+1)).
        rest = math.ceil(e_hi[reach + 1] * (1 + sigma2 / (reach + 1)))
        r_lo = [0] * (reach + 2)
        r_hi = [0] * (reach + 2)
        r_hi[reach + 1] = rest
        for y in range(reach, -1, -1):
            r_lo[y] = r_lo[y + 1] + e_lo[y]
            r_hi[y] = r_hi[y + 1] + e_hi[y]
        self.reach = reach
        self._r_lo, self._r_hi = r_lo, r_hi
        self._n_lo = 2 * r_lo[0] - one
        self._n_hi = 2 * r_hi[0] - one

    def at_least(self, m: int) -> tuple[int, int]:
        """Bounds on ``P(Z >= m) · 2**bits`` for any integer ``m``."""
        one = 1 << self.bits
        if m <= 0:
            lo, hi = self.at_least(1 - m)
            return one - hi, one - lo
        index = min(m, self.reach + 1)
        r_lo = self._r_lo[index] if m <= self.reach + 1 else 0
        r_hi = self._r_hi[index]
        return r_lo * one // self._n_hi, min(one, _ceil_div(r_hi * one, self._n_lo))


def _guard(reach: int) -> int:
    return 24 + 3 * reach.bit_length()


def _reach(sigma2: Fraction, bits: int) -> int:
    return window(sigma2, bits + 16) + 2


def at_least_bounds(
    sigma2: Fraction, ms: tuple[int, ...], bits: int
) -> list[tuple[Fraction, Fraction]]:
    """Rational bounds on ``P(Z >= m)`` for each ``m``, absolute width about ``2**-bits``."""
    reach = _reach(sigma2, bits)
    guard = _guard(reach)
    while True:
        sums = GaussianSums(sigma2, bits + guard, reach)
        found = [sums.at_least(m) for m in ms]
        if all(hi - lo <= 1 << (guard + 2) for lo, hi in found):
            scale = 1 << (bits + guard)
            return [(Fraction(lo, scale), Fraction(hi, scale)) for lo, hi in found]
        guard += 32


def _cdf_bounds(sigma2: Fraction, radius: int, prec: int) -> list[tuple[int, int]]:
    """Fixed-point bounds on ``P(Z <= z)`` for ``z = −radius−1 .. radius`` at precision ``prec``."""
    reach = max(_reach(sigma2, prec), radius + 2)
    guard = _guard(reach)
    while True:
        sums = GaussianSums(sigma2, prec + guard, reach)
        scale = 1 << guard
        out = []
        for z in range(-radius - 1, radius + 1):
            lo, hi = sums.at_least(-z)  # P(Z <= z) = P(Z >= −z) by symmetry
            out.append((lo >> guard, _ceil_div(hi, scale)))
        if all(hi - lo <= 4 for lo, hi in out):
            return out
        guard += 32


class GaussianSampler:
    """Exact vectorised sampler of the discrete Gaussian with a fixed rational σ².

    Args:
        sigma2: the parameter σ², ``0 < σ² <= 4096²``.
        bits: random bits per draw for the table (tests lower it to exercise ties).
    """

    def __init__(self, sigma2: Fraction, bits: int = 32) -> None:
        if not 0 < sigma2 <= MAX_SIGMA2:
            raise ValueError(f"sigma2 must be in (0, 4096**2], got {sigma2}")
        self.sigma2 = sigma2
        self.bits = bits
        self.radius = window(sigma2, TAIL_BITS)
        count = 2 * self.radius + 2

        def cdf(prec: int) -> list[tuple[int, int]]:
            return _cdf_bounds(sigma2, self.radius, prec)

        self.table = InversionTable(cdf, count, bits=bits)

    def sample(self, size: int, rng: RandomSource) -> npt.NDArray[np.int64]:
        """``size`` independent draws (at least :data:`MIN_BATCH` are made, extras discarded)."""
        n = max(size, MIN_BATCH)
        if self.bits == 32:
            u = rng.uint64(-(-n // 2)).view(np.uint32)[:n]
        else:
            u = rng.uint64(n) >> np.uint64(64 - self.bits)
        index = self.table.lookup(u, rng)
        draws = index.astype(np.int64) - (self.radius + 1)
        last = 2 * self.radius + 2
        for k in np.flatnonzero((index == 0) | (index == last)):
            magnitude = gaussian_tail_one(self.sigma2, self.radius + 1, rng)
            draws[k] = magnitude if index[k] == last else -magnitude
        return draws[:size]


@lru_cache(maxsize=64)
def gaussian_sampler(sigma2: Fraction) -> GaussianSampler:
    """The (cached) production sampler for σ²; building one takes up to a few tenths of a second."""
    return GaussianSampler(sigma2)
