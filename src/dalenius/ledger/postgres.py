"""The PostgreSQL ledger: one budget record shared by several gateway processes or machines.

Every operation is one transaction. A reserve locks the dataset's row and the analyst's budget row
with ``SELECT … FOR UPDATE`` (always in that order, so two transactions never wait on each other in
a cycle) before it reads what was spent, so concurrent reserves on a dataset — from any process —
are checked one after another and can never both spend the same remaining budget. Commits use
``synchronous_commit = on``: the server has flushed the charge to its write-ahead log before the
data gate's reserve returns. :meth:`~dalenius.ledger.base.Ledger.commit`, which records the answer
of a charge already flushed, turns it off for its own transaction: the next synchronous commit
flushes the log past it. Connections come from
:mod:`dalenius.ledger.storage`. Needs ``pip install 'dalenius[postgres]'``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dalenius.core.errors import ConfigurationError
from dalenius.ledger.sqlstore import SqlLedger
from dalenius.ledger.storage import PostgresDatabase, Tx

if TYPE_CHECKING:
    import psycopg

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_SCHEMA_LOCK = 0x64616C656E697573  # "dalenius" as a 64-bit advisory-lock key


def _redact(url: str) -> str:
    """The URL without its password, for error messages."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)


class PostgresLedger(SqlLedger):
    """A ledger in a PostgreSQL database (its tables are created if missing).

    Args:
        conninfo: a libpq URL or key=value string, e.g. ``postgresql://user@host:5432/db``.
        schema: a schema to hold the tables (created if missing); the connection's default
            ``search_path`` when ``None``.
        clock: the current time (timezone-aware); the system clock in UTC by default.
        connect_timeout: seconds to wait for the server.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str | None = None,
        clock: Callable[[], datetime] | None = None,
        connect_timeout: int = 10,
    ) -> None:
        self.url = _redact(conninfo)
        if schema is not None and not _IDENTIFIER.match(schema):
            raise ConfigurationError(
                f"Invalid schema name {schema!r} for the ledger.",
                fix="use letters, digits and underscores, starting with a letter (e.g. dalenius).",
            )
        self.schema = schema
        # One session: the ledger's lock serialises its use across threads. Reads see one
        # snapshot, so sums and caps agree.
        database = PostgresDatabase(
            conninfo,
            self._open_error,
            size=1,
            connect_timeout=connect_timeout,
            setup=self._use_schema,
            snapshot_reads=True,
        )
        super().__init__(database, clock=clock)

    def _open_error(self, error: BaseException) -> ConfigurationError:
        return ConfigurationError(
            f"Cannot connect to the PostgreSQL ledger at {self.url}: {error}".strip(),
            why="the ledger must be reachable before any request can be answered.",
            fix="check that the server is running and the URL (host, port, user, database).",
        )

    def _use_schema(self, connection: psycopg.Connection[Any]) -> None:
        """Create the ledger's schema if missing and make it the session's search path."""
        if self.schema is None:
            return
        from psycopg import sql

        name = sql.Identifier(self.schema)
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        connection.execute(sql.SQL("SET search_path TO {}").format(name))

    def _hold_counts(self, tx: Tx) -> None:
        # The counts' triggers write dalenius_spent: no writer moves a count while it is rebuilt.
        tx.run("LOCK TABLE dalenius_spent IN EXCLUSIVE MODE")

    def _prepare_schema(self, tx: Tx) -> None:
        # CREATE TABLE IF NOT EXISTS is not safe against itself in concurrent transactions.
        tx.run("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
