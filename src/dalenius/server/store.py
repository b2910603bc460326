"""The gateway's own records: principals, token hashes, grants, registered datasets, request log.

Budgets and charges live in the ledger; everything else the gateway must remember lives here, in
tables prefixed ``dalenius_gateway_`` that may share the ledger's database. Several gateway
processes opened on the same database see the same analysts and datasets: nothing here is cached
across requests, so a revoked token or grant stops working at once in every process.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Final

from dalenius.core.errors import ConfigurationError, UserError
from dalenius.ledger.storage import (
    POSTGRES,
    Database,
    Row,
    SqliteDatabase,
    Tx,
    decode_time,
    encode_time,
    open_database,
)
from dalenius.server.tokens import (
    IssuedToken,
    new_token,
    parse_token,
    scram_salt,
    scram_verifier,
    verify,
)

ANALYST: Final = "analyst"
CURATOR: Final = "curator"
ROLES: Final = (ANALYST, CURATOR)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


class NotFoundError(UserError):
    """Something a request names does not exist (or is not visible to the caller)."""

    code = "not_found"


class ConflictError(UserError):
    """A request that contradicts what is already recorded (a name taken, a dataset registered)."""

    code = "conflict"


@dataclass(frozen=True)
class Principal:
    """Someone who may call the gateway: an analyst (asks queries) or a curator (administers)."""

    name: str
    role: str
    created_at: datetime
    created_by: str


@dataclass(frozen=True)
class TokenInfo:
    """A token's public record (never its secret or hash); ``expires_at`` ``None``: never."""

    id: str
    principal: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None

    def expired(self, now: datetime | None = None) -> bool:
        """Whether the token's expiry has passed."""
        return self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC))


@dataclass(frozen=True)
class Caller:
    """The principal a valid token belongs to."""

    name: str
    role: str
    token_id: str

    @property
    def is_curator(self) -> bool:
        """Whether the caller may use the curator endpoints."""
        return self.role == CURATOR


@dataclass(frozen=True)
class Registration:
    """A dataset registered with the gateway, by the path of its catalog on the server."""

    name: str
    catalog: str
    registered_at: datetime
    registered_by: str


@dataclass(frozen=True)
class RequestRecord:
    """One line of the request log (every request, answered or not)."""

    at: datetime
    request_id: str
    principal: str
    token_id: str
    client: str
    method: str
    path: str
    status: int
    code: str
    millis: float


