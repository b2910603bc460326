"""The ledger's tables, shared by the SQLite and PostgreSQL stores.

Losses are exact text (see :mod:`dalenius.ledger.codec`); times are ISO-8601 UTC text. Every table
is prefixed ``dalenius_`` so the ledger can live in a database shared with other applications. A
partial unique index makes an idempotency key name at most one charge that is not rolled back, so
even a store shared by several gateway processes cannot charge one retried request twice.
"""

from __future__ import annotations

from typing import Literal

SCHEMA_VERSION = "1"
"""Stored in ``dalenius_meta``; a store written by another version is refused, not guessed at."""

Dialect = Literal["sqlite", "postgres"]

# PostgreSQL compares text by the database's collation; "C" makes ISO timestamps compare bytewise,
# as SQLite always does.
_TIME: dict[Dialect, str] = {"sqlite": "TEXT", "postgres": 'TEXT COLLATE "C"'}

_AUTO_KEY: dict[Dialect, str] = {
    "sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "postgres": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
}


def statements(dialect: Dialect) -> list[str]:
    """The DDL that creates the ledger's tables and indexes if they do not exist.

    Example:
        >>> len(statements("sqlite")) == len(statements("postgres"))
        True
    """
    time = _TIME[dialect]
    return [
        """CREATE TABLE IF NOT EXISTS dalenius_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS dalenius_datasets (
            name TEXT PRIMARY KEY,
            definition TEXT NOT NULL CHECK (definition IN ('pure', 'approx', 'zcdp')),
            total_cap TEXT,
            created_at {time} NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS dalenius_budgets (
            principal TEXT NOT NULL,
            dataset TEXT NOT NULL REFERENCES dalenius_datasets (name),
            cap TEXT NOT NULL,
            refresh_days INTEGER CHECK (refresh_days IS NULL OR refresh_days >= 1),
            anchor {time} NOT NULL,
            PRIMARY KEY (principal, dataset)
        )""",
        f"""CREATE TABLE IF NOT EXISTS dalenius_charges (
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
            created_at {time} NOT NULL,
            finished_at {time},
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
        # A shared answer (another analyst's release, served again): charged to its analyst's
        # budget but not again to the dataset's total cap. Added without a version change: an
        # older reader counts such entries in the total too, which only over-counts.
        """CREATE TABLE IF NOT EXISTS dalenius_shared (
            entry_id TEXT PRIMARY KEY REFERENCES dalenius_charges (id),
            source_id TEXT NOT NULL REFERENCES dalenius_charges (id)
        )""",
        f"""CREATE TABLE IF NOT EXISTS dalenius_audit (
            seq {_AUTO_KEY[dialect]},
            at {time} NOT NULL,
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
