"""The ledger's tables, shared by the SQLite and PostgreSQL stores.

Losses are exact text (see :mod:`dalenius.ledger.codec`); times are ISO-8601 UTC text (see
:mod:`dalenius.ledger.storage`, which also holds each database's column types). Every table
is prefixed ``dalenius_`` so the ledger can live in a database shared with other applications. A
partial unique index makes an idempotency key name at most one charge that was not returned, so
even a store shared by several gateway processes cannot charge one retried request twice.

Version 2 added the data gate's states (``charged``, ``failed``), a dataset's ``fail_closed``
setting and a budget's ``exhausted_at``. Version 3 added ``dalenius_spent``, the running count of
the charges that hold budget, kept by the database's triggers (:func:`count_triggers`) for every
writer, including a process of an earlier release still running on the upgraded store.
:func:`migrations` upgrades a version-1 or version-2 store in place.
"""

from __future__ import annotations

from dalenius.ledger.base import CHARGED_STATUSES
from dalenius.ledger.storage import DIALECTS, DialectName

SCHEMA_VERSION = "3"
"""Stored in ``dalenius_meta``; a store written by another version is refused, not guessed at."""

UPGRADABLE = ("1", "2")
"""Older versions :func:`migrations` upgrades."""

Dialect = DialectName

CHARGED_IN = "status IN (" + ", ".join(f"'{s}'" for s in CHARGED_STATUSES) + ")"
"""The charges that hold budget, as SQL (every status but ``rolled_back``)."""

DATASET_TOTAL = ""
"""The ``principal`` of a ``dalenius_spent`` row that counts a dataset's releases for its total
cap (shared answers left out); no analyst has an empty name."""

RETIRED_INDEXES = ("dalenius_charges_by_owner", "dalenius_charges_by_request")
"""Indexes of earlier releases that a wider index now serves; dropped when a store is opened."""


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
    if version == "2":
        return spent_rebuild()
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
            *spent_rebuild(),
        ]
    create = next(s for s in statements(dialect) if "TABLE IF NOT EXISTS dalenius_charges" in s)
    return [
        *columns,
        "ALTER TABLE dalenius_charges RENAME TO dalenius_charges_v1",
        # The renamed table keeps its indexes, the ones statements() has just added among them:
        # drop them all, so the new table gets its own.
        *(f"DROP INDEX IF EXISTS {name}" for name in (*RETIRED_INDEXES, *_charge_indexes(dialect))),
        # So do the triggers that keep the counts: the new table gets its own.
        *(f"DROP TRIGGER IF EXISTS {name}" for name in _TRIGGERS),
        create,
        *count_triggers(dialect),
        f"INSERT INTO dalenius_charges ({_V1_CHARGE_COLUMNS}) "
        f"SELECT {_V1_CHARGE_COLUMNS} FROM dalenius_charges_v1",
        "DROP TABLE dalenius_charges_v1",
        *(s for s in statements(dialect) if "INDEX IF NOT EXISTS dalenius_charges" in s),
        *spent_rebuild(),
    ]


def spent_recount() -> list[str]:
    """The queries that count, from the charges, what ``dalenius_spent`` should hold: rows of
    (dataset, principal, charged, releases), the analysts' and then the datasets' totals.
    """
    return [
        "SELECT dataset, principal, charged, COUNT(*) FROM dalenius_charges "
        f"WHERE {CHARGED_IN} GROUP BY dataset, principal, charged",
        f"SELECT dataset, '{DATASET_TOTAL}', charged, COUNT(*) FROM dalenius_charges "
        f"WHERE {CHARGED_IN} AND id NOT IN (SELECT entry_id FROM dalenius_shared) "
        "GROUP BY dataset, charged",
    ]


def spent_rebuild() -> list[str]:
    """The statements that count ``dalenius_spent`` afresh from the charges (on upgrade).

    Example:
        >>> spent_rebuild()[0]
        'DELETE FROM dalenius_spent'
    """
    insert = "INSERT INTO dalenius_spent (dataset, principal, charged, releases) "
    return ["DELETE FROM dalenius_spent", *(insert + query for query in spent_recount())]


_TRIGGERS = ("dalenius_spent_added", "dalenius_spent_changed", "dalenius_spent_removed")
"""The count triggers on the charges table (those on ``dalenius_shared`` stay with their table)."""


def _held(row: str) -> str:
    """SQL: whether the charge ``row`` (``NEW`` or ``OLD``) holds budget."""
    return CHARGED_IN.replace("status IN", f"{row}.status IN", 1)


def _not_shared(row: str) -> str:
    return f"NOT EXISTS (SELECT 1 FROM dalenius_shared WHERE entry_id = {row}.id)"


def _add(row: str) -> list[str]:
    """SQL: count the charge ``row`` in (its analyst's and, unless shared, its dataset's)."""
    upsert = (
        "ON CONFLICT (dataset, principal, charged) "
        "DO UPDATE SET releases = dalenius_spent.releases + 1"
    )
    insert = "INSERT INTO dalenius_spent (dataset, principal, charged, releases) "
    return [
        f"{insert}SELECT {row}.dataset, {row}.principal, {row}.charged, 1 "
        f"WHERE {_held(row)} {upsert}",
        f"{insert}SELECT {row}.dataset, '{DATASET_TOTAL}', {row}.charged, 1 "
        f"WHERE {_held(row)} AND {_not_shared(row)} {upsert}",
    ]


