"""The shared k-ary randomized response: the exact law of its sampler and its calibration."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dalenius.core.exact import exp_bounds
from dalenius.core.randomized_response import epsilon_for, move_probability, respond


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 9), st.integers(1, 5), st.integers(0, 40), st.integers(0, 8))
def test_every_draw_gives_the_exact_law(categories: int, moves: int, spare: int, true: int) -> None:
    """Over all ``D`` equally likely draws, each other category is reported ``moves`` times."""
    true %= categories
    draws_range = (categories - 1) * moves + spare  # p = moves/D <= 1/k needs D >= k·moves
    draws_range = max(draws_range, categories * moves)
    draws = np.arange(draws_range, dtype=np.int64)
    reports = respond(np.full(draws_range, true, dtype=np.int64), categories, moves, draws)
    counts = np.bincount(reports, minlength=categories)
    for category in range(categories):
        expected = draws_range - (categories - 1) * moves if category == true else moves
        assert counts[category] == expected


@settings(max_examples=100, deadline=None)
@given(
    st.integers(2, 64),
    st.fractions(Fraction(1, 1000), Fraction(16), max_denominator=1000),
    st.one_of(st.just(Fraction(0)), st.fractions(Fraction(1, 10**9), Fraction(1, 2))),
)
def test_the_calibrated_p_keeps_the_ratio_within_e_to_the_epsilon(
    categories: int, epsilon: Fraction, delta: Fraction
) -> None:
    p = move_probability(categories, epsilon, delta)
    e_lo, e_hi = exp_bounds(epsilon)
    m = categories - 1
    assert 0 < p <= Fraction(1, categories)
    assert 1 - m * p <= e_lo * p + delta  # (ε, δ)-DP, checked against a lower bound of e^ε
    assert p - (1 - delta) / (m + e_hi) <= Fraction(1, 2**32) + Fraction(1, 10**30)
    assert (p * 2**32).denominator == 1 or p == Fraction(1, categories)
    # The privacy map gives back at most the ε asked for (up to its rounding up).
    assert epsilon_for(categories, p, delta) <= epsilon + Fraction(1, 2**40)
