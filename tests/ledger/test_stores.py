"""Store-specific behaviour: opening by URL, bad files, lost PostgreSQL sessions."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import psycopg
import pytest

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import PureDP
from dalenius.ledger import open_ledger, sqlite_path
from dalenius.ledger.memory import MemoryLedger
from dalenius.ledger.postgres import PostgresLedger
from dalenius.ledger.sqlite import SqliteLedger


def test_urls_name_the_right_store(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_ledger(None), MemoryLedger)
    assert isinstance(open_ledger("memory:"), MemoryLedger)
    relative = open_ledger("sqlite:///rel.sqlite")
    assert isinstance(relative, SqliteLedger) and relative.path == "rel.sqlite"
    relative.close()
    assert (tmp_path / "rel.sqlite").exists()
    absolute = tmp_path / "abs.sqlite"
    assert sqlite_path("sqlite:///data/ledger.sqlite") == "data/ledger.sqlite"
    assert sqlite_path(f"sqlite:///{absolute}") == str(absolute)  # four slashes: absolute
    plain = open_ledger(str(absolute))
    assert isinstance(plain, SqliteLedger)
    plain.close()
    for bad in ("mysql://host/db", "sqlite://", ""):
        with pytest.raises(ConfigurationError):
            open_ledger(bad)


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("these are not the budgets you are looking for\n" * 100)
    with pytest.raises(ConfigurationError, match="Cannot open the ledger"):
        SqliteLedger(bogus)
    with pytest.raises(ConfigurationError, match="Cannot open the ledger"):
        SqliteLedger(tmp_path / "no" / "such" / "folder" / "ledger.sqlite")


def test_sqlite_uses_wal_with_full_sync(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite")
    with ledger._transaction(write=False) as tx:
        assert tx.run("PRAGMA journal_mode") == [("wal",)]
        assert tx.run("PRAGMA synchronous") == [(2,)]  # 2 = FULL
    ledger.close()


@pytest.mark.postgres
def test_postgres_url_and_lost_session(pg_url: str, pg_schema: str) -> None:
    ledger = PostgresLedger(pg_url, schema=pg_schema)
    ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
    by_url = open_ledger(f"{pg_url}?options=-csearch_path%3D{pg_schema}")
    assert by_url.get_budget("alice", "adult") == PureDP(Fraction(1))
    by_url.close()

    with ledger._transaction(write=False) as tx:
        [(pid,)] = tx.run("SELECT pg_backend_pid()")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(psycopg.OperationalError):
        ledger.get_budget("alice", "adult")
    # The next call opens a new session; nothing was lost.
    assert ledger.get_budget("alice", "adult") == PureDP(Fraction(1))
    ledger.close()


@pytest.mark.postgres
def test_postgres_unreachable_names_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="Cannot connect") as caught:
        PostgresLedger("postgresql://nobody:secret@127.0.0.1:1/none", connect_timeout=2)
    assert "secret" not in str(caught.value)
    assert "***" in str(caught.value)
