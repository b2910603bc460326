"""Counts over a join of two private tables whose keys declare no truncation: elastic sensitivity.

The proof (docs/mechanisms/join_truncation.md) rests on one fact about the data: removing one unit
moves the exact count by at most ``ES(0) = R_a·mf_b + R_b·mf_a + R_a·R_b``, computed from either
dataset's largest key frequencies after the unit caps. The tests remove every unit of random
tables and check it against the frequencies the engine computes; then the release through the
session: value inside its interval, the loss charged, coverage of the intervals, and refusals.
"""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.support.exact import exact_data

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import PrivacyRefusal, QueryError
from dalenius.core.loss import ApproxDP
from dalenius.engine import elastic_release
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.protocol import LossDefect

CATALOG = """
[dataset]
name = "open"{constant}

[tables.visits]
source = {{ csv = "visits.csv" }}
privacy_unit = {{ column = "pid", max_rows = 3 }}{rows}

[tables.visits.columns]
pid = {{ type = "int" }}
clinic = {{ type = "int" }}
cost = {{ type = "int", bounds = [0, 10] }}

[tables.staff]
source = {{ csv = "staff.csv" }}
privacy_unit = {{ column = "pid", max_rows = 2 }}{rows}

[tables.staff.columns]
pid = {{ type = "int" }}
clinic = {{ type = "int" }}
role = {{ type = "str", keys = ["nurse", "doctor"] }}
"""

COUNT = "SELECT COUNT(*) FROM visits v JOIN staff s ON v.clinic = s.clinic WHERE s.role = 'nurse'"
TWO = "SELECT COUNT(*), COUNT(DISTINCT v.pid) FROM staff s JOIN visits v ON s.clinic = v.clinic"


def _tables(seed: int, people: int = 12) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = random.Random(seed)  # test data only, never noise

    def clinic() -> int:
        return 0 if rng.random() < 0.4 else rng.randrange(1, 5)

    visits = pd.DataFrame(
        [(rng.randrange(people), clinic(), rng.randrange(11)) for _ in range(4 * people)],
        columns=["pid", "clinic", "cost"],
    )
    staff = pd.DataFrame(
        [
            (rng.randrange(people), clinic(), rng.choice(["nurse", "doctor"]))
            for _ in range(2 * people)
        ],
        columns=["pid", "clinic", "role"],
    )
    return visits, staff


def _session(
    folder: Path, visits: pd.DataFrame, staff: pd.DataFrame, constant: str = ""
) -> Session:
    folder.mkdir(parents=True)
    visits.to_csv(folder / "visits.csv", index=False)
    staff.to_csv(folder / "staff.csv", index=False)
    rows = "\nmax_row_count = 100000" if constant else ""
    (folder / "cat.toml").write_text(CATALOG.format(constant=constant, rows=rows))
    catalog = load_catalog(folder / "cat.toml")
    ledger = open_ledger(None)
    ledger.set_budget("analyst", "open", ApproxDP(Fraction(1000), Fraction(1, 100)))
    return Session(catalog, ledger=ledger, executor=DuckDBExecutor(catalog))


def _count_and_frequencies(
    session: Session, sql: str, salt: int
) -> tuple[list[int], tuple[int, int]]:
    prepared = session.prepare(sql, 1, Fraction(1, 10**6), salt=salt)
    plan, exact = exact_data(session, sql, 1, Fraction(1, 10**6), salt=salt)
    mf = tuple(int(session.executor.fetch(q)[0][0]) for q in prepared.exact.frequencies)
    values = [int(v) for m in plan.measurements for v in exact.scalars[m.name]]
    return values, (mf[0], mf[1])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_removing_any_unit_moves_each_count_by_at_most_the_local_bound(
    tmp_path: Path, seed: int
) -> None:
    visits, staff = _tables(seed)
    full = _session(tmp_path / "full", visits, staff)
    rows = (3, 2)
    moved = 0
    for n, sql in enumerate((COUNT, TWO)):
        for salt in (5, 6):
            with_all, mf = _count_and_frequencies(full, sql, salt)
            for pid in range(12):
                other = _session(
                    tmp_path / f"{n}-{salt}-{pid}",
                    visits[visits.pid != pid],
                    staff[staff.pid != pid],
                )
                without, mf2 = _count_and_frequencies(other, sql, salt)
                for a, b in zip(with_all, without, strict=True):
                    for fa, fb in (mf, mf2):
                        assert abs(a - b) <= rows[0] * fb + rows[1] * fa + rows[0] * rows[1]
                    moved = max(moved, abs(a - b))
                other.close()
    assert moved >= 6  # hot keys: one unit moves the count by many joined rows


def test_the_release_lies_in_its_interval_and_charges_epsilon_and_delta(tmp_path: Path) -> None:
    visits, staff = _tables(1, people=200)
    session = _session(tmp_path / "s", visits, staff)
    result = session.query(COUNT, 1, delta=1e-6)
    assert result.lows[0][0] <= result.rows[0][0] <= result.highs[0][0]
    assert session.remaining() == ApproxDP(Fraction(999), Fraction(1, 100) - Fraction(1, 10**6))
    explained = str(session.explain(COUNT, 1, delta=1e-6))
    assert "Elastic(" in explained and "elastic sensitivity (FLEX)" in explained


