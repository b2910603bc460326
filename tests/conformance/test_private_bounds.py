"""The private bounds and the cap suggestions read the same exact histograms on every engine, and
one unit far above its caps moves them by no more than their privacy maps charge.

The bounds' histogram counts each unit's rows capped at ``max_rows`` (so one unit moves it by at
most ``max_rows`` in L1); the contributions' histograms put each unit in one bin whatever its
number of rows (so one unit moves each by at most 1).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from dalenius.engine.session import Session
from dalenius.releases.bounds import BoundsRequest, bin_counts, plan_bounds
from dalenius.releases.contributions import (
    ContributionsRequest,
    bin_of,
    edges,
    plan_contributions,
)

ENGINES = [
    pytest.param("duckdb", id="duckdb"),
    pytest.param("postgres", marks=pytest.mark.postgres, id="postgres"),
    pytest.param("spark", marks=pytest.mark.spark, id="spark"),
]

SALT = 12345


def _bounds_counts(session: Session, column: str) -> np.ndarray:
    plan = plan_bounds(session.catalog, BoundsRequest("visits", column, Fraction(1)))
    for table in plan.tables:
        session.executor.prepare(table)
    statement = plan.prepare(session.executor.dialect, SALT)
    rows: list[tuple[int, int]] = []

    def fetch(sql: str, reads: object = ()) -> list[tuple[int, int]]:
        found = session.executor.fetch(sql)
        rows.extend(found)
        return found

    statement(fetch)
    return bin_counts(rows, len(plan.edges))


def _contribution_counts(session: Session) -> list[np.ndarray]:
    plan = plan_contributions(
        session.catalog, ContributionsRequest("visits", ("day",), Fraction(1))
    )
    session.executor.prepare(plan.table)
    tops = edges()
    out = []
    for sql in plan.statements(session.executor.dialect):
        counts = np.zeros(len(tops), dtype=np.int64)
        for n, units in session.executor.fetch(sql):
            counts[bin_of(int(n), tops)] += int(units)
        out.append(counts)
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_removing_a_heavy_unit_moves_the_bounds_histogram_by_at_most_max_rows(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    sessions = sessions_on(engine)
    heavy, light = sessions["heavy"], sessions["visits"]
    rows = heavy.catalog.table("visits").privacy_unit.max_rows  # type: ignore[union-attr]
    with_unit, without = _bounds_counts(heavy, "amount"), _bounds_counts(light, "amount")
    assert 0 < int(np.abs(with_unit - without).sum()) <= rows
    assert int(without.sum()) == 800  # every light unit's two rows, each in one bin


@pytest.mark.parametrize("engine", ENGINES)
def test_removing_a_heavy_unit_moves_each_contribution_histogram_by_one(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    sessions = sessions_on(engine)
    heavy, light = sessions["heavy"], sessions["visits"]
    for with_unit, without in zip(
        _contribution_counts(heavy), _contribution_counts(light), strict=True
    ):
        assert int(np.abs(with_unit - without).sum()) == 1
    rows, days = _contribution_counts(heavy)
    assert rows[bin_of(140, edges())] == 1  # the heavy unit, uncapped: 140 rows
    assert days[bin_of(7, edges())] == 1


@pytest.mark.postgres
@pytest.mark.spark
def test_every_engine_counts_the_same_bins(
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    reference = sessions_on("duckdb")["heavy"]
    expected = _bounds_counts(reference, "amount")
    contributions = _contribution_counts(reference)
    for engine in ("postgres", "spark"):
        session = sessions_on(engine)["heavy"]
        assert np.array_equal(_bounds_counts(session, "amount"), expected), engine
        for got, want in zip(_contribution_counts(session), contributions, strict=True):
            assert np.array_equal(got, want), engine
