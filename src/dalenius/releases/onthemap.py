"""Synthetic origin–destination data, as OnTheMap publishes commuting flows.

The custodian names an origin column and a destination column, both with public key lists (the
map's blocks). One release:

1. measures how many rows each destination has, with discrete Laplace noise (``count_epsilon``,
   L1 sensitivity ``R``: a unit's ``R`` rows change the destination counts by at most ``R``), and
   clamps each to ``[0, per_destination]`` — the synthetic size ``m_d`` of that destination;
2. for every destination draws ``m_d`` synthetic origins from the posterior predictive of the real
   origins under a Dirichlet prior of ``prior`` pseudo-counts per origin
   (:mod:`dalenius.mechanisms.dirichlet`, Machanavajjhala et al. 2008), which is
   ``R·ln(1 + per_destination/prior)``-DP.

The two compose sequentially: pure ε = ``count_epsilon + R·ln(1 + M/α)`` (rounded up), charged
whole. The custodian fixes ``per_destination`` (M) and the prior follows from the budget, or fixes
the prior and M follows, or fixes both and the budget is checked — all before any data is read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dalenius.core.catalog import Catalog, Key, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.exact import exp_down
from dalenius.core.loss import Loss, PureDP
from dalenius.core.rng import RandomSource
from dalenius.mechanisms.dirichlet import epsilon_for, polya, smallest_prior
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
from dalenius.sql.emit import ExactSQL, exact_queries

ONTHEMAP_FORMAT = "onthemap-1"
"""The ledger record's format: the request and the synthetic counts."""

MAX_CELLS = 1_000_000
"""At most this many origin × destination cells."""

MAX_ROWS = 1_000_000
"""At most this many synthetic rows (destinations × per_destination)."""

DEFAULT_COUNT_SHARE = Fraction(1, 10)
"""The share of ε spent on the destination counts when ``count_epsilon`` is not given."""


@dataclass(frozen=True)
class OnTheMapRequest:
    """The table, its origin and destination columns, and the synthesizer's public parameters."""

    table: str
    origin: str
    destination: str
    prior: Fraction | None = None
    per_destination: int | None = None
    count_epsilon: Fraction | None = None
    where: str | None = None


