"""Connections to the database of the gateway's own records, over SQLite or PostgreSQL.

The gateway keeps analysts, token hashes, grants, registered datasets and its request log in the
same kind of database as the ledger (by default the very same one), so several gateway processes
pointed at one PostgreSQL database — or one SQLite file — share them. This module hides the two
drivers behind one small interface: run ``?``-placeholder statements inside a transaction, and say
whether an error was a uniqueness conflict.
"""

from __future__ import annotations

import abc
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from dalenius.core.errors import ConfigurationError, InternalError, MissingExtraError
from dalenius.ledger import sqlite_path
from dalenius.ledger.writers import writer_lock

if TYPE_CHECKING:
    import psycopg

Row = tuple[Any, ...]


class Tx(abc.ABC):
    """Statements run inside one open transaction."""

    @abc.abstractmethod
    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Execute one statement with ``?`` placeholders and return its rows."""


class Backend(abc.ABC):
    """A small pool of connections to the gateway's database, shared by a process's threads.

    Each transaction borrows a connection and returns it, so requests read in parallel (SQLite in
    WAL mode lets readers proceed while one writer writes) and a writer waiting for the database's
    write lock delays only itself. At most ``size`` connections are open.
    """

    dialect: str
    auto_key: str
    """The column type of an auto-incrementing integer primary key."""

    def __init__(self, size: int) -> None:
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    @abc.abstractmethod
    def _connect(self) -> Any:
        """Open one connection, set up for the gateway."""

    @abc.abstractmethod
    def _run_transaction(self, connection: Any, *, write: bool) -> AbstractContextManager[Tx]:
        """A transaction on ``connection``; committed on normal exit, rolled back on error."""

    def _usable(self, connection: Any) -> bool:
        """Whether a pooled connection may be used again."""
        return True

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Tx]:
        """A transaction on a borrowed connection; committed on normal exit."""
        self._slots.acquire()
        try:
            connection = self._borrow()
            try:
                with self._run_transaction(connection, write=write) as tx:
                    yield tx
            finally:
                self._idle.put(connection)
        finally:
            self._slots.release()

    def _borrow(self) -> Any:
        if self._closed:
            raise InternalError("The gateway's database was closed.")
        while True:
            try:
                connection = self._idle.get_nowait()
            except queue.Empty:
                connection = self._connect()
                with self._lock:
                    self._all.append(connection)
                return connection
            if self._usable(connection):
                return connection
            with self._lock:
                self._all.remove(connection)
            connection.close()

    @abc.abstractmethod
    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a uniqueness violation (another writer got there first)."""

    def close(self) -> None:
        """Close every connection of the pool."""
        with self._lock:
            self._closed = True
            connections, self._all = self._all, []
        for connection in connections:
            connection.close()


class _SqliteTx(Tx):
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return self._connection.execute(sql, tuple(params)).fetchall()


class SqliteBackend(Backend):
    """A SQLite file in write-ahead-log mode, safe across threads and processes.

    ``:memory:`` gives a private in-memory database, which cannot be shared between connections,
    so the pool then holds exactly one.
    """

    dialect = "sqlite"
    auto_key = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path: str, *, busy_timeout: float = 60.0, size: int = 8) -> None:
        super().__init__(1 if path == ":memory:" else size)
        self.path = path
        self._busy_timeout = busy_timeout
        self._idle.put(self._connect())
        self._all.extend(self._idle.queue)

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,  # borrowed by one thread at a time from the pool
            )
            connection.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            if self.path != ":memory:":
                self._wal(connection, self._busy_timeout)
            # The gateway's records are rewritable by a curator; losing the last instant of the
            # request log in a power cut is acceptable, a charge never is (that is the ledger's,
            # which syncs every commit on its own connection).
            connection.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as error:
            raise ConfigurationError(
                f"Cannot open the gateway's database {self.path!r}: {error}.",
                fix="check the path and that its folder exists and is writable.",
            ) from None
        return connection

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
    def _run_transaction(self, connection: Any, *, write: bool) -> Iterator[Tx]:
        # Writers take SQLite's write lock before reading (BEGIN IMMEDIATE), after the process's
        # own lock on the file, so that writers of this process never sleep in SQLite's busy
        # handler waiting for each other.
        with writer_lock(self.path) if write else nullcontext():
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
    """A PostgreSQL database; a broken connection is dropped from the pool and replaced."""

    dialect = "postgres"
    auto_key = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

    def __init__(self, url: str, *, connect_timeout: int = 10, size: int = 4) -> None:
        super().__init__(size)
        try:
            import psycopg
        except ImportError:
            raise MissingExtraError("psycopg", "postgres", "A PostgreSQL gateway store") from None
        self._psycopg = psycopg
        self._url = url
        self._timeout = connect_timeout
        self._idle.put(self._connect())
        self._all.extend(self._idle.queue)

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return self._psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout)
        except self._psycopg.Error as error:
            raise ConfigurationError(
                f"Cannot connect to the gateway's PostgreSQL database: {error}".strip(),
                fix="check that the server is running and the URL (host, port, user, database).",
            ) from None

    def _usable(self, connection: Any) -> bool:
        # The server restarted or the network dropped: nothing half-done is left (the server
        # rolled the transaction back), so the connection is simply replaced.
        return not connection.broken

    @contextmanager
    def _run_transaction(self, connection: Any, *, write: bool) -> Iterator[Tx]:
        with connection.transaction(), connection.cursor() as cursor:
            yield _PostgresTx(cursor)

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a uniqueness violation."""
        return isinstance(error, self._psycopg.errors.UniqueViolation)


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
