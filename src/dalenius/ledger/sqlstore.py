"""The ledger's rules over SQL, shared by the SQLite, in-memory and PostgreSQL stores.

Each public operation is one database transaction of a :class:`~dalenius.ledger.storage.Database`,
which supplies what differs between engines: how a transaction begins and is made durable, how
rows are locked (SQLite's ``BEGIN IMMEDIATE`` takes the whole database; PostgreSQL locks the
dataset row with ``SELECT … FOR UPDATE``), and which error means "retry". Statements are written
with ``?`` placeholders; the storage layer rewrites them for psycopg. The stores add only how to
open their database and, for SQLite, its integrity check.

Budget sums are computed in Python from the exact stored rationals (never with SQL arithmetic on
floats). A reservation counts as spent from the moment it is recorded.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from dalenius.accounting import (
    Definition,
    cap_as,
    compose,
    compose_counted,
    convert,
    definition_of,
    minimum,
    parse_definition,
    shortfall,
    zero_loss,
)
from dalenius.accounting import remaining as remaining_of
from dalenius.core.errors import (
    ConfigurationError,
    DaleniusError,
    EvaluationFailed,
    InternalError,
    PostGateOutcome,
    UserError,
    post_gate_error,
)
from dalenius.core.loss import Loss
from dalenius.ledger import policy
from dalenius.ledger.base import (
    ANSWERED,
    BUDGET_SET,
    CACHED,
    CHARGED,
    COMMITTED,
    DATASET_SET,
    EXHAUSTED,
    FAILED,
    GATED,
    LOST,
    PENDING,
    REFUSED,
    RESERVED,
    RETURNED,
    ROLLED_BACK,
    STATUSES,
    AuditRecord,
    BudgetInfo,
    CachedAnswer,
    ChargeRequest,
    DatasetInfo,
    Ledger,
    LedgerEntry,
    Recovery,
    RequestInProgressError,
    Reservation,
    _require_loss,
    _require_name,
)
from dalenius.ledger.codec import decode_loss, encode_loss
from dalenius.ledger.schema import (
    CHARGED_IN,
    DATASET_TOTAL,
    SCHEMA_VERSION,
    UPGRADABLE,
    migrations,
    spent_rebuild,
    spent_recount,
    statements,
)
from dalenius.ledger.storage import Database, Row, Tx, decode_time, encode_time

_CHARGE_COLUMNS = (
    "id, principal, dataset, sql_text, plan_hash, request_key, idempotency_key, loss, charged, "
    "status, answer, created_at, finished_at, detail"
)
_AUDIT_COLUMNS = "seq, at, principal, dataset, sql_text, plan_hash, loss, outcome, detail, entry_id"
_DATASET_COLUMNS = "name, definition, total_cap, fail_closed"
_BUDGET_COLUMNS = "principal, dataset, cap, refresh_days, anchor, exhausted_at"
_GATE_DETAIL = "charged at the data gate, before any read"


def _entry(row: Row) -> LedgerEntry:
    return LedgerEntry(
        id=row[0],
        principal=row[1],
        dataset=row[2],
        sql=row[3],
        plan_hash=row[4],
        request_key=row[5],
        idempotency_key=row[6],
        loss=decode_loss(row[7]),
        charged=decode_loss(row[8]),
        status=row[9],
        answer=row[10],
        created_at=decode_time(row[11]),
        finished_at=None if row[12] is None else decode_time(row[12]),
        detail=row[13],
    )


def _audit_record(row: Row) -> AuditRecord:
    return AuditRecord(
        seq=int(row[0]),
        at=decode_time(row[1]),
        principal=row[2],
        dataset=row[3],
        sql=row[4],
        plan_hash=row[5],
        loss=None if row[6] is None else decode_loss(row[6]),
        outcome=row[7],
        detail=row[8],
        entry_id=row[9],
    )


def _filters(principal: str | None, dataset: str | None) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if principal is not None:
        clauses.append("principal = ?")
        params.append(principal)
    if dataset is not None:
        clauses.append("dataset = ?")
        params.append(dataset)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _check_refresh(refresh_days: int | None) -> None:
    if refresh_days is None:
        return
    if isinstance(refresh_days, bool) or not isinstance(refresh_days, int) or refresh_days < 1:
        raise ConfigurationError(
            f"refresh_days must be a whole number of days >= 1, got {refresh_days!r}.",
            fix="pass refresh_days=30 for a monthly budget, or None for one that never refreshes.",
        )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SqlLedger(Ledger):
    """A :class:`Ledger` whose rules run over SQL transactions of a :class:`Database`.

    Args:
        database: where the ledger lives (:mod:`dalenius.ledger.storage`); its tables are
            created if missing.
        clock: returns the current time (timezone-aware); tests pass a fake one to cross budget
            periods. Defaults to the system clock in UTC.
    """

    def __init__(self, database: Database, *, clock: Callable[[], datetime] | None = None) -> None:
        self._db = database
        self._for_update = database.dialect.for_update
        self._clock = clock or _utc_now
        self._lock = threading.RLock()
        try:
            self._init_schema()
        except BaseException:
            database.close()
            raise

    # -- what a store supplies -------------------------------------------------------------

    def _transaction(self, *, write: bool, synced: bool = True) -> AbstractContextManager[Tx]:
        """A transaction: committed on normal exit (synced to disk unless ``synced=False``),
        rolled back on an exception.
        """
        return self._db.transaction(write=write, synced=synced)

    def _prepare_schema(self, tx: Tx) -> None:
        """Serialise concurrent schema creation, where the engine needs it."""

    def _integrity_problems(self, tx: Tx) -> list[str]:
        """Problems the storage engine itself reports (page corruption and the like)."""
        return []

    # -- shared helpers --------------------------------------------------------------------

    def _now(self) -> datetime:
        moment = self._clock()
        if moment.tzinfo is None:
            raise InternalError("The ledger's clock returned a naive datetime.")
        return moment.astimezone(UTC)

    def _init_schema(self) -> None:
        with self._transaction(write=True) as tx:
            self._prepare_schema(tx)
            for statement in statements(self._db.dialect.name):
                tx.run(statement)
            rows = tx.run("SELECT value FROM dalenius_meta WHERE key = 'schema_version'")
            if not rows:
                tx.run(
                    "INSERT INTO dalenius_meta (key, value) VALUES ('schema_version', ?)",
                    (SCHEMA_VERSION,),
                )
            elif rows[0][0] != SCHEMA_VERSION:
                if rows[0][0] not in UPGRADABLE:
                    raise ConfigurationError(
                        f"This ledger was written with schema version {rows[0][0]}; "
                        f"this Dalenius reads version {SCHEMA_VERSION}.",
                        fix="open it with the Dalenius version that created it.",
                    )
                for statement in migrations(self._db.dialect.name, rows[0][0]):
                    tx.run(statement)
                tx.run(
                    "UPDATE dalenius_meta SET value = ? WHERE key = 'schema_version'",
                    (SCHEMA_VERSION,),
                )

    def _audit(
        self,
        tx: Tx,
        now: datetime,
        about: LedgerEntry | ChargeRequest | _Subject,
        *lines: tuple[str, str],
        loss: Loss | None = None,
        entry_id: str | None = None,
    ) -> None:
        """Write one audit line per ``(outcome, detail)`` about an entry, a request or a subject.

        About an entry, the line carries its charge and id unless ``loss``/``entry_id`` say
        otherwise. Several lines are one statement.
        """
        if isinstance(about, LedgerEntry):
            loss = about.charged if loss is None else loss
            entry_id = about.id if entry_id is None else entry_id
        head = (
            encode_time(now),
            about.principal,
            about.dataset,
            about.sql,
            about.plan_hash,
            None if loss is None else encode_loss(loss),
        )
        values: list[object] = []
        for outcome, detail in lines:
            values.extend((*head, outcome, detail, entry_id))
        tx.run(
            "INSERT INTO dalenius_audit (at, principal, dataset, sql_text, plan_hash, loss, "
            "outcome, detail, entry_id) VALUES "
            + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(lines)),
            values,
        )

    def _dataset(self, tx: Tx, name: str, *, lock: bool = False) -> DatasetInfo | None:
        rows = tx.run(
            f"SELECT {_DATASET_COLUMNS} FROM dalenius_datasets WHERE name = ?"
            + (self._for_update if lock else ""),
            (name,),
        )
        return _dataset_info(rows[0]) if rows else None

    def _budget(
        self, tx: Tx, principal: str, dataset: str, *, lock: bool = False
    ) -> BudgetInfo | None:
        rows = tx.run(
            f"SELECT {_BUDGET_COLUMNS} FROM dalenius_budgets "
            "WHERE principal = ? AND dataset = ?" + (self._for_update if lock else ""),
            (principal, dataset),
        )
        if not rows:
            return None
        return _budget_info(rows[0])

    def _sum(
        self,
        tx: Tx,
        definition: Definition,
        dataset: str,
        principal: str | None = None,
        since: datetime | None = None,
    ) -> Loss:
        """What ``principal`` (``None``: the dataset's releases, for its total cap) has spent on
        ``dataset``, charged since ``since`` (``None``: ever).
        """
        if since is None:
            # The running counts: a few rows (one per distinct loss), however long the history.
            rows = tx.run(
                "SELECT charged, releases FROM dalenius_spent WHERE dataset = ? "
                "AND principal = ? AND releases > 0",
                (dataset, DATASET_TOTAL if principal is None else principal),
            )
            return compose_counted(((decode_loss(row[0]), int(row[1])) for row in rows), definition)
        # A period: the charges since it began, counted from the covering index.
        sql = f"SELECT charged, COUNT(*) FROM dalenius_charges WHERE dataset = ? AND {CHARGED_IN}"
        params: list[object] = [dataset]
        if principal is not None:
            sql += " AND principal = ?"
            params.append(principal)
        else:
            # The dataset's total counts each release once: shared answers are not new releases.
            sql += " AND id NOT IN (SELECT entry_id FROM dalenius_shared)"
        sql += " AND created_at >= ? GROUP BY charged"
        params.append(encode_time(since))
        rows = tx.run(sql, params)
        return compose_counted(((decode_loss(row[0]), int(row[1])) for row in rows), definition)

    def _spent_in(self, tx: Tx, principal: str, dataset: str, now: datetime) -> Loss:
        info = self._dataset(tx, dataset)
        if info is None:
            return zero_loss("pure")
        budget = self._budget(tx, principal, dataset)
        since = None if budget is None else policy.period_start(budget, now)
        return self._sum(tx, info.definition, dataset, principal, since)

    def _remaining_in(self, tx: Tx, principal: str, dataset: str, now: datetime) -> Loss:
        info = self._dataset(tx, dataset)
        if info is None:
            return zero_loss("pure")
        return self._left(tx, info, self._budget(tx, principal, dataset), principal, now)

    def _left(
        self,
        tx: Tx,
        info: DatasetInfo,
        budget: BudgetInfo | None,
        principal: str,
        now: datetime,
    ) -> Loss:
        """What ``principal`` may still spend on ``info``'s dataset under ``budget`` (both as
        this transaction read them), within the dataset's total cap.
        """
        dataset = info.name
        if budget is None or budget.exhausted_at is not None:
            return zero_loss(info.definition)
        since = policy.period_start(budget, now)
        left = remaining_of(self._sum(tx, info.definition, dataset, principal, since), budget.cap)
        if info.total_cap is not None:
            shared = remaining_of(self._sum(tx, info.definition, dataset), info.total_cap)
            left = minimum(left, shared)
        return left

    def _locked_entry(self, tx: Tx, reservation_id: str) -> LedgerEntry:
        rows = tx.run(
            f"SELECT {_CHARGE_COLUMNS} FROM dalenius_charges WHERE id = ?" + self._for_update,
            (reservation_id,),
        )
        if not rows:
            raise InternalError(f"The ledger has no reservation {reservation_id!r}.")
        return _entry(rows[0])

    # -- datasets and budgets ----------------------------------------------------------------

    def set_dataset(
        self,
        dataset: str,
        *,
        definition: str = "pure",
        total_cap: Loss | None = None,
        fail_closed: bool | None = None,
    ) -> None:
        """Register a dataset's definition and, optionally, its total cap (see :class:`Ledger`)."""
        if fail_closed is not None and not isinstance(fail_closed, bool):
            raise ConfigurationError(
                f"fail_closed must be True or False, got {fail_closed!r}.",
                fix="pass fail_closed=True to exhaust an analyst's budget after a failure.",
            )
        _require_name(dataset, "dataset")
        target = parse_definition(definition)
        cap: Loss | None = None
        if total_cap is not None:
            _require_loss(total_cap, "total cap")
            cap = cap_as(total_cap, target)
        with self._lock:
            self._db.retrying(lambda: self._set_dataset(dataset, target, cap, fail_closed))

    def _set_dataset(
        self, dataset: str, definition: Definition, cap: Loss | None, fail_closed: bool | None
    ) -> None:
        with self._transaction(write=True) as tx:
            now = self._now()
            current = self._dataset(tx, dataset, lock=True)
            if current is None:
                tx.run(
                    "INSERT INTO dalenius_datasets (name, definition, total_cap, created_at, "
                    "fail_closed) VALUES (?, ?, ?, ?, ?)",
                    (
                        dataset,
                        definition,
                        None if cap is None else encode_loss(cap),
                        encode_time(now),
                        int(bool(fail_closed)),
                    ),
                )
            else:
                if current.definition != definition:
                    converted = self._switch_definition(tx, current, definition, now)
                    if cap is None:
                        cap = converted
                tx.run(
                    "UPDATE dalenius_datasets SET definition = ?, "
                    "total_cap = COALESCE(?, total_cap), fail_closed = COALESCE(?, fail_closed) "
                    "WHERE name = ?",
                    (
                        definition,
                        None if cap is None else encode_loss(cap),
                        None if fail_closed is None else int(fail_closed),
                        dataset,
                    ),
                )
            detail = f"definition {definition}" + ("" if cap is None else f", total cap {cap}")
            if fail_closed is not None:
                detail += ", fail closed" if fail_closed else ", fail open"
            self._audit(tx, now, _Subject("", dataset), (DATASET_SET, detail), loss=cap)

    def _switch_definition(
        self, tx: Tx, current: DatasetInfo, definition: Definition, now: datetime
    ) -> Loss | None:
        """Re-express every charge and cap of a dataset in a new definition, or refuse.

        Charges convert *up* (:func:`~dalenius.accounting.convert`: pure ε is (ε, 0) or exactly
        ρ = ε²/2) and caps *down* (:func:`~dalenius.accounting.cap_as`), so what was spent is
        never under-counted and what is allowed never grows. If any charge or cap has no sound
        conversion, nothing changes. Returns the converted total cap (``None`` if there is none).
        """
        dataset = current.name
        charges = tx.run(
            "SELECT id, charged FROM dalenius_charges WHERE dataset = ?" + self._for_update,
            (dataset,),
        )
        budgets = tx.run(
            "SELECT principal, cap FROM dalenius_budgets WHERE dataset = ?" + self._for_update,
            (dataset,),
        )
        try:
            new_charges = [(ident, convert(decode_loss(c), definition)) for ident, c in charges]
            new_caps = [(who, cap_as(decode_loss(c), definition)) for who, c in budgets]
            total = None if current.total_cap is None else cap_as(current.total_cap, definition)
        except ConfigurationError as error:
            raise ConfigurationError(
                f"Dataset {dataset!r} cannot switch from {current.definition!r} to "
                f"{definition!r} accounting: {error.what}",
                why=error.why or "a stored charge or cap has no sound conversion.",
                fix=(
                    f"keep definition={current.definition!r}"
                    + (
                        ", or switch to 'approx' (pure charges carry over as (ε, 0))"
                        if current.definition == "pure" and definition != "approx"
                        else ""
                    )
                    + ", or register the data under a new dataset name."
                ),
            ) from None
        for ident, loss in new_charges:
            tx.run(
                "UPDATE dalenius_charges SET charged = ? WHERE id = ?", (encode_loss(loss), ident)
            )
        for who, cap in new_caps:
            tx.run(
                "UPDATE dalenius_budgets SET cap = ? WHERE principal = ? AND dataset = ?",
                (encode_loss(cap), who, dataset),
            )
        switched = (
            f"accounting switched from {current.definition} to {definition}: "
            f"{len(new_charges)} charges and {len(new_caps)} budgets converted"
        )
        self._audit(tx, now, _Subject("", dataset), (DATASET_SET, switched))
        return total

    def remove_total_cap(self, dataset: str) -> None:
        """Lift a dataset's total cap (analysts' own budgets still apply)."""
        _require_name(dataset, "dataset")
        with self._lock, self._transaction(write=True) as tx:
            now = self._now()
            if self._dataset(tx, dataset, lock=True) is None:
                raise ConfigurationError(f"The ledger has no dataset {dataset!r}.")
            tx.run("UPDATE dalenius_datasets SET total_cap = NULL WHERE name = ?", (dataset,))
            self._audit(tx, now, _Subject("", dataset), (DATASET_SET, "total cap removed"))

    def set_budget(
        self, principal: str, dataset: str, cap: Loss, *, refresh_days: int | None = None
    ) -> None:
        """Set an analyst's cap on a dataset (see :class:`Ledger`)."""
        _require_name(principal, "analyst")
        _require_name(dataset, "dataset")
        _require_loss(cap, "budget")
        _check_refresh(refresh_days)
        with self._lock:
            self._db.retrying(lambda: self._set_budget(principal, dataset, cap, refresh_days))

    def _set_budget(
        self, principal: str, dataset: str, cap: Loss, refresh_days: int | None
    ) -> None:
        with self._transaction(write=True) as tx:
            now = self._now()
            info = self._dataset(tx, dataset, lock=True)
            if info is None:
                definition = definition_of(cap)
                tx.run(
                    "INSERT INTO dalenius_datasets (name, definition, total_cap, created_at) "
                    "VALUES (?, ?, NULL, ?)",
                    (dataset, definition, encode_time(now)),
                )
            else:
                definition = info.definition
            policy.check_no_part_dropped(principal, dataset, cap, definition)
            stored = cap_as(cap, definition)
            current = self._budget(tx, principal, dataset, lock=True)
            anchor = now if current is None else current.anchor
            tx.run(
                "INSERT INTO dalenius_budgets (principal, dataset, cap, refresh_days, anchor) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (principal, dataset) DO UPDATE SET "
                "cap = excluded.cap, refresh_days = excluded.refresh_days, exhausted_at = NULL",
                (principal, dataset, encode_loss(stored), refresh_days, encode_time(anchor)),
            )
            every = "" if refresh_days is None else f", refreshed every {refresh_days} days"
            about = _Subject(principal, dataset)
            self._audit(tx, now, about, (BUDGET_SET, f"budget {stored}{every}"), loss=stored)

    def get_budget(self, principal: str, dataset: str) -> Loss | None:
        """The analyst's cap on the dataset, in the dataset's definition, or ``None``."""
        with self._lock, self._transaction(write=False) as tx:
            budget = self._budget(tx, principal, dataset)
            return None if budget is None else budget.cap

    def remaining(self, principal: str, dataset: str) -> Loss:
        """What the analyst may still spend now (see :class:`Ledger`)."""
        with self._lock, self._transaction(write=False) as tx:
            return self._remaining_in(tx, principal, dataset, self._now())

    def spent(self, principal: str, dataset: str) -> Loss:
        """What the analyst spent in the current period (see :class:`Ledger`)."""
        with self._lock, self._transaction(write=False) as tx:
            return self._spent_in(tx, principal, dataset, self._now())

    def total_spent(self, dataset: str) -> Loss:
        """What all analysts together spent on the dataset, ever."""
        with self._lock, self._transaction(write=False) as tx:
            info = self._dataset(tx, dataset)
            if info is None:
                return zero_loss("pure")
            return self._sum(tx, info.definition, dataset)

    # -- the release protocol ----------------------------------------------------------------

    def reserve(
        self, request: ChargeRequest, *, charge: bool = False
    ) -> Reservation | CachedAnswer:
        """Answer from the record, or check every cap and hold the loss (see :class:`Ledger`)."""
        if not isinstance(request, ChargeRequest):
            raise ConfigurationError(
                f"reserve() takes a ChargeRequest, got {type(request).__name__}."
            )
        with self._lock:
            outcome: Reservation | CachedAnswer | DaleniusError = self._db.retrying(
                lambda: self._reserve(request, charge)
            )
        if isinstance(outcome, DaleniusError):
            raise outcome
        return outcome

    def _reserve(
        self, request: ChargeRequest, charge: bool
    ) -> Reservation | CachedAnswer | DaleniusError:
        with self._transaction(write=True) as tx:
            now = self._now()
            # Locks the dataset row first (PostgreSQL), so checks and insert are one atomic step
            # with respect to every other reserve on this dataset, in any process.
            info = self._dataset(tx, request.dataset, lock=True)
            budget = self._budget(tx, request.principal, request.dataset, lock=True)
            decision = self._decide(tx, request, info, budget, now)
            if isinstance(decision, _Shared):
                shared = self._record_shared(tx, request, decision, now)
                return self._with_remaining(tx, shared, info, budget, request, now)
            if isinstance(decision, CachedAnswer):
                why = f"answered from entry {decision.entry_id} at no cost"
                self._audit(tx, now, request, (CACHED, why), entry_id=decision.entry_id)
                return self._with_remaining(tx, decision, info, budget, request, now)
            if isinstance(decision, EvaluationFailed):
                why = "the recorded failure after the data gate returned again, at no cost"
                self._audit(tx, now, request, (CACHED, why))
                return decision
            if isinstance(decision, DaleniusError):
                why = decision.what if isinstance(decision, UserError) else str(decision)
                self._audit(tx, now, request, (REFUSED, why), loss=request.loss)
                return decision
            reservation = Reservation(
                uuid.uuid4().hex, request, charged=charge, remaining=decision.remaining
            )
            tx.run(
                f"INSERT INTO dalenius_charges ({_CHARGE_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL, '')",
                (
                    reservation.id,
                    request.principal,
                    request.dataset,
                    request.sql,
                    request.plan_hash,
                    request.request_key,
                    request.idempotency_key,
                    encode_loss(request.loss),
                    encode_loss(decision.charged),
                    CHARGED if charge else PENDING,
                    encode_time(now),
                ),
            )
            lines = [(RESERVED, "reserved before reading data")]
            if charge:
                lines.append((GATED, _GATE_DETAIL))
            self._audit(tx, now, request, *lines, loss=decision.charged, entry_id=reservation.id)
            return reservation

    def _with_remaining(
        self,
        tx: Tx,
        answer: CachedAnswer,
        info: DatasetInfo | None,
        budget: BudgetInfo | None,
        request: ChargeRequest,
        now: datetime,
    ) -> CachedAnswer:
        """``answer`` with what the analyst has left, read in the transaction that found it (the
        caller shows it beside the answer without a transaction of its own).
        """
        if info is None:
            left = zero_loss("pure")
        else:
            left = self._left(tx, info, budget, request.principal, now)
        return replace(answer, remaining=left)

    def _shared_source(self, tx: Tx, request: ChargeRequest) -> LedgerEntry | None:
        """Another analyst's committed release of the same request on this dataset, if any."""
        # `status || ''` keeps SQLite's planner off the index by status, whose order it would
        # otherwise prefer to reading the few entries of this request (every committed entry
        # of every dataset against a handful); PostgreSQL plans it as before.
        rows = tx.run(
            f"SELECT {_CHARGE_COLUMNS} FROM dalenius_charges WHERE dataset = ? "
            "AND request_key = ? AND status || '' = 'committed' "
            "AND id NOT IN (SELECT entry_id FROM dalenius_shared) ORDER BY created_at, id LIMIT 1",
            (request.dataset, request.request_key),
        )
        return _entry(rows[0]) if rows else None

    def _record_shared(
        self, tx: Tx, request: ChargeRequest, shared: _Shared, now: datetime
    ) -> CachedAnswer:
        """Record a shared answer for this analyst: committed at once, charged to them only."""
        ident = uuid.uuid4().hex
        source = shared.source
        tx.run(
            f"INSERT INTO dalenius_charges ({_CHARGE_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ident,
                request.principal,
                request.dataset,
                request.sql,
                request.plan_hash,
                request.request_key,
                request.idempotency_key,
                encode_loss(request.loss),
                encode_loss(shared.charged),
                COMMITTED,
                source.answer or "",
                encode_time(now),
                encode_time(now),
                f"shared answer of entry {source.id}",
            ),
        )
        tx.run(
            "INSERT INTO dalenius_shared (entry_id, source_id) VALUES (?, ?)", (ident, source.id)
        )
        why = (
            f"the release of entry {source.id}, shared: charged to this analyst's budget, "
            "not again to the dataset's total cap"
        )
        self._audit(tx, now, request, (ANSWERED, why), loss=shared.charged, entry_id=ident)
        return CachedAnswer(ident, source.answer or "", request.loss, now, shared_from=source.id)

    def _decide(
        self,
        tx: Tx,
        request: ChargeRequest,
        info: DatasetInfo | None,
        budget: BudgetInfo | None,
        now: datetime,
    ) -> _Grant | CachedAnswer | DaleniusError | _Shared:
        """The answer from the record, a refusal, or the loss to charge (in the dataset's type)."""
        if request.idempotency_key is not None:
            rows = tx.run(
                f"SELECT {_CHARGE_COLUMNS} FROM dalenius_charges WHERE principal = ? "
                "AND idempotency_key = ? AND status <> 'rolled_back'",
                (request.principal, request.idempotency_key),
            )
            if rows:
                return _replay(_entry(rows[0]), request)
        rows = tx.run(
            f"SELECT {_CHARGE_COLUMNS} FROM dalenius_charges WHERE principal = ? AND dataset = ? "
            "AND request_key = ? AND status = 'committed' ORDER BY created_at, id LIMIT 1",
            (request.principal, request.dataset, request.request_key),
        )
        if rows:
            entry = _entry(rows[0])
            return CachedAnswer(entry.id, entry.answer or "", entry.loss, entry.created_at)
        if info is None or budget is None:
            return policy.no_budget(request.principal, request.dataset, request.loss)
        if budget.exhausted_at is not None:
            return policy.exhausted(request.principal, request.dataset, request.loss, budget)
        try:
            charged = convert(request.loss, info.definition)
        except ConfigurationError as error:
            if info.definition == "pure":
                return ConfigurationError(
                    error.what,
                    why=error.why,
                    fix=policy.approx_needed(request.principal, request.dataset, budget.cap),
                )
            return error
        since = policy.period_start(budget, now)
        spent = self._sum(tx, info.definition, request.dataset, request.principal, since)
        short = shortfall(spent, charged, budget.cap)
        if short is not None:
            return policy.over_budget(
                request.principal, request.dataset, short, policy.period_end(budget, now)
            )
        left = remaining_of(compose((spent, charged), info.definition), budget.cap)
        if info.total_cap is not None:
            source = self._shared_source(tx, request)
            if source is not None:
                return _Shared(source, charged)
            total = self._sum(tx, info.definition, request.dataset)
            short = shortfall(total, charged, info.total_cap)
            if short is not None:
                return policy.over_total(request.dataset, short)
            shared_left = remaining_of(compose((total, charged), info.definition), info.total_cap)
            left = minimum(left, shared_left)
        return _Grant(charged, left)

    def charge(self, reservation: Reservation) -> None:
        """The data gate: pending becomes charged, durably (see :class:`Ledger`). A transaction
        that loses a race (PostgreSQL's deadlock detector) rolled back whole and is run again.
        """
        with self._lock:
            self._db.retrying(lambda: self._charge(reservation))

    def _charge(self, reservation: Reservation) -> None:
        with self._transaction(write=True) as tx:
            now = self._now()
            entry = self._locked_entry(tx, reservation.id)
            if entry.status != PENDING:
                raise InternalError(
                    f"Reservation {entry.id} is {entry.status}, not pending; it cannot pass the "
                    "data gate."
                )
            tx.run(
                "UPDATE dalenius_charges SET status = ? WHERE id = ? AND status = ?",
                (CHARGED, entry.id, PENDING),
            )
            self._audit(tx, now, entry, (GATED, _GATE_DETAIL))

    def release(self, reservation: Reservation, reason: str) -> bool:
        """Return a reservation that never reached the data gate (see :class:`Ledger`); run
        again if its transaction loses a race, as :meth:`charge` is.
        """
        with self._lock:
            released: bool = self._db.retrying(lambda: self._release(reservation, reason))
        return released

    def _release(self, reservation: Reservation, reason: str) -> bool:
        with self._transaction(write=True) as tx:
            now = self._now()
            entry = self._locked_entry(tx, reservation.id)
            if entry.status == ROLLED_BACK:
                return True
            if entry.status != PENDING:
                return False
            tx.run(
                "UPDATE dalenius_charges SET status = ?, finished_at = ?, detail = ? WHERE id = ?",
                (ROLLED_BACK, encode_time(now), str(reason), entry.id),
            )
            self._audit(
                tx,
                now,
                entry,
                (RETURNED, f"returned before the data gate, nothing spent: {reason}"),
            )
            return True

    def commit(self, reservation: Reservation, answer: str) -> str:
        """Record the released answer, not synced on its own; the entry id (see :class:`Ledger`)."""
        if not isinstance(answer, str):
            raise InternalError(
                f"commit() needs the answer as JSON text, got {type(answer).__name__}."
            )
        # Not synced: what protects the budget (the charge) is on disk already, and the next
        # synced commit (any reserve) flushes this one too. A power cut before that loses only
        # the record of the answer: the entry stays charged, recover() marks it lost, and a
        # retry pays again instead of replaying — never a refund. A crash of the process loses
        # nothing. This saves one fsync per query (see docs/ledger.md).
        with self._lock:
            entry_id: str = self._db.retrying(lambda: self._commit(reservation, answer))
        return entry_id

    def _commit(self, reservation: Reservation, answer: str) -> str:
        with self._transaction(write=True, synced=False) as tx:
            now = self._now()
            entry = self._locked_entry(tx, reservation.id)
            if entry.status not in (CHARGED, LOST):
                raise InternalError(
                    f"Reservation {entry.id} is {entry.status} ({entry.detail or 'no detail'}); "
                    "only a charge past the data gate can be committed."
                )
            tx.run(
                "UPDATE dalenius_charges SET status = ?, answer = ?, finished_at = ? WHERE id = ?",
                (COMMITTED, answer, encode_time(now), entry.id),
            )
            detail = "released" if entry.status == CHARGED else "released after being marked lost"
            self._audit(tx, now, entry, (ANSWERED, detail))
        return entry.id

    def fail(
        self,
        reservation: Reservation,
        detail: str,
        outcome: PostGateOutcome = PostGateOutcome.FAILED,
    ) -> PostGateOutcome:
        """Record a failure after the data gate; the charge stays (see :class:`Ledger`)."""
        with self._lock, self._transaction(write=True) as tx:
            now = self._now()
            entry = self._locked_entry(tx, reservation.id)
            if entry.status == FAILED:
                return PostGateOutcome.from_code(entry.detail)
            if entry.status == COMMITTED:
                return outcome
            if entry.status not in (CHARGED, LOST):
                raise InternalError(
                    f"Reservation {entry.id} is {entry.status}: it never passed the data gate, "
                    "so it is returned with release(), not failed."
                )
            # The entry's own detail is the constant outcome code: analysts may read their
            # entries; the engine's message goes to the audit trail only.
            tx.run(
                "UPDATE dalenius_charges SET status = ?, finished_at = ?, detail = ? WHERE id = ?",
                (FAILED, encode_time(now), outcome.code, entry.id),
            )
            audit = FAILED if outcome is PostGateOutcome.FAILED else outcome.code
            self._audit(tx, now, entry, (audit, f"failed after the data gate, charged: {detail}"))
            info = self._dataset(tx, entry.dataset, lock=True)
            if info is not None and info.fail_closed:
                tx.run(
                    "UPDATE dalenius_budgets SET exhausted_at = ? "
                    "WHERE principal = ? AND dataset = ? AND exhausted_at IS NULL",
                    (encode_time(now), entry.principal, entry.dataset),
                )
                self._audit(
                    tx, now, entry, (EXHAUSTED, "budget exhausted: the dataset fails closed")
                )
        return outcome

    def recover(self, older_than: timedelta = timedelta(minutes=10)) -> Recovery:
        """Return stale reservations that never reached the gate; mark stale charges lost."""
        if older_than < timedelta(0):
            raise ConfigurationError(f"older_than must be >= 0, got {older_than}.")
        with self._lock, self._transaction(write=True) as tx:
            now = self._now()
            rows = tx.run(
                f"SELECT {_CHARGE_COLUMNS} FROM dalenius_charges WHERE status IN (?, ?) "
                "AND created_at <= ? ORDER BY created_at, id" + self._for_update,
                (PENDING, CHARGED, encode_time(now - older_than)),
            )
            stale = [_entry(row) for row in rows]
            returned = "never reached the data gate (its process stopped); returned"
            lost = "passed the data gate but never finished (its process stopped); kept charged"
            for entry in stale:
                status, why = (ROLLED_BACK, returned) if entry.status == PENDING else (LOST, lost)
                tx.run(
                    "UPDATE dalenius_charges SET status = ?, finished_at = ?, detail = ? "
                    "WHERE id = ?",
                    (status, encode_time(now), why, entry.id),
                )
                audit = RETURNED if status == ROLLED_BACK else LOST
                self._audit(tx, now, entry, (audit, why))
        return Recovery(
            returned=tuple(e.id for e in stale if e.status == PENDING),
            lost=tuple(e.id for e in stale if e.status == CHARGED),
        )

    def failure_counts(self) -> dict[str, int]:
        """Failures after the data gate per dataset (see :class:`Ledger`)."""
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.run(
                "SELECT dataset, COUNT(*) FROM dalenius_charges WHERE status IN (?, ?) "
                "GROUP BY dataset ORDER BY dataset",
                (FAILED, LOST),
            )
        return {str(name): int(count) for name, count in rows}

    def record(
        self,
        *,
        principal: str,
        dataset: str,
        sql: str,
        outcome: str,
        detail: str,
        plan_hash: str | None = None,
        loss: Loss | None = None,
    ) -> None:
        """Write an audit line for a request refused or failed outside the ledger."""
        _require_name(outcome, "outcome")
        if loss is not None:
            _require_loss(loss, "loss")
        about = _Subject(principal, dataset, sql, plan_hash)
        with self._lock, self._transaction(write=True) as tx:
            self._audit(tx, self._now(), about, (outcome, detail), loss=loss)

    # -- reading the record ------------------------------------------------------------------

    def entries(
        self, principal: str | None = None, dataset: str | None = None
    ) -> list[LedgerEntry]:
        """Every charge (any status), oldest first, optionally filtered."""
        where, params = _filters(principal, dataset)
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.run(
                f"SELECT {_CHARGE_COLUMNS} FROM dalenius_charges{where} ORDER BY created_at, id",
                params,
            )
        return [_entry(row) for row in rows]

    def audit(self, principal: str | None = None, dataset: str | None = None) -> list[AuditRecord]:
        """The audit trail in order, optionally filtered."""
        where, params = _filters(principal, dataset)
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.run(
                f"SELECT {_AUDIT_COLUMNS} FROM dalenius_audit{where} ORDER BY seq", params
            )
        return [_audit_record(row) for row in rows]

    def datasets(self) -> list[DatasetInfo]:
        """Every registered dataset, by name."""
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.run(f"SELECT {_DATASET_COLUMNS} FROM dalenius_datasets ORDER BY name")
        return [_dataset_info(row) for row in rows]

    def budgets(self, principal: str | None = None, dataset: str | None = None) -> list[BudgetInfo]:
        """Every budget, by dataset then analyst, optionally filtered."""
        where, params = _filters(principal, dataset)
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.run(
                f"SELECT {_BUDGET_COLUMNS} FROM dalenius_budgets"
                f"{where} ORDER BY dataset, principal",
                params,
            )
        return [_budget_info(row) for row in rows]

    def verify(self) -> list[str]:
        """Check storage integrity and the ledger's invariants; return the problems found."""
        with self._lock, self._transaction(write=False) as tx:
            problems = self._integrity_problems(tx)
            problems.extend(_invariant_problems(tx))
        return problems

    def recount(self) -> list[str]:
        """Rebuild the running counts from the charges (see :class:`Ledger`)."""
        with self._lock, self._transaction(write=True) as tx:
            now = self._now()
            self._hold_counts(tx)
            differences = _count_differences(tx)
            for statement in spent_rebuild():
                tx.run(statement)
            for dataset in sorted({difference[0] for difference in differences}):
                mine = [d for d in differences if d[0] == dataset]
                detail = "running counts of what was spent recounted from the charges: " + (
                    "; ".join(_count_problems(mine))
                )
                self._audit(tx, now, _Subject("", dataset), (DATASET_SET, detail))
        return _count_problems(differences)

    def _hold_counts(self, tx: Tx) -> None:
        """Keep other writers off the counts until this transaction ends (SQLite's write
        transaction already holds the whole file).
        """

    def close(self) -> None:
        """Close the store's connections; later calls raise :class:`InternalError`."""
        with self._lock:
            self._db.close()


