"""What a query's ledger work reads stays small as the ledger's history grows (SQLite).

A reserve reads what was spent (the analyst's charges, and with a total cap the dataset's) and
looks for a committed answer to the same request. Each of those reads must come from a table or
index made for it, never from a scan of the charges table or of every entry of a status: what
was spent from the running counts (``dalenius_spent``, a few rows by primary key) or, for a
budget that refreshes, from the covering index over the current period; the answers by their
request. SQLite plans without statistics, so a query it plans badly shows up here, in the plan of
each statement the ledger ran, long before a large ledger would show it as time.
"""

from __future__ import annotations

import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.loss import PureDP
from dalenius.ledger import CachedAnswer, ChargeRequest, Reservation
from dalenius.ledger.sqlite import SqliteLedger

DATASET = "census"
TENTH = PureDP(Fraction(1, 10))


def request(principal: str, key: str) -> ChargeRequest:
    return ChargeRequest(principal, DATASET, TENTH, key, f"SELECT {key}", f"plan-{key}")


@pytest.fixture
def ledger(tmp_path: Path) -> SqliteLedger:
    """A ledger whose dataset has a total cap and a history: releases of 20 analysts, some of
    them shared answers and some returned before the data gate."""
    store = SqliteLedger(tmp_path / "ledger.sqlite")
    store.set_dataset(DATASET, total_cap=PureDP(Fraction(10**6)))
    for a in range(20):
        store.set_budget(f"analyst-{a}", DATASET, PureDP(Fraction(10**3)))
    for i in range(300):
        principal = f"analyst-{i % 20}"
        outcome = store.reserve(request(principal, f"k{i % 50}"), charge=i % 7 != 0)
        if isinstance(outcome, Reservation):
            if i % 7 == 0:
                store.release(outcome, "the engine refused the plan")
            else:
                store.commit(outcome, '{"values": [1]}')
    store.set_budget("newcomer", DATASET, PureDP(Fraction(10**3)))
    store.set_budget("monthly", DATASET, PureDP(Fraction(10**3)), refresh_days=30)
    return store


def plans(path: str, statements: list[str]) -> dict[str, list[str]]:
    """The query plan of each statement that reads the charges table."""
    out: dict[str, list[str]] = {}
    with sqlite3.connect(path) as con:
        for text in statements:
            if "dalenius_" in text and text.split()[0] in ("SELECT", "UPDATE"):
                rows = con.execute(f"EXPLAIN QUERY PLAN {text}").fetchall()
                out[text] = [str(row[3]) for row in rows]
    return out


def traced(ledger: SqliteLedger, action: object) -> list[str]:
    statements: list[str] = []
    ledger.trace(statements.append)
    try:
        assert callable(action)
        action()
    finally:
        ledger.trace(None)
    return statements


def assert_indexed(path: str, statements: list[str]) -> None:
    planned = plans(path, statements)
    assert planned, "the ledger ran no statement on the charges table"
    for text, steps in planned.items():
        for step in steps:
            assert not step.startswith("SCAN dalenius_charges"), (text, steps)
            assert "dalenius_charges_by_status" not in step, (text, steps)
        if text.startswith("SELECT charged, COUNT(*)"):
            assert any("COVERING INDEX dalenius_charges_spent" in s for s in steps), (text, steps)


def release_by(ledger: SqliteLedger, principal: str) -> list[str]:
    def release() -> None:
        outcome = ledger.reserve(request(principal, "never-asked"))
        assert isinstance(outcome, Reservation)
        ledger.charge(outcome)
        ledger.commit(outcome, '{"values": [2]}')

    return traced(ledger, release)


def test_a_new_release_reads_the_running_counts(ledger: SqliteLedger) -> None:
    statements = release_by(ledger, "newcomer")
    counts = [s for s in statements if s.startswith("SELECT charged, releases FROM")]
    assert len(counts) == 2  # the analyst's, the dataset's
    assert not any(s.startswith("SELECT charged, COUNT(*)") for s in statements)
    for steps in plans(ledger.path, counts).values():
        assert steps == [
            "SEARCH dalenius_spent USING INDEX sqlite_autoindex_dalenius_spent_1 "
            "(dataset=? AND principal=?)"
        ]
    assert_indexed(ledger.path, statements)
    assert ledger.verify() == []


def test_a_refreshing_budget_reads_its_period_from_the_covering_index(
    ledger: SqliteLedger,
) -> None:
    statements = release_by(ledger, "monthly")
    periods = [s for s in statements if s.startswith("SELECT charged, COUNT(*)")]
    assert len(periods) == 1 and "created_at >=" in periods[0]
    (steps,) = plans(ledger.path, periods).values()
    assert any("(dataset=? AND principal=? AND created_at>?)" in step for step in steps), steps
    assert_indexed(ledger.path, statements)


def test_a_repeat_and_a_shared_answer_read_indexes_only(ledger: SqliteLedger) -> None:
    def repeat() -> None:
        assert isinstance(ledger.reserve(request("analyst-3", "k3")), CachedAnswer)

    def shared() -> None:
        outcome = ledger.reserve(request("newcomer", "k4"))
        assert isinstance(outcome, CachedAnswer)
        assert outcome.shared_from is not None

    assert_indexed(ledger.path, traced(ledger, repeat))
    assert_indexed(ledger.path, traced(ledger, shared))
