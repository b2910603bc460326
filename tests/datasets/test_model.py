"""The census model tells a believable story: the joint distribution the demo's answers rely on.

The data are a deterministic function of the seed, so these checks cannot be flaky; each margin is
also wide enough (many standard errors at n = 200,000) to hold for any other seed.
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from dalenius.datasets import vocab
from dalenius.datasets.census import generate_people
from dalenius.datasets.model import zip_counts

N = 200_000


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    frame: pd.DataFrame = generate_people(N, seed=2024).to_pandas()
    return frame


def test_adults_dominate_and_both_sexes_are_present(df: pd.DataFrame) -> None:
    adults = (df.age >= 18).mean()
    assert 0.72 < adults < 0.84
    assert 0.48 < (df.sex == "Female").mean() < 0.54
    assert df.age.max() >= 95


def test_children_have_no_income_no_job_no_spouse_and_their_ages_schooling(
    df: pd.DataFrame,
) -> None:
    young = df[df.age < 16]
    assert (young.income == 0).all()
    assert (young.married == False).all()  # noqa: E712
    assert (young.hours_per_week == 0).all()
    assert set(df[df.age < 6].education) == {"Preschool"}
    grade_school = set(vocab.EDUCATION[:8])
    assert set(df[df.age < 18].education) <= grade_school
    assert not (df[df.age < 18].married).any()


def test_zero_hours_means_not_working(df: pd.DataFrame) -> None:
    idle = df.hours_per_week == 0
    assert ((df.occupation == vocab.NOT_WORKING) == idle).all()
    assert 0.35 < idle.mean() < 0.65
    # Among adults of working age, most work; past 75, few do.
    assert (df[(df.age >= 25) & (df.age < 55)].hours_per_week > 0).mean() > 0.7
    assert (df[df.age >= 75].hours_per_week > 0).mean() < 0.15


def test_income_rises_with_education(df: pd.DataFrame) -> None:
    workers = df[(df.age >= 25) & (df.age < 65) & (df.hours_per_week > 0)]
    median = workers.groupby("education").income.median()
    ladder = ["11th", "HS-grad", "Some-college", "Bachelors", "Masters", "Prof-school"]
    values = [median[level] for level in ladder]
    # Each step is 10% or more; the sampling error of these medians is around 1-2%.
    assert all(b > 1.1 * a for a, b in itertools.pairwise(values)), values
    assert 30_000 < median["HS-grad"] < 50_000


def test_income_rises_with_hours(df: pd.DataFrame) -> None:
    workers = df[(df.age >= 25) & (df.age < 65) & (df.hours_per_week > 0)]
    part_time = workers[workers.hours_per_week < 30].income.median()
    full_time = workers[workers.hours_per_week == 40].income.median()
    long_weeks = workers[workers.hours_per_week >= 50].income.median()
    assert part_time < 0.7 * full_time
    assert full_time < long_weeks


def test_income_is_heavy_tailed_and_within_bounds(df: pd.DataFrame) -> None:
    earners = df[df.income > 0].income
    assert earners.mean() > 1.15 * earners.median()
    assert earners.max() <= 500_000
    assert (earners > 250_000).sum() > 100


def test_most_full_time_workers_report_exactly_40_hours(df: pd.DataFrame) -> None:
    workers = df[df.hours_per_week > 0]
    assert (workers.hours_per_week == 40).mean() > 0.3
    assert workers.hours_per_week.max() <= 99


def test_marriage_is_common_in_middle_age_only(df: pd.DataFrame) -> None:
    rate = df.groupby(pd.cut(df.age, [17, 24, 34, 64, 100])).married.mean()
    assert rate.iloc[0] < 0.2
    assert rate.iloc[2] > 0.5


def test_every_state_gets_enough_zip_codes_for_its_ranges() -> None:
    counts = zip_counts()
    assert int(counts.sum()) == 5_000
    for (code, _, ranges), count in zip(vocab.STATES, counts, strict=True):
        capacity = sum(100 * (high - low + 1) for low, high in ranges)
        assert 10 <= count <= capacity, code
