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


def make(tmp_path: Path, frame: pd.DataFrame, name: str) -> Session:
    folder = tmp_path / name
    folder.mkdir()
    frame.to_csv(folder / "visits.csv", index=False)
    (folder / "cat.toml").write_text(CATALOG.format(csv="visits.csv"))
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
    sql = "SELECT day, COUNT(*) FROM visits GROUP BY day"
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
