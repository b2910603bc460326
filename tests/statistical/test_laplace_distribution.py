"""The discrete Laplace samplers match the exact distribution (chi-square, symmetry, tails).

False-alarm rate: each assertion rejects at p < 1e-7 (see ``stats.ALPHA``); draws come from the OS
generator unless a test needs a reproducible path, in which case the seed is fixed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import (
    ALPHA,
    binomial_pvalue,
    chi_square_pvalue,
    discrete_laplace_cdf,
    quantile_bins,
)
from tests.support.seeded import SeededRandom

from dalenius.core.rng import system_random
from dalenius.mechanisms import GridLaplace, IntegerLaplace, _dlaplace, discrete_laplace
from dalenius.mechanisms._dlaplace import LaplaceSampler
from dalenius.mechanisms._exact import discrete_laplace_one
from dalenius.mechanisms._inversion import InversionTable

pytestmark = pytest.mark.statistical

DRAWS = 200_000


def laplace_pvalue(draws: np.ndarray, scale: Fraction, bins: int = 60) -> float:
    cdf = discrete_laplace_cdf(float(scale))
    reach = int(40 * float(scale)) + 3
    cuts, probs = quantile_bins(cdf, -reach, reach, bins, draws.size)
    return chi_square_pvalue(draws, cuts, probs)


@pytest.mark.parametrize(
    "scale",
    [
        Fraction(1, 4),
        Fraction(1, 2),
        Fraction(1),
        Fraction(7, 3),
        Fraction(50),
        Fraction(1500),
        Fraction(10**6 + 1, 3),
    ],
)
def test_discrete_laplace_matches_the_exact_pmf(scale: Fraction) -> None:
    draws = discrete_laplace(scale, DRAWS)
    assert laplace_pvalue(draws, scale) > ALPHA


@pytest.mark.parametrize("scale", [Fraction(1, 5), Fraction(1, 20)])
def test_tiny_scales_are_almost_always_zero_at_the_exact_rate(scale: Fraction) -> None:
    draws = discrete_laplace(scale, DRAWS)
    q = math.exp(-1 / float(scale))
    nonzero = int((draws != 0).sum())
    assert binomial_pvalue(nonzero, DRAWS, 2 * q / (1 + q)) > ALPHA
    assert np.abs(draws).max() <= 10


def test_many_ties_are_resolved_exactly() -> None:
    """With 8-bit tables a few percent of draws tie with a boundary and take the lazy path."""
    calls = {"ties": 0}
    original = InversionTable.resolve_tie

    def counting(self: InversionTable, u: int, first: int, last: int, rng: object) -> int:
        calls["ties"] += 1
        return original(self, u, first, last, rng)  # type: ignore[arg-type]

    InversionTable.resolve_tie = counting  # type: ignore[method-assign]
    try:
        for scale in (Fraction(3, 2), Fraction(700)):
            sampler = LaplaceSampler(scale, bits=8)
            draws = sampler.sample(100_000, SeededRandom(11))
            assert laplace_pvalue(draws, scale) > ALPHA
    finally:
        InversionTable.resolve_tie = original  # type: ignore[method-assign]
    assert calls["ties"] > 1000


def test_top_digit_tail_is_sampled_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shrinking the tail factor makes the memoryless tail path frequent; the law must not move."""
    monkeypatch.setattr(_dlaplace, "TAIL_FACTOR", 1)
    for scale in (Fraction(100), Fraction(30000)):
        sampler = LaplaceSampler(scale)
        reach = _dlaplace.BASE**sampler.stages
        draws = sampler.sample(DRAWS, system_random())
        assert np.mean(np.abs(draws) > reach) > 0.01
        assert laplace_pvalue(draws, scale) > ALPHA


def test_symmetry_and_tail_mass() -> None:
    m = IntegerLaplace(1, Fraction(1, 3))
    draws = m.release(np.zeros(DRAWS, dtype=np.int64))
    positive, negative = int((draws > 0).sum()), int((draws < 0).sum())
    assert binomial_pvalue(positive, positive + negative, 0.5) > ALPHA
    for confidence in (0.9, 0.99):
        h = m.error_bar(confidence)
        beyond = int((np.abs(draws) > h).sum())
        q = math.exp(-1 / float(m.scale))
        exact_tail = 2 * q ** (h + 1) / (1 + q)
        assert exact_tail <= 1 - confidence
        assert binomial_pvalue(beyond, DRAWS, exact_tail) > ALPHA


def test_grid_laplace_looks_continuous_laplace_ks() -> None:
    m = GridLaplace(Fraction(1), Fraction(1, 2))
    out = m.release_each(np.full(DRAWS, 3.0))
    result = stats.kstest(out, stats.laplace(loc=3.0, scale=float(m.scale)).cdf)
    assert result.pvalue > ALPHA


def test_grid_error_bar_coverage() -> None:
    m = GridLaplace(Fraction(2), Fraction(1))
    exact = np.linspace(-50, 50, DRAWS)
    out = m.release_each(exact)
    h = m.error_bar(0.9)
    covered = int((np.abs(out - exact) <= h).sum())
    assert covered / DRAWS > 0.9 - 4 * math.sqrt(0.09 / DRAWS) * 1.5


def test_scalar_reference_sampler_matches_the_pmf() -> None:
    """The slow CKS Algorithm 2 reference (fewer draws: it runs one draw at a time)."""
    rng = system_random()
    scale = Fraction(5, 2)
    draws = np.array([discrete_laplace_one(scale, rng) for _ in range(30_000)])
    assert laplace_pvalue(draws, scale, bins=20) > ALPHA
