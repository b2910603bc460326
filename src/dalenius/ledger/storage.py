"""One storage layer for the ledger and the gateway's records, over SQLite and PostgreSQL.

Everything that differs between the two databases, or that the ledger and the gateway's state
store would otherwise each write for themselves, is here and only here:

* **connections**: a small pool per database (:class:`Database`); a broken PostgreSQL session is
  dropped and replaced, an in-memory SQLite database is one connection;
* **transactions**: ``with db.transaction(write=...) as tx: tx.run(sql, params)``, committed on
  normal exit and rolled back on any exception; SQLite writers take the file's write lock first
  (``BEGIN IMMEDIATE``, after the process's own lock on the file, :func:`writer_lock`);
* **retries**: SQLite's busy handler waits ``busy_timeout`` for another process's writer and the
  switch to write-ahead logging is retried within it; :meth:`Database.retrying` re-runs an
  operation that lost a race on PostgreSQL (a uniqueness violation, a serialisation failure, a
  deadlock);
* **dialect facts** (:class:`Dialect`): statements use ``?`` placeholders (rewritten to ``%s``
  for psycopg), the time column type, the auto-incrementing key, the row-lock suffix; both
  databases accept the same ``INSERT … ON CONFLICT … DO UPDATE`` upsert;
* **time encoding**: ISO-8601 text in UTC with microseconds (:func:`encode_time`), so comparing
  the text compares the times.

Durability is the caller's choice per database, and per transaction: the ledger syncs every
commit that holds budget (``synchronous=FULL``; ``synchronous_commit = on``) and lets the record of
a released answer ride on the next synced commit (``transaction(write=True, synced=False)``); the
gateway's rewritable records accept ``NORMAL``.

Why hand-written and not SQLAlchemy Core: measured on this project's statements (a primary-key
``SELECT`` on a SQLite file in WAL mode), SQLAlchemy 2.1 Core took 17.6 µs per statement against
4.6 µs for the ``sqlite3`` driver (16.7 µs with ``exec_driver_sql``): about 0.13 ms more for the
ten statements of a query, 13 % of the 1 ms fixed cost per query Dalenius aims at, plus 0.19 s
of import time for every CLI call. What the two stores need from it — a pool of a few
connections, two placeholder styles, ``FOR UPDATE``, one upsert syntax both databases share — is
the 300 lines below.
"""

from __future__ import annotations

import abc
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from dalenius.core.errors import ConfigurationError, InternalError, MissingExtraError

if TYPE_CHECKING:
    import psycopg

Row = tuple[Any, ...]
T = TypeVar("T")

RETRIES: Final = 5
"""How often :meth:`Database.retrying` runs an operation that keeps losing races."""

DialectName = Literal["sqlite", "postgres"]


@dataclass(frozen=True)
class Dialect:
    """What differs in the SQL the stores write for one database.

    Attributes:
        name: ``"sqlite"`` or ``"postgres"``.
        time_type: the column type of a time stored as ISO text; PostgreSQL's ``"C"`` collation
            makes it compare bytewise, as SQLite always does.
        auto_key: the column type of an auto-incrementing integer primary key.
        for_update: the suffix that locks the rows a ``SELECT`` reads until the transaction ends
            (empty for SQLite, whose ``BEGIN IMMEDIATE`` already holds the whole database).
    """

    name: DialectName
    time_type: str
    auto_key: str
    for_update: str


SQLITE: Final = Dialect("sqlite", "TEXT", "INTEGER PRIMARY KEY AUTOINCREMENT", "")
POSTGRES: Final = Dialect(
    "postgres", 'TEXT COLLATE "C"', "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", " FOR UPDATE"
)
DIALECTS: Final = {d.name: d for d in (SQLITE, POSTGRES)}


