"""Test-only sessions for the loss audit: a planner with a bug, and a session with a budget."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from dalenius.core.loss import ApproxDP
from dalenius.engine.session import Prepared, Session, connect


class TamperedSession(Session):
    """A session whose planner has a bug: ``tamper`` rewrites every prepared plan."""

    tamper: Any = None

    def prepare(self, sql: str, epsilon: Any = None, delta: Any = None, **kw: Any) -> Prepared:
        prepared = super().prepare(sql, epsilon, delta, **kw)
        return replace(prepared, plan=type(self).tamper(prepared.plan))


def budgeted_session(catalog: Path, cls: type[Session] = Session) -> Session:
    """A session on ``catalog`` with a budget of (10, 1e-3), of class ``cls``."""
    base = connect(catalog, budget=ApproxDP(Fraction(10), Fraction(1, 1000)))
    return cls(base.catalog, ledger=base.ledger, executor=base.executor, analyst=base.analyst)
