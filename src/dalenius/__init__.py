"""Dalenius: a differential-privacy gateway — ordinary SQL in, noisy answers with error bars out.

The public names are loaded on first use, so importing one layer (say ``dalenius.mechanisms``)
does not import the whole engine.

Example (after ``dalenius demo`` has written ``dalenius-demo/census.toml``)::

    import dalenius

    session = dalenius.connect("dalenius-demo/census.toml", budget=1.0, ledger="ledger.sqlite")
    print(session.explain("SELECT COUNT(*) FROM people", epsilon=0.1))
    print(session.query("SELECT COUNT(*) FROM people", epsilon=0.1))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dalenius.core.catalog import Catalog, load_catalog
    from dalenius.core.errors import (
        BudgetExceededError,
        CatalogError,
        ConfigurationError,
        DaleniusError,
        EvaluationFailed,
        ExecutionError,
        InvalidLossError,
        PrivacyRefusal,
        QueryError,
        UserError,
    )
    from dalenius.core.loss import ZCDP, ApproxDP, PureDP
    from dalenius.engine.result import Result
    from dalenius.engine.session import InMemoryLedgerWarning, Session, connect
    from dalenius.frames import AggregateFrame, PrivateFrame, col, lit, when
    from dalenius.plan.explain import Explanation

__version__ = "0.1.0"

_EXPORTS = {
    "AggregateFrame": "dalenius.frames",
    "ApproxDP": "dalenius.core.loss",
    "BudgetExceededError": "dalenius.core.errors",
    "Catalog": "dalenius.core.catalog",
    "CatalogError": "dalenius.core.errors",
    "ConfigurationError": "dalenius.core.errors",
    "DaleniusError": "dalenius.core.errors",
    "EvaluationFailed": "dalenius.core.errors",
    "ExecutionError": "dalenius.core.errors",
    "Explanation": "dalenius.plan.explain",
    "InMemoryLedgerWarning": "dalenius.engine.session",
    "InvalidLossError": "dalenius.core.errors",
    "PrivacyRefusal": "dalenius.core.errors",
    "PrivateFrame": "dalenius.frames",
    "PureDP": "dalenius.core.loss",
    "QueryError": "dalenius.core.errors",
    "Result": "dalenius.engine.result",
    "Session": "dalenius.engine.session",
    "UserError": "dalenius.core.errors",
    "ZCDP": "dalenius.core.loss",
    "col": "dalenius.frames",
    "connect": "dalenius.engine.session",
    "lit": "dalenius.frames",
    "load_catalog": "dalenius.core.catalog",
    "when": "dalenius.frames",
}

__all__ = [
    "ZCDP",
    "AggregateFrame",
    "ApproxDP",
    "BudgetExceededError",
    "Catalog",
    "CatalogError",
    "ConfigurationError",
    "DaleniusError",
    "EvaluationFailed",
    "ExecutionError",
    "Explanation",
    "InMemoryLedgerWarning",
    "InvalidLossError",
    "PrivacyRefusal",
    "PrivateFrame",
    "PureDP",
    "QueryError",
    "Result",
    "Session",
    "UserError",
    "__version__",
    "col",
    "connect",
    "lit",
    "load_catalog",
    "when",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dalenius' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
