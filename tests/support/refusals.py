"""Checks shared by the tests of refusals: a refused query spends nothing and leaves one audit
line."""

from __future__ import annotations

import re

import pytest

from dalenius.core.errors import QueryError
from dalenius.engine.session import Session


def refused_free(session: Session, sql: str, message: str) -> QueryError:
    """Ask ``sql`` (ε = 1): it must be refused with ``message``, located, spending nothing, with
    a "refused" audit line; returns the refusal."""
    before = session.remaining()
    with pytest.raises(QueryError, match=re.escape(message)) as refused:
        session.query(sql, epsilon=1)
    assert refused.value.span is not None
    assert session.remaining() == before
    assert session.ledger.audit("analyst")[-1].outcome == "refused"
    return refused.value
