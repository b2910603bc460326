"""Seeded generators and fast categorical sampling for *data synthesis* (never for privacy noise).

The synthetic datasets must be reproducible, so they draw from ``numpy.random.Generator`` over
PCG64, keyed by a seed; privacy noise must be unpredictable, so it comes only from
:func:`dalenius.core.rng.system_random`. This module serves the former only. It lives in layer L4,
which the mechanisms (L1) cannot import, so no noise path can reach it.

Categorical draws use Walker's alias method (Vose's construction): one uniform number, a multiply
and two table look-ups per draw, about four times faster than a binary search over the cumulative
distribution when there are thousands of categories (the ZIP codes), and exact up to float
rounding of the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def generator(seed: int, stream: int, chunk: int = 0) -> np.random.Generator:
    """The PCG64 generator of one ``(seed, stream, chunk)``: independent streams of one seed.

    Example:
        >>> a = generator(1994, 1, 0).random(2)
        >>> bool((a == generator(1994, 1, 0).random(2)).all())
        True
        >>> bool((a == generator(1994, 1, 1).random(2)).any())
        False
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream, chunk])))


@dataclass(frozen=True)
class AliasTable:
    """Walker alias tables for one or more categorical distributions over the same ``k`` categories.

    Row ``g`` of ``keep`` and ``alias`` describes distribution ``g``: a draw picks a column ``i``
    uniformly, keeps it with probability ``keep[g, i]`` and otherwise takes ``alias[g, i]``.

    Attributes:
        keep: probabilities of keeping the uniformly chosen column, shape ``(groups, k)``.
        alias: the category taken instead, shape ``(groups, k)``.
    """

    keep: FloatArray
    alias: IntArray

    @property
    def categories(self) -> int:
        """The number of categories ``k``."""
        return int(self.keep.shape[1])

    def sample(self, rng: np.random.Generator, size: int) -> IntArray:
        """Draw ``size`` categories from the first (usually only) distribution.

        Example:
            >>> table = alias_table([[0.0, 1.0, 3.0]])
            >>> draws = table.sample(generator(7, 0), 10_000)
            >>> sorted(set(draws.tolist()))
            [1, 2]
        """
        return self.sample_given(rng, np.zeros(size, dtype=np.int64))

    def sample_given(self, rng: np.random.Generator, group: IntArray) -> IntArray:
        """Draw one category per entry of ``group``, from that group's distribution.

        Example:
            >>> table = alias_table([[1.0, 0.0], [0.0, 1.0]])
            >>> table.sample_given(generator(7, 0), np.array([0, 1, 1, 0])).tolist()
            [0, 1, 1, 0]
        """
        k = self.categories
        scaled = rng.random(group.size) * k
        column = np.minimum(scaled.astype(np.int64), k - 1)
        # The fractional part is a second uniform number, independent of the column drawn.
        fraction = scaled - column
        flat = group.astype(np.int64) * k + column
        keep = fraction < self.keep.ravel()[flat]
        return np.where(keep, column, self.alias.ravel()[flat]).astype(np.int64)


def alias_table(weights: npt.ArrayLike) -> AliasTable:
    """Build alias tables from non-negative weights, one distribution per row.

    A category of weight zero is never drawn. A 1-D ``weights`` is one distribution.

    Raises:
        ValueError: if a weight is negative or not finite, or a row sums to zero (a bug in the
            model's fixed tables, not a user error).
    """
    matrix = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if not np.isfinite(matrix).all() or (matrix < 0).any():
        raise ValueError("alias weights must be finite and non-negative")
    totals = matrix.sum(axis=1)
    if (totals <= 0).any():
        raise ValueError("every row of alias weights needs a positive total")
    groups, k = matrix.shape
    keep = np.ones((groups, k))
    alias = np.tile(np.arange(k, dtype=np.int64), (groups, 1))
    for g in range(groups):
        _vose(matrix[g] / totals[g] * k, keep[g], alias[g])
    keep.flags.writeable = False
    alias.flags.writeable = False
    return AliasTable(keep=keep, alias=alias)


def _vose(scaled: FloatArray, keep: FloatArray, alias: IntArray) -> None:
    """Fill one row of alias tables from probabilities scaled to mean 1 (Vose, 1991)."""
    mass = scaled.tolist()
    small = [i for i, m in enumerate(mass) if m < 1.0]
    large = [i for i, m in enumerate(mass) if m >= 1.0]
    while small and large:
        s = small.pop()
        big = large.pop()
        keep[s] = mass[s]
        alias[s] = big
        mass[big] += mass[s] - 1.0
        (small if mass[big] < 1.0 else large).append(big)
    # Whatever is left holds mass 1 up to float rounding: keep it always (its default).
