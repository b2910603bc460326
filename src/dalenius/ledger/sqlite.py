"""The SQLite ledger: the default store, one file, safe across threads and processes.

Durability and atomicity come from SQLite itself: write-ahead logging (``journal_mode=WAL``) with
``synchronous=FULL`` syncs the log on every commit that holds budget, so the data gate's charge
returns only once it survives a power cut (:meth:`~dalenius.ledger.base.Ledger.commit`, which only
records the answer of a charge already on disk, is written with ``NORMAL``: it survives a crash of
the process and is synced by the next synced commit); every write
runs in ``BEGIN IMMEDIATE``, which takes the database's single write lock before reading the
budget, so two reserves (threads or processes) never both see the same remaining budget. Waiting
writers retry for ``busy_timeout`` seconds. Connections, transactions and retries come from
:mod:`dalenius.ledger.storage`, shared with the gateway's records.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime

from dalenius.core.errors import ConfigurationError
from dalenius.ledger.sqlstore import SqlLedger
from dalenius.ledger.storage import SqliteDatabase, Tx


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

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 60.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        # One connection: the ledger's lock serialises its use across threads.
        database = SqliteDatabase(
            self.path,
            self._open_error,
            busy_timeout=busy_timeout,
            size=1,
            synchronous="FULL",
            foreign_keys=True,
        )
        self._sqlite = database
        super().__init__(database, clock=clock)

    def trace(self, callback: Callable[[str], None] | None) -> None:
        """Call ``callback`` with every statement the ledger runs (tests count them per query)."""
        self._sqlite.trace(callback)

    def _open_error(self, error: BaseException) -> ConfigurationError:
        return ConfigurationError(
            f"Cannot open the ledger at {self.path!r}: {error}.",
            why="the file must be a SQLite database written by Dalenius, in a writable folder.",
            fix="check the path (and that its folder exists), or point --ledger at a new file.",
        )

    def _integrity_problems(self, tx: Tx) -> list[str]:
        rows = tx.run("PRAGMA integrity_check")
        return [f"SQLite integrity check: {row[0]}" for row in rows if row[0] != "ok"]