def check_name(name: str, what: str = "name") -> str:
    """Validate a principal's name: 1 to 64 letters, digits and ``_ . @ -``.

    Example:
        >>> check_name("alice@example.org")
        'alice@example.org'
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"The {what} {name!r} is not a valid name.",
            why="names appear in URLs, logs and the ledger, so they are kept plain.",
            fix="use 1 to 64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit.",
        )
    return name


def check_role(role: str) -> str:
    """Validate a role name (``analyst`` or ``curator``)."""
    if role not in ROLES:
        raise ConfigurationError(f"Unknown role {role!r}.", fix=f"use one of {', '.join(ROLES)}.")
    return role


def _now() -> str:
    return encode_time(datetime.now(UTC))


def _time(text: str | None) -> datetime | None:
    return None if text is None else decode_time(text)


def _opening(error: BaseException) -> ConfigurationError:
    return ConfigurationError(
        f"Cannot open the gateway's database: {error}".strip(),
        fix="check the path (its folder must exist and be writable) or, for PostgreSQL, that the "
        "server is running and the URL (host, port, user, database).",
    )


_LIVE_TOKEN = "t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > ?)"
"""The condition on a token ``t`` that can sign in (its one parameter: now)."""

BUCKETS_TABLE = """CREATE TABLE IF NOT EXISTS dalenius_gateway_buckets (
    client TEXT PRIMARY KEY,
    tokens DOUBLE PRECISION NOT NULL,
    at DOUBLE PRECISION NOT NULL
)"""


class StateStore:
    """Principals, tokens, grants, datasets and the request log in one database.

    Args:
        url: ``memory:``, a SQLite file or ``sqlite:///`` URL, or a ``postgresql://`` URL.

    Example:
        >>> store = StateStore("memory:")
        >>> _ = store.create_principal("alice", "analyst", by="root")
        >>> issued = store.issue_token("alice", label="laptop", by="root")
        >>> store.authenticate(issued.token)  # doctest: +ELLIPSIS
        Caller(name='alice', role='analyst', token_id='...')
        >>> store.close()
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._db: Database = open_database(url, _opening, durable=False)
        self._create_tables()
        self._buckets = self._bucket_backend()

    def _bucket_backend(self) -> Database:
        """Where rate-limit buckets live: beside a SQLite file, else in the same database.

        Every request writes its bucket. In a SQLite file that is also the ledger, such a write
        would queue behind the ledger's commits, each synced to disk under the file's one write
        lock, and a cheap request would wait for another analyst's charges. A sidecar file
        (``<file>-limits``) has a write lock of its own; PostgreSQL locks rows, not the database.
        """
        if not isinstance(self._db, SqliteDatabase) or self._db.path == ":memory:":
            return self._db
        sidecar = SqliteDatabase(f"{self._db.path}-limits", _opening, synchronous="NORMAL")
        with sidecar.transaction(write=True) as tx:
            tx.run(BUCKETS_TABLE)
        return sidecar

    @property
    def backend(self) -> Database:
        """The database connection pool (shared with the local-DP collection store)."""
        return self._db

    def _create_tables(self) -> None:
        """Create the gateway's tables if missing.

        Long because it is the schema: one statement per table, run in one transaction.
        """
        time = self._db.dialect.time_type
        ddl = [
            f"""CREATE TABLE IF NOT EXISTS dalenius_gateway_principals (
                name TEXT PRIMARY KEY,
                role TEXT NOT NULL CHECK (role IN ('analyst', 'curator')),
                created_at {time} NOT NULL,
                created_by TEXT NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS dalenius_gateway_tokens (
                id TEXT PRIMARY KEY,
                principal TEXT NOT NULL REFERENCES dalenius_gateway_principals (name),
                hash TEXT NOT NULL,
                label TEXT NOT NULL,
                created_at {time} NOT NULL,
                revoked_at {time}
            )""",
            # A token's SCRAM verifier, for the PostgreSQL listener's sign-in (tokens issued
            # before the listener existed have none: they sign in over TLS only).
            """CREATE TABLE IF NOT EXISTS dalenius_gateway_scram (
                token_id TEXT PRIMARY KEY REFERENCES dalenius_gateway_tokens (id),
                verifier TEXT NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS dalenius_gateway_datasets (
                name TEXT PRIMARY KEY,
                catalog TEXT NOT NULL,
                registered_at {time} NOT NULL,
                registered_by TEXT NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS dalenius_gateway_grants (
                principal TEXT NOT NULL REFERENCES dalenius_gateway_principals (name),
                dataset TEXT NOT NULL,
                granted_at {time} NOT NULL,
                granted_by TEXT NOT NULL,
                PRIMARY KEY (principal, dataset)
            )""",
            f"""CREATE TABLE IF NOT EXISTS dalenius_gateway_requests (
                seq {self._db.dialect.auto_key},
                at {time} NOT NULL,
                request_id TEXT NOT NULL,
                principal TEXT NOT NULL,
                token_id TEXT NOT NULL,
                client TEXT NOT NULL,
                method TEXT NOT NULL,
                path TEXT NOT NULL,
                status INTEGER NOT NULL,
                code TEXT NOT NULL,
                millis DOUBLE PRECISION NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS dalenius_gateway_floors (
                dataset TEXT PRIMARY KEY,
                min_epsilon TEXT NOT NULL,
                set_at {time} NOT NULL,
                set_by TEXT NOT NULL
            )""",
            BUCKETS_TABLE,
        ]
        with self._db.transaction(write=True) as tx:
            if self._db.dialect is POSTGRES:
                # CREATE TABLE IF NOT EXISTS races with itself across processes; serialise it.
                tx.run("SELECT pg_advisory_xact_lock(?)", (0x6761746577617931,))
            for statement in ddl:
                tx.run(statement)
            self._add_expiry(tx, time)

    def _add_expiry(self, tx: Tx, time: str) -> None:
        """Give a tokens table made by an earlier version its ``expires_at`` column."""
        if self._db.dialect is POSTGRES:
            tx.run(
                f"ALTER TABLE dalenius_gateway_tokens ADD COLUMN IF NOT EXISTS expires_at {time}"
            )
            return
        columns = {row[1] for row in tx.run("PRAGMA table_info(dalenius_gateway_tokens)")}
        if "expires_at" not in columns:
            tx.run(f"ALTER TABLE dalenius_gateway_tokens ADD COLUMN expires_at {time}")

    @contextmanager
    def _conflicts_as(self, error: ConflictError) -> Iterator[None]:
        """Report a uniqueness violation (a concurrent writer from another process) as ``error``."""
        try:
            yield
        except Exception as exc:
            if self._db.is_conflict(exc):
                raise error from None
            raise

    # -- principals and tokens -------------------------------------------------------------

    def create_principal(self, name: str, role: str, *, by: str) -> Principal:
        """Create an analyst or curator.

        Raises:
            ConflictError: if the name is taken.
        """
        check_name(name)
        check_role(role)
        now = _now()
        taken = ConflictError(
            f"A principal named {name!r} already exists.",
            fix="choose another name, or issue a new token for the existing one.",
        )
        with self._conflicts_as(taken), self._db.transaction(write=True) as tx:
            if tx.run("SELECT 1 FROM dalenius_gateway_principals WHERE name = ?", (name,)):
                raise taken
            tx.run(
                "INSERT INTO dalenius_gateway_principals (name, role, created_at, created_by) "
                "VALUES (?, ?, ?, ?)",
                (name, role, now, by),
            )
        return Principal(name, role, decode_time(now), by)

    def ensure_principal(self, name: str, role: str, *, by: str) -> Principal:
        """The principal called ``name``, created with ``role`` if missing.

        Raises:
            ConflictError: if it exists with another role.
        """
        existing = self.principal(name)
        if existing is None:
            try:
                return self.create_principal(name, role, by=by)
            except ConflictError:
                existing = self.principal(name)
                if existing is None:
                    raise
        if existing.role != role:
            raise ConflictError(
                f"{name!r} exists as {existing.role}, not {role}.",
                fix="choose another name; a principal's role does not change.",
            )
        return existing

    def principal(self, name: str) -> Principal | None:
        """The principal called ``name``, or ``None``."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT name, role, created_at, created_by FROM dalenius_gateway_principals "
                "WHERE name = ?",
                (name,),
            )
        return _principal(rows[0]) if rows else None

    def principals(self) -> list[Principal]:
        """Every principal, by name."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT name, role, created_at, created_by FROM dalenius_gateway_principals "
                "ORDER BY name"
            )
        return [_principal(row) for row in rows]

    def issue_token(
        self, name: str, *, label: str = "", by: str, expires_at: datetime | None = None
    ) -> IssuedToken:
        """Draw a new token for ``name``; its text is returned once and only its hash is kept.

        Args:
            name: the principal.
            label: a note on the token (where it is used).
            by: who issued it.
            expires_at: when the token stops working (``None``: when it is revoked).

        Raises:
            NotFoundError: if no such principal exists.
        """
        issued = new_token()
        expiry = None if expires_at is None else encode_time(expires_at)
        with self._db.transaction(write=True) as tx:
            if not tx.run("SELECT 1 FROM dalenius_gateway_principals WHERE name = ?", (name,)):
                raise NotFoundError(f"No principal named {name!r}.", fix="create it first.")
            tx.run(
                "INSERT INTO dalenius_gateway_tokens (id, principal, hash, label, created_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                (issued.token_id, name, issued.hash, label or f"issued by {by}", _now(), expiry),
            )
            tx.run(
                "INSERT INTO dalenius_gateway_scram (token_id, verifier) VALUES (?, ?)",
                (issued.token_id, scram_verifier(issued.token, scram_salt(name))),
            )
        return issued

    def tokens(self, name: str | None = None) -> list[TokenInfo]:
        """Tokens (revoked ones too), oldest first, optionally of one principal."""
        sql = (
            "SELECT id, principal, label, created_at, revoked_at, expires_at "
            "FROM dalenius_gateway_tokens"
        )
        params: tuple[object, ...] = ()
        if name is not None:
            sql += " WHERE principal = ?"
            params = (name,)
        with self._db.transaction(write=False) as tx:
            rows = tx.run(sql + " ORDER BY created_at, id", params)
        return [
            TokenInfo(row[0], row[1], row[2], decode_time(row[3]), _time(row[4]), _time(row[5]))
            for row in rows
        ]

    def revoke_token(self, name: str, token_id: str) -> None:
        """Revoke one of ``name``'s tokens; it stops working at once, in every process.

        Raises:
            NotFoundError: if ``name`` has no such token.
        """
        with self._db.transaction(write=True) as tx:
            rows = tx.run(
                "SELECT revoked_at FROM dalenius_gateway_tokens WHERE id = ? AND principal = ?",
                (token_id, name),
            )
            if not rows:
                raise NotFoundError(f"{name!r} has no token {token_id!r}.")
            if rows[0][0] is None:
                tx.run(
                    "UPDATE dalenius_gateway_tokens SET revoked_at = ? WHERE id = ?",
                    (_now(), token_id),
                )

    def credentials(self, token_id: str) -> tuple[Caller, str] | None:
        """The owner of a live token and its stored hash, or ``None`` (unknown, revoked, expired)."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT p.name, p.role, t.hash FROM dalenius_gateway_tokens t "
                "JOIN dalenius_gateway_principals p ON p.name = t.principal "
                f"WHERE t.id = ? AND {_LIVE_TOKEN}",
                (token_id, _now()),
            )
        if not rows:
            return None
        return Caller(name=rows[0][0], role=rows[0][1], token_id=token_id), rows[0][2]

    def scram_verifiers(self, name: str) -> list[tuple[Caller, str]]:
        """The live tokens of principal ``name`` that have a SCRAM verifier, with it."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT p.name, p.role, t.id, s.verifier FROM dalenius_gateway_tokens t "
                "JOIN dalenius_gateway_principals p ON p.name = t.principal "
                "JOIN dalenius_gateway_scram s ON s.token_id = t.id "
                f"WHERE p.name = ? AND {_LIVE_TOKEN} ORDER BY t.created_at",
                (name, _now()),
            )
        return [(Caller(name=r[0], role=r[1], token_id=r[2]), r[3]) for r in rows]

    def authenticate(self, token: str) -> Caller | None:
        """The caller a token belongs to, or ``None``; the hash is compared in constant time."""
        token_id = parse_token(token)
        if token_id is None:
            return None
        found = self.credentials(token_id)
        if found is None:
            return None
        caller, stored = found
        return caller if verify(token, stored) else None

    # -- datasets and grants ---------------------------------------------------------------

    def register(self, name: str, catalog: str, *, by: str) -> Registration:
        """Record a dataset by its catalog path.

        Raises:
            ConflictError: if ``name`` is registered with another catalog.
        """
        now = _now()
        race = ConflictError(f"Dataset {name!r} was registered concurrently; try again.")
        with self._conflicts_as(race), self._db.transaction(write=True) as tx:
            rows = tx.run("SELECT catalog FROM dalenius_gateway_datasets WHERE name = ?", (name,))
            if rows and rows[0][0] != catalog:
                raise ConflictError(
                    f"A dataset named {name!r} is already registered, from {rows[0][0]}.",
                    why="budgets are kept per dataset name, so one name cannot mean two catalogs.",
                    fix="remove the registered dataset first, or give the new catalog another "
                    "[dataset] name.",
                )
            if not rows:
                tx.run(
                    "INSERT INTO dalenius_gateway_datasets (name, catalog, registered_at, "
                    "registered_by) VALUES (?, ?, ?, ?)",
                    (name, catalog, now, by),
                )
        found = self.registration(name)
        if found is None:
            raise race
        return found

    def unregister(self, name: str) -> None:
        """Remove a dataset and every grant on it (the ledger keeps its budgets and charges).

        Raises:
            NotFoundError: if no such dataset is registered.
        """
        with self._db.transaction(write=True) as tx:
            if not tx.run("SELECT 1 FROM dalenius_gateway_datasets WHERE name = ?", (name,)):
                raise NotFoundError(f"No dataset named {name!r} is registered.")
            tx.run("DELETE FROM dalenius_gateway_grants WHERE dataset = ?", (name,))
            tx.run("DELETE FROM dalenius_gateway_datasets WHERE name = ?", (name,))
            tx.run("DELETE FROM dalenius_gateway_floors WHERE dataset = ?", (name,))

    def registration(self, name: str) -> Registration | None:
        """The registered dataset called ``name``, or ``None``."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT name, catalog, registered_at, registered_by "
                "FROM dalenius_gateway_datasets WHERE name = ?",
                (name,),
            )
        return _registration(rows[0]) if rows else None

    def registrations(self) -> list[Registration]:
        """Every registered dataset, by name."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT name, catalog, registered_at, registered_by "
                "FROM dalenius_gateway_datasets ORDER BY name"
            )
        return [_registration(row) for row in rows]

    def grant(self, name: str, dataset: str, *, by: str) -> None:
        """Let ``name`` see and query ``dataset`` (idempotent).

        Raises:
            NotFoundError: if the principal or the dataset does not exist.
        """
        with self._db.transaction(write=True) as tx:
            _require(tx, name, dataset)
            if tx.run(
                "SELECT 1 FROM dalenius_gateway_grants WHERE principal = ? AND dataset = ?",
                (name, dataset),
            ):
                return
            tx.run(
                "INSERT INTO dalenius_gateway_grants (principal, dataset, granted_at, granted_by) "
                "VALUES (?, ?, ?, ?)",
                (name, dataset, _now(), by),
            )

    def revoke_grant(self, name: str, dataset: str) -> None:
        """Withdraw a grant (idempotent); the analyst's ledger records stay.

        Raises:
            NotFoundError: if the principal or the dataset does not exist.
        """
        with self._db.transaction(write=True) as tx:
            _require(tx, name, dataset)
            tx.run(
                "DELETE FROM dalenius_gateway_grants WHERE principal = ? AND dataset = ?",
                (name, dataset),
            )

    def grants(self, name: str | None = None) -> list[tuple[str, str]]:
        """``(principal, dataset)`` pairs, sorted, optionally of one principal."""
        sql = "SELECT principal, dataset FROM dalenius_gateway_grants"
        params: tuple[object, ...] = ()
        if name is not None:
            sql += " WHERE principal = ?"
            params = (name,)
        with self._db.transaction(write=False) as tx:
            rows = tx.run(sql + " ORDER BY principal, dataset", params)
        return [(row[0], row[1]) for row in rows]

    def is_granted(self, name: str, dataset: str) -> bool:
        """Whether ``name`` holds a grant on ``dataset``."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT 1 FROM dalenius_gateway_grants WHERE principal = ? AND dataset = ?",
                (name, dataset),
            )
        return bool(rows)

    def access(self, name: str, dataset: str) -> tuple[Registration | None, bool, Fraction | None]:
        """The dataset's registration, whether ``name`` holds a grant on it, and its ε floor.

        One transaction for what every explain and query checks first.
        """
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT d.name, d.catalog, d.registered_at, d.registered_by, "
                "(SELECT COUNT(*) FROM dalenius_gateway_grants g "
                "WHERE g.principal = ? AND g.dataset = d.name), "
                "(SELECT f.min_epsilon FROM dalenius_gateway_floors f WHERE f.dataset = d.name) "
                "FROM dalenius_gateway_datasets d WHERE d.name = ?",
                (name, dataset),
            )
        if not rows:
            return None, False, None
        row = rows[0]
        return _registration(row), int(row[4]) > 0, None if row[5] is None else Fraction(row[5])

    # -- epsilon floors ----------------------------------------------------------------------

    def set_floor(self, dataset: str, min_epsilon: Fraction | None, *, by: str) -> None:
        """Set (or with ``None`` lift) the smallest ε one query on ``dataset`` may spend.

        Raises:
            NotFoundError: if no such dataset is registered.
        """
        with self._db.transaction(write=True) as tx:
            if not tx.run("SELECT 1 FROM dalenius_gateway_datasets WHERE name = ?", (dataset,)):
                raise NotFoundError(f"No dataset named {dataset!r} is registered.")
            tx.run("DELETE FROM dalenius_gateway_floors WHERE dataset = ?", (dataset,))
            if min_epsilon is not None:
                tx.run(
                    "INSERT INTO dalenius_gateway_floors (dataset, min_epsilon, set_at, set_by) "
                    "VALUES (?, ?, ?, ?)",
                    (dataset, f"{min_epsilon.numerator}/{min_epsilon.denominator}", _now(), by),
                )

    def floor(self, dataset: str) -> Fraction | None:
        """The ε floor a curator set on ``dataset``, or ``None``."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT min_epsilon FROM dalenius_gateway_floors WHERE dataset = ?", (dataset,)
            )
        return Fraction(rows[0][0]) if rows else None

    # -- rate limits -----------------------------------------------------------------------

    def take(self, client: str, *, rate: float, burst: int, now: float) -> float:
        """Take one request from ``client``'s token bucket, shared by every process.

        The bucket holds up to ``burst`` requests and refills at ``rate`` per second; ``now`` is
        wall-clock seconds (every process must agree on it). A client absent from the table has
        a full bucket, so forgetting one is never stricter than the limit.

        Returns:
            0.0 if the request may proceed, else the seconds to wait.
        """
        with self._buckets.transaction(write=True) as tx:
            if self._buckets.dialect is POSTGRES:
                # A bucket is no record: after a crash of the database server it may come back
                # as it was a moment earlier (fuller, never stricter), so its commit need not
                # wait for the disk, and a request's sign-in does not wait for one.
                tx.run("SET LOCAL synchronous_commit TO off")
                tx.run(
                    "INSERT INTO dalenius_gateway_buckets (client, tokens, at) VALUES (?, ?, ?) "
                    "ON CONFLICT (client) DO NOTHING",
                    (client, float(burst), now),
                )
                lock = " FOR UPDATE"
            else:
                lock = ""
            rows = tx.run(
                f"SELECT tokens, at FROM dalenius_gateway_buckets WHERE client = ?{lock}",
                (client,),
            )
            tokens, last = (float(rows[0][0]), float(rows[0][1])) if rows else (burst, now)
            tokens = min(float(burst), tokens + max(0.0, now - last) * rate)
            wait = 0.0
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / rate
            if rows:
                tx.run(
                    "UPDATE dalenius_gateway_buckets SET tokens = ?, at = ? WHERE client = ?",
                    (tokens, max(now, last), client),
                )
            else:
                tx.run(
                    "INSERT INTO dalenius_gateway_buckets (client, tokens, at) VALUES (?, ?, ?)",
                    (client, tokens, now),
                )
        return wait

    def forget_full_buckets(self, *, rate: float, burst: int, now: float, keep: int) -> None:
        """Delete refilled buckets (the same as no row), and all but the ``keep`` newest."""
        with self._buckets.transaction(write=True) as tx:
            tx.run("DELETE FROM dalenius_gateway_buckets WHERE at < ?", (now - burst / rate - 1.0,))
            tx.run(
                "DELETE FROM dalenius_gateway_buckets WHERE at < (SELECT at FROM "
                "dalenius_gateway_buckets ORDER BY at DESC LIMIT 1 OFFSET ?)",
                (int(keep),),
            )

    def bucket_count(self) -> int:
        """How many clients have a bucket stored now."""
        with self._buckets.transaction(write=False) as tx:
            return int(tx.run("SELECT COUNT(*) FROM dalenius_gateway_buckets")[0][0])

    # -- request log -----------------------------------------------------------------------

    def log_requests(self, records: Iterable[RequestRecord]) -> None:
        """Append lines to the request log, in one transaction."""
        rows = [
            (
                encode_time(r.at),
                r.request_id,
                r.principal,
                r.token_id,
                r.client,
                r.method,
                r.path,
                r.status,
                r.code,
                r.millis,
            )
            for r in records
        ]
        if not rows:
            return
        with self._db.transaction(write=True) as tx:
            for row in rows:
                tx.run(
                    "INSERT INTO dalenius_gateway_requests (at, request_id, principal, token_id, "
                    "client, method, path, status, code, millis) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )

    def requests(self, *, principal: str | None = None, limit: int = 100) -> list[RequestRecord]:
        """The most recent request-log lines, newest first."""
        sql = (
            "SELECT at, request_id, principal, token_id, client, method, path, status, code, "
            "millis FROM dalenius_gateway_requests"
        )
        params: list[object] = []
        if principal is not None:
            sql += " WHERE principal = ?"
            params.append(principal)
        sql += " ORDER BY seq DESC LIMIT ?"
        params.append(int(limit))
        with self._db.transaction(write=False) as tx:
            rows = tx.run(sql, params)
        return [
            RequestRecord(
                at=decode_time(row[0]),
                request_id=row[1],
                principal=row[2],
                token_id=row[3],
                client=row[4],
                method=row[5],
                path=row[6],
                status=int(row[7]),
                code=row[8],
                millis=float(row[9]),
            )
            for row in rows
        ]

    def close(self) -> None:
        """Close the database connections."""
        if self._buckets is not self._db:
            self._buckets.close()
        self._db.close()


def _require(tx: Tx, name: str, dataset: str) -> None:
    if not tx.run("SELECT 1 FROM dalenius_gateway_principals WHERE name = ?", (name,)):
        raise NotFoundError(f"No principal named {name!r}.")
    if not tx.run("SELECT 1 FROM dalenius_gateway_datasets WHERE name = ?", (dataset,)):
        raise NotFoundError(f"No dataset named {dataset!r} is registered.")


def _principal(row: Row) -> Principal:
    return Principal(row[0], row[1], decode_time(row[2]), row[3])


def _registration(row: Row) -> Registration:
    return Registration(row[0], row[1], decode_time(row[2]), row[3])