@dataclass(frozen=True)
class OnTheMapPlan:
    """A synthetic origin–destination release ready to run."""

    request: OnTheMapRequest
    origins: tuple[Key, ...]
    destinations: tuple[Key, ...]
    exact: DPQuery
    tables: tuple[Table, ...]
    loss: PureDP
    prior: Fraction
    per_destination: int
    count_epsilon: Fraction
    sample_epsilon: Fraction
    max_rows: int

    # -- the release protocol (dalenius.plan.protocol) ----------------------------------------

    kind: ClassVar[str] = "onthemap"
    answer_format: ClassVar[str] = ONTHEMAP_FORMAT
    plan_class: ClassVar[str] = "onthemap"

    @property
    def text(self) -> str:
        """The audit trail's text: what the analyst asked."""
        req = self.request
        where = f" WHERE {req.where}" if req.where else ""
        return (
            f"ONTHEMAP({req.origin} -> {req.destination}; prior={self.prior}, "
            f"per_destination={self.per_destination}) FROM {req.table}{where}"
        )

    def privacy_map(self) -> Loss:
        """The destination counts' Laplace loss plus the Pólya sampler's ``R·ln(1 + M/α)``,
        both at the unit's row cap (Machanavajjhala et al. 2008), composed sequentially.
        """
        required = self.exact.query.unit.max_rows
        counts = self.count_mechanism()
        return PureDP(
            scaled_epsilon(counts.epsilon, counts.sensitivity, required)
            + epsilon_for(self.prior, self.per_destination, required)
        )

    def prepare(self, dialect: Dialect, salt: int) -> Measure[npt.NDArray[np.int64]]:
        """The exact pair counts' statement now; the synthetic counts behind the gate (the
        record keeps them, so the same request gives back the same rows at no cost).
        """
        statement = self.sql(dialect, salt).main

        def measure(fetch: Fetch) -> Measured[npt.NDArray[np.int64]]:
            synthetic = self.synthesise(self.table_counts(fetch(statement)))
            doc = {
                "format": ONTHEMAP_FORMAT,
                "request": request_doc(self.request),
                "counts": [int(v) for v in synthetic.reshape(-1)],
            }
            return Measured(json.dumps(doc), synthetic)

        return measure

    def decode(self, record: str) -> npt.NDArray[np.int64]:
        """The synthetic counts of a ledger record (destinations × origins)."""
        counts = np.asarray(recorded(record, ONTHEMAP_FORMAT)["counts"], dtype=np.int64)
        return counts.reshape(len(self.destinations), len(self.origins))

    def publish(self, value: npt.NDArray[np.int64], confidence: float) -> OnTheMapRelease:
        """The release from the synthetic counts (no interval applies to synthetic rows)."""
        return self.finish(value)

    def sql(self, dialect: Dialect | str, salt: int = 0) -> ExactSQL:
        """The exact count of every (origin, destination) pair present."""
        return exact_queries(self.exact, dialect, salt=salt)

    def fingerprint(self) -> str:
        """A hash naming exactly what is released."""
        r = self.request
        payload = {
            "kind": "onthemap",
            "request": [r.table, r.origin, r.destination, r.where],
            "prior": str(self.prior),
            "per_destination": self.per_destination,
            "count_epsilon": str(self.count_epsilon),
            "loss": str(self.loss),
            "plan": self.exact.fingerprint(),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def table_counts(self, rows: Sequence[tuple[Any, ...]]) -> npt.NDArray[np.int64]:
        """The exact counts as a destinations × origins matrix (values outside the keys dropped)."""
        o_index = {norm(k): i for i, k in enumerate(self.origins)}
        d_index = {norm(k): i for i, k in enumerate(self.destinations)}
        out = np.zeros((len(self.destinations), len(self.origins)), dtype=np.int64)
        for row in rows:
            i, j = o_index.get(norm(row[0])), d_index.get(norm(row[1]))
            if i is not None and j is not None:
                out[j, i] += int(row[2] or 0)
        return out

    def count_mechanism(self) -> IntegerLaplace:
        """Step 1's noise on each destination's row count (sensitivity R: the destinations are
        disjoint, so one unit's at most R rows change the counts by at most R in L1).
        """
        return IntegerLaplace(self.max_rows, self.count_epsilon)

    def sizes(
        self, counts: npt.NDArray[np.int64], rng: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """Step 1: each destination's synthetic size, its noisy row count clamped to ``[0, M]``."""
        noisy = self.count_mechanism().release(counts.sum(axis=1), rng=rng)
        return np.clip(noisy, 0, self.per_destination).astype(np.int64)

    def synthesise(
        self, counts: npt.NDArray[np.int64], rng: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """Both steps: the synthetic destinations × origins counts (row ``d`` sums to ``m_d``)."""
        sizes = self.sizes(counts, rng)
        return (
            np.stack(
                [
                    polya(counts[d].tolist(), self.prior, int(sizes[d]), rng)
                    for d in range(len(sizes))
                ]
            )
            if len(sizes)
            else np.zeros((0, len(self.origins)), dtype=np.int64)
        )

    def finish(self, synthetic: npt.NDArray[np.int64]) -> OnTheMapRelease:
        """The release from the synthetic counts (no data)."""
        return OnTheMapRelease(
            origin=self.request.origin,
            destination=self.request.destination,
            origins=self.origins,
            destinations=self.destinations,
            counts=synthetic,
            prior=self.prior,
            per_destination=self.per_destination,
            count_epsilon=self.count_epsilon,
            sample_epsilon=self.sample_epsilon,
            loss=self.loss,
        )


@dataclass(frozen=True)
class OnTheMapRelease:
    """Synthetic counts per (destination, origin), as rows or as a flow table."""

    origin: str
    destination: str
    origins: tuple[Key, ...]
    destinations: tuple[Key, ...]
    counts: npt.NDArray[np.int64]
    prior: Fraction
    per_destination: int
    count_epsilon: Fraction
    sample_epsilon: Fraction
    loss: PureDP

    @property
    def rows(self) -> int:
        """The number of synthetic rows."""
        return int(self.counts.sum())

    def flows(self) -> Any:
        """One row per (origin, destination) pair with a synthetic count above zero."""
        import pandas as pd

        d, o = np.nonzero(self.counts)
        return pd.DataFrame(
            {
                self.origin: [self.origins[i] for i in o],
                self.destination: [self.destinations[j] for j in d],
                "count": self.counts[d, o],
            }
        )

    def to_pandas(self) -> Any:
        """The synthetic microdata: one row per synthetic person, by destination then origin."""
        import pandas as pd

        flat = self.counts.reshape(-1)
        cells = np.repeat(np.arange(flat.size), flat)
        d, o = np.divmod(cells, len(self.origins))
        return pd.DataFrame(
            {
                self.origin: np.asarray(self.origins, dtype=object)[o],
                self.destination: np.asarray(self.destinations, dtype=object)[d],
            }
        )


def plan_onthemap(
    catalog: Catalog, request: OnTheMapRequest, *, epsilon: Fraction | None, delta: Fraction | None
) -> OnTheMapPlan:
    """Validate an origin–destination request and fix the prior, sizes and loss; reads no data.

    Long because it validates the request in order (loss, table, origin and destination columns,
    sizes, the count's share of ε), each refusal naming the parameter, the reason and the fix,
    before any data is read.
    """
    if delta:
        raise InvalidLossError(
            "the OnTheMap synthesizer is charged pure ε; delta must not be given.",
            why="its guarantee (every pseudo-count at least m/(e^ε − 1)) is pure differential privacy.",
            fix="omit delta.",
        )
    if epsilon is None or epsilon <= 0:
        raise InvalidLossError(
            "the OnTheMap synthesizer needs epsilon > 0.", fix="pass epsilon=8, for example."
        )
    table = catalog.table(request.table)
    if table is None:
        raise QueryError(
            f"there is no table {request.table!r} in the catalog.", fix="check the table's name."
        )
    keys: list[tuple[Key, ...]] = []
    for role, name in (("origin", request.origin), ("destination", request.destination)):
        column = table.column(name)
        if column is None or column.keys is None:
            raise QueryError(
                f"the {role} column {name!r} of {request.table!r} has no public key list.",
                why="synthetic origins and destinations are drawn from public domains, never from the data.",
                fix=f"use an {role} column whose keys the catalog declares.",
            )
        keys.append(column.keys)
    if request.origin.lower() == request.destination.lower():
        raise QueryError(
            "origin and destination must be two different columns.",
            fix="name the home column as origin and the work column as destination, for example.",
        )
    origins, destinations = keys
    if len(origins) * len(destinations) > MAX_CELLS:
        raise QueryError(
            f"{len(origins)} origins × {len(destinations)} destinations exceed {MAX_CELLS} cells.",
            fix="use coarser origin or destination columns.",
        )
    exact, tables, rows = keyed_counts(
        catalog, request.table, (request.origin, request.destination), request.where
    )
    count_eps = (
        request.count_epsilon
        if request.count_epsilon is not None
        else epsilon * DEFAULT_COUNT_SHARE
    )
    if not 0 < count_eps < epsilon:
        raise InvalidLossError(
            f"count_epsilon must be positive and below epsilon ({float(epsilon):g}), "
            f"got {float(count_eps):g}.",
            why="part of ε measures each destination's size, the rest pays for the synthetic origins.",
            fix=f"pass count_epsilon={float(epsilon / 10):g}, or leave it out.",
        )
    sample_eps = epsilon - count_eps
    prior, size = _prior_and_size(request, sample_eps, rows, MAX_ROWS // len(destinations))
    if size * len(destinations) > MAX_ROWS:
        raise QueryError(
            f"{len(destinations)} destinations × {size} rows each exceed {MAX_ROWS} synthetic rows.",
            fix="ask for fewer rows per destination (per_destination), or use a larger prior.",
        )
    return OnTheMapPlan(
        request=request,
        origins=origins,
        destinations=destinations,
        exact=exact,
        tables=tables,
        loss=PureDP(epsilon),
        prior=prior,
        per_destination=size,
        count_epsilon=count_eps,
        sample_epsilon=sample_eps,
        max_rows=rows,
    )


def _prior_and_size(
    request: OnTheMapRequest, budget: Fraction, rows: int, most: int
) -> tuple[Fraction, int]:
    """The pseudo-count α and the rows per destination M with ``R·ln(1 + M/α) <= budget``
    (a derived M is at most ``most``, so the synthetic table stays within its size limit).
    """
    prior, size = request.prior, request.per_destination
    if prior is not None and prior <= 0:
        raise InvalidLossError(
            f"the prior must be a positive pseudo-count, got {float(prior):g}.",
            fix="pass prior=1, or leave it out and give per_destination.",
        )
    if size is not None and not 1 <= size <= MAX_ROWS:
        raise QueryError(
            f"per_destination must be between 1 and {MAX_ROWS}, got {size}.",
            fix="pass per_destination=100, for example.",
        )
    if size is None and prior is None:
        raise QueryError(
            "the OnTheMap synthesizer needs per_destination (the most synthetic rows per "
            "destination) or prior (the pseudo-count per origin).",
            why="the loss is R·ln(1 + per_destination/prior); one of them must be public and fixed.",
            fix="pass per_destination=100 (the prior then follows from epsilon), or prior=1.",
        )
    if prior is None:
        assert size is not None
        return smallest_prior(budget, size, rows), size
    if size is None:
        size = min(int(prior * (exp_down(budget / rows) - 1)), max(most, 1))
        while size > 0 and epsilon_for(prior, size, rows) > budget:
            size -= 1
        if size < 1:
            raise InvalidLossError(
                f"a prior of {float(prior):g} pseudo-counts allows no synthetic row at this epsilon.",
                fix=f"use a prior of at least {float(smallest_prior(budget, 1, rows)):g}, or a larger epsilon.",
            )
        return prior, size
    if epsilon_for(prior, size, rows) > budget:
        need = smallest_prior(budget, size, rows)
        raise InvalidLossError(
            f"a prior of {float(prior):g} pseudo-counts with {size} rows per destination costs "
            f"{float(epsilon_for(prior, size, rows)):.4g}, more than the {float(budget):.4g} left "
            "after the destination counts.",
            why="the synthesizer is ε-DP only if every pseudo-count is at least m/(e^(ε/R) − 1).",
            fix=f"use prior={float(need):g} or more, fewer rows per destination, or a larger epsilon.",
        )
    return prior, size


@dataclass(frozen=True)
class OnTheMapKind:
    """How a flows release is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = ONTHEMAP_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> OnTheMapPlan:
        """The plan of the recorded request under the loss it was charged."""
        epsilon, _, _ = loss_parts(loss)
        return plan_onthemap(
            catalog,
            OnTheMapRequest(
                table=request["table"],
                origin=request["origin"],
                destination=request["destination"],
                prior=Fraction(request["prior"]) if request["prior"] is not None else None,
                per_destination=request["per_destination"],
                count_epsilon=Fraction(request["count_epsilon"])
                if request["count_epsilon"] is not None
                else None,
                where=request["where"],
            ),
            epsilon=epsilon,
            delta=None,
        )


register_product(OnTheMapKind())
