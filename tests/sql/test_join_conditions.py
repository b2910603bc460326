"""An inner join's ON may carry more conditions after its key equality: they filter the joined
rows (R ⋈_{k ∧ c} S = σ_c(R ⋈_k S)), so the answers equal the same join with them in WHERE and
the sensitivity is the key join's. A LEFT JOIN's conditions on its right table alone filter that
table before the join (L ⟕_{k ∧ c(R)} R = L ⟕_k σ_c(R), TPC-H Q13)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tests.support.exact import exact_answer

import dalenius
from dalenius.core.errors import PrivacyRefusal, QueryError
from dalenius.datasets.census import write_demo


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo(tmp_path_factory.mktemp("census"), n=400)


@pytest.fixture(scope="module")
def session(census: Path) -> dalenius.Session:
    return dalenius.connect(str(census), budget=10, ledger="memory:")


@pytest.fixture(scope="module")
def census_frames(census: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_csv(census.parent / "people.csv"), pd.read_csv(census.parent / "visits.csv")


BASE = "SELECT COUNT(*) FROM people p JOIN visits v ON p.person_id = v.person_id"


@pytest.mark.parametrize(
    ("on", "where"),
    [
        ("p.person_id = v.person_id AND p.state = v.state", "p.state = v.state"),
        ("p.state = v.state AND p.person_id = v.person_id", "p.state = v.state"),
        ("p.person_id = v.person_id AND v.duration_minutes > 30", "v.duration_minutes > 30"),
    ],
)
def test_more_on_conditions_plan_as_the_key_join_with_them_in_where(
    session: dalenius.Session, on: str, where: str
) -> None:
    lifted = session.plan(f"SELECT COUNT(*) FROM people p JOIN visits v ON {on}", 1)
    filtered = session.plan(f"{BASE} WHERE {where}", 1)
    assert lifted.fingerprint() == filtered.fingerprint()
    # The sensitivity is the key join's: each person's rows multiply 1 × 5.
    assert lifted.measurements[0].sensitivity_units == 5


def test_a_left_join_refuses_an_on_condition_that_reads_the_left_side(
    session: dalenius.Session,
) -> None:
    with pytest.raises(QueryError) as caught:
        session.plan(
            "SELECT COUNT(*) FROM people p LEFT JOIN visits v "
            "ON p.person_id = v.person_id AND p.age > 30",
            1,
        )
    assert caught.value.clause == "JOIN" and "move it to WHERE" in (caught.value.fix or "")
    assert "empties their match" in (caught.value.why or "")


LEFT = (
    "SELECT COUNT(*), COUNT(v.person_id) FROM people p LEFT JOIN visits v "
    "ON p.person_id = v.person_id{extra}"
)


def test_a_left_join_s_condition_on_the_right_table_filters_it_before_the_join(
    session: dalenius.Session, census_frames: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    """L ⟕_{k ∧ c(R)} R = L ⟕_k σ_c(R): every person is kept, matched only with long visits."""
    people, visits = census_frames
    sql = LEFT.format(extra=" AND v.duration_minutes > 30 AND v.state <> 'TX'")
    answer = exact_answer(session, sql, 1)
    kept = visits[(visits.duration_minutes > 30) & (visits.state != "TX")]
    joined = people.merge(kept, on="person_id", how="left", suffixes=("", "_v"))
    assert answer.rows == ((len(joined), int(joined.visit_id.notna().sum())),)
    # The sensitivity is the key join's: the filter only drops right rows.
    plain = session.plan(LEFT.format(extra=""), 1)
    assert session.plan(sql, 1).measurements[0].sensitivity_units == (
        plain.measurements[0].sensitivity_units
    )


def test_a_where_over_a_join_is_written_on_the_join_and_keeps_the_same_rows(
    session: dalenius.Session, census_frames: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    """A filter over a join is the join's own WHERE, not a query around it (DuckDB derives a
    filter for each side's scan from a disjunction over both sides only there: TPC-H Q19); the
    rows kept are the ones pandas keeps for the same condition."""
    people, visits = census_frames
    sql = (
        "SELECT COUNT(*), SUM(v.duration_minutes) FROM people p JOIN visits v "
        "ON p.person_id = v.person_id WHERE v.state <> 'TX' AND ("
        "(p.age >= 40 AND v.duration_minutes <= 20) OR (p.age < 40 AND v.duration_minutes > 45))"
    )
    main = session.prepare(sql, 1).exact.main
    assert " AS __f " not in main and "WHERE" in main
    joined = people.merge(visits, on="person_id", suffixes=("", "_v"))
    kept = joined[
        (joined.state_v != "TX")
        & (
            ((joined.age >= 40) & (joined.duration_minutes <= 20))
            | ((joined.age < 40) & (joined.duration_minutes > 45))
        )
    ]
    assert 0 < len(kept) < len(joined)
    answer = exact_answer(session, sql, 1)
    assert answer.rows == ((len(kept), int(kept.duration_minutes.sum())),)


def test_q13_shape_a_histogram_of_people_by_their_filtered_visit_count(
    session: dalenius.Session, census_frames: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    people, visits = census_frames
    sql = (
        "SELECT c_count, COUNT(*) AS custdist FROM (SELECT p.person_id, COUNT(v.visit_id) AS "
        "c_count FROM people p LEFT OUTER JOIN visits v ON p.person_id = v.person_id "
        "AND v.duration_minutes > 30 GROUP BY p.person_id) AS t GROUP BY c_count"
    )
    answer = exact_answer(session, sql, 1)
    kept = visits[visits.duration_minutes > 30]
    per = people[["person_id"]].merge(kept, on="person_id", how="left")
    counts = per.groupby("person_id").visit_id.count().value_counts()
    got = {row[0]: row[1] for row in answer.rows if row[1]}
    assert got == {int(k): int(v) for k, v in counts.items()}


def test_two_private_tables_still_need_their_unit_among_the_equalities(
    session: dalenius.Session,
) -> None:
    with pytest.raises(PrivacyRefusal, match="without join_rows_per_key needs a delta"):
        session.plan(
            "SELECT COUNT(*) FROM people p JOIN visits v ON p.state = v.state AND p.age = v.age", 1
        )
