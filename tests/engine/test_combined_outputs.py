"""An output combining several aggregates (``SUM(age) / COUNT(*)``) is post-processing: answered,
computed from the released values, without an interval (each aggregate's holds with the stated
confidence; their combination's would not), with a note saying so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.exact import exact_answer

import dalenius
from dalenius.engine.session import Session


@pytest.fixture
def session(adult_catalog_path: Path) -> Iterator[Session]:
    with dalenius.connect(adult_catalog_path, ledger="memory:", budget=10) as s:
        yield s


def test_a_combination_of_aggregates_is_released_without_an_interval(session: Session) -> None:
    sql = "SELECT sex, SUM(age) / COUNT(*) AS mean_age, SUM(age), COUNT(*) FROM adult GROUP BY sex"
    exact = exact_answer(session, sql)
    for row in exact.rows:
        # Integer / truncates, and division by zero is NULL, as in PostgreSQL.
        assert row[1] == (row[2] // row[3] if row[3] else None)
    result = session.query(sql, epsilon=1)
    assert all(
        lows[1] is None and highs[1] is None
        for lows, highs in zip(result.lows, result.highs, strict=True)
    )
    assert all(lows[2] is not None for lows in result.lows)
    assert any("mean_age combines 2 aggregates" in n for n in result.notes)