def encode_time(moment: datetime) -> str:
    """ISO-8601 text in UTC with microseconds (sorts as the times do).

    Example:
        >>> encode_time(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC))
        '2024-01-02T03:04:05.000000+00:00'
    """
    if moment.tzinfo is None:
        raise InternalError("A stored time must be timezone-aware; the clock returned a naive one.")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def decode_time(text: str) -> datetime:
    """Read a time written by :func:`encode_time`."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InternalError(f"The store holds a malformed time {text!r}.") from None


def sqlite_path(url: str | None) -> str | None:
    """The SQLite file a store URL names, or ``None`` for in-memory and PostgreSQL stores.

    As in SQLAlchemy, ``sqlite:///rel.sqlite`` names a relative path and
    ``sqlite:////abs/path.sqlite`` an absolute one; a bare path is used as it is.

    Raises:
        ConfigurationError: for an unknown URL scheme or a ``sqlite://`` URL without a path.

    Example:
        >>> sqlite_path("sqlite:////var/lib/dalenius/ledger.sqlite")
        '/var/lib/dalenius/ledger.sqlite'
        >>> sqlite_path("memory:") is None
        True
    """
    if url is None:
        return None
    text = url.strip()
    if text in {"memory:", ":memory:"} or is_postgres_url(text):
        return None
    if text.startswith("sqlite://"):
        path = text.removeprefix("sqlite://").removeprefix("/")
        if not path:
            raise ConfigurationError(
                f"The ledger URL {url!r} names no file.",
                fix="use sqlite:///relative/path.sqlite or sqlite:////absolute/path.sqlite.",
            )
        return path
    if "://" in text or not text:
        raise ConfigurationError(
            f"Unknown ledger URL {url!r}.",
            fix="use memory:, a file path, sqlite:///path or postgresql://host/database.",
        )
    return text


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database."""
    return url.strip().startswith(("postgresql://", "postgres://"))


_locks: dict[str, threading.RLock] = {}
_guard = threading.Lock()


def writer_lock(path: str) -> AbstractContextManager[object]:
    """The process-wide write lock of the SQLite file at ``path`` (none for ``:memory:``).

    SQLite has one write lock per file. Writers of one process on different connections (the
    ledger's, the gateway's pool) would otherwise meet only inside SQLite, whose busy handler
    sleeps 1, 2, 5, 10 … ms between tries; queued on this mutex, the next one wakes at once, and
    the busy handler arbitrates only between processes. Reentrant.

    Example:
        >>> writer_lock("a.sqlite") is writer_lock("./a.sqlite")
        True
    """
    if path in ("", ":memory:") or path.startswith("file::memory:"):
        return nullcontext()
    key = os.path.realpath(path)
    with _guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock


