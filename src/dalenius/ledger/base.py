"""The budget ledger's interface: what every store (in-memory, SQLite, PostgreSQL) promises.

The engine drives a ledger with a three-step protocol around every release:

1. :meth:`Ledger.reserve` — *before* any data is read, atomically check every cap (the analyst's
   budget on the dataset and the dataset's total cap, counting pending reservations as spent) and
   record a pending reservation; or return the committed answer of an identical earlier request
   (:class:`CachedAnswer`, no charge); or raise
   :class:`~dalenius.core.errors.BudgetExceededError`.
2. :meth:`Ledger.commit` — after noise is drawn and *before* the answer leaves, make the charge
   and the answer durable.
3. :meth:`Ledger.rollback` — only for a failure *before* noise was drawn; the reservation is
   refunded.

A reservation that is neither committed nor rolled back (its process crashed) stays charged: noise
may have been drawn and seen, so a refund could overspend. :meth:`Ledger.recover` marks such stale
reservations ``lost`` and keeps them charged. Every step leaves an :class:`AuditRecord`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Final

from dalenius.accounting import Definition
from dalenius.core.errors import ConfigurationError, UserError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP

PENDING: Final = "pending"
"""Status of a reservation whose release is in progress (counts as spent)."""
COMMITTED: Final = "committed"
"""Status of a released answer (counts as spent)."""
ROLLED_BACK: Final = "rolled_back"
"""Status of a reservation refunded because the request failed before noise was drawn."""
LOST: Final = "lost"
"""Status of a reservation abandoned by a crashed process (counts as spent, never refunded)."""
CHARGED_STATUSES: Final = (PENDING, COMMITTED, LOST)
"""Statuses whose loss counts against budgets."""
STATUSES: Final = (PENDING, COMMITTED, ROLLED_BACK, LOST)

RESERVED: Final = "reserved"
ANSWERED: Final = "answered"
CACHED: Final = "cached"
REFUSED: Final = "refused"
FAILED: Final = "failed"
BUDGET_SET: Final = "budget_set"
DATASET_SET: Final = "dataset_set"
OUTCOMES: Final = (RESERVED, ANSWERED, CACHED, REFUSED, FAILED, LOST, BUDGET_SET, DATASET_SET)
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
    """A pending charge: its loss is held until :meth:`Ledger.commit` or :meth:`Ledger.rollback`."""

    id: str
    request: ChargeRequest


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
    """

    entry_id: str
    answer: str
    loss: Loss
    created_at: datetime
    shared_from: str | None = None


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
        finished_at: when it was committed, rolled back or marked lost (UTC).
        detail: why it was rolled back or lost; empty otherwise.
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
        detail: a human-readable explanation (error message, rollback reason, new budget).
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
    """A dataset known to the ledger: its accounting definition and optional total cap."""

    name: str
    definition: Definition
    total_cap: Loss | None


@dataclass(frozen=True)
class BudgetInfo:
    """An analyst's budget on a dataset.

    Attributes:
        principal: the analyst.
        dataset: the dataset.
        cap: the cap, in the dataset's definition (converted down from what the custodian gave).
        refresh_days: length of a budget period in days; ``None`` for a budget that never refreshes.
        anchor: when the budget was first set; periods start at ``anchor + k·refresh_days``.
    """

    principal: str
    dataset: str
    cap: Loss
    refresh_days: int | None
    anchor: datetime


class Ledger(abc.ABC):
    """A durable record of privacy budgets and of every charge against them.

    Implementations differ only in storage; :mod:`dalenius.ledger.sqlstore` holds the shared
    policy and the conformance suite in ``tests/ledger`` runs against every store.
    """

    @abc.abstractmethod
    def set_dataset(
        self, dataset: str, *, definition: str = "pure", total_cap: Loss | None = None
    ) -> None:
        """Register a dataset's accounting definition and, optionally, its total cap.

        The total cap bounds the sum of every analyst's charges on the dataset (analysts who
        collude add their losses). ``total_cap=None`` leaves an existing cap in place; use
        :meth:`remove_total_cap` to lift it. The definition cannot change once budgets or charges
        exist, because stored sums are in the old definition's type.
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
        ``refresh_days``, only charges inside the current period count against the cap.
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

        Pending and lost reservations count; rolled-back ones do not. Rounded up.
        """

    @abc.abstractmethod
    def total_spent(self, dataset: str) -> Loss:
        """What every analyst together has spent on the dataset, ever (for the total cap)."""

    @abc.abstractmethod
    def reserve(self, request: ChargeRequest) -> Reservation | CachedAnswer:
        """Atomically answer from the record, or check every cap and hold the loss.

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
            RequestInProgressError: if the idempotency key belongs to a pending reservation.
        """

    @abc.abstractmethod
    def commit(self, reservation: Reservation, answer: str) -> str:
        """Record the released answer durably (the transaction is synced); return the entry id."""

    @abc.abstractmethod
    def rollback(self, reservation: Reservation, reason: str) -> None:
        """Refund a reservation whose request failed before any noise was drawn."""

    @abc.abstractmethod
    def recover(self, older_than: timedelta = timedelta(minutes=10)) -> list[str]:
        """Mark reservations pending for longer than ``older_than`` as lost (still charged).

        Returns:
            The ids of the entries marked lost.
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


def sqlite_path(url: str | None) -> str | None:
    """The SQLite file a ledger URL names, or ``None`` for in-memory and PostgreSQL ledgers.

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
    if text in {"memory:", ":memory:"} or text.startswith(("postgresql://", "postgres://")):
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


def open_ledger(url: str | None) -> Ledger:
    """Open the ledger a URL names.

    ``None`` or ``"memory:"`` gives an in-memory ledger (gone when closed); a file path or
    ``"sqlite:///path"`` a SQLite ledger (created if missing, see :func:`sqlite_path`);
    ``"postgresql://…"`` (or ``"postgres://…"``) a PostgreSQL ledger, which needs
    ``pip install 'dalenius[postgres]'``.

    Example:
        >>> from fractions import Fraction
        >>> with open_ledger("memory:") as ledger:
        ...     ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
        ...     ledger.remaining("alice", "adult")
        PureDP(epsilon=Fraction(1, 1))
    """
    # Imported here: the stores import this module for the interface they implement.
    path = sqlite_path(url)
    if path is not None:
        from dalenius.ledger.sqlite import SqliteLedger

        return SqliteLedger(path)
    if url is not None and url.strip().startswith(("postgresql://", "postgres://")):
        from dalenius.ledger.postgres import PostgresLedger

        return PostgresLedger(url.strip())
    from dalenius.ledger.memory import MemoryLedger

    return MemoryLedger()
