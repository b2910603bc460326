"""A release product defined only in the tests: a noisy histogram of one keyed column.

It exists to show that a product needs one module and one request model, and nothing in
``dalenius.engine``: it implements :class:`dalenius.plan.protocol.ReleasePlan`, registers its
record format, and :meth:`dalenius.engine.session.Session.spend` gives it the loss audit, the
policy, the answer cache, constant-time deadlines, the audit trail and the fixed post-gate failure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from dalenius.core.catalog import Catalog, Key, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import QueryError
from dalenius.core.loss import Loss, PureDP, as_fraction
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.nodes import DPQuery
from dalenius.plan.protocol import (
    Fetch,
    Measure,
    Measured,
    loss_parts,
    recorded,
    register_product,
    request_doc,
    scaled_epsilon,
)
from dalenius.releases._counts import keyed_counts, norm
from dalenius.sql.emit import exact_queries

FORMAT = "test-histogram-1"


@dataclass(frozen=True)
class HistogramRequest:
    """The request model: a table, one column with public keys, a pure ε."""

    table: str
    column: str
    epsilon: Fraction


@dataclass(frozen=True)
class HistogramRelease:
    """The noisy count of each key."""

    keys: tuple[Key, ...]
    counts: tuple[int, ...]

    def to_pandas(self) -> pd.DataFrame:
        return pd.DataFrame({"key": list(self.keys), "count": list(self.counts)})


@dataclass(frozen=True)
class HistogramPlan:
    """The plan: the exact per-key counts and one Laplace mechanism over the disjoint keys."""

    request: HistogramRequest
    keys: tuple[Key, ...]
    exact: DPQuery
    tables: tuple[Table, ...]
    loss: Loss
    mechanism: IntegerLaplace = field(compare=False)
    kind: ClassVar[str] = "test-histogram"
    answer_format: ClassVar[str] = FORMAT
    plan_class: ClassVar[str] = "group_by"

    @property
    def text(self) -> str:
        return f"HISTOGRAM({self.request.column}) FROM {self.request.table}"

    def fingerprint(self) -> str:
        payload = [
            self.request.table,
            self.request.column,
            str(self.loss),
            self.exact.fingerprint(),
        ]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()

    def privacy_map(self) -> Loss:
        # One unit's at most R rows change the disjoint counts by at most R in L1.
        required = self.exact.query.unit.max_rows
        m = self.mechanism
        return PureDP(scaled_epsilon(m.epsilon, m.sensitivity, required))

    def prepare(self, dialect: Dialect, salt: int) -> Measure[tuple[int, ...]]:
        statement = exact_queries(self.exact, dialect, salt=salt).main

        def measure(fetch: Fetch) -> Measured[tuple[int, ...]]:
            index = {norm(k): i for i, k in enumerate(self.keys)}
            counts = np.zeros(len(self.keys), dtype=np.int64)
            for row in fetch(statement):
                i = index.get(norm(row[0]))
                if i is not None:
                    counts[i] += int(row[1] or 0)
            noisy: npt.NDArray[np.int64] = self.mechanism.release(counts)
            value = tuple(int(v) for v in noisy)
            doc = {"format": FORMAT, "request": request_doc(self.request), "counts": value}
            return Measured(json.dumps(doc), value)

        return measure

    def decode(self, record: str) -> tuple[int, ...]:
        return tuple(int(v) for v in recorded(record, FORMAT)["counts"])

    def publish(self, value: Sequence[int], confidence: float) -> HistogramRelease:
        return HistogramRelease(self.keys, tuple(value))


def plan_histogram(catalog: Catalog, request: HistogramRequest) -> HistogramPlan:
    """Validate the request from the catalog alone and build the plan."""
    table = catalog.table(request.table)
    column = table.column(request.column) if table is not None else None
    if column is None or column.keys is None:
        raise QueryError(
            f"{request.table}.{request.column} is not a column with public keys.",
            fix="name a keyed column.",
        )
    exact, tables, rows = keyed_counts(catalog, request.table, (request.column,), None)
    epsilon = as_fraction(request.epsilon, "epsilon")
    return HistogramPlan(
        request, column.keys, exact, tables, PureDP(epsilon), IntegerLaplace(rows, epsilon)
    )


@dataclass(frozen=True)
class HistogramKind:
    """Fetching a histogram again by its ledger entry id."""

    answer_format: ClassVar[str] = FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> HistogramPlan:
        epsilon, _, _ = loss_parts(loss)
        assert epsilon is not None
        return plan_histogram(
            catalog, HistogramRequest(request["table"], request["column"], epsilon)
        )


register_product(HistogramKind())