@dataclass(frozen=True)
class _Subject:
    """What an audit line is about when it is neither a request nor an entry."""

    principal: str
    dataset: str
    sql: str = ""
    plan_hash: str | None = None


@dataclass(frozen=True)
class _Grant:
    """A decision of :meth:`SqlLedger._decide`: charge ``charged``; ``remaining`` is left after."""

    charged: Loss
    remaining: Loss


@dataclass(frozen=True)
class _Shared:
    """A decision of :meth:`SqlLedger._decide`: serve ``source``'s release, charging ``charged``."""

    source: LedgerEntry
    charged: Loss


def _budget_info(row: Row) -> BudgetInfo:
    principal, dataset, cap, refresh, anchor, exhausted = row
    return BudgetInfo(
        principal,
        dataset,
        decode_loss(cap),
        None if refresh is None else int(refresh),
        decode_time(anchor),
        None if exhausted is None else decode_time(exhausted),
    )


def _dataset_info(row: Row) -> DatasetInfo:
    name, definition, cap, fail_closed = row
    total = None if cap is None else decode_loss(cap)
    return DatasetInfo(name, parse_definition(definition), total, bool(fail_closed))


def _replay(entry: LedgerEntry, request: ChargeRequest) -> CachedAnswer | DaleniusError:
    """The outcome of a retried request whose idempotency key is already on record."""
    if entry.request_key != request.request_key or entry.dataset != request.dataset:
        return ConfigurationError(
            f"Idempotency key {request.idempotency_key!r} was already used for a different request "
            f"(entry {entry.id}).",
            why="a key names one request, so a retry can be answered without charging twice.",
            fix="use a fresh idempotency key for each new request.",
        )
    if entry.status == COMMITTED:
        return CachedAnswer(entry.id, entry.answer or "", entry.loss, entry.created_at)
    if entry.status == FAILED:
        return post_gate_error(PostGateOutcome.from_code(entry.detail))
    if entry.status == LOST:
        return RequestInProgressError(
            f"The request with idempotency key {request.idempotency_key!r} was lost when its "
            f"gateway stopped (entry {entry.id}); it stays charged.",
            why="it passed the data gate, so it cannot be returned or silently re-run.",
            fix="send the request again with a new idempotency key.",
        )
    return RequestInProgressError(
        f"The request with idempotency key {request.idempotency_key!r} is still in progress "
        f"(entry {entry.id}).",
        why="answering it twice would charge twice.",
        fix="retry in a moment; if its gateway crashed, run recover() first.",
    )


