"""What the rewrite rules may read besides the query: the binder's and the session's facts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from dalenius.plan.derive import GroupKeys
from dalenius.plan.expr import Expr
from dalenius.plan.functions import Bounds
from dalenius.plan.nodes import MeasuredQuery, Query, Scan


@dataclass(frozen=True)
class BigQueryOptions:
    """A ``SELECT WITH DIFFERENTIAL_PRIVACY`` query's per-unit facts, from the binder.

    Attributes:
        bounds: ``contribution_bounds_per_group`` by aggregate index, where the SQL gives them.
        fresh_id: makes a field id unused by the query, from an alias and a name (the binder's,
            so the ids stay the ones every plan fingerprint was computed with).
    """

    bounds: Mapping[int, Bounds] = field(default_factory=dict)
    fresh_id: Callable[[str, str], str] = lambda alias, name: f"{alias}__{name}"


@dataclass(frozen=True)
class Context:
    """The facts a rule may need; a rule whose fact is missing leaves the query as it is.

    Attributes:
        bigquery: set for a ``SELECT WITH DIFFERENTIAL_PRIVACY`` query (BigQuery semantics).
        multiplicity: reads, from a public table (by catalog name), the most rows sharing one
            value of a column (by its catalog name); set where public tables may be read.
        public_keys: reads the distinct values of a public table's column (the table's scan,
            the column's catalog name) among the rows that pass the given conditions (plan
            expressions over the scan's fields), or ``None`` when the table is not public or the
            column's type cannot be a key; set where public tables may be read.
    """

    bigquery: BigQueryOptions | None = None
    multiplicity: Callable[[str, str], int] | None = None
    public_keys: Callable[[Scan, str, tuple[Expr, ...]], GroupKeys | None] | None = None


Plan = TypeVar("Plan", Query, MeasuredQuery)
"""What a rule rewrites: a logical query, or its measurements before ε is split."""


class Rule(Protocol):
    """A rewrite rule (a function; this protocol only types it)."""

    def __call__(self, plan: Plan, context: Context, /) -> Plan:
        """A new plan of the kind given, or that very plan when the rule has nothing to do
        (a plan of the other kind, or a fact missing from the context).
        """