class Tx(abc.ABC):
    """Statements run inside one open transaction."""

    @abc.abstractmethod
    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Execute one statement with ``?`` placeholders and return its rows (none for writes)."""


OpenError = Callable[[BaseException], ConfigurationError]
"""Builds the error a caller reports when its database cannot be opened or reached."""


class Database(abc.ABC):
    """A small pool of connections to one database, shared by a process's threads.

    Each transaction borrows a connection and returns it, so readers proceed in parallel (SQLite
    in WAL mode lets them read while one writer writes) and a writer waiting for the write lock
    delays only itself. At most ``size`` connections are open.
    """

    dialect: Dialect

    def __init__(self, size: int, opening: OpenError) -> None:
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False
        self._opening = opening

    def _open_first(self) -> None:
        """Open one connection now, so a wrong path or URL is reported at once."""
        self._idle.put(self._connect())
        self._all.extend(self._idle.queue)

    @abc.abstractmethod
    def _connect(self) -> Any:
        """Open one connection, set up for its owner."""

    @abc.abstractmethod
    def _run_transaction(
        self, connection: Any, *, write: bool, synced: bool
    ) -> AbstractContextManager[Tx]:
        """A transaction on ``connection``; committed on normal exit, rolled back on error."""

    def _usable(self, connection: Any) -> bool:
        """Whether a pooled connection may be used again."""
        return True

    @contextmanager
    def transaction(self, *, write: bool, synced: bool = True) -> Iterator[Tx]:
        """A transaction on a borrowed connection: committed on normal exit, else rolled back.

        ``write=False`` promises only reads (PostgreSQL may then read one snapshot).
        ``synced=False`` lets a write's commit return before its log is flushed to disk, where
        the database's durability setting would otherwise flush it: the commit survives a crash
        of the process, and a power cut may lose it only if no synced commit followed, because
        a synced commit flushes the one log, written in order, up to itself.
        """
        self._slots.acquire()
        try:
            connection = self._borrow()
            try:
                with self._run_transaction(connection, write=write, synced=synced) as tx:
                    yield tx
            finally:
                self._idle.put(connection)
        finally:
            self._slots.release()

    def _borrow(self) -> Any:
        if self._closed:
            raise InternalError("This database was closed.")
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

    def retryable(self, error: BaseException) -> bool:
        """Whether ``error`` means a concurrent writer won and the operation may run again."""
        return False

    def retrying(self, action: Callable[[], T]) -> T:
        """Run ``action`` (one whole transaction), again while it loses races (at most 5 times)."""
        for attempt in range(RETRIES):
            try:
                return action()
            except Exception as error:
                if attempt + 1 < RETRIES and self.retryable(error):
                    continue
                raise
        raise InternalError("unreachable: the retry loop always returns or raises")

    def close(self) -> None:
        """Close every connection of the pool; later transactions raise ``InternalError``."""
        with self._lock:
            self._closed = True
            connections, self._all = self._all, []
        for connection in connections:
            connection.close()


class _SqliteTx(Tx):
    __slots__ = ("_execute",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._execute = connection.execute

    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return self._execute(sql, params).fetchall()


class SqliteDatabase(Database):
    """A SQLite file in write-ahead-log mode, safe across threads and processes.

    ``:memory:`` gives a private in-memory database, which cannot be shared between connections,
    so the pool then holds exactly one.

    Args:
        path: the database file (created if missing).
        opening: builds the error reported when the file cannot be opened.
        busy_timeout: seconds a writer waits for another process's writer.
        size: connections in the pool.
        synchronous: ``"FULL"`` syncs the log on every commit (survives a power cut);
            ``"NORMAL"`` survives a crash of the process but may lose the last commits in a
            power cut.
        foreign_keys: enforce ``REFERENCES`` constraints.
    """

    dialect = SQLITE

    def __init__(
        self,
        path: str,
        opening: OpenError,
        *,
        busy_timeout: float = 60.0,
        size: int = 8,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        foreign_keys: bool = False,
    ) -> None:
        super().__init__(1 if path == ":memory:" else size, opening)
        self.path = path
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        self._foreign_keys = foreign_keys
        self._trace: Callable[[str], None] | None = None
        # Looked up once: resolving the path (a system call per folder) on every write
        # transaction was a measurable part of a query's fixed cost.
        self._writer = writer_lock(path)
        self._open_first()

    def trace(self, callback: Callable[[str], None] | None) -> None:
        """Call ``callback`` with the text of every statement run from now on (``None`` stops).

        For tests and diagnostics: counting statements and transactions per operation.
        """
        with self._lock:
            self._trace = callback
            for connection in self._all:
                connection.set_trace_callback(callback)

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,  # transactions are begun and ended explicitly
                check_same_thread=False,  # borrowed by one thread at a time from the pool
            )
        except sqlite3.Error as error:
            raise self._opening(error) from error
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            if self.path != ":memory:":
                self._use_wal(connection)
            connection.execute(f"PRAGMA synchronous = {self._synchronous}")
            if self._foreign_keys:
                connection.execute("PRAGMA foreign_keys = ON")
            connection.set_trace_callback(self._trace)
        except sqlite3.DatabaseError as error:
            connection.close()
            raise self._opening(error) from error
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
    def _run_transaction(self, connection: Any, *, write: bool, synced: bool) -> Iterator[Tx]:
        # Writers take SQLite's write lock before reading (BEGIN IMMEDIATE), so two writers never
        # both read the same state; the process's own lock on the file comes first.
        relaxed = write and not synced and self._synchronous == "FULL"
        with self._writer if write else nullcontext():
            if relaxed:
                # In WAL mode NORMAL writes the commit to the log without syncing it; the
                # setting is the connection's, so it is restored right after.
                connection.execute("PRAGMA synchronous = NORMAL")
            try:
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield _SqliteTx(connection)
                    connection.execute("COMMIT")
                except BaseException:
                    # Also after a failed COMMIT, so the connection is usable for the next call.
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
            finally:
                if relaxed:
                    connection.execute(f"PRAGMA synchronous = {self._synchronous}")

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a uniqueness (or other constraint) violation."""
        return isinstance(error, sqlite3.IntegrityError)


