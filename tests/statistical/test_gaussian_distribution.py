"""The discrete Gaussian samplers match the exact distribution (chi-square, KS, symmetry, tails).

False-alarm rate: each assertion rejects at p < 1e-7 (see ``stats.ALPHA``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA, binomial_pvalue, chi_square_pvalue, quantile_bins
from tests.support.seeded import SeededRandom

from dalenius.core.loss import ZCDP, ApproxDP
from dalenius.core.rng import system_random
from dalenius.mechanisms import GridGaussian, IntegerGaussian, _dgauss, discrete_gaussian
from dalenius.mechanisms._dgauss import GaussianSampler
from dalenius.mechanisms._exact import discrete_gaussian_one

pytestmark = pytest.mark.statistical

DRAWS = 200_000


def gaussian_cdf(sigma2: float):  # type: ignore[no-untyped-def]
    radius = int(45 * math.sqrt(sigma2)) + 20
    support = np.arange(-radius, radius + 1)
    weights = np.exp(-(support.astype(np.float64) ** 2) / (2 * sigma2))
    cum = np.cumsum(weights / weights.sum())

    def cdf(k: np.ndarray) -> np.ndarray:
        index = np.clip(np.floor(k).astype(np.int64) + radius, -1, 2 * radius)
        return np.where(index < 0, 0.0, cum[np.maximum(index, 0)])

    return cdf, radius


def gaussian_pvalue(draws: np.ndarray, sigma2: Fraction, bins: int = 60) -> float:
    cdf, radius = gaussian_cdf(float(sigma2))
    cuts, probs = quantile_bins(cdf, -radius, radius, bins, draws.size)
    return chi_square_pvalue(draws, cuts, probs)


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(1, 4), Fraction(1), Fraction(7, 3), Fraction(100), Fraction(1500**2)],
)
def test_discrete_gaussian_matches_the_exact_pmf(sigma2: Fraction) -> None:
    draws = discrete_gaussian(sigma2, DRAWS)
    assert gaussian_pvalue(draws, sigma2) > ALPHA


def test_ties_are_resolved_exactly() -> None:
    for sigma2 in (Fraction(3, 2), Fraction(40)):
        draws = GaussianSampler(sigma2, bits=8).sample(DRAWS, SeededRandom(21))
        assert gaussian_pvalue(draws, sigma2) > ALPHA


def test_tails_beyond_the_table_are_sampled_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-bit window leaves about 7 % of the mass in the tails, drawn by the scalar sampler."""
    monkeypatch.setattr(_dgauss, "TAIL_BITS", 1)
    sigma2 = Fraction(9)
    sampler = GaussianSampler(sigma2)
    draws = sampler.sample(50_000, system_random())
    assert np.mean(np.abs(draws) > sampler.radius) > 0.05
    assert gaussian_pvalue(draws, sigma2, bins=40) > ALPHA


def test_symmetry_and_tail_mass() -> None:
    m = IntegerGaussian(1, ZCDP(Fraction(1, 18)))  # σ = 3
    draws = m.release(np.zeros(DRAWS, dtype=np.int64))
    positive, negative = int((draws > 0).sum()), int((draws < 0).sum())
    assert binomial_pvalue(positive, positive + negative, 0.5) > ALPHA
    _, radius = gaussian_cdf(9.0)
    support = np.arange(-radius, radius + 1)
    weights = np.exp(-(support**2) / 18.0)
    weights /= weights.sum()
    for confidence in (0.9, 0.99):
        h = m.error_bar(confidence)
        exact_tail = float(weights[np.abs(support) > h].sum())
        assert exact_tail <= 1 - confidence
        beyond = int((np.abs(draws) > h).sum())
        assert binomial_pvalue(beyond, DRAWS, exact_tail) > ALPHA


def test_grid_gaussian_looks_normal_ks() -> None:
    m = GridGaussian(Fraction(2), ApproxDP(Fraction(1), Fraction(1, 10**6)))
    out = m.release_each(np.full(DRAWS, -7.25))
    sigma = math.sqrt(float(m.sigma2))
    assert stats.kstest(out, stats.norm(loc=-7.25, scale=sigma).cdf).pvalue > ALPHA


def test_scalar_reference_sampler_matches_the_pmf() -> None:
    """The slow CKS Algorithm 3 reference (fewer draws: it runs one draw at a time)."""
    rng = system_random()
    sigma2 = Fraction(5, 2)
    draws = np.array([discrete_gaussian_one(sigma2, rng) for _ in range(20_000)])
    assert gaussian_pvalue(draws, sigma2, bins=12) > ALPHA
