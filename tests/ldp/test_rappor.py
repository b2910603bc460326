"""RAPPOR: exact ε₁ / ε∞ by enumeration, memoisation, unbiased per-bit estimates, the decoder.

False-alarm rate: statistical assertions reject at p < 1e-7 each (``tests.statistical.stats``).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA

from dalenius.core.errors import ConfigurationError
from dalenius.ldp._draws import SimulationDraws
from dalenius.ldp.rappor import (
    RapporClient,
    RapporParams,
    bit_counts,
    bit_estimates,
    bloom_matrix,
    check_reports,
    simulate_reports,
)
from dalenius.ldp.rappor_decode import benjamini_hochberg, decode


def test_published_settings_give_the_published_epsilons() -> None:
    # RAPPOR's regression tests: p=0.39, q=0.61, f=0.45, h=2 is "eps_1 = 1, eps_inf = 5".
    params = RapporParams(bits=8, hashes=2, cohorts=128, f=0.45, p=0.39, q=0.61)
    assert float(params.epsilon_one) == pytest.approx(0.9728, abs=1e-3)
    assert float(params.epsilon_inf) == pytest.approx(4.947, abs=1e-3)
    # Chrome's: f=0.5, p=0.5, q=0.75, h=2: ε∞ = 4 ln 3.
    chrome = RapporParams(bits=16, hashes=2, cohorts=64, f=0.5, p=0.5, q=0.75)
    assert float(chrome.epsilon_inf) == pytest.approx(4 * np.log(3), abs=1e-9)


def _bloom_filters(bits: int, hashes: int):
    for positions in itertools.combinations(range(bits), hashes):
        yield tuple(int(i in positions) for i in range(bits))


def test_epsilons_are_the_worst_ratio_over_every_output() -> None:
    params = RapporParams(
        bits=4, hashes=2, cohorts=1, f=Fraction(1, 4), p=Fraction(1, 4), q=Fraction(3, 4)
    )
    ps, qs, hf = params.p_star, params.q_star, params.half_f
    worst_one = worst_inf = Fraction(0)
    filters = list(_bloom_filters(4, 2))
    for out in itertools.product((0, 1), repeat=4):
        one = [
            np.prod(
                [
                    (qs if b else ps) if s else (1 - qs if b else 1 - ps)
                    for b, s in zip(f, out, strict=False)
                ]
            )
            for f in filters
        ]
        inf = [
            np.prod(
                [
                    (1 - hf if b else hf) if s else (hf if b else 1 - hf)
                    for b, s in zip(f, out, strict=False)
                ]
            )
            for f in filters
        ]
        worst_one = max(worst_one, max(one) / min(one))
        worst_inf = max(worst_inf, max(inf) / min(inf))
    assert worst_one == (qs * (1 - ps) / (ps * (1 - qs))) ** 2
    assert worst_inf == ((1 - hf) / hf) ** 4
    assert 0 <= params.epsilon_one - float(np.log(float(worst_one))) < 1e-12
    assert 0 <= params.epsilon_inf - float(np.log(float(worst_inf))) < 1e-12


def test_permanent_response_is_memoised_per_client_and_value() -> None:
    params = RapporParams(bits=64, hashes=2, cohorts=4)
    alice = RapporClient(params, cohort=1)
    assert (alice.permanent("x") == alice.permanent("x")).all()
    bob = RapporClient(params, cohort=1)
    assert not (alice.permanent("x") == bob.permanent("x")).all()  # 2^-~40 chance of equality
    report = alice.report("x")
    assert report.cohort == 1 and report.bits.shape == (64,)


@pytest.mark.statistical
def test_memoised_permanent_bits_have_the_right_law() -> None:
    params = RapporParams(bits=64, hashes=1, cohorts=1, f=0.5)
    client = RapporClient(params, cohort=0)
    zeros = ones = total_zero = total_one = 0
    for i in range(3000):
        value = f"v{i}"
        bloom, perm = client.bloom(value), client.permanent(value)
        ones += int(perm[bloom == 1].sum())
        total_one += int((bloom == 1).sum())
        zeros += int(perm[bloom == 0].sum())
        total_zero += int((bloom == 0).sum())
    assert stats.binomtest(zeros, total_zero, 0.25).pvalue > ALPHA
    assert stats.binomtest(ones, total_one, 0.75).pvalue > ALPHA


@pytest.mark.statistical
def test_per_bit_estimates_are_unbiased_with_the_stated_variance() -> None:
    params = RapporParams(bits=8, hashes=2, cohorts=2, f=0.5, p=0.5, q=0.75)
    candidates = [f"s{i}" for i in range(5)]
    values = np.repeat(np.arange(5), [800, 400, 200, 100, 0])
    reps = 300
    draws = SimulationDraws()
    estimates, variances = [], []
    bloom = bloom_matrix(candidates, params)
    for _ in range(reps):
        cohorts, bits = simulate_reports(values, candidates, params, draws)
        counts, totals = bit_counts(cohorts, bits, params)
        est, _ = bit_estimates(counts, totals, params)
        true = np.zeros((2, 8))
        np.add.at(true, cohorts, bloom[cohorts, values])
        estimates.append(est - true)  # cohort sizes vary: compare with this run's truth
        ps, qs = float(params.p_star), float(params.q_star)
        n = totals[:, None]
        variances.append((true * qs * (1 - qs) + (n - true) * ps * (1 - ps)) / (qs - ps) ** 2)
    errors, var = np.array(estimates), np.array(variances).mean(axis=0)
    z = stats.norm.isf(ALPHA / 32)
    assert (np.abs(errors.mean(axis=0)) <= z * np.sqrt(var / reps)).all()
    ratio = errors.var(axis=0, ddof=1) / var
    assert ((ratio > 0.6) & (ratio < 1.5)).all(), ratio


@pytest.mark.statistical
def test_decoder_finds_the_strings_and_controls_false_discoveries() -> None:
    params = RapporParams(bits=16, hashes=2, cohorts=32, f=0.5, p=0.5, q=0.75)
    held = [f"held{i}" for i in range(6)]
    decoys = [f"decoy{i}" for i in range(14)]
    values = np.repeat(np.arange(6), [60_000, 40_000, 30_000, 20_000, 15_000, 10_000])
    cohorts, bits = simulate_reports(values, held, params, SimulationDraws())
    counts, totals = bit_counts(cohorts, bits, params)
    result = decode(counts, totals, held + decoys, params, fdr=0.05)
    truth = np.bincount(values, minlength=6)
    for i in range(3):
        assert result.detected[i]
        assert abs(result.counts[i] - truth[i]) <= 6 * result.stderr[i]
    assert result.detected[6:].sum() <= 2


def test_benjamini_hochberg_matches_the_procedure() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.2])
    # sorted: .005 .01 .03 .04 .2 vs .01 .02 .03 .04 .05 -> first four pass
    assert benjamini_hochberg(p, 0.05).tolist() == [True, True, True, True, False]


def test_bad_parameters_and_reports_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="p < q"):
        RapporParams(p=0.75, q=0.5)
    with pytest.raises(ConfigurationError, match="f < 1"):
        RapporParams(f=1)
    params = RapporParams(bits=8, cohorts=4)
    with pytest.raises(ConfigurationError, match="exactly 8 bits"):
        check_reports([0], [[0, 1, 0]], params)
    with pytest.raises(ConfigurationError, match="cohort"):
        check_reports([9], [[0] * 8], params)
    with pytest.raises(ConfigurationError, match="strings"):
        RapporClient(params).report(3)  # type: ignore[arg-type]
