"""Joins of two private tables on a key other than the unit, each side truncated first.

The privacy claim is the stability bound of docs/mechanisms/join_truncation.md: removing one
unit (all its rows in both tables) changes the exact measurements by at most the sensitivity the
plan charges, ``2·(R_left·τ_right + R_right·τ_left)`` rows times a row's reach, for every hash
key. The tests remove every unit of random tables with hot keys, one at a time, and check it; a
planted defect (no truncation) is caught by the same check.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.support.exact import exact_units_for

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import CatalogError, PrivacyRefusal, QueryError
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.nodes import Join, depth_first
from dalenius.sql.emit.statements import exact_queries

CATALOG = """
[dataset]
name = "clinics"

[tables.visits]
source = {{ csv = "visits.csv" }}
privacy_unit = {{ column = "pid", max_rows = 3 }}

[tables.visits.columns]
pid = {{ type = "int" }}
clinic = {{ type = "int"{visits_key} }}
cost = {{ type = "int", bounds = [0, 10] }}

[tables.staff]
source = {{ csv = "staff.csv" }}
privacy_unit = {{ column = "pid", max_rows = 2 }}

[tables.staff.columns]
pid = {{ type = "int" }}
clinic = {{ type = "int"{staff_key} }}
role = {{ type = "str", keys = ["nurse", "doctor"] }}
"""

TRUNCATED = {"visits_key": ", join_rows_per_key = 4", "staff_key": ", join_rows_per_key = 2"}

QUERIES = [
    "SELECT COUNT(*) FROM visits v JOIN staff s ON v.clinic = s.clinic",
    "SELECT s.role, COUNT(*), SUM(v.cost) FROM visits v JOIN staff s ON v.clinic = s.clinic "
    "GROUP BY s.role",
    "SELECT AVG(v.cost) FROM staff s JOIN visits v ON s.clinic = v.clinic WHERE s.role = 'nurse'",
]


def _tables(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Random visits and staff over 12 people and 4 clinics, clinic 0 hot on both sides."""
    rng = random.Random(seed)  # test data only, never noise

    def clinic() -> int:
        return 0 if rng.random() < 0.5 else rng.randrange(1, 4)

    visits = pd.DataFrame(
        [(rng.randrange(12), clinic(), rng.randrange(14)) for _ in range(50)],
        columns=["pid", "clinic", "cost"],
    )
    staff = pd.DataFrame(
        [(rng.randrange(12), clinic(), rng.choice(["nurse", "doctor"])) for _ in range(24)],
        columns=["pid", "clinic", "role"],
    )
    return visits, staff


def _session(folder: Path, visits: pd.DataFrame, staff: pd.DataFrame, **keys: str) -> Session:
    folder.mkdir(parents=True)
    visits.to_csv(folder / "visits.csv", index=False)
    staff.to_csv(folder / "staff.csv", index=False)
    (folder / "cat.toml").write_text(CATALOG.format(**{**TRUNCATED, **keys}))
    catalog = load_catalog(folder / "cat.toml")
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_removing_any_unit_moves_each_measurement_by_at_most_its_sensitivity(
    tmp_path: Path, seed: int
) -> None:
    visits, staff = _tables(seed)
    full = _session(tmp_path / "full", visits, staff)
    reached = 0
    for sql in QUERIES:
        plan = full.prepare(sql, 1).plan
        assert plan.bounding.max_rows == 2 * (3 * 2 + 2 * 4)
        for salt in (11, 12):
            with_all = exact_units_for(full, sql, salt=salt)
            for pid in range(12):
                folder = tmp_path / f"{sql.__hash__() & 0xFFFF}-{salt}-{pid}"
                without = _session(folder, visits[visits.pid != pid], staff[staff.pid != pid])
                other = exact_units_for(without, sql, salt=salt)
                for m in plan.measurements:
                    l1 = int(np.abs(np.array(with_all[m.name]) - np.array(other[m.name])).sum())
                    assert l1 <= m.sensitivity_units, (sql, salt, pid, m.name, l1)
                    if m.kind == "count":
                        reached = max(reached, l1)
                without.close()
    # The tables are hot enough that removing one person moves a count by many joined rows.
    assert reached >= 6


