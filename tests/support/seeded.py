"""Test-only seeded random sources: reproducible bits for tests, never for releases.

They live in the test tree, not in the installed package, so no configuration file, environment
variable or CLI flag can select them; a test passes one explicitly to a sampler's ``rng`` argument.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt


class SeededRandom:
    """A reproducible :class:`~dalenius.core.rng.RandomSource` (numpy's PCG64) for tests only."""

    def __init__(self, seed: int) -> None:
        self.name = f"seeded:{seed}"
        self._generator = np.random.Generator(np.random.PCG64(seed))
        self.bytes_drawn = 0

    def random_bytes(self, n: int) -> bytes:
        """``n`` reproducible pseudo-random bytes."""
        self.bytes_drawn += n
        return self._generator.bytes(n)

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        """``size`` reproducible pseudo-random 64-bit words."""
        self.bytes_drawn += 8 * size
        return self._generator.integers(0, 2**64, size=size, dtype=np.uint64)


class ScriptedRandom:
    """A random source that replays given 64-bit words (then falls back to a seeded stream).

    Lets a test force a sampler down a chosen path, such as a tie in an inversion table.
    """

    def __init__(self, words: Iterable[int], seed: int = 0) -> None:
        self.name = "scripted"
        self._words = [int(w) for w in words]
        self._fallback = SeededRandom(seed)

    def _take(self, count: int) -> list[int]:
        taken = self._words[:count]
        self._words = self._words[count:]
        if len(taken) < count:
            extra = self._fallback.uint64(count - len(taken))
            taken.extend(int(w) for w in extra)
        return taken

    def random_bytes(self, n: int) -> bytes:
        """Bytes cut from the scripted words, little-endian."""
        words = self._take(-(-n // 8))
        data = b"".join(w.to_bytes(8, "little") for w in words)
        return data[:n]

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        """The next ``size`` scripted words."""
        return np.array(self._take(size), dtype=np.uint64)
