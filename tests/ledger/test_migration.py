"""A store written by an earlier schema (version 1 or 2) is upgraded in place when it is opened.

Version 2 added the data gate's statuses, ``fail_closed`` and ``exhausted_at``; version 3 the
running counts of what was spent (``dalenius_spent``), counted from the charges on upgrade. The
upgrade keeps every charge, budget and audit line, and the upgraded store runs the whole protocol.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from dalenius.core.loss import PureDP
from dalenius.ledger import ChargeRequest, Ledger, Reservation
from dalenius.ledger.codec import encode_loss
from dalenius.ledger.postgres import PostgresLedger
from dalenius.ledger.schema import RETIRED_INDEXES
from dalenius.ledger.sqlite import SqliteLedger

CHARGE_INDEXES = {
    "dalenius_charges_spent",
    "dalenius_charges_answers",
    "dalenius_charges_by_status",
    "dalenius_charges_idempotency",
}
"""The charges table's indexes in the current schema (the primary key's aside)."""

COUNT_TRIGGERS = {
    ("dalenius_spent_added", "dalenius_charges"),
    ("dalenius_spent_changed", "dalenius_charges"),
    ("dalenius_spent_removed", "dalenius_charges"),
    ("dalenius_spent_shared", "dalenius_shared"),
    ("dalenius_spent_unshared", "dalenius_shared"),
}
"""The triggers that keep the running counts, and their tables."""

V1_DDL = [
    """CREATE TABLE IF NOT EXISTS dalenius_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
    """CREATE TABLE IF NOT EXISTS dalenius_datasets (
            name TEXT PRIMARY KEY,
            definition TEXT NOT NULL CHECK (definition IN ('pure', 'approx', 'zcdp')),
            total_cap TEXT,
            created_at TEXT NOT NULL
        )""",
    """CREATE TABLE IF NOT EXISTS dalenius_budgets (
            principal TEXT NOT NULL,
            dataset TEXT NOT NULL REFERENCES dalenius_datasets (name),
            cap TEXT NOT NULL,
            refresh_days INTEGER CHECK (refresh_days IS NULL OR refresh_days >= 1),
            anchor TEXT NOT NULL,
            PRIMARY KEY (principal, dataset)
        )""",
    """CREATE TABLE IF NOT EXISTS dalenius_charges (
            id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            dataset TEXT NOT NULL REFERENCES dalenius_datasets (name),
            sql_text TEXT NOT NULL,
            plan_hash TEXT NOT NULL,
            request_key TEXT NOT NULL,
            idempotency_key TEXT,
            loss TEXT NOT NULL,
            charged TEXT NOT NULL,
            status TEXT NOT NULL
                CHECK (status IN ('pending', 'committed', 'rolled_back', 'lost')),
            answer TEXT,
            created_at TEXT NOT NULL,
            finished_at TEXT,
            detail TEXT NOT NULL
        )""",
    """CREATE INDEX IF NOT EXISTS dalenius_charges_by_owner
            ON dalenius_charges (dataset, principal, created_at)""",
    """CREATE INDEX IF NOT EXISTS dalenius_charges_by_request
            ON dalenius_charges (principal, dataset, request_key)""",
    """CREATE INDEX IF NOT EXISTS dalenius_charges_by_status
            ON dalenius_charges (status, created_at)""",
    """CREATE UNIQUE INDEX IF NOT EXISTS dalenius_charges_idempotency
            ON dalenius_charges (principal, idempotency_key)
            WHERE idempotency_key IS NOT NULL AND status <> 'rolled_back'""",
    """CREATE TABLE IF NOT EXISTS dalenius_audit (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            principal TEXT NOT NULL,
            dataset TEXT NOT NULL,
            sql_text TEXT NOT NULL,
            plan_hash TEXT,
            loss TEXT,
            outcome TEXT NOT NULL,
            detail TEXT NOT NULL,
            entry_id TEXT
        )""",
    """CREATE INDEX IF NOT EXISTS dalenius_audit_by_owner
            ON dalenius_audit (dataset, principal, seq)""",
]


def write_v1(run: Callable[..., object], *, postgres: bool = False) -> None:
    """A version-1 store holding a dataset, a budget, a committed and a lost entry."""
    identity = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    for statement in V1_DDL:
        run(
            statement.replace("INTEGER PRIMARY KEY AUTOINCREMENT", identity)
            if postgres
            else statement
        )
    now = "2026-01-01T00:00:00.000000+00:00"
    tenth = encode_loss(PureDP(Fraction(1, 10)))
    run("INSERT INTO dalenius_meta VALUES ('schema_version', '1')")
    run("INSERT INTO dalenius_datasets VALUES ('adult', 'pure', NULL, ?)", (now,))
    run(
        "INSERT INTO dalenius_budgets VALUES ('alice', 'adult', ?, NULL, ?)",
        (encode_loss(PureDP(Fraction(1))), now),
    )
    for ident, status, answer in [("a1", "committed", '{"x": 1}'), ("a2", "lost", None)]:
        run(
            "INSERT INTO dalenius_charges VALUES (?, 'alice', 'adult', 'SELECT 1', 'h', ?, NULL, "
            "?, ?, ?, ?, ?, ?, '')",
            (ident, ident, tenth, tenth, status, answer, now, now),
        )
    run(
        "INSERT INTO dalenius_audit (at, principal, dataset, sql_text, outcome, detail, entry_id) "
        "VALUES (?, 'alice', 'adult', 'SELECT 1', 'answered', 'released', 'a1')",
        (now,),
    )


