"""Frequency oracles: encoders follow their exact law; estimators are unbiased with the stated variance.

False-alarm rate: every assertion rejects only at p < 1e-7 (``tests.statistical.stats.ALPHA``),
after a Bonferroni split over the values of the domain; this module makes about 30 assertions,
so a correct implementation fails it with probability below 3e-6 per run.

Variance tolerance: with ``R`` repetitions the sample variance of an (almost normal) estimate
satisfies ``(R − 1)s²/σ² ~ χ²(R − 1)``; the test accepts when that statistic lies within the
two-sided ``α/d`` quantiles. For ``R = 1000`` and ``d = 8`` that is ``s²/σ²`` within about
``[0.77, 1.27]``; for the ``R = 200`` run through the real (OS-randomised) client encoder, about
``[0.56, 1.65]``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA

from dalenius.ldp import FACTORIES, make_oracle
from dalenius.ldp._draws import SimulationDraws

pytestmark = pytest.mark.statistical

D = 8
TRUE = np.repeat(np.arange(D), [600, 300, 150, 100, 50, 0, 0, 800])  # 2000 clients


def _check_mean_and_variance(oracle, estimates: np.ndarray) -> None:
    reps = estimates.shape[0]
    true_counts = np.bincount(TRUE, minlength=D)
    sigma2 = oracle.variance(true_counts)
    alpha = ALPHA / D
    z = stats.norm.isf(alpha / 2)
    mean = estimates.mean(axis=0)
    assert (np.abs(mean - true_counts) <= z * np.sqrt(sigma2 / reps)).all(), (mean, true_counts)
    statistic = (reps - 1) * estimates.var(axis=0, ddof=1) / sigma2
    low, high = stats.chi2.ppf(alpha / 2, reps - 1), stats.chi2.isf(alpha / 2, reps - 1)
    assert ((statistic >= low) & (statistic <= high)).all(), statistic / (reps - 1)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_unbiased_with_closed_form_variance_simulated(name: str) -> None:
    """1,000 repetitions of 2,000 clients (the simulation generator, seeded from the OS)."""
    oracle = make_oracle(name, D, 1)
    draws = SimulationDraws()
    estimates = np.array(
        [oracle.estimate(oracle._perturb(TRUE, draws)).counts for _ in range(1000)]
    )
    _check_mean_and_variance(oracle, estimates)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_unbiased_with_closed_form_variance_client_encoder(name: str) -> None:
    """200 repetitions through the production encoder (OS generator)."""
    oracle = make_oracle(name, D, 2)
    estimates = np.array([oracle.estimate(oracle.encode_many(TRUE)).counts for _ in range(200)])
    _check_mean_and_variance(oracle, estimates)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_client_encoder_follows_its_exact_distribution(name: str) -> None:
    oracle = make_oracle(name, 3, 1)
    reports = list(oracle.all_reports())
    draws = 60_000
    for value in (0, 2):
        sent = oracle.encode_many(np.full(draws, value))
        keys = [tuple(np.atleast_1d(r).tolist()) for r in sent]
        seen = Counter(keys)
        probs = np.array([float(oracle.report_probability(r, value)) for r in reports])
        observed = np.array([seen[tuple(np.atleast_1d(r).tolist())] for r in reports])
        assert observed.sum() == draws
        keep = probs * draws >= 5
        expected = probs * draws
        # cells too rare for the chi-square approximation are pooled into one
        obs = np.append(observed[keep], observed[~keep].sum())
        exp = np.append(expected[keep], expected[~keep].sum())
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        assert stats.chisquare(obs, exp).pvalue > ALPHA
