"""Interval half-widths for linear combinations of independent integer noises (conservative).

A post-processed estimate (a consistent hierarchy node, a running total of a continual series) is
``Σ_u a_u·noise_u`` plus the exact value. Its interval comes from a Chernoff bound on that exact
linear combination: any λ gives a valid tail bound, so the grid search over λ can only make the
interval wider than the best bound, never narrower than a true one. Hierarchies and continual
releases share it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.mechanisms.laplace import IntegerLaplace


def noise_variance(mech: IntegerGaussian | IntegerLaplace) -> float:
    """The exact variance of one draw of ``mech``'s noise (a coarse Gaussian grid adds g²/12)."""
    if isinstance(mech, IntegerGaussian):
        return float(mech.sigma2) + float(mech.granularity) ** 2 / 12
    p = math.exp(-1.0 / float(mech.scale))
    return 2 * p / (1 - p) ** 2


def log_mgf(
    mech: IntegerGaussian | IntegerLaplace, lam: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``log E[exp(λ·noise)]`` (an upper bound for the discrete Gaussian: its subgaussian bound)."""
    if isinstance(mech, IntegerGaussian):
        out: npt.NDArray[np.float64] = lam * lam * float(mech.sigma2) / 2
        return out
    p = math.exp(-1.0 / float(mech.scale))
    lam = np.minimum(np.abs(lam), -math.log(p) * (1 - 1e-12))
    value: npt.NDArray[np.float64] = (
        2 * math.log(1 - p) - np.log1p(-p * np.exp(lam)) - np.log1p(-p * np.exp(-lam))
    )
    return value


def chernoff_half_widths(
    coefficients: npt.NDArray[np.float64],
    level: npt.NDArray[np.int64],
    mechanisms: Sequence[IntegerGaussian | IntegerLaplace],
    beta: float,
) -> npt.NDArray[np.float64]:
    """Per node, ``t`` with ``P(|Σ_u a_u·noise_u| > t) ≤ β``: a Chernoff bound on the exact sum.

    Gaussian levels (each noise σ-subgaussian): ``t = √(2·Σa²σ²·ln(2/β))``, the exact minimiser.
    Laplace levels: ``min_λ (Σ ln M(λa_u) + ln(2/β)) / λ`` with the discrete Laplace's exact
    moment generating function, over a grid of λ (any λ gives a valid bound). Coarse Gaussian
    grids add their rounding, ``g/2·Σ|a_u|``.
    """
    log_term = math.log(2.0 / beta)
    if all(isinstance(m, IntegerGaussian) for m in mechanisms):
        spread = np.zeros(coefficients.shape[0])
        pad = np.zeros(coefficients.shape[0])
        for depth, mech in enumerate(mechanisms):
            assert isinstance(mech, IntegerGaussian)
            cols = coefficients[:, level == depth]
            spread += (cols * cols).sum(axis=1) * float(mech.sigma2)
            if mech.granularity > 1:
                pad += np.abs(cols).sum(axis=1) * float(mech.granularity) / 2
        gauss: npt.NDArray[np.float64] = np.sqrt(2 * spread * log_term) + pad
        return gauss
    # The discrete Laplace is a difference of geometrics, whose cumulants are all positive, so
    # its cumulant function f(u) = ln M(u) has f(u)/u² increasing in |u|: for |a_u| ≤ a_max,
    # Σ f(λa_u) ≤ (Σ a_u² / a_max²)·f(λ·a_max). Per node and level, two numbers then suffice.
    laplace = [m for m in mechanisms if isinstance(m, IntegerLaplace)]
    limit = min(1.0 / float(m.scale) for m in laplace)
    parts = []
    for depth, mech in enumerate(mechanisms):
        cols = np.abs(coefficients[:, level == depth])
        top = cols.max(axis=1) + 1e-300
        parts.append((mech, (cols * cols).sum(axis=1) / (top * top), top))
    amax = np.max([p[2] for p in parts], axis=0)
    best = np.full(coefficients.shape[0], np.inf)
    for fraction in np.geomspace(1e-4, 0.999, 400):
        lam = fraction * limit / amax
        total = np.zeros(coefficients.shape[0])
        for mech, weight, top in parts:
            total += weight * log_mgf(mech, lam * top)
        best = np.minimum(best, (total + log_term) / lam)
    return best
