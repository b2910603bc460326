"""The course's k-anonymity and ℓ-diversity examples, run as tests (docs/anonymity/course.md)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from dalenius.anonymity import (
    DistinctLDiversity,
    Hierarchy,
    KAnonymity,
    anonymize,
    check,
)

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult.csv"

UMEKO = pd.DataFrame(
    {
        "zip": [
            "13053",
            "13068",
            "13068",
            "13053",
            "14853",
            "14853",
            "14850",
            "14850",
            "13053",
            "13053",
            "13068",
            "13068",
        ],
        "age": [28, 29, 21, 23, 50, 55, 47, 59, 31, 37, 36, 32],
        "nationality": [
            "Russian",
            "American",
            "Japanese",
            "American",
            "Indian",
            "Russian",
            "American",
            "American",
            "American",
            "Indian",
            "Japanese",
            "American",
        ],
        "disease": [
            "Heart",
            "Heart",
            "Flu",
            "Flu",
            "Cancer",
            "Heart",
            "Flu",
            "Flu",
            "Cancer",
            "Cancer",
            "Cancer",
            "Cancer",
        ],
    }
)
AGE_BANDS = Hierarchy.tree(
    {str(a): ["<30" if a < 30 else ("30-40" if a <= 40 else ">40")] for a in range(18, 90)}
)
UMEKO_HIERARCHIES = {
    "zip": Hierarchy.mask([1, 2]),
    "age": AGE_BANDS,
    "nationality": Hierarchy.identity(),
}


def umeko_class(release: pd.DataFrame) -> pd.DataFrame:
    """The released rows an attacker who knows Umeko (13068, 24, Japanese) can narrow her to."""
    zip_ok = release["zip"].map(
        lambda z: all(c in ("*", d) for c, d in zip(z, "13068", strict=False)) or z == "*"
    )
    age_ok = release["age"].isin(["<30", "*"])
    nat_ok = release["nationality"].isin(["Japanese", "*"])
    return release[zip_ok & age_ok & nat_ok]


def test_the_table_is_1_anonymous() -> None:
    assert check(UMEKO, ["zip", "age", "nationality"], ["disease"]).k == 1


def test_a_4_anonymous_release_still_tells_that_umeko_has_the_flu() -> None:
    release = anonymize(
        UMEKO, quasi_identifiers=["zip", "age", "nationality"], k=4, hierarchies=UMEKO_HIERARCHIES
    )
    table = release.to_pandas()
    assert release.report.released is not None and release.report.released.k >= 4
    assert release.report.levels == {"zip": 2, "age": 1, "nationality": 1}
    candidates = umeko_class(table)
    # Japanese people rarely have heart disease: without Heart, only Flu is left.
    assert set(candidates["disease"]) - {"Heart"} == {"Flu"}
    # and homogeneity: Bob (13053, 35) is in a class where everybody has cancer
    assert release.report.released.sensitive == ()
    assert check(table, ["zip", "age", "nationality"], ["disease"]).sensitive[0].distinct_l == 1


def test_an_l_diverse_release_does_not() -> None:
    release = anonymize(
        UMEKO,
        quasi_identifiers=["zip", "age", "nationality"],
        models=[KAnonymity(4), DistinctLDiversity(3)],
        sensitive=["disease"],
        hierarchies=UMEKO_HIERARCHIES,
    )
    table = release.to_pandas()
    assert release.report.released is not None
    assert release.report.released.sensitive[0].distinct_l >= 3
    candidates = umeko_class(table)
    assert len(set(candidates["disease"]) - {"Heart"}) >= 2


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return pd.read_csv(ADULT)


def test_adult_age_and_education_num_are_1_anonymous(adult: pd.DataFrame) -> None:
    assert check(adult, ["age", "education_num"]).k == 1
    decades = duckdb.sql(
        "SELECT age // 10 * 10 AS a, education_num // 10 * 10 AS e FROM adult"
    ).df()
    # The course's sample had (90, 0) alone; on all 32,561 rows the smallest decade class has 21.
    assert check(decades, ["a", "e"]).k == 21


def test_adult_with_top_coding_is_455_anonymous(adult: pd.DataFrame) -> None:
    course = duckdb.sql(
        "SELECT LEAST(age // 10 * 10, 60) AS a, education_num // 10 * 10 AS e FROM adult"
    ).df()
    report = check(course, ["a", "e"])
    assert report.k == 455
    assert report.classes == 12
    release = anonymize(
        adult,
        quasi_identifiers=["age", "education_num"],
        k=455,
        hierarchies={
            "age": Hierarchy.intervals([10], top=60),
            "education_num": Hierarchy.intervals([10]),
        },
    )
    assert release.report.levels == {"age": 1, "education_num": 1}
    assert release.report.released is not None and release.report.released.k == 455
    assert release.report.suppressed == 0