def _invariant_problems(tx: Tx) -> list[str]:
    """Problems in the ledger's own records: malformed losses, answers without charges, etc."""
    problems: list[str] = []
    definitions: dict[str, str] = {}
    for name, definition, cap in tx.run(
        "SELECT name, definition, total_cap FROM dalenius_datasets"
    ):
        definitions[name] = definition
        problems.extend(_loss_problems(cap, f"total cap of dataset {name!r}", definition, True))
    for principal, dataset, cap in tx.run("SELECT principal, dataset, cap FROM dalenius_budgets"):
        where = f"budget of {principal!r} on {dataset!r}"
        problems.extend(_loss_problems(cap, where, definitions.get(dataset), False))
    gated = {
        row[0]
        for row in tx.run(
            "SELECT entry_id FROM dalenius_audit WHERE outcome = ? AND entry_id IS NOT NULL",
            (GATED,),
        )
    }
    answered = {
        row[0]
        for row in tx.run(
            "SELECT entry_id FROM dalenius_audit WHERE outcome = ? AND entry_id IS NOT NULL",
            (ANSWERED,),
        )
    }
    for row in tx.run(f"SELECT {_CHARGE_COLUMNS} FROM dalenius_charges"):
        ident, dataset, loss, charged, status, answer = (
            row[0],
            row[2],
            row[7],
            row[8],
            row[9],
            row[10],
        )
        problems.extend(_loss_problems(loss, f"loss of entry {ident}", None, False))
        problems.extend(
            _loss_problems(charged, f"charge of entry {ident}", definitions.get(dataset), False)
        )
        if (status == COMMITTED) != (answer is not None):
            problems.append(f"entry {ident} has status {status} but answer={answer is not None}")
        if status == COMMITTED and ident not in answered:
            problems.append(f"committed entry {ident} has no 'answered' audit line")
        if status not in STATUSES:
            problems.append(f"entry {ident} has unknown status {status!r}")
        if status in (CHARGED, FAILED) and ident not in gated:
            problems.append(f"entry {ident} is {status} but has no data-gate audit line")
    problems.extend(_count_problems(_count_differences(tx)))
    return problems


