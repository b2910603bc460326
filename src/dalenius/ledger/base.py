"""The budget ledger's interface: what every store (in-memory, SQLite, PostgreSQL) promises.

The engine drives a ledger through four steps around every release, and the *data gate* divides
them: nothing before it has touched a private relation, everything after it has (or may have).

1. :meth:`Ledger.reserve` — *before* any data is read, atomically check every cap (the analyst's
   budget on the dataset and the dataset's total cap, counting held reservations as spent) and
   record a ``pending`` reservation; or return the committed answer of an identical earlier
   request (:class:`CachedAnswer`, no charge); or raise
   :class:`~dalenius.core.errors.BudgetExceededError`.
2. :meth:`Ledger.charge` — the data gate: the reservation becomes a durable charge (``charged``,
   synced) *before* the first engine call that binds, plans or reads a private relation. Until
   then :meth:`Ledger.release` may return it (``rolled_back``): a refusal decided from the query,
   the catalog and the ledger costs nothing.
3. :meth:`Ledger.commit` — after noise is drawn and *before* the answer leaves, make the answer
   durable (``committed``).
4. :meth:`Ledger.fail` — any other outcome after the gate (an engine error, a time limit, a
   cancellation): the charge stays (``failed``). Nothing moves from charged back to returned, so a
   failure that depends on the data is never a free query.

A caller that has decided everything that can refuse a request reserves and passes the gate in
one transaction (``reserve(request, charge=True)``, steps 1 and 2 at once).

A process killed before the gate leaves a ``pending`` reservation that provably read nothing:
:meth:`Ledger.recover` returns it. One killed after the gate leaves a ``charged`` entry, which
``recover`` marks ``lost`` and keeps charged. Every step leaves an :class:`AuditRecord`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Final

from dalenius.accounting import Definition
from dalenius.core.errors import ConfigurationError, PostGateOutcome, UserError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP

PENDING: Final = "pending"
"""Status of a reservation held before the data gate (counts as spent; may still be returned)."""
CHARGED: Final = "charged"
"""Status of a reservation that passed the data gate: the engine may read the data (spent)."""
COMMITTED: Final = "committed"
"""Status of a released answer (counts as spent)."""
FAILED: Final = "failed"
"""Status of a charge whose request failed after the data gate (counts as spent, never returned)."""
ROLLED_BACK: Final = "rolled_back"
"""Status of a reservation returned before the data gate: no engine call had read the data."""
LOST: Final = "lost"
"""Status of a charge abandoned after the data gate by a stopped process (counts as spent)."""
CHARGED_STATUSES: Final = (PENDING, CHARGED, COMMITTED, FAILED, LOST)
"""Statuses whose loss counts against budgets."""
PAST_GATE: Final = (CHARGED, COMMITTED, FAILED, LOST)
"""Statuses of entries that passed the data gate; none of them can ever be returned."""
STATUSES: Final = (PENDING, CHARGED, COMMITTED, FAILED, ROLLED_BACK, LOST)

RESERVED: Final = "reserved"
GATED: Final = "charged"
"""Audit outcome of the data gate (the same word as the status it writes)."""
ANSWERED: Final = "answered"
CACHED: Final = "cached"
REFUSED: Final = "refused"
RETURNED: Final = "returned"
"""Audit outcome of a reservation returned before the data gate."""
EXHAUSTED: Final = "exhausted"
"""Audit outcome of a fail-closed dataset closing an analyst's budget after a failure."""
BUDGET_SET: Final = "budget_set"
DATASET_SET: Final = "dataset_set"
OUTCOMES: Final = (
    RESERVED,
    GATED,
    ANSWERED,
    CACHED,
    REFUSED,
    FAILED,
    RETURNED,
    LOST,
    EXHAUSTED,
    BUDGET_SET,
    DATASET_SET,
)
"""Audit outcomes the ledger itself writes; :meth:`Ledger.record` may add others."""


class RequestInProgressError(UserError):
    """A retried request whose idempotency key belongs to a reservation still in progress."""

    code = "request_in_progress"


def _require_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(
            f"The {what} must be a non-empty string, got {value!r}.",
            fix=f"pass the {what}'s name, such as 'alice' or 'adult'.",
        )


def _require_loss(value: object, what: str) -> None:
    if not isinstance(value, PureDP | ApproxDP | ZCDP):
        raise ConfigurationError(
            f"The {what} must be a privacy loss, got {type(value).__name__}.",
            fix="build it with dalenius.core.loss.PureDP, ApproxDP or ZCDP.",
        )


