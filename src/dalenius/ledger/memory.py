"""The in-memory ledger, for tests and notebooks: the SQLite store held in memory.

It runs the very same statements and rules as the file-backed store (so the conformance suite
proves both), but nothing survives :meth:`~dalenius.ledger.base.Ledger.close` or the end of the
process. Never use it for budgets that must be enforced across sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dalenius.ledger.sqlite import SqliteLedger


class MemoryLedger(SqliteLedger):
    """A ledger that lives in this process's memory only.

    Example:
        >>> from fractions import Fraction
        >>> from dalenius.core.loss import ZCDP
        >>> ledger = MemoryLedger()
        >>> ledger.set_budget("bob", "pums", ZCDP(Fraction(1, 2)))
        >>> ledger.spent("bob", "pums")
        ZCDP(rho=Fraction(0, 1))
    """

    def __init__(self, *, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(":memory:", clock=clock)
