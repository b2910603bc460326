"""Contribution bounding for an id-column privacy unit, checked on neighbouring datasets.

A unit with many rows in many groups is removed; the exact bounded aggregates of the two
neighbouring datasets must differ by at most the sensitivity the plan charges, whatever rows the
keyed hash happened to keep.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.support.exact import exact_units_for

from dalenius.core.catalog import load_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

CATALOG = """
[dataset]
name = "visits"

[tables.visits]
source = {{ csv = "{csv}" }}
privacy_unit = {{ column = "pid", max_rows = 3, max_groups = 2 }}

[tables.visits.columns]
pid = {{ type = "int" }}
day = {{ type = "str", keys = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] }}
amount = {{ type = "float", bounds = [0, 100] }}
"""

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def make(tmp_path: Path, frame: pd.DataFrame, name: str, *, catalog: str = CATALOG) -> Session:
    folder = tmp_path / name
    folder.mkdir()
    frame.to_csv(folder / "visits.csv", index=False)
    (folder / "cat.toml").write_text(catalog.format(csv="visits.csv"))
    catalog = load_catalog(folder / "cat.toml")
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


@pytest.fixture
def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.Generator(np.random.PCG64(7))  # test data only, not noise
    others = pd.DataFrame(
        {
            "pid": np.arange(2, 402).repeat(2),
            "day": rng.choice(DAYS, 800),
            "amount": rng.uniform(-20, 150, 800).round(3),
        }
    )
    heavy = pd.DataFrame(
        {"pid": 1, "day": np.tile(DAYS, 20), "amount": np.full(140, 1000.0)}
    )  # 140 rows in 7 groups, every value far above the bound
    with_heavy = pd.concat([others, heavy], ignore_index=True).sample(frac=1, random_state=3)
    return with_heavy, others


QUERIES = [
    "SELECT COUNT(*) FROM visits",
    "SELECT SUM(amount), AVG(amount) FROM visits",
    "SELECT day, COUNT(*), SUM(amount) FROM visits GROUP BY day",
    "SELECT day, AVG(amount) FROM visits WHERE amount > 10 GROUP BY day",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_removing_a_heavy_unit_moves_each_measurement_by_at_most_its_sensitivity(
    tmp_path: Path, frames: tuple[pd.DataFrame, pd.DataFrame], sql: str
) -> None:
    with_heavy, without = frames
    a, b = make(tmp_path, with_heavy, "a"), make(tmp_path, without, "b")
    plan = a.prepare(sql, 1).plan
    for salt in (3, 99, 2**50):  # the bound must hold for every hash key, the same on both sides
        ua, ub = exact_units_for(a, sql, salt=salt), exact_units_for(b, sql, salt=salt)
        for m in plan.measurements:
            l1 = int(np.abs(np.array(ua[m.name]) - np.array(ub[m.name])).sum())
            assert l1 <= m.sensitivity_units, (m.describe(), l1, m.sensitivity_units)


def test_heavy_unit_keeps_at_most_max_rows_and_max_groups(
    tmp_path: Path, frames: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    with_heavy, without = frames
    a, b = make(tmp_path, with_heavy, "a"), make(tmp_path, without, "b")
    # A count of distinct units keeps the catalog's group cap (without one, it is lifted: below).
    sql = "SELECT day, COUNT(*), COUNT(DISTINCT pid) FROM visits GROUP BY day"
    assert a.prepare(sql, 1).plan.bounding.max_groups == 2
    for salt in (3, 99, 2**50):
        diff = np.array(exact_units_for(a, sql, salt=salt)["m0"]) - np.array(
            exact_units_for(b, sql, salt=salt)["m0"]
        )
        # Other units have only 2 rows each, below the caps: only the heavy unit's rows differ.
        assert diff.min() >= 0
        assert diff.sum() <= 3
        assert np.count_nonzero(diff) <= 2


def test_units_below_the_caps_are_untouched(
    tmp_path: Path, frames: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    _, without = frames
    b = make(tmp_path, without, "b")
    counts = exact_units_for(b, "SELECT day, COUNT(*) FROM visits GROUP BY day")["m0"]
    expected = without.groupby("day").size().reindex(DAYS, fill_value=0).tolist()
    # Units with 2 rows in up to 2 days are within max_rows = 3 and max_groups = 2.
    assert counts == expected


def spread_frames() -> tuple[pd.DataFrame, pd.DataFrame, list[int]]:
    """Units of 1 to 9 distinct rows over 1 to 7 days, and the same without the heaviest ones."""
    rng = np.random.Generator(np.random.PCG64(11))  # test data only, not noise
    rows = []
    for pid in range(1, 301):
        days = rng.choice(DAYS, size=int(rng.integers(1, 8)), replace=False)
        for _ in range(int(rng.integers(1, 10))):
            rows.append([pid, str(rng.choice(days)), round(float(rng.uniform(-20, 150)), 3)])
    frame = pd.DataFrame(rows, columns=["pid", "day", "amount"])
    spans = frame.groupby("pid").agg(n=("day", "size"), days=("day", "nunique"))
    heavy = spans[(spans.n > 3) & (spans.days > 3)].index[:6].tolist()
    return frame, frame[~frame.pid.isin(heavy)], heavy


PUBLIC_KEY_QUERIES = [
    "SELECT day, COUNT(*), SUM(amount) FROM visits GROUP BY day",
    "SELECT day, AVG(amount), VARIANCE(amount) FROM visits WHERE amount > 10 GROUP BY day",
    # A quantile's histogram bounds the rows themselves (sql.emit.bounding.bounded).
    "SELECT day, MEDIAN(amount), COUNT(DISTINCT amount) FROM visits GROUP BY day",
]


@pytest.mark.parametrize("sql", PUBLIC_KEY_QUERIES)
def test_with_public_keys_only_rows_are_capped_and_the_sensitivity_holds(
    tmp_path: Path, sql: str
) -> None:
    """Nothing here depends on the group cap, so the planner lifts it to the row cap (2 -> 3):
    each unit keeps at most 3 rows in any groups, and removing a unit whose rows span several
    groups moves every measurement by at most the sensitivity charged, for every hash key."""
    full, _, heavy = spread_frames()
    a = make(tmp_path, full, "full")
    plan = a.prepare(sql, 1).plan
    assert (plan.bounding.max_rows, plan.bounding.max_groups) == (3, 3)
    assert "rows <= 3)" in str(a.explain(sql, 1))
    groups_kept = set()
    for pid in heavy:
        b = make(tmp_path, full[full.pid != pid], f"without{pid}")
        for salt in (3, 2**50):
            ua, ub = exact_units_for(a, sql, salt=salt), exact_units_for(b, sql, salt=salt)
            for m in plan.measurements:
                l1 = int(np.abs(np.array(ua[m.name]) - np.array(ub[m.name])).sum())
                assert l1 <= m.sensitivity_units, (pid, m.describe(), l1, m.sensitivity_units)
            if "COUNT(*)" in sql:
                kept = np.array(ua["m0"]) - np.array(ub["m0"])
                assert kept.min() >= 0 and kept.sum() == 3
                groups_kept.add(int(np.count_nonzero(kept)))
    if "COUNT(*)" in sql:
        assert 3 in groups_kept  # the heavy units' rows do land in more than 2 groups


@pytest.mark.parametrize(
    ("sql", "delta"),
    [
        ("SELECT day, COUNT(DISTINCT pid) FROM visits GROUP BY day", None),
        ("SELECT amount, COUNT(*) FROM visits GROUP BY amount", 1e-6),
        (
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 2) "
            "day, MEDIAN(amount) FROM visits GROUP BY day",
            None,
        ),
    ],
    ids=["distinct-units", "private-keys", "asked"],
)
def test_the_group_cap_stays_where_a_sensitivity_or_the_query_needs_it(
    tmp_path: Path, sql: str, delta: float | None
) -> None:
    a = make(tmp_path, spread_frames()[0], "full")
    assert a.prepare(sql, 1, delta).plan.bounding.max_groups == 2


DECLARED = CATALOG.replace('"sun"] }', '"sun"], per_unit = true }')
"""The same catalog saying each unit has one ``day``: :func:`spread_frames` says otherwise."""


@pytest.mark.parametrize("sql", PUBLIC_KEY_QUERIES[:2])
def test_a_false_per_unit_declaration_keeps_the_same_rows_and_the_sensitivity(
    tmp_path: Path, sql: str
) -> None:
    """``per_unit`` only chooses how units are bounded (each aggregated once, the units with
    several days read again): on data whose units span up to seven days, the exact answers are
    those of the undeclared catalog for the same hash key, and removing a unit moves every
    measurement by at most the sensitivity charged."""
    full, _, heavy = spread_frames()
    declared = make(tmp_path, full, "declared", catalog=DECLARED)
    plain = make(tmp_path, full, "plain")
    plan = declared.prepare(sql, 1).plan
    assert plan == plain.prepare(sql, 1).plan  # the declaration is no part of the plan
    assert plan.fingerprint() == plain.prepare(sql, 1).plan.fingerprint()
    assert "__over_caps" in declared.prepare(sql, 1, salt=3).exact.main
    assert "__over_caps" not in plain.prepare(sql, 1, salt=3).exact.main
    for salt in (3, 2**50):
        assert exact_units_for(declared, sql, salt=salt) == exact_units_for(plain, sql, salt=salt)
    for pid in heavy[:3]:
        without = make(tmp_path, full[full.pid != pid], f"without{pid}", catalog=DECLARED)
        ua, ub = exact_units_for(declared, sql, salt=5), exact_units_for(without, sql, salt=5)
        for m in plan.measurements:
            l1 = int(np.abs(np.array(ua[m.name]) - np.array(ub[m.name])).sum())
            assert l1 <= m.sensitivity_units, (pid, m.describe(), l1, m.sensitivity_units)


ONE_ROW = CATALOG.replace("max_rows = 3, max_groups = 2", "max_rows = 1, max_groups = 1")
"""One row per unit: a unit within the cap has one group, declared or not."""


def test_a_one_row_cap_aggregates_each_unit_once_as_bounding_the_rows_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``max_rows = 1`` a unit within the cap has one row, so one group: each unit is
    aggregated once (no (unit, group) cells), and the exact answers are, bit for bit, those of
    the bounded rows for the same hash key, with units of up to nine rows over seven days."""
    from dalenius.sql.emit import statements

    session = make(tmp_path, spread_frames()[0], "one", catalog=ONE_ROW)
    for table in session.catalog.tables:
        session.executor.prepare(table)
    for sql in PUBLIC_KEY_QUERIES[:2]:
        plan = session.prepare(sql, 1).plan
        for salt in (3, 2**50):
            once = statements.exact_queries(plan, "duckdb", salt=salt).main
            with monkeypatch.context() as patch:
                patch.setattr(statements, "bounded_aggregate", lambda *a, **k: None)
                rows = statements.exact_queries(plan, "duckdb", salt=salt).main
            assert "__over_caps" in once and "__over AS" not in once
            ours = sorted(map(repr, session.executor.fetch(once)))
            assert ours == sorted(map(repr, session.executor.fetch(rows))), (sql, salt)
