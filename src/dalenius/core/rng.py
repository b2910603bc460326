"""The only source of randomness for privacy: the operating system's cryptographic generator.

Noise in Dalenius never comes from a database's ``RANDOM()``, from :mod:`random`, or from numpy's
default generator, whose output is predictable from its seed. Every sampler takes a
:class:`RandomSource`; in production that is always :func:`system_random`, which reads
``os.urandom``. A seeded source exists only in the test suite (``tests/support``), is not part of the
installed package, and no configuration file, environment variable or CLI flag can select it.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt


@runtime_checkable
class RandomSource(Protocol):
    """A stream of uniformly random bits."""

    name: str

    def random_bytes(self, n: int) -> bytes:
        """Return ``n`` uniformly random bytes."""
        ...

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        """Return ``size`` independent uniform 64-bit unsigned integers."""
        ...


class SystemRandom:
    """Random bits from the kernel's CSPRNG (``os.urandom``, i.e. ``getrandom(2)`` on Linux)."""

    name = "os.urandom"

    def random_bytes(self, n: int) -> bytes:
        """Return ``n`` bytes from ``os.urandom``."""
        return os.urandom(n)

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        """Return ``size`` uniform 64-bit integers built from ``os.urandom`` bytes.

        Example:
            >>> system_random().uint64(3).dtype
            dtype('uint64')
        """
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        return np.frombuffer(os.urandom(8 * size), dtype=np.uint64).copy()


_SYSTEM = SystemRandom()


def system_random() -> SystemRandom:
    """The process-wide cryptographic random source used by every production code path."""
    return _SYSTEM