def test_without_truncation_the_same_check_fails(tmp_path: Path) -> None:
    """A planted defect: the plan still charges the truncated stability, but the engine joins
    every row. Removing a person with rows on the hot clinic then moves the count by more.
    """
    visits, staff = _tables(1)
    hot = pd.DataFrame({"pid": [99] * 3, "clinic": [0] * 3, "cost": [1] * 3})
    visits = pd.concat([visits, hot], ignore_index=True)
    staff = pd.concat(
        [staff, pd.DataFrame({"pid": [98] * 20, "clinic": [0] * 20, "role": ["nurse"] * 20})],
        ignore_index=True,
    )
    sql = QUERIES[0]
    full = _session(tmp_path / "full", visits, staff)
    without = _session(tmp_path / "without", visits[visits.pid != 99], staff)
    honest = (
        exact_units_for(full, sql, salt=3)["m0"][0],
        exact_units_for(without, sql, salt=3)["m0"][0],
    )
    sensitivity = full.prepare(sql, 1).plan.measurements[0].sensitivity_units
    assert abs(honest[0] - honest[1]) <= sensitivity

    def untruncated(session: Session) -> int:
        prepared = session.prepare(sql, 1, salt=3)
        plan = prepared.plan
        bare = depth_first(
            plan.query.relation,
            lambda r: replace(r, truncation=None) if isinstance(r, Join) else r,
        )
        broken = replace(plan, query=replace(plan.query, relation=bare))
        for table in prepared.tables:
            session.executor.prepare(table)
        rows = session.executor.fetch(exact_queries(broken, salt=3).main)
        return int(rows[0][-1])

    moved = abs(untruncated(full) - untruncated(without))
    assert moved > sensitivity, (moved, sensitivity)


def test_truncation_keeps_every_row_when_no_key_is_over_its_cap(tmp_path: Path) -> None:
    """Truncation drops rows only where a key (or a unit) is over its cap: on tables within
    them the answer is the plain join's, computed here by pandas.
    """
    visits = pd.DataFrame({"pid": [1, 2, 3, 4], "clinic": [0, 0, 1, 2], "cost": [5, 7, 20, 1]})
    staff = pd.DataFrame(
        {"pid": [5, 6, 7], "clinic": [0, 1, 1], "role": ["nurse", "doctor", "nurse"]}
    )
    session = _session(tmp_path / "s", visits, staff)
    sql = QUERIES[1]
    joined = visits.merge(staff, on="clinic")
    got = exact_units_for(session, sql, salt=1)
    plan = session.prepare(sql, 1).plan
    counts = dict(zip(["nurse", "doctor"], got["m0"], strict=True))
    sums = dict(zip(["nurse", "doctor"], got["m1"], strict=True))
    for role in ("nurse", "doctor"):
        rows = joined[joined.role == role]
        assert counts[role] == len(rows)
        sum_m = next(m for m in plan.measurements if m.kind == "sum")
        assert (
            sums[role] * sum_m.granularity + sum_m.center * len(rows) == rows.cost.clip(0, 10).sum()
        )


def test_explain_shows_the_truncation_and_the_bound(tmp_path: Path) -> None:
    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff)
    text = str(session.explain(QUERIES[0], 1))
    assert (
        "Truncate(<= 3 rows per v.pid, then <= 4 rows per v.clinic; <= 2 rows per s.pid, then <= 2 rows per s.clinic)"
        in text
    )
    assert "rows <= 28" in text


def test_a_key_without_a_declared_truncation_falls_to_elastic_sensitivity(
    tmp_path: Path,
) -> None:
    """One key without ``join_rows_per_key``: no side is truncated per key; the join is bounded
    by elastic sensitivity (tests/sql/test_elastic_joins.py), which needs a delta."""
    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff, staff_key="")
    with pytest.raises(PrivacyRefusal) as caught:
        session.prepare(QUERIES[0], 1)
    assert caught.value.clause == "JOIN"
    assert "needs a delta" in caught.value.what
    assert "join_rows_per_key" in (caught.value.fix or "")
    plan = session.prepare(QUERIES[0], 1, Fraction(1, 10**6)).plan
    assert plan.elastic is not None


def test_a_left_join_of_two_private_tables_off_the_unit_is_refused(tmp_path: Path) -> None:
    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff)
    with pytest.raises(QueryError) as caught:
        session.prepare("SELECT COUNT(*) FROM visits v LEFT JOIN staff s ON v.clinic = s.clinic", 1)
    assert "LEFT JOIN of two private tables" in caught.value.what


@pytest.mark.parametrize("value", ["0", "true", "2.5", "'ten'", "1000001"])
def test_the_catalog_refuses_a_bad_join_rows_per_key(tmp_path: Path, value: str) -> None:
    visits, staff = _tables(1)
    with pytest.raises(CatalogError, match="join_rows_per_key must be a whole number"):
        _session(tmp_path / "s", visits, staff, staff_key=f", join_rows_per_key = {value}")


def test_each_query_truncates_with_its_own_fresh_hash_key(tmp_path: Path) -> None:
    """The exact SQL is cached with a stand-in key and given each query's key afresh: the
    truncation's hashes must use that key too, never a constant of the cached statement.
    """
    visits, staff = _tables(1)
    session = _session(tmp_path / "s", visits, staff)
    pattern = re.compile(r"MD5\(CONCAT\('(\d+)\|', CASE WHEN 'join side")
    keys = [set(pattern.findall(session.prepare(QUERIES[0], 1).exact.main)) for _ in range(3)]
    assert all(len(k) == 2 for k in keys)  # the unit cap's and the key cap's
    assert keys[0] != keys[1] != keys[2]
