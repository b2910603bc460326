"""Exact, vectorised inversion sampling of a distribution whose CDF is irrational but computable.

The idea: an outcome is ``#{j : CDF_j <= U}`` for a uniform real ``U`` in ``[0, 1)``. ``U`` is never
materialised as a float. Its first ``w`` bits are one random integer ``u``; the table stores
``B_j = floor(CDF_j · 2**w)``, certified from rational bounds on each ``CDF_j``. Then

* ``u > B_j`` proves ``U > CDF_j`` and ``u < B_j`` proves ``U < CDF_j``, so the outcome is
  ``#{j : B_j < u}`` — one table lookup — unless ``u == B_j`` for some ``j``;
* in that rare tie (probability at most ``count / 2**w``) more random bits of ``U`` are drawn, 64
  at a time, and compared with ever tighter bounds on the tied ``CDF_j`` until every comparison is
  decided. The CDFs here are irrational, so this ends with probability one.

The outcome therefore has exactly the target distribution: the table only decides comparisons
that are provably right. A guide table indexed by the top bits of ``u`` answers most draws with a
single array lookup; draws that land in a cell containing a boundary fall back to a binary search.

Timing: the binary-search fallback always runs over a fixed quota of slots (padded), so its cost
does not depend on how many draws needed it unless the quota is exceeded (probability below
1e-12 per call); ties cost extra time but happen with probability at most ``count / 2**w``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.rng import RandomSource
from dalenius.mechanisms._bounds import exp_neg_fixed
from dalenius.mechanisms._exact import random_bits

CdfBounds = Callable[[int], Sequence[tuple[int, int]]]
"""``cdf(prec)`` returns, for every boundary ``j``, integers ``lo <= CDF_j · 2**prec <= hi`` with
``hi - lo <= 4``; boundaries are nondecreasing and each ``CDF_j`` is irrational and in ``(0, 1)``."""

_MAX_CERTIFY_PRECISION = 4096


class InversionTable:
    """A certified inversion table for one discrete distribution over ``count + 1`` outcomes.

    Args:
        cdf: exact bounds on the ``count`` CDF boundaries at any precision.
        count: number of boundaries.
        bits: random bits per draw used by the table (``w``); the input ``u`` is below ``2**bits``.
    """

    def __init__(self, cdf: CdfBounds, count: int, bits: int = 32, guide: bool = True) -> None:
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        self.bits = bits
        self.count = count
        self._cdf = cdf
        self._bounds_cache: dict[int, Sequence[tuple[int, int]]] = {}
        self.boundaries = self._certified_floors()
        # Without a guide (one-off tables) every draw takes the binary search.
        guide_bits = min(bits, 20, max(12, math.ceil(math.log2(count + 1)) + 8)) if guide else 0
        self._shift = bits - guide_bits
        cells = np.arange(1 << guide_bits, dtype=np.int64) << self._shift
        first = np.searchsorted(self.boundaries, cells, side="left")
        after = np.searchsorted(self.boundaries, cells + (1 << self._shift), side="left")
        self._guide = np.where(first == after, first, -1).astype(np.int32)
        if not guide:
            self._guide[:] = -1
        self.dirty_fraction = float(np.mean(self._guide < 0))

    def _bounds(self, prec: int) -> Sequence[tuple[int, int]]:
        cached = self._bounds_cache.get(prec)
        if cached is None:
            cached = self._cdf(prec)
            if len(cached) != self.count:
                raise ValueError(f"cdf returned {len(cached)} bounds, expected {self.count}")
            if len(self._bounds_cache) > 16:
                self._bounds_cache.clear()
            self._bounds_cache[prec] = cached
        return cached

    def _certified_floors(self) -> npt.NDArray[np.int64]:
        prec = self.bits + 24
        while prec <= _MAX_CERTIFY_PRECISION:
            bounds = self._bounds(prec)
            drop = prec - self.bits
            # Every CDF_j is strictly below 1, so its floor is at most 2**bits - 1 even when the
            # upper bound touches 1 (values within 2**-prec of 1 are common in far tails).
            top = (1 << prec) - 1
            floors = [lo >> drop for lo, _ in bounds]
            if all((min(hi, top) >> drop) == f for (_, hi), f in zip(bounds, floors, strict=True)):
                return np.array(floors, dtype=np.int64)
            prec += 64
        raise ArithmeticError("could not certify the inversion table (a CDF value is dyadic?)")

    def _quota(self, size: int) -> int:
        """Slots the binary-search fallback always processes for ``size`` draws."""
        mean = size * self.dirty_fraction
        return min(size, math.ceil(mean + 8 * math.sqrt(mean) + 32))

    def lookup(
        self, u: npt.NDArray[np.unsignedinteger[Any]], rng: RandomSource
    ) -> npt.NDArray[np.int32]:
        """Outcome indices ``0 .. count`` for uniform ``bits``-bit integers ``u``.

        ``rng`` supplies the further random bits needed to settle ties.
        """
        out = self._guide[u >> u.dtype.type(self._shift)]
        dirty = np.flatnonzero(out < 0)
        quota = self._quota(u.size)
        padded = np.zeros(max(quota, dirty.size), dtype=np.int64)
        values = u[dirty].astype(np.int64)
        padded[: dirty.size] = values
        found = np.searchsorted(self.boundaries, padded, side="left")[: dirty.size]
        out[dirty] = found
        if dirty.size:
            at = np.minimum(found, self.count - 1)
            ties = np.flatnonzero((found < self.count) & (self.boundaries[at] == values))
            for k in ties:
                value = int(values[k])
                first = int(found[k])
                last = int(np.searchsorted(self.boundaries, value, side="right"))
                out[dirty[k]] = self.resolve_tie(value, first, last, rng)
        return out

    def resolve_tie(self, u: int, first: int, last: int, rng: RandomSource) -> int:
        """Settle ``u == B_j`` for ``first <= j < last`` by drawing more bits of ``U``.

        Returns ``first + #{j in [first, last) : CDF_j <= U}``.
        """
        prefix = u
        extra = 0
        while True:
            prefix = (prefix << 64) | random_bits(64, rng)
            extra += 64
            prec = self.bits + extra + 8
            bounds = self._bounds(prec)
            low = prefix << 8
            high = (prefix + 1) << 8
            below = 0
            decided = True
            for j in range(first, last):
                lo, hi = bounds[j]
                if hi <= low:
                    below += 1
                elif lo < high:
                    decided = False
                    break
            if decided:
                return first + below


@functools.lru_cache(maxsize=1 << 16)
def _exp_neg_floor(gamma: Fraction, bits: int) -> int:
    """``floor(exp(−γ)·2**bits)``, certified (raising the working precision as needed).

    Memoised: a selection over many groups meets the same gaps again and again (every empty bin
    past the data has the same utility), and each costs a high-precision exponential.
    """
    if gamma == 0:
        return 1 << bits
    prec = bits + 24
    while True:
        lo, hi = exp_neg_fixed(gamma, prec)
        drop = prec - bits
        if lo >> drop == min(hi, (1 << prec) - 1) >> drop:
            return lo >> drop
        prec += 64


def bernoulli_exp_array(
    gammas: Sequence[Fraction], rng: RandomSource, size: int = 1, bits: int = 32
) -> npt.NDArray[np.bool_]:
    """``size`` rows of independent trials, trial ``i`` true with probability exactly ``exp(−γ_i)``.

    Each trial compares ``bits`` random bits with the certified ``floor(exp(−γ_i)·2**bits)``; a tie
    draws more bits and compares them with tighter bounds, as in :class:`InversionTable`. Every
    trial costs the same unless it ties (probability ``2**-bits``).

    Returns:
        A boolean array of shape ``(size, len(gammas))``.
    """
    n = len(gammas)
    floors = np.array([_exp_neg_floor(g, bits) for g in gammas], dtype=np.int64)
    u = (rng.uint64(n * size) >> np.uint64(64 - bits)).astype(np.int64).reshape(size, n)
    out = u < floors
    for row, k in zip(*np.nonzero(u == floors), strict=True):
        prefix = int(u[row, k])
        extra = 0
        while True:
            prefix = (prefix << 64) | random_bits(64, rng)
            extra += 64
            prec = bits + extra + 8
            lo, hi = exp_neg_fixed(gammas[int(k)], prec)
            if hi <= prefix << 8:
                out[row, k] = False
                break
            if lo >= (prefix + 1) << 8:
                out[row, k] = True
                break
    return out
