"""Helpers for the statistical tests: exact pmfs, binned chi-square, and the alarm threshold.

False-alarm policy: every statistical assertion rejects only when its p-value is below
``ALPHA = 1e-7``. The statistical suite makes fewer than 100 such assertions per run, so the chance
that a correct sampler fails CI on any given run is below 1e-5 (Bonferroni).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import stats

ALPHA = 1e-7
"""Per-assertion false-alarm probability."""


def discrete_laplace_cdf(
    scale: float,
) -> Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]:
    """``P(Z <= k)`` for the discrete Laplace distribution with ``P(z) ∝ exp(−|z|/scale)``."""
    q = math.exp(-1 / scale)

    def cdf(k: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        k = np.floor(k)
        below = q ** (-np.minimum(k, 0)) / (1 + q)
        above = 1 - q ** (np.maximum(k, 0) + 1) / (1 + q)
        return np.where(k < 0, below, above)

    return cdf


def discrete_gaussian_pmf(
    sigma2: float, radius: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Support ``-radius..radius`` and the discrete Gaussian pmf on it (mass outside is < 1e-30)."""
    support = np.arange(-radius, radius + 1)
    weights = np.exp(-(support.astype(np.float64) ** 2) / (2 * sigma2))
    return support, weights / weights.sum()


def quantile_bins(
    cdf: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    low: int,
    high: int,
    bins: int,
    draws: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Integer cut points splitting the integers into about ``bins`` cells of similar mass.

    A draw ``z`` falls in cell ``i`` when ``c[i-1] < z <= c[i]`` (open ends). Cells whose expected
    count would be below 5 are merged into a neighbour. ``[low, high]`` must hold every cut.
    Returns the cut points and the exact probability of each cell.
    """
    cuts: list[int] = []
    for target in np.linspace(0, 1, bins + 1)[1:-1]:
        lo, hi = low, high
        while lo < hi:  # smallest k with cdf(k) >= target
            mid = (lo + hi) // 2
            if cdf(np.array([mid], dtype=np.float64))[0] >= target:
                hi = mid
            else:
                lo = mid + 1
        cuts.append(lo)
    unique = np.unique(np.array(cuts, dtype=np.int64))
    minimum = 5 / draws
    kept: list[int] = []
    previous = 0.0
    for cut in unique:
        mass = float(cdf(np.array([cut], dtype=np.float64))[0])
        if mass - previous >= minimum and 1 - mass >= minimum:
            kept.append(int(cut))
            previous = mass
    final = np.array(kept, dtype=np.int64)
    cum_at = cdf(final.astype(np.float64))
    probs = np.diff(np.concatenate(([0.0], cum_at, [1.0])))
    return final, probs


def chi_square_pvalue(
    draws: npt.NDArray[np.int64], cuts: npt.NDArray[np.int64], probs: npt.NDArray[np.float64]
) -> float:
    """p-value of Pearson's chi-square test of the binned draws against ``probs``."""
    cells = np.searchsorted(cuts, draws, side="left")
    observed = np.bincount(cells, minlength=probs.size)
    expected = probs * draws.size
    assert expected.min() >= 5, "cells too thin for the chi-square approximation"
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(statistic, probs.size - 1))


def binomial_pvalue(successes: int, trials: int, p: float) -> float:
    """Two-sided exact binomial test p-value."""
    return float(stats.binomtest(successes, trials, p).pvalue)
