"""The Gaussian-process mechanism: its sensitivity, its exact ρ, its noise law and its bands.

Data are generated with seeded numpy generators (data only); the noise always comes from the OS
generator. The statistical tests state their false-alarm rates.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dalenius.core.errors import ConfigurationError
from dalenius.mechanisms.gaussian_process import (
    JITTER,
    GaussianProcessMechanism,
    KernelAxis,
    gaussian_kernel,
)


def curve(
    points: int = 50, bins: int = 101, h: float = 4.0, rows: int = 1, rho: float = 0.5
) -> GaussianProcessMechanism:
    axis = KernelAxis(np.linspace(0.0, 100.0, points), np.arange(bins, dtype=np.float64))
    return GaussianProcessMechanism([axis], bandwidth=h, max_rows=rows, rho=Fraction(rho))


def surface(rows: int = 3) -> GaussianProcessMechanism:
    a = KernelAxis(np.linspace(0.0, 10.0, 12), np.arange(11, dtype=np.float64))
    b = KernelAxis(np.linspace(0.0, 5.0, 9), np.arange(6, dtype=np.float64))
    return GaussianProcessMechanism([a, b], bandwidth=1.5, max_rows=rows, rho=Fraction(1, 4))


@pytest.mark.parametrize("rho", [0.001, 0.1, 0.5, 8.0])
def test_the_release_spends_exactly_the_rho_asked(rho: float) -> None:
    m = curve(rho=rho)
    assert m.rho == Fraction(rho)
    assert m.sigma2_units <= 4096**2


@pytest.mark.parametrize(("make", "rows"), [(curve, 1), (lambda: curve(rows=5), 5), (surface, 3)])
def test_neighbouring_counts_move_the_integer_units_by_at_most_the_charged_shift(
    make, rows: int
) -> None:  # type: ignore[no-untyped-def]
    """One unit adds up to ``rows`` rows anywhere; the units move by at most √(2ρσ_u²)."""
    m = make()
    rng = np.random.default_rng(7)  # data only
    bins = math.prod(f.kernel_q.shape[1] for f in m.factors)
    shift_bound = math.sqrt(float(m.rho * 2 * m.sigma2_units))
    for trial in range(200):
        counts = rng.integers(0, 1000, size=bins)
        neighbour = counts.copy()
        # half the trials pile every row into one bin (the L1 ball's extreme points)
        targets = (
            [int(rng.integers(0, bins))] * rows if trial % 2 else rng.integers(0, bins, size=rows)
        )
        for b in targets:
            neighbour[b] += 1
        diff = np.array(m.exact_units(counts) - m.exact_units(neighbour), dtype=np.float64)
        assert float(np.sqrt((diff * diff).sum())) <= shift_bound


def test_the_whitened_kde_difference_of_neighbours_is_within_the_rkhs_sensitivity() -> None:
    """Hall et al.'s lemma on the exact (unbinned) curve: (f_D − f_D′)ᵀ (K + λI)⁻¹ (f_D − f_D′) ≤ Δ²."""
    rng = np.random.default_rng(11)  # data only
    grid = np.linspace(0.0, 1.0, 60)
    h = 0.05
    cov = gaussian_kernel(grid, grid, h) + JITTER * np.eye(grid.size)
    inverse = np.linalg.inv(cov)
    for rows in (1, 4):
        for _ in range(300):
            added = rng.uniform(-0.2, 1.2, size=rows)  # the unit's rows, anywhere
            diff = gaussian_kernel(grid, added, h).sum(axis=1)
            assert float(diff @ inverse @ diff) <= rows**2 * (1 + 1e-9)


def test_the_measured_column_norm_never_exceeds_the_rkhs_bound() -> None:
    for m in (curve(), curve(points=200, bins=20_000 // 20, h=0.5), surface()):
        for f in m.factors:
            assert f.column_norm <= 1 + 1e-6


@pytest.mark.statistical
def test_the_released_noise_has_the_stated_covariance() -> None:
    """Whitened, the noise is i.i.d. N_Z(0, σ_u²) in grid units: a χ² test on its variance and a
    KS test of its standardised values, then each point's variance; false-alarm rate 4 × 1e-4."""
    m = curve(points=20, bins=101, h=8.0)
    zero = np.zeros(101, dtype=np.int64)
    draws = np.array([m.release(zero) for _ in range(600)])
    g = float(m.granularity)
    units = np.linalg.solve(m.factors[0].factor, draws.T).T / g
    sigma_u = math.sqrt(float(m.sigma2_units))
    z = (units / sigma_u).reshape(-1)
    chi2 = float((z * z).sum())
    n = z.size
    assert stats.chi2.sf(chi2, n) > 1e-4 and stats.chi2.cdf(chi2, n) > 1e-4
    assert stats.kstest(z, "norm").pvalue > 1e-4
    # Each point's variance, unwhitened: (n − 1)·s²/σ² is χ²(n − 1); two-sided, Bonferroni over
    # the points, so the whole check keeps its false-alarm rate (a fixed rtol failed 1 run in ~20).
    ratio = (len(draws) - 1) * np.diag(np.cov(draws.T)) / np.diag(m.covariance)
    alpha = 1e-4 / ratio.size
    assert (stats.chi2.sf(ratio, len(draws) - 1) > alpha).all()
    assert (stats.chi2.cdf(ratio, len(draws) - 1) > alpha).all()


@pytest.mark.statistical
def test_the_bands_cover_the_exact_sum_at_the_stated_rate() -> None:
    """Pointwise misses ≤ 5% on average, simultaneous misses ≤ 5% of releases (binomial tests,
    false-alarm rate 1e-4 each); the bands are conservative, so misses are usually far fewer."""
    m = curve(points=40, bins=101, h=3.0)
    rng = np.random.default_rng(3)  # data only
    counts = rng.integers(0, 300, size=101)
    exact = m.exact_sum(counts)
    rows = float(counts.sum())
    point = m.half_width(0.95, simultaneous=False, rows=rows)
    band = m.half_width(0.95, simultaneous=True, rows=rows)
    releases = 300
    point_misses = band_misses = 0
    for _ in range(releases):
        noisy = m.release(counts)
        miss = np.abs(noisy - exact) > point
        point_misses += int(miss.sum())
        band_misses += int((np.abs(noisy - exact) > band).any())
    assert stats.binomtest(point_misses, releases * 40, 0.05, alternative="greater").pvalue > 1e-4
    assert stats.binomtest(band_misses, releases, 0.05, alternative="greater").pvalue > 1e-4


def test_a_release_is_post_processing_of_integers() -> None:
    """The output is L·(units + noise)·g exactly: nothing of the exact float survives."""
    m = curve(points=10, bins=11, h=2.0)
    counts = np.arange(11, dtype=np.int64)
    out = m.release(counts)
    g = float(m.granularity)
    back = np.linalg.solve(m.factors[0].factor, out) / g
    assert np.allclose(back, np.rint(back), atol=1e-6)


def test_bad_parameters_are_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="bandwidth"):
        GaussianProcessMechanism(
            [KernelAxis(np.zeros(3), np.zeros(3))], bandwidth=0.0, max_rows=1, rho=1
        )
    with pytest.raises(ConfigurationError, match="too small"):
        curve(points=4000, rho=1e-7)
    with pytest.raises(ConfigurationError, match="axis"):
        GaussianProcessMechanism(
            [KernelAxis(np.array([np.nan]), np.zeros(3))], bandwidth=1.0, max_rows=1, rho=1
        )
