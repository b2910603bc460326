"""The PostgreSQL ledger: one budget record shared by several gateway processes or machines.

Every operation is one transaction. A reserve locks the dataset's row and the analyst's budget row
with ``SELECT … FOR UPDATE`` (always in that order, so two transactions never wait on each other in
a cycle) before it reads what was spent, so concurrent reserves on a dataset — from any process —
are checked one after another and can never both spend the same remaining budget. Commits use
``synchronous_commit = on``: the server has flushed the charge to its write-ahead log before
:meth:`~dalenius.ledger.base.Ledger.commit` returns. Needs ``pip install 'dalenius[postgres]'``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dalenius.core.errors import ConfigurationError, InternalError, MissingExtraError
from dalenius.ledger.sqlstore import Row, Runner, SqlLedger

if TYPE_CHECKING:
    import psycopg

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_SCHEMA_LOCK = 0x64616C656E697573  # "dalenius" as a 64-bit advisory-lock key


def _redact(url: str) -> str:
    """The URL without its password, for error messages."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)


class _Runner:
    """Runs ``?``-placeholder statements through a psycopg cursor."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def run(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Execute one statement and return its rows (none for statements without a result)."""
        # The ledger's statements contain no literal '?' or '%', so this rewrite is exact.
        self._cursor.execute(sql.replace("?", "%s"), tuple(params))
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()


class PostgresLedger(SqlLedger):
    """A ledger in a PostgreSQL database (its tables are created if missing).

    Args:
        conninfo: a libpq URL or key=value string, e.g. ``postgresql://user@host:5432/db``.
        schema: a schema to hold the tables (created if missing); the connection's default
            ``search_path`` when ``None``.
        clock: the current time (timezone-aware); the system clock in UTC by default.
        connect_timeout: seconds to wait for the server.
    """

    dialect = "postgres"
    for_update = " FOR UPDATE"

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str | None = None,
        clock: Callable[[], datetime] | None = None,
        connect_timeout: int = 10,
    ) -> None:
        try:
            import psycopg
            import psycopg.errors
        except ImportError:
            raise MissingExtraError("psycopg", "postgres", "A PostgreSQL ledger") from None
        super().__init__(clock=clock)
        self._errors = psycopg.errors
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self.url = _redact(conninfo)
        if schema is not None and not _IDENTIFIER.match(schema):
            raise ConfigurationError(
                f"Invalid schema name {schema!r} for the ledger.",
                fix="use letters, digits and underscores, starting with a letter (e.g. dalenius).",
            )
        self.schema = schema
        self._connection: psycopg.Connection[Any] | None = self._connect()
        self._init_schema()

    def _connect(self) -> psycopg.Connection[Any]:
        """A new session, set up for the ledger (durable commits, the ledger's schema)."""
        import psycopg  # already imported by __init__; bound here for the type checker
        from psycopg import sql

        try:
            connection = psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=self._connect_timeout
            )
        except psycopg.Error as error:
            raise ConfigurationError(
                f"Cannot connect to the PostgreSQL ledger at {self.url}: {error}".strip(),
                why="the ledger must be reachable before any request can be answered.",
                fix="check that the server is running and the URL (host, port, user, database).",
            ) from None
        # Durability must not depend on the server's default for this setting.
        connection.execute("SET synchronous_commit TO on")
        if self.schema is not None:
            name = sql.Identifier(self.schema)
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
            connection.execute(sql.SQL("SET search_path TO {}").format(name))
        return connection

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Runner]:
        with self._lock:
            connection = self._connection
            if connection is None:
                raise InternalError("This ledger was closed.")
            if connection.broken:
                # The server restarted or the network dropped: nothing was half-done on our side
                # (a broken transaction is rolled back by the server), so start a new session.
                connection = self._connection = self._connect()
            with connection.transaction(), connection.cursor() as cursor:
                if not write:
                    # One snapshot for every statement of a read, so sums and caps agree.
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield _Runner(cursor)

    def _prepare_schema(self, tx: Runner) -> None:
        # CREATE TABLE IF NOT EXISTS is not safe against itself in concurrent transactions.
        tx.run("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))

    def _is_conflict(self, error: BaseException) -> bool:
        return isinstance(
            error,
            self._errors.UniqueViolation
            | self._errors.SerializationFailure
            | self._errors.DeadlockDetected,
        )

    def close(self) -> None:
        """Close the connection; later calls raise :class:`~dalenius.core.errors.InternalError`."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
