"""Bit-packed Bernoulli trials: the same law as one 32-bit comparison per trial, exactly.

The exactness test records every random word the generator hands out and recomputes each trial
as ``U < threshold`` from the bits it consumed; the statistical test checks the OS generator's
trials against the binomial law (rejecting at ``tests.statistical.stats.ALPHA``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA

from dalenius.ldp._draws import _PACKED_CHUNK, SimulationDraws, SystemDraws, packed_bernoulli


class Recording(SimulationDraws):
    """Seeded draws that keep every batch of 32-bit words they hand out."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.batches: list[np.ndarray] = []

    def words32(self, size: int) -> np.ndarray:
        words = super().words32(size)
        self.batches.append(words.copy())  # the caller may overwrite what it was given
        return words


@pytest.mark.parametrize(
    "threshold", [1, 0x00FFFFFF, 0x01000000, 0x45A3B2C1, 0x80000000, 0xFF003039, (1 << 32) - 1]
)
def test_each_trial_is_the_comparison_of_the_bits_it_consumed(threshold: int) -> None:
    words = _PACKED_CHUNK + 77  # two chunks, the second short
    draws = Recording(threshold)
    got = packed_bernoulli(draws, threshold, words)
    lanes = np.unpackbits(got.astype("<u8").view(np.uint8), bitorder="little").astype(bool)
    expected = np.empty(lanes.size, dtype=bool)
    batches = iter(draws.batches)
    for start in range(0, words, _PACKED_CHUNK):
        size = min(_PACKED_CHUNK, words - start)
        top = np.zeros(64 * size, dtype=np.int64)
        for _ in range(8):  # the top 8 bits of every trial's U, most significant first
            level = next(batches).view(np.uint64).astype("<u8").view(np.uint8)
            top = top << 1 | np.unpackbits(level, bitorder="little")
        decided = top != threshold >> 24
        result = top < threshold >> 24
        if not decided.all():  # ties compare 24 fresh bits, in lane order
            low = next(batches) & 0xFFFFFF
            result[~decided] = low < threshold & 0xFFFFFF
        expected[64 * start : 64 * (start + size)] = result
    assert next(batches, None) is None  # every word drawn was used
    assert (lanes == expected).all()


@pytest.mark.statistical
@pytest.mark.parametrize("threshold", [0x00FFFFFF, 0x45A3B2C1, 0xFF003039])
def test_os_trials_follow_the_binomial_law(threshold: int) -> None:
    bits = packed_bernoulli(SystemDraws(), threshold, 1 << 14)
    ones = int(np.bitwise_count(bits).sum())
    assert stats.binomtest(ones, 64 << 14, threshold / 2**32).pvalue > ALPHA
