"""The storage layer's durability per transaction: a write may skip its sync, and only that one.

``transaction(write=True, synced=False)`` is how the ledger records a released answer without an
``fsync`` (the charge is on disk already); every other transaction keeps the database's setting.
These read the setting from inside each transaction, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.ledger.conftest import PG_URL, pg_connect

from dalenius.core.errors import ConfigurationError
from dalenius.ledger.storage import Database, PostgresDatabase, SqliteDatabase

SQLITE_FULL, SQLITE_NORMAL = 2, 1


def _sqlite_setting(db: Database, *, write: bool, synced: bool = True) -> int:
    with db.transaction(write=write, synced=synced) as tx:
        return int(tx.run("PRAGMA synchronous")[0][0])


def test_sqlite_relaxes_only_the_unsynced_write_and_restores_the_setting(tmp_path: Path) -> None:
    db = SqliteDatabase(str(tmp_path / "s.sqlite"), ConfigurationError, size=1)
    try:
        assert _sqlite_setting(db, write=True) == SQLITE_FULL
        assert _sqlite_setting(db, write=True, synced=False) == SQLITE_NORMAL
        assert _sqlite_setting(db, write=True) == SQLITE_FULL
        # A read commits nothing: it keeps the connection's setting.
        assert _sqlite_setting(db, write=False, synced=False) == SQLITE_FULL
        # An error inside the relaxed transaction rolls it back and still restores FULL.
        with pytest.raises(RuntimeError), db.transaction(write=True, synced=False) as tx:
            tx.run("CREATE TABLE t (x INTEGER)")
            raise RuntimeError("boom")
        assert _sqlite_setting(db, write=True) == SQLITE_FULL
        with db.transaction(write=False) as tx:
            assert tx.run("SELECT name FROM sqlite_master WHERE name = 't'") == []
    finally:
        db.close()


def test_sqlite_normal_database_stays_normal(tmp_path: Path) -> None:
    db = SqliteDatabase(
        str(tmp_path / "n.sqlite"), ConfigurationError, size=1, synchronous="NORMAL"
    )
    try:
        assert _sqlite_setting(db, write=True) == SQLITE_NORMAL
        assert _sqlite_setting(db, write=True, synced=False) == SQLITE_NORMAL
    finally:
        db.close()


def test_an_unsynced_commit_is_committed_and_seen_by_a_new_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    db = SqliteDatabase(path, ConfigurationError, size=1)
    try:
        with db.transaction(write=True) as tx:
            tx.run("CREATE TABLE t (x INTEGER)")
        with db.transaction(write=True, synced=False) as tx:
            tx.run("INSERT INTO t VALUES (7)")
    finally:
        db.close()
    again = SqliteDatabase(path, ConfigurationError, size=1)
    try:
        with again.transaction(write=False) as tx:
            assert tx.run("SELECT x FROM t") == [(7,)]
    finally:
        again.close()


@pytest.mark.postgres
def test_postgres_turns_off_synchronous_commit_for_that_transaction_only() -> None:
    pg_connect().close()  # fails with the command that starts the server, if it is down
    db = PostgresDatabase(PG_URL, ConfigurationError, size=1)

    def setting(*, write: bool, synced: bool = True) -> str:
        with db.transaction(write=write, synced=synced) as tx:
            return str(tx.run("SHOW synchronous_commit")[0][0])

    try:
        assert setting(write=True) == "on"
        assert setting(write=True, synced=False) == "off"
        assert setting(write=True) == "on"  # SET LOCAL ends with its transaction
        assert setting(write=False, synced=False) == "on"
        with pytest.raises(RuntimeError), db.transaction(write=True, synced=False):
            raise RuntimeError("boom")
        assert setting(write=True) == "on"
    finally:
        db.close()
