"""Re-identification risk: hand-made cases, Zayatz's formula, and the census's uniqueness."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from dalenius.anonymity import risk, zayatz_population_uniques
from dalenius.core.errors import ConfigurationError
from dalenius.datasets import generate_people


def test_prosecutor_journalist_and_marketer_on_a_hand_made_table() -> None:
    sample = pd.DataFrame({"q": ["a", "b", "b", "c"]})
    population = pd.DataFrame({"q": ["a", "a", "b", "b", "b", "c", "d"]})
    r = risk(sample, ["q"], population=population)
    assert r.prosecutor_max == 1.0
    assert r.prosecutor_avg == pytest.approx(3 / 4)
    assert r.sample_uniques == pytest.approx(2 / 4)  # a and c
    assert r.journalist_max == 1.0  # c is unique in the population
    # marketer: (1/n) Σ f/F = (1/2 + 2/3 + 1/1) / 4
    assert r.marketer == pytest.approx((0.5 + 2 / 3 + 1) / 4)
    assert r.population_uniques == pytest.approx(1 / 4)
    assert r.population_size == 7


def test_zayatz_by_hand() -> None:
    # sizes: two classes of 1, one of 2; n = 4, N = 8, pi = 1/2; P1 = 2/3, P2 = 1/3
    # P(F=1|f=1) = P1*pi / (P1*1*pi + P2*2*pi*(1-pi)) = (1/3) / (1/3 + 1/6) = 2/3
    assert zayatz_population_uniques([1, 1, 2], 8) == pytest.approx(2 * 2 / 3)
    with pytest.raises(ConfigurationError, match="cannot be smaller than the sample"):
        zayatz_population_uniques([1, 1, 2], 3)


def test_people_are_unique_by_sex_zip_and_date_of_birth() -> None:
    people = generate_people(100_000)
    whole = risk(people, ["sex", "zip", "date_of_birth"])
    assert whole.sample_uniques > 0.9
    sample = duckdb.sql(
        "SELECT * FROM people USING SAMPLE 10 PERCENT (bernoulli, 7)"
    ).to_arrow_table()
    exact = risk(sample, ["sex", "zip", "date_of_birth"], population=people)
    estimate = risk(sample, ["sex", "zip", "date_of_birth"], population_size=people.num_rows)
    assert exact.population_uniques == pytest.approx(whole.sample_uniques, abs=0.02)
    assert estimate.population_uniques == pytest.approx(exact.population_uniques, abs=0.03)
    # fewer columns, far fewer uniques
    assert risk(people, ["sex", "zip"]).sample_uniques < 0.01
