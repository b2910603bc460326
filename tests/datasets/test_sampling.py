"""Alias-table sampling draws each category with its weight, and seeded streams are independent."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dalenius.datasets.sampling import alias_table, generator

# Each chi-square test below fails only if its p-value is under 1e-6: for a correct sampler that
# is a false-alarm rate of 1e-6 per test, whatever the seed.
ALPHA = 1e-6


def test_draws_follow_the_weights() -> None:
    weights = np.array([5.0, 0.5, 1.0, 20.0, 0.0, 3.0, 0.25])
    draws = alias_table(weights).sample(generator(1, 0), 200_000)
    observed = np.bincount(draws, minlength=weights.size)
    assert observed[4] == 0
    positive = weights > 0
    expected = weights[positive] / weights.sum() * draws.size
    assert stats.chisquare(observed[positive], expected).pvalue > ALPHA


def test_many_skewed_categories_follow_their_weights() -> None:
    weights = generator(2, 9).lognormal(0.0, 1.0, 3_000)
    draws = alias_table(weights).sample(generator(2, 0), 600_000)
    observed = np.bincount(draws, minlength=weights.size)
    expected = weights / weights.sum() * draws.size
    assert stats.chisquare(observed, expected).pvalue > ALPHA


def test_each_row_draws_from_its_own_group() -> None:
    table = alias_table([[1.0, 1.0, 0.0], [0.0, 1.0, 3.0]])
    group = np.repeat(np.array([0, 1]), 100_000)
    draws = table.sample_given(generator(3, 0), group)
    first = np.bincount(draws[group == 0], minlength=3)
    second = np.bincount(draws[group == 1], minlength=3)
    assert first[2] == 0
    assert second[0] == 0
    assert stats.chisquare(first[:2], [50_000, 50_000]).pvalue > ALPHA
    assert stats.chisquare(second[1:], [25_000, 75_000]).pvalue > ALPHA


def test_same_key_same_stream_and_other_keys_differ() -> None:
    a = generator(1994, 1, 0).random(8)
    assert np.array_equal(a, generator(1994, 1, 0).random(8))
    for other in (generator(1994, 2, 0), generator(1994, 1, 1), generator(1995, 1, 0)):
        assert not np.array_equal(a, other.random(8))


@pytest.mark.parametrize(
    "weights", [[1.0, -0.5], [0.0, 0.0], [1.0, float("nan")], [[1.0, 1.0], [0.0, 0.0]]]
)
def test_bad_weights_are_refused(weights: list[float] | list[list[float]]) -> None:
    with pytest.raises(ValueError, match=r"alias weights|positive total"):
        alias_table(weights)
