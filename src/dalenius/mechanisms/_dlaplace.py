"""The vectorised exact discrete Laplace sampler: certified digit tables on 32-bit random words.

Target: ``P(Z = z) = (1−q)/(1+q) · q^|z|`` with ``q = exp(−1/t)`` for a rational scale ``t``.

Decomposition (each piece independent, so the product is exactly the target):

* ``Z = 0`` with probability ``P0 = (1−q)/(1+q)``; otherwise ``|Z| = 1 + X`` with ``X`` geometric,
  ``P(X = x) = (1−q)·q^x``, and the sign is a fair random bit.
* ``X`` is written in base 256, ``X = Σ 256^i·D_i``. Because ``q^x`` factorises over digits, the
  digits are independent: ``D_i`` has ``P(D_i = d) ∝ r_i^d`` on ``0..255`` with
  ``r_i = exp(−256^i/t)``, except the top digit ``D_L``, which is unbounded (geometric with ratio
  ``r_L``). ``L`` is the smallest with ``256^(L+1) >= 28·t``, so ``D_L >= 256`` has probability at
  most ``e^-28``; that tail is sampled exactly, using memorylessness, as
  ``256 + geometric(r_L)`` with the scalar CKS sampler.
* Stage 0 merges the zero event with the lowest digit, so one draw of stage 0 decides both.

Each stage is an :class:`~dalenius.mechanisms._inversion.InversionTable` fed 32 random bits (31
for stage 0, whose 32nd bit is the sign): a release costs ``ceil((L+1)/2)`` 64-bit words per draw.
The work per draw is a fixed sequence of array operations, whatever the noise turns out to be.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.rng import RandomSource
from dalenius.mechanisms._bounds import exp_neg_fixed
from dalenius.mechanisms._exact import geometric_exp
from dalenius.mechanisms._inversion import InversionTable
from dalenius.mechanisms._uniform import MIN_BATCH

BASE = 256
TAIL_FACTOR = 28
"""``256^(L+1) >= TAIL_FACTOR·t`` makes the top digit's tail mass at most ``e^-28``."""

MAX_SCALE = Fraction(2) ** 40
"""Largest scale the vectorised sampler accepts (int64 outputs stay far from overflow)."""


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def stage_bounds(scale: Fraction, stage: int, top: bool, prec: int) -> list[tuple[int, int]]:
    """Fixed-point bounds (scale ``2**prec``) on the CDF boundaries of one stage.

    Stage 0 has the zero outcome first, then digit values; the top stage ends with a tail outcome.
    """
    rate = Fraction(BASE**stage) / scale
    digits = BASE if top else BASE - 1
    guard = 24 + max(0, math.ceil(scale).bit_length() - 8 * stage)
    while True:
        p = prec + guard
        one = 1 << p
        powers = [exp_neg_fixed((d + 1) * rate, p) for d in range(digits)]
        if top:
            cdf = [(one - hi, one - lo) for lo, hi in powers]
        else:
            full_lo, full_hi = exp_neg_fixed(BASE * rate, p)
            den_lo, den_hi = one - full_hi, one - full_lo
            cdf = [
                ((one - hi) * one // den_hi, min(one, _ceil_div((one - lo) * one, den_lo)))
                for lo, hi in powers
            ]
        if stage == 0:
            q_lo, q_hi = exp_neg_fixed(1 / scale, p)
            p0_lo = (one - q_hi) * one // (one + q_hi)
            p0_hi = _ceil_div((one - q_lo) * one, one + q_lo)
            merged = [(p0_lo, p0_hi)]
            for g_lo, g_hi in cdf:
                lo = p0_lo + g_lo - _ceil_div(p0_lo * g_lo, one)
                hi = p0_hi + g_hi - (p0_hi * g_hi) // one
                merged.append((lo, min(hi, one)))
            cdf = merged
        out = [(lo >> guard, _ceil_div(hi, 1 << guard)) for lo, hi in cdf]
        if all(hi - lo <= 4 for lo, hi in out):
            return out
        guard += 32


def stage_count(scale: Fraction) -> int:
    """Number of stages (digits) for ``scale``: the smallest ``L+1`` with ``256^(L+1) >= 28·t``."""
    stages = 1
    while BASE**stages < TAIL_FACTOR * scale:
        stages += 1
    return stages


class LaplaceSampler:
    """Exact vectorised sampler of the discrete Laplace distribution with a fixed rational scale.

    Args:
        scale: the scale ``t`` (``P(z) ∝ exp(−|z|/t)``), ``0 < t <= 2**40``.
        bits: random bits per stage (tests lower it to exercise the tie path; 32 in production).
    """

    def __init__(self, scale: Fraction, bits: int = 32) -> None:
        if not 0 < scale <= MAX_SCALE:
            raise ValueError(f"scale must be in (0, 2**40], got {scale}")
        self.scale = scale
        self.bits = bits
        self.stages = stage_count(scale)
        self.tables: list[InversionTable] = []
        for i in range(self.stages):
            top = i == self.stages - 1
            count = (1 if i == 0 else 0) + (BASE if top else BASE - 1)
            width = bits - 1 if i == 0 else bits

            def cdf(prec: int, i: int = i, top: bool = top) -> list[tuple[int, int]]:
                return stage_bounds(scale, i, top, prec)

            self.tables.append(InversionTable(cdf, count, bits=width))
        self._top_rate = Fraction(BASE ** (self.stages - 1)) / scale

    def _columns(self, n: int, rng: RandomSource) -> list[npt.NDArray[np.unsignedinteger[Any]]]:
        """One array of ``bits``-bit uniform integers per stage, cut from 64-bit random words."""
        per_word = 64 // self.bits
        words = -(-self.stages // per_word)
        raw = rng.uint64(n * words)
        if self.bits == 32:
            halves = raw.view(np.uint32).reshape(n, 2 * words)
            return [halves[:, k] for k in range(self.stages)]
        table = raw.reshape(n, words)
        mask = np.uint64((1 << self.bits) - 1)
        return [
            (table[:, k // per_word] >> np.uint64(self.bits * (k % per_word))) & mask
            for k in range(self.stages)
        ]

    def sample(self, size: int, rng: RandomSource) -> npt.NDArray[np.int64]:
        """``size`` independent draws (at least :data:`MIN_BATCH` are made, extras discarded)."""
        n = max(size, MIN_BATCH)
        columns = self._columns(n, rng)
        first = columns[0]
        sign_bit = first.dtype.type(1 << (self.bits - 1))
        negative = first >= sign_bit
        index0 = self.tables[0].lookup(first & (sign_bit - first.dtype.type(1)), rng)
        # index0 is 0 for Z = 0 and 1 + D_0 otherwise, so it already holds 1 + D_0.
        magnitude = index0.astype(np.int64)
        top_index = index0
        for i in range(1, self.stages):
            top_index = self.tables[i].lookup(columns[i], rng)
            magnitude += np.multiply(top_index, BASE**i, dtype=np.int64)
        tail_index = BASE + (1 if self.stages == 1 else 0)
        for k in np.flatnonzero(top_index == tail_index):
            # Memorylessness: given D_L >= 256, D_L − 256 is again geometric with ratio r_L.
            magnitude[k] += geometric_exp(self._top_rate, rng) * BASE ** (self.stages - 1)
        np.putmask(magnitude, index0 == 0, 0)
        np.negative(magnitude, out=magnitude, where=negative)
        return magnitude[:size]


@lru_cache(maxsize=128)
def laplace_sampler(scale: Fraction) -> LaplaceSampler:
    """The (cached) production sampler for ``scale``; building one takes a few milliseconds."""
    return LaplaceSampler(scale)
