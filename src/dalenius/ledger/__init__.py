"""L3 ledger: durable budgets, the reserve → data gate → commit protocol, the answer cache, the audit trail.

Open one with :func:`open_ledger` (``memory:``, a SQLite path, or a ``postgresql://`` URL). The
composition rules come from :mod:`dalenius.accounting`; the stores only keep the record.
"""

from dalenius.ledger.base import (
    CHARGED_STATUSES,
    OUTCOMES,
    PAST_GATE,
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
)
from dalenius.ledger.open import open_ledger, sqlite_path

__all__ = [
    "CHARGED_STATUSES",
    "OUTCOMES",
    "PAST_GATE",
    "STATUSES",
    "AuditRecord",
    "BudgetInfo",
    "CachedAnswer",
    "ChargeRequest",
    "DatasetInfo",
    "Ledger",
    "LedgerEntry",
    "Recovery",
    "RequestInProgressError",
    "Reservation",
    "open_ledger",
    "sqlite_path",
]