def check_upgraded(ledger: Ledger) -> None:
    assert [(e.id, e.status) for e in ledger.entries()] == [("a1", "committed"), ("a2", "lost")]
    assert ledger.spent("alice", "adult") == PureDP(Fraction(1, 5))  # from the counts rebuilt
    assert ledger.total_spent("adult") == PureDP(Fraction(1, 5))
    assert not ledger.datasets()[0].fail_closed
    assert ledger.verify() == []
    outcome = ledger.reserve(
        ChargeRequest("alice", "adult", PureDP(Fraction(1, 10)), "k", "S", "h")
    )
    assert isinstance(outcome, Reservation)
    ledger.charge(outcome)
    ledger.fail(outcome, "engine text")
    ledger.set_dataset("adult", fail_closed=True)
    assert ledger.datasets()[0].fail_closed
    assert ledger.failure_counts() == {"adult": 2}  # the lost entry passed its (unrecorded) gate
    assert ledger.spent("alice", "adult") == PureDP(Fraction(3, 10))
    assert ledger.verify() == []


def test_a_version_1_sqlite_store_is_upgraded_and_keeps_its_record(tmp_path: Path) -> None:
    path = str(tmp_path / "v1.sqlite")
    con = sqlite3.connect(path)
    write_v1(con.execute)
    con.commit()
    con.close()
    ledger = SqliteLedger(path)
    check_upgraded(ledger)
    ledger.close()
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT value FROM dalenius_meta").fetchall() == [("3",)]
        # The upgrade copies the charges into a new table: its indexes and triggers are the
        # current ones (not left behind on the old table, dropped with it).
        assert sqlite_indexes(con) == CHARGE_INDEXES
        assert sqlite_triggers(con) == COUNT_TRIGGERS
    SqliteLedger(path).close()  # opening an upgraded store again changes nothing


def test_a_version_2_store_gets_its_running_counts(tmp_path: Path) -> None:
    """Version 2 kept no counts: the upgrade counts every charge that holds budget."""
    path = str(tmp_path / "v2.sqlite")
    ledger = SqliteLedger(path)
    ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
    for key in ("a", "b", "c"):
        outcome = ledger.reserve(
            ChargeRequest("alice", "adult", PureDP(Fraction(1, 10)), key, "S", "h")
        )
        assert isinstance(outcome, Reservation)
        if key == "c":
            ledger.release(outcome, "refused")  # returned: holds nothing
    ledger.close()
    with sqlite3.connect(path) as con:
        con.execute("DROP TABLE dalenius_spent")
        con.execute("UPDATE dalenius_meta SET value = '2' WHERE key = 'schema_version'")
    upgraded = SqliteLedger(path)
    assert upgraded.spent("alice", "adult") == PureDP(Fraction(1, 5))
    assert upgraded.verify() == []
    upgraded.close()
    with sqlite3.connect(path) as con:
        rows = con.execute("SELECT principal, charged, releases FROM dalenius_spent ORDER BY 1")
        assert rows.fetchall() == [("", "pure:1/10", 2), ("alice", "pure:1/10", 2)]
        assert con.execute("SELECT value FROM dalenius_meta").fetchall() == [("3",)]
        assert sqlite_triggers(con) == COUNT_TRIGGERS


def sqlite_triggers(con: sqlite3.Connection) -> set[tuple[str, str]]:
    rows = con.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")
    return {(str(name), str(table)) for name, table in rows}


def sqlite_indexes(con: sqlite3.Connection) -> set[str]:
    rows = con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'dalenius_charges' "
        "AND name NOT LIKE 'sqlite_autoindex%'"
    )
    return {str(name) for (name,) in rows}


def test_a_version_2_store_of_an_earlier_release_gets_the_wider_indexes(tmp_path: Path) -> None:
    """A store written before the spent and answers indexes trades its narrower ones for them."""
    path = str(tmp_path / "v2.sqlite")
    SqliteLedger(path).close()
    with sqlite3.connect(path) as con:
        con.execute("DROP INDEX dalenius_charges_spent")
        con.execute("DROP INDEX dalenius_charges_answers")
        con.execute(
            "CREATE INDEX dalenius_charges_by_owner ON dalenius_charges "
            "(dataset, principal, created_at)"
        )
        con.execute(
            "CREATE INDEX dalenius_charges_by_request ON dalenius_charges "
            "(principal, dataset, request_key)"
        )
        assert {"dalenius_charges_by_owner", "dalenius_charges_by_request"} == set(RETIRED_INDEXES)
    SqliteLedger(path).close()
    with sqlite3.connect(path) as con:
        assert sqlite_indexes(con) == CHARGE_INDEXES


@pytest.mark.postgres
def test_a_version_1_postgres_store_is_upgraded_and_keeps_its_record(
    pg_url: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
        con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))

        def run(statement: str, params: tuple[object, ...] = ()) -> object:
            return con.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]

        write_v1(run, postgres=True)
    ledger = PostgresLedger(pg_url, schema=pg_schema)
    check_upgraded(ledger)
    ledger.close()
    PostgresLedger(pg_url, schema=pg_schema).close()
    with psycopg.connect(pg_url) as con:
        rows = con.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s "
            "AND tablename = 'dalenius_charges' AND indexname <> 'dalenius_charges_pkey'",
            (pg_schema,),
        ).fetchall()
        triggers = con.execute(
            "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND NOT t.tgisinternal",
            (pg_schema,),
        ).fetchall()
    assert {str(name) for (name,) in rows} == CHARGE_INDEXES
    assert {(str(name), str(table)) for name, table in triggers} == COUNT_TRIGGERS
