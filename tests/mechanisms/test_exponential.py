"""Selection mechanisms: validation, the quantile utility's sensitivity, guarantees, helpers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.seeded import SeededRandom

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import PureDP
from dalenius.mechanisms import (
    ExponentialMechanism,
    PermuteAndFlip,
    bounds_from_bin_counts,
    quantile_from_bin_counts,
    report_noisy_max,
)
from dalenius.mechanisms.exponential import quantile_utilities


@pytest.mark.parametrize("mechanism", [ExponentialMechanism, PermuteAndFlip])
def test_validation(mechanism: type[ExponentialMechanism]) -> None:
    m = mechanism(1, Fraction(1))
    with pytest.raises(ConfigurationError, match="no candidates"):
        m.select([])
    with pytest.raises(ConfigurationError, match="finite"):
        m.select([1.0, math.inf])
    with pytest.raises(ConfigurationError, match="numbers"):
        m.select([1, "2"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        mechanism(0, Fraction(1))
    assert m.select([5]) == 0
    assert m.loss == PureDP(Fraction(1))


def test_monotonic_flag_doubles_the_rate() -> None:
    assert PermuteAndFlip(2, Fraction(1), monotonic=True).rate == Fraction(1, 2)
    assert PermuteAndFlip(2, Fraction(1)).rate == Fraction(1, 4)


def test_utility_error_bar_formula_rounds_up() -> None:
    m = ExponentialMechanism(1, Fraction(1, 2))
    bar = m.utility_error_bar(100, 0.95)
    assert float(bar) >= 4 * math.log(100 / 0.05)
    assert float(bar) == pytest.approx(4 * math.log(100 / 0.05), rel=1e-12)
    with pytest.raises(ConfigurationError):
        m.utility_error_bar(0, 0.9)


def test_strong_preference_is_followed() -> None:
    rng = SeededRandom(4)
    for mechanism in (ExponentialMechanism(1, Fraction(10)), PermuteAndFlip(1, Fraction(10))):
        picks = mechanism.sample([0, 100, 3], 200, rng=rng)
        assert np.all(picks == 1)
    assert report_noisy_max([0, 100, 3], 1, Fraction(10), rng=rng) == 1


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(0, 30), min_size=1, max_size=8),
    q=st.fractions(0, 1, max_denominator=20),
    data=st.data(),
)
def test_quantile_utility_has_sensitivity_one(
    counts: list[int], q: Fraction, data: st.DataObject
) -> None:
    where = data.draw(st.integers(0, len(counts) - 1))
    grown = list(counts)
    grown[where] += 1
    before = quantile_utilities(counts, q)
    after = quantile_utilities(grown, q)
    assert max(abs(a - b) for a, b in zip(before, after, strict=True)) <= 1


def test_quantile_picks_the_right_bin_and_reports_its_error() -> None:
    edges = list(range(0, 110, 10))
    counts = [0, 0, 5, 50, 500, 50, 5, 0, 0, 0]
    release = quantile_from_bin_counts(edges, counts, 0.5, Fraction(5), rng=SeededRandom(1))
    assert release.bin == 4
    assert (release.low, release.high, release.value) == (40.0, 50.0, 45.0)
    assert release.loss == PureDP(Fraction(5))
    assert float(release.rank_error) == pytest.approx(2 / 5 * math.log(10 / 0.05), rel=1e-9)


def test_min_and_max_are_quantiles_zero_and_one() -> None:
    edges = [0, 1, 2, 3, 4, 5]
    counts = [0, 200, 0, 0, 200]
    low = quantile_from_bin_counts(edges, counts, 0, Fraction(20), rng=SeededRandom(2))
    high = quantile_from_bin_counts(edges, counts, 1, Fraction(20), rng=SeededRandom(3))
    assert low.bin in (0, 1) and high.bin == 4


def test_quantile_validation() -> None:
    with pytest.raises(ConfigurationError, match="increasing"):
        quantile_from_bin_counts([0, 0, 1], [1, 1], 0.5, Fraction(1))
    with pytest.raises(ConfigurationError, match="one count per bin"):
        quantile_from_bin_counts([0, 1, 2], [1], 0.5, Fraction(1))
    with pytest.raises(ConfigurationError, match="non-negative"):
        quantile_from_bin_counts([0, 1, 2], [1, -1], 0.5, Fraction(1))
    with pytest.raises(ConfigurationError, match=r"\[0, 1\]"):
        quantile_from_bin_counts([0, 1, 2], [1, 1], 1.5, Fraction(1))


def test_bounds_from_bin_counts_spends_epsilon_once_in_total() -> None:
    edges = [float(x) for x in range(0, 101, 5)]
    counts = [0, 0, 0, 10, 100, 300, 300, 100, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    low, high, loss = bounds_from_bin_counts(edges, counts, Fraction(8), rng=SeededRandom(5))
    assert loss == PureDP(Fraction(8))
    assert 10 <= low <= 20 and 35 <= high <= 45
    with pytest.raises(ConfigurationError):
        bounds_from_bin_counts(edges, counts, Fraction(1), coverage=Fraction(1))
