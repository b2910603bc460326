"""One database connection for the gateway's own records, over SQLite or PostgreSQL.

The gateway keeps analysts, token hashes, grants, registered datasets and its request log in the
same kind of database as the ledger (by default the very same one), so several gateway processes
pointed at one PostgreSQL database — or one SQLite file — share them. This module hides the two
drivers behind one small interface: run ``?``-placeholder statements inside a transaction, and say
whether an error was a uniqueness conflict.
"""

from __future__ import annotations

import abc
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dalenius.core.errors import ConfigurationError, InternalError, MissingExtraError
from dalenius.ledger import sqlite_path

if TYPE_CHECKING:
    import psycopg

Row = tuple[Any, ...]


class Tx(abc.ABC):
    """Statements run inside one open transaction."""

    @abc.abstractmethod
    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Execute one statement with ``?`` placeholders and return its rows."""


class Backend(abc.ABC):
    """A connection to the gateway's database, shared by the threads of one process."""

    dialect: str
    auto_key: str
    """The column type of an auto-incrementing integer primary key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @abc.abstractmethod
    def transaction(self, *, write: bool) -> Any:
        """A context manager yielding a :class:`Tx`; committed on normal exit."""

    @abc.abstractmethod
    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a uniqueness violation (another writer got there first)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection."""


class _SqliteTx(Tx):
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return self._connection.execute(sql, tuple(params)).fetchall()


class SqliteBackend(Backend):
    """A SQLite file (or ``:memory:``) in write-ahead-log mode, safe across processes."""

    dialect = "sqlite"
    auto_key = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path: str, *, busy_timeout: float = 60.0) -> None:
        super().__init__()
        self.path = path
        try:
            self._connection: sqlite3.Connection | None = sqlite3.connect(
                path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            if path != ":memory:":
                self._wal(self._connection, busy_timeout)
            # The gateway's records are rewritable by a curator; losing the last instant of the
            # request log in a power cut is acceptable, a charge never is (that is the ledger's,
            # which syncs every commit on its own connection).
            self._connection.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as error:
            raise ConfigurationError(
                f"Cannot open the gateway's database {path!r}: {error}.",
                fix="check the path and that its folder exists and is writable.",
            ) from None

    @staticmethod
    def _wal(connection: sqlite3.Connection, timeout: float) -> None:
        # Entering WAL needs a moment of exclusive access, which a process opening the same new
        # file may hold: wait and try again within the busy timeout.
        deadline = time.monotonic() + timeout
        while True:
            try:
                connection.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Tx]:
        """A transaction; writers take SQLite's write lock before reading (``BEGIN IMMEDIATE``)."""
        with self._lock:
            connection = self._connection
            if connection is None:
                raise InternalError("The gateway's database was closed.")
            connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield _SqliteTx(connection)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a uniqueness violation."""
        return isinstance(error, sqlite3.IntegrityError)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


class _PostgresTx(Tx):
    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        # The gateway's statements contain no literal '?' or '%', so this rewrite is exact.
        self._cursor.execute(sql.replace("?", "%s"), tuple(params))
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()


class PostgresBackend(Backend):
    """A PostgreSQL database; a broken connection is replaced on the next transaction."""

    dialect = "postgres"
    auto_key = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        super().__init__()
        try:
            import psycopg
        except ImportError:
            raise MissingExtraError("psycopg", "postgres", "A PostgreSQL gateway store") from None
        self._psycopg = psycopg
        self._url = url
        self._timeout = connect_timeout
        self._connection: psycopg.Connection[Any] | None = self._connect()

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return self._psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout)
        except self._psycopg.Error as error:
            raise ConfigurationError(
                f"Cannot connect to the gateway's PostgreSQL database: {error}".strip(),
                fix="check that the server is running and the URL (host, port, user, database).",
            ) from None

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Tx]:
        """A transaction on the shared connection (reconnecting if the server dropped it)."""
        with self._lock:
            connection = self._connection
            if connection is None:
                raise InternalError("The gateway's database was closed.")
            if connection.broken:
                connection = self._connection = self._connect()
            with connection.transaction(), connection.cursor() as cursor:
                yield _PostgresTx(cursor)

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a uniqueness violation."""
        return isinstance(error, self._psycopg.errors.UniqueViolation)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def open_backend(url: str) -> Backend:
    """Open the database a store URL names (the same URLs as the ledger's).

    Example:
        >>> backend = open_backend("memory:")
        >>> with backend.transaction(write=False) as tx:
        ...     tx.run("SELECT 1 + 1")
        [(2,)]
        >>> backend.close()
    """
    text = url.strip()
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresBackend(text)
    path = sqlite_path(text)
    return SqliteBackend(path if path is not None else ":memory:")