@dataclass(frozen=True)
class ChargeRequest:
    """One release the engine wants to make, described before any data is read.

    Attributes:
        principal: the analyst.
        dataset: the catalog's dataset name.
        loss: the total loss of this release.
        request_key: hash of the normalised plan, the loss and the data version; identical
            requests share it and are answered from the ledger at no cost.
        sql: the analyst's query text (for the audit trail).
        plan_hash: hash of the plan that spends the budget.
        idempotency_key: a client's retry key: the same key gives the same outcome, charged once.
    """

    principal: str
    dataset: str
    loss: Loss
    request_key: str
    sql: str
    plan_hash: str
    idempotency_key: str | None = None

    def __post_init__(self) -> None:
        _require_name(self.principal, "analyst")
        _require_name(self.dataset, "dataset")
        _require_loss(self.loss, "loss of a request")
        _require_name(self.request_key, "request key")
        if self.idempotency_key is not None:
            _require_name(self.idempotency_key, "idempotency key")


@dataclass(frozen=True)
class Reservation:
    """A held loss: returned by :meth:`Ledger.release` before the gate, charged from it on.

    Attributes:
        id: the ledger entry's id.
        request: what was reserved.
        charged: whether the reservation passed the data gate when it was made
            (``reserve(request, charge=True)``): its charge is already durable.
        remaining: what the analyst may still spend with this reservation counted, as the
            reservation's transaction saw it (``None`` when the store does not say).
    """

    id: str
    request: ChargeRequest
    charged: bool = False
    remaining: Loss | None = None


@dataclass(frozen=True)
class CachedAnswer:
    """The committed answer of an identical earlier request.

    The analyst's own repeated request is answered at no cost. A request that another analyst
    already paid for on a dataset with a total cap (a *shared* answer, see :meth:`Ledger.reserve`)
    is the same release, charged to this analyst's own budget but not again to the dataset's total.

    Attributes:
        entry_id: the ledger entry that recorded the answer for this analyst.
        answer: the JSON text committed with it.
        loss: what that entry cost when it was first answered.
        created_at: when the entry was reserved (UTC).
        shared_from: for a shared answer, the entry (of another analyst) that released it.
        remaining: what the analyst may still spend, as the transaction that found the answer
            saw it (``None`` when the store does not say): a repeat then needs no second read.
    """

    entry_id: str
    answer: str
    loss: Loss
    created_at: datetime
    shared_from: str | None = None
    remaining: Loss | None = None


@dataclass(frozen=True)
class LedgerEntry:
    """The durable record of one charge: who, when, what plan, which loss, the outcome, the answer.

    Attributes:
        id: the entry's identifier (the reservation id).
        principal: the analyst.
        dataset: the dataset charged.
        sql: the analyst's query text.
        plan_hash: hash of the plan that spent the budget.
        request_key: see :class:`ChargeRequest`.
        idempotency_key: the client's retry key, if any.
        loss: the loss as requested.
        charged: the loss as counted, in the dataset's definition (converted up).
        status: one of :data:`STATUSES`.
        answer: the JSON text released, for committed entries.
        created_at: when the reservation was made (UTC); budget periods use this time.
        finished_at: when it was committed, failed, returned or marked lost (UTC).
        detail: why it was returned, failed or lost; empty otherwise. Never the engine's message
            (analysts may read their own entries): that goes to the audit trail only.
    """

    id: str
    principal: str
    dataset: str
    sql: str
    plan_hash: str
    request_key: str
    idempotency_key: str | None
    loss: Loss
    charged: Loss
    status: str
    answer: str | None
    created_at: datetime
    finished_at: datetime | None
    detail: str

    @property
    def is_charged(self) -> bool:
        """Whether this entry's loss counts against budgets."""
        return self.status in CHARGED_STATUSES


