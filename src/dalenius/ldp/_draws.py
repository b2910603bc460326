"""Where a client's random bits come from, and the only other place they may come from.

A report leaves the device once and is the privacy boundary: its randomness must be unpredictable,
so every client encoder draws from the operating system's generator
(:func:`dalenius.core.rng.system_random`) through :class:`SystemDraws`. No encoder takes a
generator argument, so nothing — no option, file or flag — can make a client use another source.

Simulating millions of clients with ``os.urandom`` would be slow and would prove nothing more, so
:mod:`dalenius.ldp.simulate` (and only it) builds :class:`SimulationDraws` over numpy's seeded
PCG64 and calls the protocols' internal, vectorised ``_perturb`` methods directly. Simulated
reports are for measuring accuracy; they are never sent anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dalenius.core.rng import RandomSource, system_random

_MAX_N = 1 << 62


class Draws(Protocol):
    """Uniform random integers, the one primitive every local encoder is built from."""

    def words32(self, size: int) -> npt.NDArray[np.uint32]:
        """``size`` independent uniform 32-bit words."""
        ...

    def below(self, n: int, size: int) -> npt.NDArray[np.int64]:
        """``size`` independent uniform integers in ``[0, n)`` (exact, no modulo bias)."""
        ...

    def bernoulli32(self, threshold: int, size: int) -> npt.NDArray[np.bool_]:
        """``size`` independent trials, true with probability exactly ``threshold / 2**32``."""
        ...


class SystemDraws:
    """Draws from a :class:`~dalenius.core.rng.RandomSource` (the OS generator in production)."""

    def __init__(self, source: RandomSource | None = None) -> None:
        self._source = source if source is not None else system_random()

    def words32(self, size: int) -> npt.NDArray[np.uint32]:
        """Uniform 32-bit words cut from 64-bit words of the source."""
        words = self._source.uint64((size + 1) // 2).view(np.uint32)
        return words[:size]

    def below(self, n: int, size: int) -> npt.NDArray[np.int64]:
        """Rejection sampling on 64-bit words: every residue equally likely."""
        if not 1 <= n <= _MAX_N:
            raise ValueError(f"n must be in [1, 2**62], got {n}")
        if n & (n - 1) == 0:
            return (self._source.uint64(size) & np.uint64(n - 1)).astype(np.int64)
        limit = np.uint64(((1 << 64) // n) * n)
        out = np.empty(size, dtype=np.int64)
        pending = np.arange(size)
        while pending.size:
            words = self._source.uint64(pending.size)
            accepted = words < limit
            out[pending[accepted]] = (words[accepted] % np.uint64(n)).astype(np.int64)
            pending = pending[~accepted]
        return out

    def bernoulli32(self, threshold: int, size: int) -> npt.NDArray[np.bool_]:
        """Exact trials from about one random byte each.

        A 32-bit uniform word is below ``threshold`` exactly when its top byte is below the
        threshold's top byte, or equal to it and the low 24 bits are below the threshold's: so one
        byte decides, and only a tie (probability 1/256) needs three more — the same law as a full
        word, for a quarter of the OS generator's output.
        """
        first = np.frombuffer(self._source.random_bytes(size), dtype=np.uint8)
        return _lexicographic(first, threshold, self.words32)


def _lexicographic(
    first: npt.NDArray[np.uint8], threshold: int, words32: Callable[[int], npt.NDArray[np.uint32]]
) -> npt.NDArray[np.bool_]:
    """``U < threshold/2**32`` for uniform ``U`` whose top byte is ``first`` (ties drawn on)."""
    if threshold >= 1 << 32:
        return np.ones(first.size, dtype=bool)
    top = threshold >> 24
    out = first < top
    tie = np.nonzero(first == top)[0]
    if tie.size:
        low = words32(tie.size) & np.uint32(0xFFFFFF)
        out[tie] = low < np.uint32(threshold & 0xFFFFFF)
    return out


def packed_bernoulli(draws: Draws, threshold: int, words: int) -> npt.NDArray[np.uint64]:
    """``64·words`` independent trials, each true with probability exactly ``threshold / 2**32``,
    packed 64 to a little-endian word (trial ``i`` of word ``w`` is bit ``i``).

    The same law as :meth:`Draws.bernoulli32`, computed 64 trials per operation: trial ``i``
    compares a uniform 32-bit ``U_i`` with ``threshold`` most significant bit first, and the
    ``j``-th bits of 64 trials are one random 64-bit word. After the top 8 bits a trial is
    decided unless ``U_i`` agreed with the threshold on all of them (probability 1/256); those
    ties compare 24 fresh bits with the threshold's low 24 bits, as ``bernoulli32`` does. The
    trials come out bit-packed: an ``n × d`` bit matrix costs ``n·d/8`` bytes, not ``n·d``.

    Example:
        >>> bits = packed_bernoulli(SimulationDraws(1), 1 << 30, 1 << 12)  # p = 1/4
        >>> 0.24 < int(np.bitwise_count(bits).sum()) / (64 << 12) < 0.26
        True
    """
    if threshold >= 1 << 32:
        return np.full(words, np.iinfo(np.uint64).max, dtype=np.uint64)
    out = np.empty(words, dtype=np.uint64)
    for start in range(0, words, _PACKED_CHUNK):  # chunks small enough to stay in cache
        out[start : start + _PACKED_CHUNK] = _packed_chunk(
            draws, threshold, min(_PACKED_CHUNK, words - start)
        )
    return out


_PACKED_CHUNK = 1 << 15


def _packed_chunk(draws: Draws, threshold: int, words: int) -> npt.NDArray[np.uint64]:
    less = np.zeros(words, dtype=np.uint64)
    equal = np.full(words, np.iinfo(np.uint64).max, dtype=np.uint64)
    scratch = np.empty(words, dtype=np.uint64)
    for level in range(31, 23, -1):
        bit = np.ascontiguousarray(draws.words32(2 * words)).view(np.uint64)
        if threshold >> level & 1:
            np.invert(bit, out=scratch)
            np.bitwise_and(scratch, equal, out=scratch)
            np.bitwise_or(less, scratch, out=less)
            np.bitwise_and(equal, bit, out=equal)
        else:
            np.invert(bit, out=bit)
            np.bitwise_and(equal, bit, out=equal)
    tied = np.flatnonzero(equal)
    if tied.size:
        lanes = np.unpackbits(equal[tied].astype("<u8").view(np.uint8), bitorder="little")
        ties = lanes.view(bool)
        low = draws.words32(int(ties.sum())) & np.uint32(0xFFFFFF)
        lanes[ties] = low < np.uint32(threshold & 0xFFFFFF)
        won = np.packbits(lanes, bitorder="little").view("<u8").astype(np.uint64)
        less[tied] |= won
    return less


class SimulationDraws:
    """numpy's PCG64, for simulations of many clients only (see the module docstring).

    Args:
        seed: the seed; ``None`` takes one from the OS.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.generator = np.random.Generator(np.random.PCG64(seed))

    def words32(self, size: int) -> npt.NDArray[np.uint32]:
        """Uniform 32-bit words (the generator's raw 64-bit output cut in two)."""
        raw = self.generator.bit_generator.random_raw((size + 1) // 2)
        words: npt.NDArray[np.uint32] = np.asarray(raw, dtype=np.uint64).view(np.uint32)[:size]
        return words

    def bernoulli32(self, threshold: int, size: int) -> npt.NDArray[np.bool_]:
        """Trials true with probability ``threshold / 2**32`` (one raw byte each, ties drawn on)."""
        raw = np.asarray(self.generator.bit_generator.random_raw((size + 7) // 8), dtype=np.uint64)
        return _lexicographic(raw.view(np.uint8)[:size], threshold, self.words32)

    def below(self, n: int, size: int) -> npt.NDArray[np.int64]:
        """Uniform integers in ``[0, n)`` (numpy's unbiased bounded generator)."""
        return self.generator.integers(0, n, size=size, dtype=np.int64)


def client_draws() -> Draws:
    """The draws every client encoder uses: the operating system's generator, always."""
    return SystemDraws()
