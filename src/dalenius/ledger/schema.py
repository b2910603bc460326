"""The ledger's tables, shared by the SQLite and PostgreSQL stores.

Losses are exact text (see :mod:`dalenius.ledger.codec`); times are ISO-8601 UTC text (see
:mod:`dalenius.ledger.storage`, which also holds each database's column types). Every table
is prefixed ``dalenius_`` so the ledger can live in a database shared with other applications. A
partial unique index makes an idempotency key name at most one charge that was not returned, so
even a store shared by several gateway processes cannot charge one retried request twice.

Version 2 added the data gate's states (``charged``, ``failed``), a dataset's ``fail_closed``
setting and a budget's ``exhausted_at``; :func:`migrations` upgrades a version-1 store in place.
"""

from __future__ import annotations

from dalenius.ledger.storage import DIALECTS, DialectName

SCHEMA_VERSION = "2"
"""Stored in ``dalenius_meta``; a store written by another version is refused, not guessed at."""

UPGRADABLE = ("1",)
"""Older versions :func:`migrations` upgrades."""

Dialect = DialectName


_STATUS_LIST = "('pending', 'charged', 'committed', 'failed', 'rolled_back', 'lost')"
"""Every status of a charge (see :mod:`dalenius.ledger.base`)."""

_V1_CHARGE_COLUMNS = (
    "id, principal, dataset, sql_text, plan_hash, request_key, idempotency_key, loss, charged, "
    "status, answer, created_at, finished_at, detail"
)


def migrations(dialect: Dialect, version: str) -> list[str]:
    """The statements that upgrade a store written at ``version`` to :data:`SCHEMA_VERSION`.

    Run after :func:`statements` (which creates nothing that exists) inside the same transaction.
    SQLite cannot change a ``CHECK`` constraint, so its charges table is copied into a new one.

    Example:
        >>> migrations("sqlite", SCHEMA_VERSION)
        []
    """
    if version == SCHEMA_VERSION:
        return []
    time = DIALECTS[dialect].time_type
    columns = [
        "ALTER TABLE dalenius_datasets ADD COLUMN fail_closed INTEGER NOT NULL DEFAULT 0",
        f"ALTER TABLE dalenius_budgets ADD COLUMN exhausted_at {time}",
    ]
    if dialect == "postgres":
        return [
            *columns,
            "ALTER TABLE dalenius_charges DROP CONSTRAINT IF EXISTS dalenius_charges_status_check",
            "ALTER TABLE dalenius_charges ADD CONSTRAINT dalenius_charges_status_check "
            f"CHECK (status IN {_STATUS_LIST})",
        ]
    create = next(s for s in statements(dialect) if "TABLE IF NOT EXISTS dalenius_charges" in s)
    return [
        *columns,
        "ALTER TABLE dalenius_charges RENAME TO dalenius_charges_v1",
        "DROP INDEX IF EXISTS dalenius_charges_by_owner",
        "DROP INDEX IF EXISTS dalenius_charges_by_request",
        "DROP INDEX IF EXISTS dalenius_charges_by_status",
        "DROP INDEX IF EXISTS dalenius_charges_idempotency",
        create,
        f"INSERT INTO dalenius_charges ({_V1_CHARGE_COLUMNS}) "
        f"SELECT {_V1_CHARGE_COLUMNS} FROM dalenius_charges_v1",
        "DROP TABLE dalenius_charges_v1",
        *(s for s in statements(dialect) if "INDEX IF NOT EXISTS dalenius_charges" in s),
    ]


def statements(dialect: Dialect) -> list[str]:
    """The DDL that creates the ledger's tables and indexes if they do not exist.

    Long because it is the schema itself: one literal per table and index, read top to bottom
    as the ledger's data model (docs/ledger.md); splitting it would scatter that model.

    Example:
        >>> len(statements("sqlite")) == len(statements("postgres"))
        True
    """
    time = DIALECTS[dialect].time_type
    return [
        """CREATE TABLE IF NOT EXISTS dalenius_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS dalenius_datasets (
            name TEXT PRIMARY KEY,
            definition TEXT NOT NULL CHECK (definition IN ('pure', 'approx', 'zcdp')),
            total_cap TEXT,
            created_at {time} NOT NULL,
            fail_closed INTEGER NOT NULL DEFAULT 0
        )""",
        f"""CREATE TABLE IF NOT EXISTS dalenius_budgets (
            principal TEXT NOT NULL,
            dataset TEXT NOT NULL REFERENCES dalenius_datasets (name),
            cap TEXT NOT NULL,
            refresh_days INTEGER CHECK (refresh_days IS NULL OR refresh_days >= 1),
            anchor {time} NOT NULL,
            exhausted_at {time},
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
            status TEXT NOT NULL CHECK (status IN {_STATUS_LIST}),
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
            seq {DIALECTS[dialect].auto_key},
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