class _PostgresTx(Tx):
    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        # The stores' statements contain no literal '?' or '%', so this rewrite is exact.
        self._cursor.execute(sql.replace("?", "%s"), tuple(params))
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()


class PostgresDatabase(Database):
    """A PostgreSQL database; a broken connection is dropped from the pool and replaced.

    Every session runs with ``synchronous_commit = on``, whatever the server's default: a
    commit returns once the server has flushed it to its write-ahead log.

    Args:
        url: a libpq URL or key=value string.
        opening: builds the error reported when the server cannot be reached.
        size: connections in the pool.
        connect_timeout: seconds to wait for the server.
        setup: run on every new connection (autocommit), e.g. to choose a schema.
        snapshot_reads: read transactions see one snapshot (``REPEATABLE READ READ ONLY``), so
            several statements of one read agree with each other.
    """

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        opening: OpenError,
        *,
        size: int = 4,
        connect_timeout: int = 10,
        setup: Callable[[psycopg.Connection[Any]], None] | None = None,
        snapshot_reads: bool = False,
    ) -> None:
        try:
            import psycopg
            import psycopg.errors
        except ImportError:
            raise MissingExtraError("psycopg", "postgres", "A PostgreSQL store") from None
        super().__init__(size, opening)
        self._psycopg = psycopg
        self._url = url
        self._timeout = connect_timeout
        self._setup = setup
        self._snapshot_reads = snapshot_reads
        self._races = (
            psycopg.errors.UniqueViolation,
            psycopg.errors.SerializationFailure,
            psycopg.errors.DeadlockDetected,
        )
        self._open_first()

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            connection = self._psycopg.connect(
                self._url, autocommit=True, connect_timeout=self._timeout
            )
        except self._psycopg.Error as error:
            raise self._opening(error) from None
        # Durability must not depend on the server's default for this setting.
        connection.execute("SET synchronous_commit TO on")
        if self._setup is not None:
            self._setup(connection)
        return connection

    def _usable(self, connection: Any) -> bool:
        # The server restarted or the network dropped: nothing half-done is left (the server
        # rolled the transaction back), so the connection is simply replaced.
        return not connection.broken

    @contextmanager
    def _run_transaction(self, connection: Any, *, write: bool, synced: bool) -> Iterator[Tx]:
        with connection.transaction(), connection.cursor() as cursor:
            if self._snapshot_reads and not write:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if write and not synced:
                # For this transaction only: the commit returns before the server flushes its
                # write-ahead log (which it does within a few wal_writer_delay).
                cursor.execute("SET LOCAL synchronous_commit TO off")
            yield _PostgresTx(cursor)

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a uniqueness violation."""
        return isinstance(error, self._psycopg.errors.UniqueViolation)

    def retryable(self, error: BaseException) -> bool:
        """A uniqueness violation, a serialisation failure or a deadlock: run it again."""
        return isinstance(error, self._races)


def open_database(url: str, opening: OpenError, *, durable: bool) -> Database:
    """Open the database a store URL names (``memory:``, a SQLite path or URL, PostgreSQL).

    ``durable`` syncs every SQLite commit (``FULL``); otherwise ``NORMAL`` (see
    :class:`SqliteDatabase`). PostgreSQL commits are always flushed.

    Example:
        >>> db = open_database("memory:", ConfigurationError, durable=False)
        >>> with db.transaction(write=False) as tx:
        ...     tx.run("SELECT 1 + 1")
        [(2,)]
        >>> db.close()
    """
    text = url.strip()
    if is_postgres_url(text):
        return PostgresDatabase(text, opening)
    path = sqlite_path(text)
    return SqliteDatabase(
        path if path is not None else ":memory:",
        opening,
        synchronous="FULL" if durable else "NORMAL",
    )