def _count_differences(tx: Tx) -> list[tuple[str, str, str, int, int]]:
    """Where the running counts of ``dalenius_spent`` differ from a count of the charges:
    (dataset, principal, charged, kept, counted), ``principal`` empty for a dataset's total.
    """
    kept = {
        (str(d), str(p), str(c)): int(n)
        for d, p, c, n in tx.run(
            "SELECT dataset, principal, charged, releases FROM dalenius_spent WHERE releases > 0"
        )
    }
    recount = {
        (str(d), str(p), str(c)): int(n)
        for query in spent_recount()
        for d, p, c, n in tx.run(query)
    }
    return [
        (*key, kept.get(key, 0), recount.get(key, 0))
        for key in sorted(kept.keys() | recount.keys())
        if kept.get(key, 0) != recount.get(key, 0)
    ]


def _count_problems(differences: list[tuple[str, str, str, int, int]]) -> list[str]:
    """Differences found by :func:`_count_differences`, in words."""
    problems = []
    for dataset, principal, charged, has, should in differences:
        whose = f"analyst {principal!r}" if principal else "the dataset's total"
        problems.append(
            f"running count of {charged} charges of {whose} on {dataset!r} is {has}, but the "
            f"ledger holds {should} (repair: dalenius ledger recount)"
        )
    return problems


def _loss_problems(
    text: str | None, where: str, definition: str | None, optional: bool
) -> list[str]:
    if text is None:
        return [] if optional else [f"{where} is missing"]
    try:
        loss = decode_loss(text)
    except InternalError as error:
        return [f"{where}: {error}"]
    if definition is not None and definition_of(loss) != definition:
        return [f"{where} is {loss}, not a {definition!r} loss"]
    return []
