"""An inner join's ON may carry more conditions after its key equality: they filter the joined
rows (R ⋈_{k ∧ c} S = σ_c(R ⋈_k S)), so the answers equal the same join with them in WHERE and
the sensitivity is the key join's."""

from __future__ import annotations

import pytest

import dalenius
from dalenius.core.errors import PrivacyRefusal, QueryError
from dalenius.datasets.census import write_demo


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dalenius.Session:
    catalog = write_demo(tmp_path_factory.mktemp("census"), n=400)
    return dalenius.connect(str(catalog), budget=10, ledger="memory:")


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


def test_a_left_join_refuses_another_on_condition(session: dalenius.Session) -> None:
    with pytest.raises(QueryError) as caught:
        session.plan(
            "SELECT COUNT(*) FROM people p LEFT JOIN visits v "
            "ON p.person_id = v.person_id AND v.duration_minutes > 30",
            1,
        )
    assert caught.value.clause == "JOIN" and "move it to WHERE" in (caught.value.fix or "")


def test_two_private_tables_still_need_their_unit_among_the_equalities(
    session: dalenius.Session,
) -> None:
    with pytest.raises(PrivacyRefusal, match="without join_rows_per_key needs a delta"):
        session.plan(
            "SELECT COUNT(*) FROM people p JOIN visits v ON p.state = v.state AND p.age = v.age", 1
        )
