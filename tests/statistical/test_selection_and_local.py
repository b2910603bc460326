"""Selection, randomized response and record perturbation match their exact laws.

False-alarm rate: each assertion rejects at p < 1e-7 (see ``stats.ALPHA``).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA, binomial_pvalue
from tests.support.seeded import SeededRandom

from dalenius.core.rng import system_random
from dalenius.mechanisms import (
    ExponentialMechanism,
    PermuteAndFlip,
    RandomizedResponse,
    RecordPerturbation,
    quantile_from_bin_counts,
)
from dalenius.mechanisms._inversion import bernoulli_exp_array
from dalenius.mechanisms.exponential import quantile_utilities

pytestmark = pytest.mark.statistical

DRAWS = 100_000
SCORES = [0, 1, 2, 3, -5, Fraction(5, 2)]


def chi_square(observed: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * observed.sum()
    assert expected.min() >= 5
    return float(stats.chisquare(observed, expected).pvalue)


def permute_and_flip_pmf(accept: list[float]) -> np.ndarray:
    """Exact law of "first accepted in a uniformly random order", by enumerating coin outcomes."""
    n = len(accept)
    pmf = np.zeros(n)
    for outcome in itertools.product([False, True], repeat=n):
        weight = math.prod(p if hit else 1 - p for p, hit in zip(accept, outcome, strict=True))
        chosen = [i for i, hit in enumerate(outcome) if hit]
        for i in chosen:
            pmf[i] += weight / len(chosen)
    return pmf


def test_exponential_mechanism_matches_its_law() -> None:
    m = ExponentialMechanism(1, Fraction(3, 2))
    picks = m.sample(SCORES, DRAWS)
    observed = np.bincount(picks, minlength=len(SCORES))
    assert chi_square(observed, np.array(m.probabilities(SCORES))) > ALPHA


def test_permute_and_flip_matches_its_law() -> None:
    m = PermuteAndFlip(1, Fraction(3, 2))
    accept = [math.exp(-float(g)) for g in m.gaps(SCORES)]
    picks = m.sample(SCORES, DRAWS)
    observed = np.bincount(picks, minlength=len(SCORES))
    assert chi_square(observed, permute_and_flip_pmf(accept)) > ALPHA


def test_exact_exp_bernoulli_with_many_ties() -> None:
    gammas = [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 2), Fraction(10)]
    coins = bernoulli_exp_array(gammas, SeededRandom(9), size=DRAWS, bits=6)
    for k, gamma in enumerate(gammas):
        p = math.exp(-float(gamma))
        heads = int(coins[:, k].sum())
        if p == 1.0:
            assert heads == DRAWS
        else:
            assert binomial_pvalue(heads, DRAWS, p) > ALPHA


def test_quantile_rank_error_holds_at_its_confidence() -> None:
    edges = list(range(0, 210, 10))
    counts = [3, 8, 20, 40, 80, 120, 90, 60, 40, 30, 20, 10, 5, 3, 2, 1, 1, 0, 0, 1]
    utilities = quantile_utilities(counts, Fraction(1, 2))
    trials = 20_000
    release = quantile_from_bin_counts(edges, counts, 0.5, Fraction(1, 2), confidence=0.9)
    # quantile_from_bin_counts is permute-and-flip on these utilities; sample it in bulk
    chosen = PermuteAndFlip(1, Fraction(1, 2)).sample(utilities, trials, rng=system_random())
    misses = int(sum(utilities[c] < -release.rank_error for c in chosen))
    # the guarantee says P(miss) <= 0.1: a one-sided binomial test against 0.1
    assert stats.binomtest(misses, trials, 0.1, alternative="greater").pvalue > ALPHA


@pytest.mark.parametrize("categories", [2, 5])
def test_randomized_response_transitions(categories: int) -> None:
    rr = RandomizedResponse(categories, epsilon=Fraction(1))
    truth = np.arange(DRAWS) % categories
    reports = rr.privatize(truth)
    p = float(rr.p)
    for value in range(categories):
        observed = np.bincount(reports[truth == value], minlength=categories)
        probs = np.full(categories, p)
        probs[value] = float(rr.keep)
        assert chi_square(observed, probs) > ALPHA


def test_randomized_response_estimates_within_hoeffding_bar() -> None:
    rr = RandomizedResponse(4, epsilon=Fraction(2))
    truth = np.repeat(np.arange(4), [40_000, 30_000, 20_000, 10_000])
    estimate = rr.estimate_counts(rr.privatize(truth))
    bar = rr.error_bar(truth.size, 1 - 1e-8)
    assert np.all(np.abs(estimate - np.array([40_000, 30_000, 20_000, 10_000])) <= bar)


def test_randomized_response_variance_formula() -> None:
    rr = RandomizedResponse(3, p=Fraction(1, 8))
    truth = np.repeat(np.arange(3), [120, 60, 20])
    reps = 4000
    estimates = np.array([rr.estimate_counts(r) for r in rr.privatize(np.tile(truth, (reps, 1)))])
    predicted = rr.variance([120, 60, 20])
    for j in range(3):
        sample_var = estimates[:, j].var(ddof=1)
        statistic = (reps - 1) * sample_var / predicted[j]
        tail = min(stats.chi2.cdf(statistic, reps - 1), stats.chi2.sf(statistic, reps - 1))
        assert 2 * tail > ALPHA
    means = estimates.mean(axis=0)
    z = (means - np.array([120, 60, 20])) / np.sqrt(predicted / reps)
    assert np.all(2 * stats.norm.sf(np.abs(z)) > ALPHA)


def test_record_perturbation_noise_is_laplace_ks() -> None:
    m = RecordPerturbation(0, 100, Fraction(1, 2), Fraction(1, 100))
    out = m.release(np.full(DRAWS, 50.0))
    assert stats.kstest(out - 50.0, stats.laplace(scale=float(m.scale)).cdf).pvalue > ALPHA
