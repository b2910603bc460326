"""Keys the query's own WHERE excludes form no group: the answer lists only the keys asked about.

``WHERE state = 'CA' GROUP BY state`` over a public key list used to answer all 50 states, 49 of
them noise around a known zero. The planner now leaves out the keys a condition on the key column
alone rules out (:func:`dalenius.plan.derive.keys_of`), from the query and the public list only.
These check that the groups kept get exactly the answers they got before, on row-level data and
under contribution bounding (same hash key), so only empty groups are gone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tests.conformance.datasets import write_mixed
from tests.support.exact import exact_answer, exact_data

from dalenius.core.catalog import load_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger


def _session(catalog_path: Path | None = None, folder: Path | None = None) -> Session:
    catalog = load_catalog(catalog_path) if catalog_path else write_mixed(folder or Path("."))
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


def test_the_kept_keys_answer_as_they_did_among_all_keys(adult_catalog_path: Path) -> None:
    with _session(adult_catalog_path) as session:
        every = exact_answer(
            session, "SELECT sex, COUNT(*), SUM(age) FROM adult WHERE age > 30 GROUP BY sex"
        )
        asked = exact_answer(
            session,
            "SELECT sex, COUNT(*), SUM(age) FROM adult WHERE age > 30 AND sex = 'Male' "
            "GROUP BY sex",
        )
    assert [r[0] for r in every.rows] == ["Female", "Male", "Unknown"]
    assert asked.rows == tuple(r for r in every.rows if r[0] == "Male")


def test_under_contribution_bounding_too(tmp_path: Path) -> None:
    """``mixed`` bounds persons to 3 rows in 2 groups; the reference's extra condition is never
    true (amounts lie below 1,000), so both queries bound the same rows, but it names another
    column, so its keys are not narrowed."""
    narrowed = (
        "SELECT day, COUNT(*), SUM(amount) FROM mixed WHERE day IN ('mon', 'tue') GROUP BY day"
    )
    reference = narrowed.replace(
        "WHERE day IN ('mon', 'tue')", "WHERE (day IN ('mon', 'tue') OR amount > 1000)"
    )
    with _session(folder=tmp_path) as session:
        for salt in (17, 1_000_020):
            plan, asked = exact_data(session, narrowed, salt=salt)
            _, every = exact_data(session, reference, salt=salt)
            assert plan.query.group_by[0].keys == ("mon", "tue")
            assert len(every.groups) == 7
            rows = [every.groups.index(g) for g in asked.groups]
            for name, values in asked.scalars.items():
                assert np.array_equal(values, np.asarray(every.scalars[name])[rows]), name
            outside = [i for i, g in enumerate(every.groups) if g not in asked.groups]
            assert all(int(every.scalars["m0"][i]) == 0 for i in outside)