def test_the_intervals_cover_the_exact_count(tmp_path: Path) -> None:
    """Many releases of one plan (fresh noise each): the 95% interval holds the exact count at
    least that often (it is conservative: the frequencies' margin widens it)."""
    visits, staff = _tables(2, people=200)
    session = _session(tmp_path / "s", visits, staff)
    prepared = session.prepare(COUNT, 1, Fraction(1, 10**6), salt=3)
    plan, exact = exact_data(session, COUNT, 1, Fraction(1, 10**6), salt=3)
    mf = tuple(int(session.executor.fetch(q)[0][0]) for q in prepared.exact.frequencies)
    truth = int(exact.scalars["m0"][0])
    covered = 0
    for _ in range(200):
        noisy = elastic_release.release(plan, exact, (mf[0], mf[1]))
        answer = elastic_release.publish(plan, noisy, 0.95)
        covered += answer.lows[0][0] <= truth <= answer.highs[0][0]
    assert covered >= 190


def test_the_loss_audit_catches_a_smoothness_too_large(tmp_path: Path) -> None:
    from dataclasses import replace

    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff)
    plan = session.prepare(COUNT, 1, Fraction(1, 10**6)).plan
    assert plan.elastic is not None
    assert elastic_release.elastic_loss(plan) == ApproxDP(Fraction(1), Fraction(1, 10**6))
    broken = replace(plan, elastic=replace(plan.elastic, beta=plan.elastic.beta * 2))
    with pytest.raises(LossDefect):
        elastic_release.elastic_loss(broken)


@pytest.mark.parametrize(
    ("sql", "delta", "clause", "fragment"),
    [
        (COUNT, None, "JOIN", "needs a delta"),
        (
            "SELECT s.role, COUNT(*) FROM visits v JOIN staff s ON v.clinic = s.clinic GROUP BY s.role",
            1e-6,
            "GROUP BY",
            "GROUP BY over a join",
        ),
        (
            "SELECT SUM(v.cost) FROM visits v JOIN staff s ON v.clinic = s.clinic",
            1e-6,
            "SELECT",
            "only counts",
        ),
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN staff s ON v.clinic = s.clinic",
            1e-6,
            "JOIN",
            "LEFT JOIN of two private tables",
        ),
    ],
)
def test_what_elastic_sensitivity_does_not_plan_is_refused_before_reading(
    tmp_path: Path, sql: str, delta: float | None, clause: str, fragment: str
) -> None:
    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff)
    with pytest.raises(QueryError) as caught:
        session.prepare(sql, 1, delta)
    assert caught.value.clause == clause
    assert fragment in caught.value.what
    assert caught.value.fix
    if "LEFT" not in sql:
        assert "join_rows_per_key" in caught.value.fix


def test_a_constant_time_dataset_refuses_elastic_sensitivity(tmp_path: Path) -> None:
    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff, constant="\nconstant_time = true")
    with pytest.raises(PrivacyRefusal, match="constant-time"):
        session.prepare(COUNT, 1, Fraction(1, 10**6))


def test_every_count_gets_its_share_and_the_frequencies_a_tenth(tmp_path: Path) -> None:
    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff)
    plan = session.prepare(TWO, 1, Fraction(1, 10**6)).plan
    assert plan.elastic is not None and plan.elastic.bound_epsilon == Fraction(1, 10)
    assert [m.epsilon for m in plan.measurements] == [Fraction(9, 20), Fraction(9, 20)]
    assert plan.elastic.delta == Fraction(1, 2 * 10**6)
    assert np.isfinite(float(plan.elastic.beta))


def test_a_lookup_joined_after_the_elastic_join_is_refused(tmp_path: Path) -> None:
    """A public table joined after the join would repeat each joined row, which ES counts once."""
    visits, staff = _tables(1)
    folder = tmp_path / "s"
    session = _session(folder, visits, staff)
    pd.DataFrame({"clinic": [0, 0, 1], "town": ["a", "b", "c"]}).to_csv(
        folder / "towns.csv", index=False
    )
    text = (folder / "cat.toml").read_text() + (
        '\n[tables.towns]\nsource = { csv = "towns.csv" }\npublic = true\n\n'
        '[tables.towns.columns]\nclinic = { type = "int" }\ntown = { type = "str" }\n'
    )
    (folder / "cat.toml").write_text(text)
    catalog = load_catalog(folder / "cat.toml")
    session = Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))
    after = (
        "SELECT COUNT(*) FROM visits v JOIN staff s ON v.clinic = s.clinic "
        "JOIN towns t ON s.clinic = t.clinic"
    )
    with pytest.raises(PrivacyRefusal, match="must be the last join"):
        session.prepare(after, 1, Fraction(1, 10**6))
    before = (
        "SELECT COUNT(*) FROM visits v JOIN towns t ON v.clinic = t.clinic "
        "JOIN staff s ON v.clinic = s.clinic"
    )
    plan = session.prepare(before, 1, Fraction(1, 10**6)).plan
    assert plan.elastic is not None and plan.elastic.left_rows == 3  # the id side's cap
