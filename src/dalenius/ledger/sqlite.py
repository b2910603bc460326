"""The SQLite ledger: the default store, one file, safe across threads and processes.

Durability and atomicity come from SQLite itself: write-ahead logging (``journal_mode=WAL``) with
``synchronous=FULL`` syncs the log on every commit, so :meth:`~dalenius.ledger.base.Ledger.commit`
returns only once the charge survives a power cut; every write runs in ``BEGIN IMMEDIATE``, which
takes the database's single write lock before reading the budget, so two reserves (threads or
processes) never both see the same remaining budget. Waiting writers retry for ``busy_timeout``
seconds. Within one process, a lock serialises use of the shared connection.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import datetime

from dalenius.core.errors import ConfigurationError, InternalError
from dalenius.ledger.sqlstore import Row, Runner, SqlLedger
from dalenius.ledger.writers import writer_lock


class _Runner:
    """Runs statements on a connection inside the transaction its ledger opened."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Execute one statement and return its rows."""
        return self._connection.execute(sql, tuple(params)).fetchall()


class SqliteLedger(SqlLedger):
    """A ledger in a SQLite database file (created, with its tables, if missing).

    Args:
        path: the database file.
        busy_timeout: seconds a writer waits for another writer before giving up.
        clock: the current time (timezone-aware); the system clock in UTC by default.

    Example:
        >>> import tempfile, pathlib
        >>> from fractions import Fraction
        >>> from dalenius.core.loss import PureDP
        >>> folder = tempfile.TemporaryDirectory()
        >>> path = pathlib.Path(folder.name) / "ledger.sqlite"
        >>> with SqliteLedger(path) as ledger:
        ...     ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
        >>> SqliteLedger(path).get_budget("alice", "adult")  # survives a restart
        PureDP(epsilon=Fraction(1, 1))
        >>> folder.cleanup()
    """

    dialect = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 60.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(clock=clock)
        self.path = os.fspath(path)
        self._busy_timeout = busy_timeout
        self._connection: sqlite3.Connection | None = self._connect()
        try:
            self._init_schema()
        except sqlite3.DatabaseError as error:
            self.close()
            raise self._open_error(error) from error

    def _open_error(self, error: sqlite3.Error) -> ConfigurationError:
        return ConfigurationError(
            f"Cannot open the ledger at {self.path!r}: {error}.",
            why="the file must be a SQLite database written by Dalenius, in a writable folder.",
            fix="check the path (and that its folder exists), or point --ledger at a new file.",
        )

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,  # transactions are begun and ended explicitly below
                check_same_thread=False,  # the ledger's lock serialises use across threads
            )
        except sqlite3.Error as error:
            raise self._open_error(error) from error
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            if self.path != ":memory:":
                self._use_wal(connection)
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as error:
            connection.close()
            raise self._open_error(error) from error
        return connection

    def _use_wal(self, connection: sqlite3.Connection) -> None:
        # Switching to WAL needs a moment of exclusive access; a process opening the same new
        # file at the same time may hold it, so wait and try again within the busy timeout.
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
                continue
            if str(mode).lower() != "wal":
                raise sqlite3.DatabaseError(f"the file system does not support WAL (mode {mode})")
            return

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Runner]:
        with self._lock:
            connection = self._connection
            if connection is None:
                raise InternalError("This ledger was closed.")
            with writer_lock(self.path) if write else nullcontext():
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield _Runner(connection)
                    connection.execute("COMMIT")
                except BaseException:
                    # Also after a failed COMMIT, so the connection is usable for the next call.
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise

    def _integrity_problems(self, tx: Runner) -> list[str]:
        rows = tx.run("PRAGMA integrity_check")
        return [f"SQLite integrity check: {row[0]}" for row in rows if row[0] != "ok"]

    def close(self) -> None:
        """Close the connection; later calls raise :class:`~dalenius.core.errors.InternalError`."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
