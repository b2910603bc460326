"""A join of two private tables on a key other than the unit, on every engine.

Each side is truncated before the join (at most ``R`` rows per unit, then ``τ`` rows per key, in
the order of a keyed hash that is the same on every engine), so removing one unit moves each exact
measurement by at most the sensitivity charged, and every engine keeps the same rows and gives the
same exact answers for the same hash key (docs/mechanisms/join_truncation.md).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest
from tests.conformance.engines import OTHER_ENGINES
from tests.support.exact import SALTS, exact_units_for, neighbour_moves, same_exact_units

from dalenius.engine.session import Session

QUERIES = [
    "SELECT s.role, COUNT(*), SUM(v.cost) FROM visits v JOIN staff s ON v.clinic = s.clinic "
    "GROUP BY s.role",
    "SELECT COUNT(*), AVG(v.cost) FROM staff s JOIN visits v ON s.clinic = v.clinic "
    "WHERE v.cost > 10",
]

ENGINES = [
    pytest.param("duckdb", 3, id="duckdb"),
    pytest.param("postgres", 2, marks=pytest.mark.postgres, id="postgres"),
    pytest.param("spark", 1, marks=pytest.mark.spark, id="spark"),
]


@pytest.mark.parametrize(("engine", "repeats"), ENGINES)
def test_removing_a_heavy_unit_moves_each_measurement_by_at_most_its_sensitivity(
    engine: str, repeats: int, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    sessions = sessions_on(engine)
    heavy, light = sessions["clinics"], sessions["clinics_light"]
    moved = 0
    for sql in QUERIES:
        assert heavy.prepare(sql, 1).plan.bounding.max_rows == 2 * (3 * 3 + 2 * 5)
        for salt in range(repeats):
            moved = max(moved, neighbour_moves(heavy, light, sql, salt=7 * salt + 1))
    assert moved > 0  # the heavy unit's kept rows do reach the answer


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_every_engine_keeps_the_same_rows_of_each_side(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    for sql in QUERIES:
        same_exact_units(sessions_on("duckdb")["clinics"], sessions_on(engine)["clinics"], sql)


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_every_engine_gives_the_same_counts_and_key_frequencies_for_elastic_sensitivity(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    sql = "SELECT COUNT(*) FROM visits v JOIN staff s ON v.clinic = s.clinic WHERE s.role = 'nurse'"
    delta = Fraction(1, 10**6)
    for salt in SALTS:
        got = []
        for name in ("duckdb", engine):
            session = sessions_on(name)["clinics_open"]
            prepared = session.prepare(sql, 1, delta, salt=salt)
            assert prepared.plan.elastic is not None
            counts = exact_units_for(session, sql, 1, delta, salt=salt)  # prepares the tables
            frequencies = [int(session.executor.fetch(q)[0][0]) for q in prepared.exact.frequencies]
            got.append((counts, frequencies))
        assert got[0] == got[1], (engine, salt)
        assert got[0][1][0] > 40  # the hot clinic: the frequencies are not trivial
