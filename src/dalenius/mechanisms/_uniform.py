"""Vectorised exact uniform integers and rational Bernoulli trials on 64-bit random words.

Uniform integers below ``n`` come from rejection sampling: a 64-bit word is accepted only below the
largest multiple of ``n`` that fits, so every residue is equally likely (no modulo bias). The
rejection loop runs over whole arrays; which draws were rejected is independent of the values that
are finally accepted, so the number of rounds reveals nothing about the output.

Example:
    >>> from dalenius.core.rng import system_random
    >>> draws = uniform_below_array(6, 1000, system_random())
    >>> bool(draws.min() >= 0 and draws.max() < 6)
    True
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.rng import RandomSource

MIN_BATCH = 1024
"""Fewest draws a vectorised sampler makes per call, so one draw costs as much as a batch."""

_MAX_N = 1 << 62


def uniform_below_array(n: int, size: int, rng: RandomSource) -> npt.NDArray[np.int64]:
    """``size`` independent uniform integers in ``[0, n)``, for ``1 <= n <= 2**62``."""
    if not 1 <= n <= _MAX_N:
        raise ValueError(f"n must be in [1, 2**62], got {n}")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if n & (n - 1) == 0:
        words = rng.uint64(size)
        return (words & np.uint64(n - 1)).astype(np.int64)
    limit = np.uint64(((1 << 64) // n) * n)
    modulus = np.uint64(n)
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        words = rng.uint64(pending.size)
        accepted = words < limit
        out[pending[accepted]] = (words[accepted] % modulus).astype(np.int64)
        pending = pending[~accepted]
    return out


def bernoulli_array(p: Fraction, size: int, rng: RandomSource) -> npt.NDArray[np.bool_]:
    """``size`` independent trials that are true with probability exactly ``p``.

    ``p`` must be a rational in ``[0, 1]`` whose denominator is at most ``2**62``.
    """
    if not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got {p}")
    return uniform_below_array(p.denominator, size, rng) < p.numerator
