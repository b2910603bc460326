"""Local-DP collections in the gateway's database: settings, reports, and each client's lifetime ε.

Tables (prefixed ``dalenius_ldp_``, beside the gateway's own records and the ledger's):

* ``collections`` — name, protocol, settings (JSON), the hash of the submission key;
* ``reports`` — every accepted report, unique per ``(collection, client, report_id)`` so a retried
  submission is recognised and never counted twice;
* ``clients`` — each client's lifetime ε per collection (exact fraction text) and report count,
  rewritten in the same transaction as the reports that change it.

A submission is validated completely — every report's shape, the client's lifetime cap — before
anything is written; a refused batch leaves no row behind. On PostgreSQL the collection's row is
locked for the length of a submission (``SELECT … FOR UPDATE``), on SQLite the write lock is taken
first (``BEGIN IMMEDIATE``), so concurrent submissions for one collection are serialised and the
lifetime ε recomputed from committed rows is exact.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Any

from dalenius.core.errors import ConfigurationError
from dalenius.core.periods import calendar, publication_day
from dalenius.ldp.collection import CollectionSpec, independent
from dalenius.ldp.series import EARLY, Arrival, check_series, collection_series
from dalenius.ledger.storage import Database, Tx, decode_time, encode_time
from dalenius.server.errors import AuthenticationError
from dalenius.server.store import ConflictError, NotFoundError, check_name

MAX_BATCH = 1000
"""The most reports one submission may carry."""

SUBMIT_PATH = r"/v1/ldp/collections/[^/]+/reports"
"""The route devices submit batches to (a regular expression over the whole path)."""

_ID = "x" * 128
"""A client, report id or memo at its longest (the request model allows 128 characters)."""


def submission_bytes() -> int:
    """The body a batch of :data:`MAX_BATCH` reports may need, in bytes.

    Reports are computed, not guessed: the largest report at each protocol's default parameters
    (a count-mean sketch's ``signs``, ``width`` = 1024 entries of −1, is the largest; RAPPOR's 16
    bits are far smaller), as JSON with the spaces Python and most clients put after ``,`` and
    ``:``, with a client, report id and memo at their longest. Unary encodings of a large domain
    (``oue``, ``sue``: one entry per value) can be larger; they send fewer reports per batch.
    """
    sketch = CollectionSpec({"protocol": "cms", "epsilon": 1, "candidates": ["a", "b"]}).sketch
    rappor = CollectionSpec({"protocol": "rappor", "epsilon": 8, "candidates": ["a", "b"]}).rappor
    largest = [
        {"row": sketch.hashes - 1, "signs": [-1] * sketch.width},
        {"cohort": rappor.cohorts - 1, "bits": [1] * rappor.bits},
    ]
    item = max(
        len(json.dumps({"client": _ID, "report_id": _ID, "memo": _ID, "report": report}))
        for report in largest
    )
    return len(json.dumps({"reports": []})) + MAX_BATCH * (item + len(", "))


@dataclass(frozen=True)
class Submission:
    """One report as a client sends it."""

    client: str
    report_id: str
    memo: str | None
    report: Any


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _day(stamp: object) -> date:
    """The UTC day of a stored arrival time (text on SQLite, a datetime on PostgreSQL)."""
    moment = stamp if isinstance(stamp, datetime) else decode_time(str(stamp))
    return moment.astimezone(UTC).date()


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class LdpStore:
    """Collections and their reports over the gateway's database backend."""

    def __init__(self, backend: Database, *, clock: Callable[[], datetime] = _utc_now) -> None:
        """``clock`` stamps each report's arrival (a series groups reports by it); tests pass
        one to simulate reports arriving over many days.
        """
        self._db = backend
        self._clock = clock
        self._specs: dict[str, tuple[str, CollectionSpec]] = {}
        time = backend.dialect.time_type
        ddl = [
            f"""CREATE TABLE IF NOT EXISTS dalenius_ldp_collections (
                name TEXT PRIMARY KEY,
                protocol TEXT NOT NULL,
                settings TEXT NOT NULL,
                key_hash TEXT NOT NULL,
                created_at {time} NOT NULL,
                created_by TEXT NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS dalenius_ldp_reports (
                seq {backend.dialect.auto_key},
                collection TEXT NOT NULL REFERENCES dalenius_ldp_collections (name),
                client TEXT NOT NULL,
                report_id TEXT NOT NULL,
                memo TEXT NOT NULL,
                report TEXT NOT NULL,
                received_at {time} NOT NULL,
                UNIQUE (collection, client, report_id)
            )""",
            f"""CREATE TABLE IF NOT EXISTS dalenius_ldp_clients (
                collection TEXT NOT NULL REFERENCES dalenius_ldp_collections (name),
                client TEXT NOT NULL,
                epsilon TEXT NOT NULL,
                reports INTEGER NOT NULL,
                updated_at {time} NOT NULL,
                PRIMARY KEY (collection, client)
            )""",
        ]
        with self._db.transaction(write=True) as tx:
            for statement in ddl:
                tx.run(statement)

    def _now(self) -> str:
        return encode_time(self._clock())

    # -- collections ---------------------------------------------------------------------------

    def create(self, name: str, settings: dict[str, Any], *, by: str) -> dict[str, Any]:
        """Create a collection; returns its description with the submission key (shown once)."""
        check_name(name, "collection name")
        spec = CollectionSpec(settings)
        key = "dlc_" + secrets.token_urlsafe(32)
        try:
            with self._db.transaction(write=True) as tx:
                if tx.run("SELECT 1 FROM dalenius_ldp_collections WHERE name = ?", (name,)):
                    raise ConflictError(
                        f"A collection named {name!r} already exists.", fix="choose another name."
                    )
                tx.run(
                    "INSERT INTO dalenius_ldp_collections VALUES (?, ?, ?, ?, ?, ?)",
                    (name, spec.protocol, spec.stored_settings(), _hash(key), self._now(), by),
                )
        except Exception as error:
            if self._db.is_conflict(error):
                raise ConflictError(f"A collection named {name!r} already exists.") from None
            raise
        out = self.describe(name)
        out["submission_key"] = key
        return out

    def spec(self, name: str) -> CollectionSpec:
        """The collection's protocol (cached per process by its stored settings)."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run("SELECT settings FROM dalenius_ldp_collections WHERE name = ?", (name,))
        if not rows:
            raise NotFoundError(
                f"No collection named {name!r}.", fix="list them with GET /v1/ldp/collections."
            )
        text = str(rows[0][0])
        cached = self._specs.get(name)
        if cached is None or cached[0] != text:
            cached = (text, CollectionSpec(json.loads(text)))
            self._specs[name] = cached
        return cached[1]

    def describe(self, name: str) -> dict[str, Any]:
        """A collection's public description: parameters, report and client counts."""
        spec = self.spec(name)
        with self._db.transaction(write=False) as tx:
            head = tx.run(
                "SELECT created_at, created_by FROM dalenius_ldp_collections WHERE name = ?",
                (name,),
            )
            counts = tx.run(
                "SELECT COUNT(*), COUNT(DISTINCT client) FROM dalenius_ldp_reports WHERE collection = ?",
                (name,),
            )
        return {
            "name": name,
            "protocol": spec.protocol,
            "epsilon": float(spec.epsilon),
            "client_cap": None if spec.client_cap is None else float(spec.client_cap),
            "parameters": spec.client_parameters(),
            "reports": int(counts[0][0]),
            "clients": int(counts[0][1]),
            "created_at": str(head[0][0]),
            "created_by": str(head[0][1]),
        }

    def names(self) -> list[str]:
        """Every collection's name."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run("SELECT name FROM dalenius_ldp_collections ORDER BY name")
        return [str(r[0]) for r in rows]

    def check_key(self, name: str, key: str | None) -> CollectionSpec:
        """The collection's spec if ``key`` is its submission key (else 401; unknown name: 404)."""
        missing = AuthenticationError(
            "A report needs the collection's submission key.",
            why="only clients the curator enrolled may add reports.",
            fix="send the key given when the collection was created in X-Collection-Key.",
        )
        if not key:
            raise missing
        spec = self.spec(name)
        with self._db.transaction(write=False) as tx:
            rows = tx.run("SELECT key_hash FROM dalenius_ldp_collections WHERE name = ?", (name,))
        if not hmac.compare_digest(_hash(key), str(rows[0][0])):
            raise missing
        return spec

    # -- reports ---------------------------------------------------------------------------------

    def submit(self, name: str, spec: CollectionSpec, batch: list[Submission]) -> dict[str, Any]:
        """Validate every report, then store the new ones and update their clients' lifetime ε.

        ``spec`` comes from :meth:`check_key` (the caller's key was checked).
        """
        if not 1 <= len(batch) <= MAX_BATCH:
            raise ConfigurationError(f"a submission carries 1 to {MAX_BATCH} reports.")
        canonical = [self._checked(spec, i, item) for i, item in enumerate(batch)]
        cap = spec.client_cap
        with self._db.transaction(write=True) as tx:
            self._lock(tx, name)
            accepted, duplicates, touched = 0, 0, set()
            for item, (report, memo) in zip(batch, canonical, strict=True):
                if tx.run(
                    "SELECT 1 FROM dalenius_ldp_reports "
                    "WHERE collection = ? AND client = ? AND report_id = ?",
                    (name, item.client, item.report_id),
                ):
                    duplicates += 1
                    continue
                tx.run(
                    "INSERT INTO dalenius_ldp_reports "
                    "(collection, client, report_id, memo, report, received_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (name, item.client, item.report_id, memo, report, self._now()),
                )
                accepted += 1
                touched.add(item.client)
            lifetimes = {c: self._lifetime(tx, spec, name, c) for c in sorted(touched)}
            for client, (epsilon, reports) in lifetimes.items():
                if cap is not None and epsilon > cap:
                    raise ConflictError(
                        f"Client {client!r} would reach a lifetime ε of {float(epsilon):.6g} in "
                        f"collection {name!r}, above its cap {float(cap):g}; nothing was stored.",
                        why="each client's lifetime privacy loss per collection is capped.",
                        fix="repeat a memoised response (same memo tag) or stop reporting.",
                    )
                self._record_client(tx, name, client, epsilon, reports)
        return {
            "accepted": accepted,
            "duplicates": duplicates,
            "clients": [
                {"client": c, "epsilon": float(e), "reports": r} for c, (e, r) in lifetimes.items()
            ],
        }

    @staticmethod
    def _checked(spec: CollectionSpec, index: int, item: Submission) -> tuple[str, str]:
        for field, value in (("client", item.client), ("report_id", item.report_id)):
            if not isinstance(value, str) or not 1 <= len(value) <= 128:
                raise ConfigurationError(f"reports[{index}].{field} must be 1 to 128 characters.")
        if spec.memoised and not (isinstance(item.memo, str) and 1 <= len(item.memo) <= 128):
            raise ConfigurationError(
                f"reports[{index}].memo is required for {spec.protocol}: the memo tag of the "
                "memoised response this report repeats.",
                fix="derive it on the device from its secret and the value (same value, same tag).",
            )
        if not spec.memoised and item.memo is not None:
            raise ConfigurationError(
                f"reports[{index}].memo is only for memoised protocols; {spec.protocol} is not.",
                fix="leave memo out.",
            )
        try:
            report = spec.validate(item.report)
        except ConfigurationError as error:
            raise ConfigurationError(
                f"reports[{index}].report is malformed: {error.what}",
                why="the gateway accepts only already-randomised reports of the protocol's shape.",
                fix=error.fix or "send what the client's encoder produced.",
            ) from None
        memo = item.memo if spec.memoised and item.memo else "\x1f" + item.report_id
        return json.dumps(report, separators=(",", ":")), memo

    def _lock(self, tx: Tx, name: str) -> None:
        suffix = self._db.dialect.for_update
        tx.run(f"SELECT name FROM dalenius_ldp_collections WHERE name = ?{suffix}", (name,))

    @staticmethod
    def _lifetime(tx: Tx, spec: CollectionSpec, name: str, client: str) -> tuple[Fraction, int]:
        """A client's lifetime ε and report count, from what it sent under each memo tag: how
        many reports, and how many different ones (a memoised response repeats exactly).
        """
        rows = tx.run(
            "SELECT memo, COUNT(*), COUNT(DISTINCT report) FROM dalenius_ldp_reports "
            "WHERE collection = ? AND client = ? GROUP BY memo",
            (name, client),
        )
        counts = [int(r[1]) for r in rows]
        distinct = [int(r[2]) for r in rows]
        return spec.lifetime_epsilon(counts, distinct), sum(counts)

    def _record_client(
        self, tx: Tx, name: str, client: str, epsilon: Fraction, reports: int
    ) -> None:
        params = (str(epsilon), reports, self._now(), name, client)
        tx.run(
            "UPDATE dalenius_ldp_clients SET epsilon = ?, reports = ?, updated_at = ? "
            "WHERE collection = ? AND client = ?",
            params,
        )
        if not tx.run(
            "SELECT 1 FROM dalenius_ldp_clients WHERE collection = ? AND client = ?", (name, client)
        ):
            tx.run(
                "INSERT INTO dalenius_ldp_clients (epsilon, reports, updated_at, collection, client) "
                "VALUES (?, ?, ?, ?, ?)",
                params,
            )

    def reports(self, name: str) -> list[Any]:
        """Every stored report of a collection (canonical JSON, decoded)."""
        self.spec(name)
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT report FROM dalenius_ldp_reports WHERE collection = ? ORDER BY seq", (name,)
            )
        return [json.loads(str(r[0])) for r in rows]

    def observations(self, name: str, spec: CollectionSpec) -> list[Any]:
        """The independent observations among a collection's reports, in arrival order.

        All of a client's reports under one memo tag that repeat one response exactly are one
        observation (1BitMean, dBitFlip), and so are all reports under one RAPPOR tag (they
        share one permanent response; the first is kept): error bars then count devices and
        their values, not how often each device reported. A tag whose reports differ (a client
        that does not memoise) contributes every report, as fresh ones.
        """
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT client, memo, report FROM dalenius_ldp_reports WHERE collection = ? "
                "ORDER BY seq",
                (name,),
            )
        kept = independent(spec.observations, [(str(c), str(m), str(r)) for c, m, r in rows])
        return [json.loads(r) for r in kept]

    def estimate(self, name: str, confidence: float) -> dict[str, Any]:
        """Estimates with error bars from the collection's independent observations."""
        spec = self.spec(name)
        observed = self.observations(name, spec)
        out = spec.estimate(observed, confidence)
        out["reports_received"] = sum(self.report_counts(name).values())
        out["collection"] = name
        out["protocol"] = spec.protocol
        out["epsilon_per_report"] = float(spec.per_report)
        return out

    def series(
        self,
        name: str,
        *,
        period: str,
        start: str,
        horizon: int,
        as_of: str | date | None = None,
        confidence: float = 0.95,
    ) -> dict[str, Any]:
        """Each closed period's estimates and running totals with their intervals
        (:func:`~dalenius.ldp.series.collection_series`); reports grouped by the UTC day they
        arrived. Free: post-processing of reports a device already paid for, within its cap.
        """
        spec = self.spec(name)
        check_series(spec)
        calendar(period, start, horizon)  # every parameter checked before a report is read
        publication_day(as_of, EARLY)
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT client, memo, report, received_at FROM dalenius_ldp_reports "
                "WHERE collection = ? ORDER BY seq",
                (name,),
            )
        arrivals = [Arrival(str(c), str(m), str(r), _day(when)) for c, m, r, when in rows]
        out = collection_series(
            spec,
            arrivals,
            period=period,
            start=start,
            horizon=horizon,
            as_of=as_of,
            confidence=confidence,
        )
        return {"collection": name, **out}

    def clients(self, name: str, limit: int) -> list[dict[str, Any]]:
        """Each client's lifetime ε and report count (largest ε first)."""
        self.spec(name)
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT client, epsilon, reports, updated_at FROM dalenius_ldp_clients "
                "WHERE collection = ?",
                (name,),
            )
        ordered = sorted(rows, key=lambda r: (-Fraction(str(r[1])), str(r[0])))[:limit]
        return [
            {
                "client": str(r[0]),
                "epsilon": float(Fraction(str(r[1]))),
                "epsilon_exact": str(r[1]),
                "reports": int(r[2]),
                "updated_at": str(r[3]),
            }
            for r in ordered
        ]

    def report_counts(self, name: str) -> dict[str, int]:
        """Reports per client (for tests and audits)."""
        with self._db.transaction(write=False) as tx:
            rows = tx.run(
                "SELECT client, COUNT(*) FROM dalenius_ldp_reports WHERE collection = ? GROUP BY client",
                (name,),
            )
        out: dict[str, int] = defaultdict(int)
        for client, count in rows:
            out[str(client)] = int(count)
        return dict(out)