def _take(row: str) -> str:
    """SQL: take the charge ``row`` out of the counts it is in."""
    return (
        "UPDATE dalenius_spent SET releases = releases - 1 "
        f"WHERE {_held(row)} AND dataset = {row}.dataset AND charged = {row}.charged "
        f"AND (principal = {row}.principal "
        f"OR (principal = '{DATASET_TOTAL}' AND {_not_shared(row)}))"
    )


def _share(step: str, row: str) -> str:
    """SQL: move the dataset's count of the charge that shared-answer ``row`` names by ``step``."""
    entry = f"FROM dalenius_charges WHERE id = {row}.entry_id AND {CHARGED_IN}"
    return (
        f"UPDATE dalenius_spent SET releases = releases {step} 1 "
        f"WHERE principal = '{DATASET_TOTAL}' AND dataset = (SELECT dataset {entry}) "
        f"AND charged = (SELECT charged {entry})"
    )


_CHANGED = (
    "({held_old}) <> ({held_new}) OR OLD.charged <> NEW.charged "
    "OR OLD.dataset <> NEW.dataset OR OLD.principal <> NEW.principal"
)


def count_triggers(dialect: Dialect) -> list[str]:
    """The triggers that keep ``dalenius_spent`` in step with every write to the charges.

    In the database rather than in the ledger's code, so that every writer keeps the counts:
    also a process of an earlier release still running on a store another process has just
    upgraded (a gateway's workers replaced one by one). A charge is counted when it is added
    holding budget, taken out when it stops holding it (returned before the data gate) or is
    deleted, and moved when its loss is converted; a shared answer's charge leaves the
    dataset's count when it is recorded as shared. Only the changes that move a count fire.
    """
    changed = _CHANGED.format(held_old=_held("OLD"), held_new=_held("NEW"))
    if dialect == "sqlite":

        def body(*sql: str) -> str:
            return "BEGIN " + " ".join(f"{statement};" for statement in sql) + " END"

        return [
            "CREATE TRIGGER IF NOT EXISTS dalenius_spent_added AFTER INSERT ON dalenius_charges "
            + body(*_add("NEW")),
            "CREATE TRIGGER IF NOT EXISTS dalenius_spent_changed AFTER UPDATE OF status, "
            f"charged, dataset, principal ON dalenius_charges WHEN {changed} "
            + body(_take("OLD"), *_add("NEW")),
            "CREATE TRIGGER IF NOT EXISTS dalenius_spent_removed AFTER DELETE ON dalenius_charges "
            + body(_take("OLD")),
            "CREATE TRIGGER IF NOT EXISTS dalenius_spent_shared AFTER INSERT ON dalenius_shared "
            + body(_share("-", "NEW")),
            "CREATE TRIGGER IF NOT EXISTS dalenius_spent_unshared AFTER DELETE ON dalenius_shared "
            + body(_share("+", "OLD")),
        ]

    def trigger(name: str, event: str, table: str, *sql: str, when: str = "") -> str:
        # Created once, with its function, if missing: opening a store writes no DDL, and
        # search_path is pinned to the schema the ledger lives in, whoever writes.
        body = " ".join(f"{statement};" for statement in sql)
        return (
            "DO $do$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = "
            f"'{name}' AND tgrelid = '{table}'::regclass) THEN "
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path FROM CURRENT AS $$ BEGIN {body} RETURN NULL; END $$; "
            f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW {when}"
            f"EXECUTE FUNCTION {name}(); END IF; END $do$"
        )

    return [
        trigger("dalenius_spent_added", "INSERT", "dalenius_charges", *_add("NEW")),
        trigger(
            "dalenius_spent_changed",
            "UPDATE OF status, charged, dataset, principal",
            "dalenius_charges",
            _take("OLD"),
            *_add("NEW"),
            when=f"WHEN ({changed}) ",
        ),
        trigger("dalenius_spent_removed", "DELETE", "dalenius_charges", _take("OLD")),
        trigger("dalenius_spent_shared", "INSERT", "dalenius_shared", _share("-", "NEW")),
        trigger("dalenius_spent_unshared", "DELETE", "dalenius_shared", _share("+", "OLD")),
    ]


def _charge_indexes(dialect: Dialect) -> list[str]:
    """The names of the indexes :func:`statements` creates on the charges table."""
    prefix = "INDEX IF NOT EXISTS "
    return [
        s.split(prefix, 1)[1].split()[0]
        for s in statements(dialect)
        if prefix + "dalenius_charges" in s
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
        # What a reserve reads, so its cost stays small as the ledger's history grows: the spent
        # sums read every charge of an analyst (or of a dataset) from this index alone, without
        # visiting the table; the first committed answer to a request (the analyst's own, or
        # another analyst's to share) is found by the request, in order, without sorting.
        """CREATE INDEX IF NOT EXISTS dalenius_charges_spent
            ON dalenius_charges (dataset, principal, created_at, status, charged, id)""",
        """CREATE INDEX IF NOT EXISTS dalenius_charges_answers
            ON dalenius_charges (dataset, request_key, principal, created_at, id)""",
        *(f"DROP INDEX IF EXISTS {name}" for name in RETIRED_INDEXES),
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
        # How many charges that hold budget each analyst has of each loss on each dataset, and
        # (principal DATASET_TOTAL) the dataset's releases for its total cap: what a reserve
        # composes, read in a few rows however long the history. Kept in step with every write
        # by the triggers of count_triggers(), in the writer's own transaction.
        """CREATE TABLE IF NOT EXISTS dalenius_spent (
            dataset TEXT NOT NULL,
            principal TEXT NOT NULL,
            charged TEXT NOT NULL,
            releases INTEGER NOT NULL CHECK (releases >= 0),
            PRIMARY KEY (dataset, principal, charged)
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
        *count_triggers(dialect),
    ]