@dataclass(frozen=True)
class AuditRecord:
    """One line of the audit trail: every request — answered, refused or failed — leaves one.

    Attributes:
        seq: position in the trail (increasing).
        at: when (UTC).
        principal: the analyst (empty for a custodian's change to a dataset).
        dataset: the dataset concerned.
        sql: the analyst's query text (empty for custodian changes).
        plan_hash: hash of the plan, when there was one.
        loss: the loss involved, when there was one.
        outcome: one of :data:`OUTCOMES`, or a caller's own outcome from :meth:`Ledger.record`.
        detail: a human-readable explanation (error message, why a reservation was returned or
            failed, the new budget). Custodian-only: it may hold an engine's message.
        entry_id: the ledger entry this line is about, if any.
    """

    seq: int
    at: datetime
    principal: str
    dataset: str
    sql: str
    plan_hash: str | None
    loss: Loss | None
    outcome: str
    detail: str
    entry_id: str | None


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset known to the ledger: its accounting definition and optional total cap.

    Attributes:
        fail_closed: whether a failure after the data gate also exhausts the analyst's budget on
            the dataset (one data-dependent failure bit per analyst, at most).
    """

    name: str
    definition: Definition
    total_cap: Loss | None
    fail_closed: bool = False


@dataclass(frozen=True)
class Recovery:
    """What :meth:`Ledger.recover` did to the reservations abandoned by stopped processes.

    Attributes:
        returned: reservations that never reached the data gate (nothing was read): returned.
        lost: charges past the data gate that were never finished: marked lost, still charged.
    """

    returned: tuple[str, ...]
    lost: tuple[str, ...]


@dataclass(frozen=True)
class BudgetInfo:
    """An analyst's budget on a dataset.

    Attributes:
        principal: the analyst.
        dataset: the dataset.
        cap: the cap, in the dataset's definition (converted down from what the custodian gave).
        refresh_days: length of a budget period in days; ``None`` for a budget that never refreshes.
        anchor: when the budget was first set; periods start at ``anchor + k·refresh_days``.
        exhausted_at: when a failure after the data gate on a fail-closed dataset closed this
            budget (nothing remains until the custodian sets it again); ``None`` if open.
    """

    principal: str
    dataset: str
    cap: Loss
    refresh_days: int | None
    anchor: datetime
    exhausted_at: datetime | None = None


class Ledger(abc.ABC):
    """A durable record of privacy budgets and of every charge against them.

    Implementations differ only in storage; :mod:`dalenius.ledger.sqlstore` holds the shared
    policy and the conformance suite in ``tests/ledger`` runs against every store.
    """

    @abc.abstractmethod
    def set_dataset(
        self,
        dataset: str,
        *,
        definition: str = "pure",
        total_cap: Loss | None = None,
        fail_closed: bool | None = None,
    ) -> None:
        """Register a dataset's accounting definition and, optionally, its total cap.

        The total cap bounds the sum of every analyst's charges on the dataset (analysts who
        collude add their losses). ``total_cap=None`` leaves an existing cap in place; use
        :meth:`remove_total_cap` to lift it. The definition cannot change once budgets or charges
        exist, because stored sums are in the old definition's type. ``fail_closed`` (``None``
        leaves it as it is; new datasets start without it) makes a failure after the data gate
        also exhaust that analyst's budget on the dataset.
        """

    @abc.abstractmethod
    def remove_total_cap(self, dataset: str) -> None:
        """Lift a dataset's total cap (analysts' own budgets still apply)."""

    @abc.abstractmethod
    def set_budget(
        self, principal: str, dataset: str, cap: Loss, *, refresh_days: int | None = None
    ) -> None:
        """Set an analyst's cap on a dataset, converted down to the dataset's definition.

        An unknown dataset is registered with the definition matching the cap's type. With
        ``refresh_days``, only charges inside the current period count against the cap. Setting a
        budget re-opens one a fail-closed failure exhausted.
        """

    @abc.abstractmethod
    def get_budget(self, principal: str, dataset: str) -> Loss | None:
        """The analyst's cap on the dataset, or ``None`` if none was set (nothing may be spent)."""

    @abc.abstractmethod
    def remaining(self, principal: str, dataset: str) -> Loss:
        """What the analyst may still spend, rounded down and never negative.

        That is the budget minus what was spent in the current period, bounded by what remains of
        the dataset's total cap.
        """

    @abc.abstractmethod
    def spent(self, principal: str, dataset: str) -> Loss:
        """What the analyst has spent in the current period, in the dataset's definition.

        Every entry counts except reservations returned before the data gate. Rounded up.
        """

    @abc.abstractmethod
    def total_spent(self, dataset: str) -> Loss:
        """What every analyst together has spent on the dataset, ever (for the total cap)."""

    @abc.abstractmethod
    def failure_counts(self) -> dict[str, int]:
        """How many requests failed after the data gate, per dataset (those with none are absent).

        Lost entries count too: their process stopped after the gate.
        """

    @abc.abstractmethod
    def reserve(
        self, request: ChargeRequest, *, charge: bool = False
    ) -> Reservation | CachedAnswer:
        """Atomically answer from the record, or check every cap and hold the loss.

        With ``charge=True`` the reservation also passes the data gate in the same durable
        transaction (status ``charged``, with both audit lines): for a caller that has decided
        everything that can refuse the request before it reserves, so nothing would ever return
        the reservation. The query path does this: one synced write instead of two.

        The record answers an analyst's own committed request with the same ``request_key`` at
        no cost. On a dataset with a total cap, it also answers a request that *another* analyst
        already paid for (the shared answer cache: one release per normalised query and data
        version, so colluding analysts cannot average independent draws): the answer is the same
        release, counted once against the total cap and charged to this analyst's own budget.

        Raises:
            BudgetExceededError: if any cap would be exceeded (nothing is charged; the refusal is
                audited).
            ConfigurationError: if the loss has no sound conversion to the dataset's definition,
                or the idempotency key was already used for a different request.
            RequestInProgressError: if the idempotency key belongs to a request in progress.
            EvaluationFailed: if the idempotency key belongs to a request that failed after the
                data gate (the recorded failure, at no new cost).
        """

    @abc.abstractmethod
    def charge(self, reservation: Reservation) -> None:
        """The data gate: make a pending reservation a durable charge (synced) before data is read.

        Raises:
            InternalError: the reservation is not pending (it was returned — by :meth:`release`
                or :meth:`recover` — or already charged); no engine call may follow.
        """

    @abc.abstractmethod
    def release(self, reservation: Reservation, reason: str) -> bool:
        """Return a reservation that never reached the data gate.

        Returns:
            ``True`` if it was returned (or already was), ``False`` if it had passed the gate: it
            stays charged and the caller must treat the request as failed after the gate.
        """

    @abc.abstractmethod
    def commit(self, reservation: Reservation, answer: str) -> str:
        """Record the released answer and return the entry id.

        The record survives a crash of the process. Stores that sync to disk may return before
        this transaction is synced, since the charge it settles is on disk already: a power cut
        before the next synced transaction may lose the record, leaving the entry charged
        (:meth:`recover` marks it ``lost``), never returned.

        Raises:
            InternalError: the reservation never passed the data gate, or failed, or was
                committed already.
        """

    @abc.abstractmethod
    def fail(
        self,
        reservation: Reservation,
        detail: str,
        outcome: PostGateOutcome = PostGateOutcome.FAILED,
    ) -> PostGateOutcome:
        """Record a failure after the data gate: the charge stays (``failed``).

        Returns the outcome on record: ``outcome``, or for an entry that had already failed, the
        outcome recorded then (a missed deadline stays a missed deadline).

        ``detail`` (the engine's message) goes to the audit trail only; the entry keeps
        ``outcome``'s constant code, so a retry returns the same outcome. On a fail-closed dataset
        the analyst's budget there is exhausted in the same transaction. A committed or already
        failed entry is left as it is.

        Raises:
            InternalError: the reservation never passed the gate (use :meth:`release`).
        """

    @abc.abstractmethod
    def recover(self, older_than: timedelta = timedelta(minutes=10)) -> Recovery:
        """Finish the entries a stopped process left for longer than ``older_than``.

        A ``pending`` reservation never reached the data gate (the gate's charge is durable
        before any engine call), so it is returned; a ``charged`` one is marked ``lost`` and
        stays charged.
        """

    @abc.abstractmethod
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
        """Write an audit line for a request refused or failed outside the ledger (costs nothing).

        Refusals raised by :meth:`reserve` are audited by the ledger itself.
        """

    @abc.abstractmethod
    def entries(
        self, principal: str | None = None, dataset: str | None = None
    ) -> list[LedgerEntry]:
        """Every charge (any status), oldest first, optionally filtered."""

    @abc.abstractmethod
    def audit(self, principal: str | None = None, dataset: str | None = None) -> list[AuditRecord]:
        """The audit trail in order, optionally filtered."""

    @abc.abstractmethod
    def datasets(self) -> list[DatasetInfo]:
        """Every registered dataset, by name."""

    @abc.abstractmethod
    def budgets(self, principal: str | None = None, dataset: str | None = None) -> list[BudgetInfo]:
        """Every budget, by dataset then analyst, optionally filtered."""

    @abc.abstractmethod
    def verify(self) -> list[str]:
        """Check the store's integrity and the ledger's invariants; return the problems found."""

    @abc.abstractmethod
    def recount(self) -> list[str]:
        """Count what was spent afresh from the charges; return the running counts that differed.

        The repair for a problem :meth:`verify` reports in the running counts (the store's
        triggers keep them, so only a hand-edited or damaged store needs it). The charges are
        the record: the counts are rebuilt from them, in one write transaction.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store's connections; the ledger cannot be used afterwards."""

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
