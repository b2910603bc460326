"""Apple's sketches, Microsoft's 1BitMean and dBitFlip, Duchi and piecewise means.

Exact ε: the output distributions are enumerated with rational probabilities. Statistical checks
(unbiasedness and closed-form variance over >= 200 repetitions) reject at p < 1e-7 each
(``tests.statistical.stats.ALPHA``); the variance check accepts when the chi-square statistic of
the sample variance lies within its two-sided 1e-7 quantiles (about ±45% for 200 repetitions).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.ldp._draws import SimulationDraws
from dalenius.ldp.apple import CountMeanSketch
from dalenius.ldp.microsoft import DBitFlip, DBitFlipClient, OneBitMean, OneBitMeanClient
from dalenius.ldp.numeric import DuchiMean, PiecewiseMean


def _assert_mean_and_variance(errors: np.ndarray, sigma2: np.ndarray, tests: int = 1) -> None:
    reps = errors.shape[0]
    z = stats.norm.isf(ALPHA / (2 * tests))
    assert (np.abs(errors.mean(axis=0)) <= z * np.sqrt(sigma2 / reps)).all()
    statistic = (reps - 1) * errors.var(axis=0, ddof=1) / sigma2
    low = stats.chi2.ppf(ALPHA / (2 * tests), reps - 1)
    high = stats.chi2.isf(ALPHA / (2 * tests), reps - 1)
    assert ((statistic >= low) & (statistic <= high)).all(), statistic / (reps - 1)


@pytest.mark.parametrize("hadamard", [False, True])
def test_sketch_epsilon_from_the_exact_output_distribution(hadamard: bool) -> None:
    cms = CountMeanSketch(epsilon=1, hashes=2, width=4, hadamard=hadamard)
    rho = cms.flip
    buckets = cms.hash_rows(["a", "b", "c", "d", "e"])
    e_lo, _ = exp_bounds(Fraction(1))

    def prob(report, value):
        if hadamard:
            row, col, sign = report
            true = 1 - 2 * (bin(int(buckets[row, value]) & col).count("1") % 2)
            return Fraction(1, 2 * 4) * ((1 - rho) if sign == true else rho)
        row, signs = report
        p = Fraction(1, 2)
        for a, s in enumerate(signs):
            true = 1 if a == buckets[row, value] else -1
            p *= (1 - rho) if s == true else rho
        return p

    if hadamard:
        reports = list(itertools.product(range(2), range(4), (-1, 1)))
    else:
        reports = [(r, s) for r in range(2) for s in itertools.product((-1, 1), repeat=4)]
    worst = Fraction(0)
    for report in reports:
        probs = [prob(report, v) for v in range(5)]
        worst = max(worst, max(probs) / min(probs))
    assert all(sum(prob(r, v) for r in reports) == 1 for v in range(5))
    assert worst <= cms.ratio <= e_lo


@pytest.mark.statistical
@pytest.mark.parametrize("hadamard", [False, True])
def test_sketch_unbiased_with_collision_variance(hadamard: bool) -> None:
    """Each repetition is a new deployment (new random hash family)."""
    candidates = [f"w{i}" for i in range(12)]
    codes = np.repeat(np.arange(12), [3000, 1500, 800, 400, 200, 100, 0, 0, 0, 0, 0, 0])
    truth = np.bincount(codes, minlength=12)
    errors = []
    draws = SimulationDraws()
    for _ in range(300):
        cms = CountMeanSketch(epsilon=2, hashes=4, width=16, hadamard=hadamard)
        rows, cols, signs = cms._perturb(cms.hash_rows(candidates), codes, draws)
        errors.append(
            cms.estimate(cms.sketch(rows, cols, signs), codes.size, candidates).counts - truth
        )
    _assert_mean_and_variance(np.array(errors), cms.variance(truth, codes.size), tests=12)


@pytest.mark.statistical
def test_sketch_client_encoder_round_trip() -> None:
    cms = CountMeanSketch(epsilon=4, hashes=4, width=32, hadamard=True)
    reports = [cms.encode("apple") for _ in range(3000)] + [cms.encode("pear") for _ in range(1000)]
    rows = np.array([r["row"] for r in reports])
    cols = np.array([r["column"] for r in reports])
    signs = np.array([r["sign"] for r in reports])
    est = cms.estimate(
        cms.sketch(*cms.check_reports(rows, cols, signs)), 4000, ["apple", "pear", "fig"]
    )
    sd = np.sqrt(cms.variance([3000, 1000, 0], 4000))
    assert (np.abs(est.counts - [3000, 1000, 0]) <= 5.5 * sd).all()


@pytest.mark.parametrize("mech", [DuchiMean(epsilon=1), OneBitMean(epsilon=1, bound=1)])
def test_binary_mean_epsilon_is_the_randomized_response_ratio(mech) -> None:
    rho = mech.flip
    e_lo, _ = exp_bounds(Fraction(1))
    # P[output | carried bit]: the value only reaches the output through the carried bit.
    assert (1 - rho) / rho <= e_lo
    assert float(mech.epsilon) == pytest.approx(1, rel=1e-6)


def test_dbitflip_epsilon_from_the_exact_output_distribution() -> None:
    mech = DBitFlip(4, bits=2, epsilon=1)
    rho = mech.flip
    e_lo, _ = exp_bounds(Fraction(1))
    worst = Fraction(0)
    for chosen in itertools.combinations(range(4), 2):
        for bits in itertools.product((0, 1), repeat=2):
            probs = []
            for value in range(4):
                p = Fraction(1, 6)
                for j, b in zip(chosen, bits, strict=False):
                    one = 1 - rho if j == value else rho
                    p *= one if b else 1 - one
                probs.append(p)
            worst = max(worst, max(probs) / min(probs))
    assert worst == ((1 - rho) / rho) ** 2 <= e_lo


@pytest.mark.statistical
def test_dbitflip_unbiased_with_closed_form_variance() -> None:
    mech = DBitFlip(10, bits=3, epsilon=1)
    codes = np.repeat(np.arange(10), [400, 300, 200, 100, 50, 50, 0, 0, 0, 0])
    truth = np.bincount(codes, minlength=10)
    draws = SimulationDraws()
    errors = [mech.estimate_counts(*mech._perturb(codes, draws)) - truth for _ in range(400)]
    _assert_mean_and_variance(np.array(errors), mech.variance(truth), tests=10)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "factory",
    [
        lambda: DuchiMean(epsilon=1),
        lambda: PiecewiseMean(epsilon=1),
        lambda: PiecewiseMean(epsilon=4),
        lambda: OneBitMean(epsilon=1, bound=1),
    ],
)
def test_means_unbiased_with_closed_form_variance(factory) -> None:
    mech = factory()
    x = np.linspace(-1, 1, 2000) if not isinstance(mech, OneBitMean) else np.linspace(0, 1, 2000)
    draws = SimulationDraws()
    if isinstance(mech, OneBitMean):
        errors = [mech.estimate(mech._perturb(x, draws)).mean - x.mean() for _ in range(400)]
    else:
        errors = [mech._perturb(x, draws).mean() - x.mean() for _ in range(400)]
    _assert_mean_and_variance(np.array(errors)[:, None], np.array([mech.variance(x)]))


@pytest.mark.statistical
def test_piecewise_output_density_ratio_is_e_to_the_epsilon() -> None:
    mech = PiecewiseMean(epsilon=2)
    out = mech.encode_many(np.full(200_000, 0.3))
    left = (mech.c + 1) / 2 * 0.3 - (mech.c - 1) / 2
    inside = (out >= left) & (out <= left + mech.c - 1)
    # inside length C − 1 carries e^{ε/2}/(e^{ε/2}+1) of the mass
    p_in = float(1 - mech.outside)
    assert stats.binomtest(int(inside.sum()), out.size, p_in).pvalue > ALPHA
    assert np.abs(out).max() <= mech.c


def test_one_bit_mean_alpha_rounding_and_memoisation() -> None:
    mech = OneBitMean(epsilon=1, bound=100, points=10)
    client = OneBitMeanClient(mech)
    first = client.report(42.0)
    assert all(client.report(42.0) == first for _ in range(20))  # memoised: same answer
    assert client.point(42.0) in (4, 5)
    assert client.point(0) == 0 and client.point(100) == 10


@pytest.mark.statistical
def test_alpha_point_rounding_is_unbiased() -> None:
    mech = OneBitMean(epsilon=1, bound=10, points=10)
    points = np.array([OneBitMeanClient(mech).point(4.37) for _ in range(4000)])
    assert set(points.tolist()) <= {4, 5}
    assert stats.binomtest(int((points == 5).sum()), 4000, 0.37).pvalue > ALPHA


def test_dbitflip_client_memoises_per_value() -> None:
    mech = DBitFlip(16, bits=4, epsilon=1)
    client = DBitFlipClient(mech)
    first = client.report(3)
    assert all(client.report(3) == first for _ in range(10))
    assert len(first[0]) == 4 and len(set(first[0])) == 4


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="power of two"):
        CountMeanSketch(epsilon=1, width=100, hadamard=True)
    with pytest.raises(ConfigurationError, match=r"\[-1, 1\]"):
        DuchiMean(epsilon=1).encode(1.5)
    with pytest.raises(ConfigurationError, match="distinct buckets"):
        DBitFlip(8, bits=2, epsilon=1).check_reports([[1, 1]], [[0, 1]])
    with pytest.raises(ConfigurationError, match="signs"):
        cms = CountMeanSketch(epsilon=1, hashes=2, width=4)
        cms.check_reports([0], [0], [[1, -1, 1]])
