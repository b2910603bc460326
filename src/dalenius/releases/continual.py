"""Continual release: counts (and clipped sums) per period, published as periods close, under one
lifetime loss — the binary-tree mechanism with Honaker's combination of its nodes.

A **series** is declared up front: a table, its date column, the period (day, week or month), the
first day, the horizon ``T`` (how many periods it will ever publish), the lifetime row cap ``R``
of a privacy unit and, optionally, an int column with public bounds to sum. Its tree
(:class:`~dalenius.releases._dyadic.DyadicTree`) has ``L = ⌈log2 T⌉ + 1`` levels.

* **Contribution bounding, stable over time.** Each unit keeps its first ``R`` rows in time order
  from the first day on (ties within a day by a keyed hash with the series' own key, drawn at its
  first publication and kept in its record): rows of an earlier period always precede a later
  one's, so publishing later periods never changes which earlier rows count
  (:func:`dalenius.sql.series.kept_per_day`).
* **Sensitivity.** Each kept row lies in one node per level, and within one level a unit's kept
  rows number at most ``R`` even across publications (``docs/releases/continual.md``), so removing
  a unit changes the whole vector of node counts by at most ``R·L`` in L1 (sums: ``R·L·B``, ``B``
  the largest absolute bound).
* **One lifetime loss.** Every node gets discrete Laplace noise of scale ``R·L/ε`` (sums: their
  own half of ε when a column is summed) and is measured **once**, when its last period closes;
  its noisy value is stored in the publication's ledger record and reused, never measured again.
  The first publication charges ε for the whole horizon; a later one charges nothing: its new
  nodes are part of the one tree mechanism the first charge paid for, and everything it
  publishes is post-processing of stored and newly measured nodes.
* **One successor per state.** Each publication of a series has a ledger slot (an idempotency
  key naming the series, its generation and how many periods were measured before it), so two
  publications can never both measure the same node; a failure after the data gate ends the
  series' generation (its nodes are never measured again), and publishing on starts a new one,
  charged ε again.

The per-period estimates and running totals, with exact standard errors and conservative
intervals, are :mod:`dalenius.releases.continual_estimates`; reading a series' state from the
ledger and planning its next publication, :mod:`dalenius.releases.continual_series`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dalenius.core import periods
from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import Loss, PureDP
from dalenius.core.periods import PERIODS, calendar
from dalenius.core.rng import RandomSource
from dalenius.core.unit import IdUnit
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.protocol import (
    Fetch,
    Measure,
    Measured,
    recorded,
    register_product,
    request_doc,
    scaled_epsilon,
    within,
)
from dalenius.releases._dyadic import DyadicTree, full_levels
from dalenius.releases.continual_estimates import ContinualRelease, estimate
from dalenius.sql.series import SeriesColumns, kept_per_day

CONTINUAL_FORMAT = "continual-1"
"""The ledger record's format: the request, the step, the series' key and every measured node."""

MAX_HORIZON = periods.MAX_HORIZON
"""At most this many periods (the combination's coefficients are periods × nodes numbers)."""

SUM_SHARE = Fraction(1, 2)
"""The share of ε a summed column's nodes get (the counts get the rest)."""

SLOT_PREFIX = "continual:"
"""Publications' ledger slots (idempotency keys) start with it."""

_EPOCH = date(1970, 1, 1)


@dataclass(frozen=True)
class SeriesRequest:
    """A series as the analyst declares it (all public, checked before any data is read).

    Attributes:
        table: the private table.
        time: its date column: which period a row belongs to.
        period: ``day``, ``week`` (seven days from ``start``) or ``month`` (calendar months).
        start: the first day of the first period (ISO ``YYYY-MM-DD``; the 1st for months).
        horizon: how many periods the series will ever publish (fixes the tree).
        max_rows: ``R``, the most rows of one unit counted over the whole horizon (default: the
            privacy unit's ``max_rows``; 1 when a row is the unit).
        value: an int column with public bounds whose clipped values are summed too.
        levels: keep the tree's lowest ``levels`` levels (default: all, ``⌈log2 T⌉ + 1``);
            ``1`` measures each period once and nothing above it.
    """

    table: str
    time: str
    period: str
    start: str
    horizon: int
    max_rows: int | None = None
    value: str | None = None
    levels: int | None = None


@dataclass(frozen=True)
class Step:
    """Where one publication stands in its series.

    Attributes:
        generation: the series' generation (a new one after a failed publication).
        opening: whether this is the generation's first publication (the one charged).
        measured: periods already measured before it (its nodes are stored).
        closed: periods closed when it is published; it measures every node ending in
            ``[measured, closed)``.
    """

    generation: int
    opening: bool
    measured: int
    closed: int


@dataclass(frozen=True)
class Stored:
    """The noisy nodes of a series so far (``None`` where a node is not measured yet)."""

    counts: npt.NDArray[np.int64]
    sums: npt.NDArray[np.int64] | None
    mask: npt.NDArray[np.bool_]
    key: int


def series_id(
    analyst: str, dataset: str, request: SeriesRequest, epsilon: Fraction, shape: Sequence[Any]
) -> str:
    """The identity of a series: whose, on which dataset, what it counts, at which lifetime ε,
    and ``shape``: what the catalog resolves for it (``R``, the unit, the value's bounds). A
    custodian's change to any of them starts a new series: a tree's nodes must all be measured
    with one ``R`` and one clipping, which its one lifetime loss was computed for.
    """
    payload = {
        "analyst": analyst,
        "dataset": dataset,
        **request_doc(request),
        "e": str(epsilon),
        "shape": [str(part) for part in shape],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def slot(series: str, step: Step) -> str:
    """The ledger slot of a publication: one per generation and number of periods measured."""
    where = "open" if step.opening else str(step.measured)
    return f"{SLOT_PREFIX}{series}:g{step.generation}:{where}"


@dataclass(frozen=True)
class ContinualPlan:
    """One publication of a series, ready to run: the statement, the mechanisms, the loss."""

    request: SeriesRequest
    series: str
    epsilon: Fraction
    step: Step
    table: Table
    columns: SeriesColumns = field(compare=False)
    max_rows: int
    bound: int
    tree: DyadicTree = field(compare=False)
    bounds: tuple[date, ...] = field(compare=False)
    counts: IntegerLaplace = field(compare=False)
    sums: IntegerLaplace | None = field(compare=False)
    previous: Stored | None = field(default=None, compare=False, repr=False)
    covered: Loss | None = field(default=None, compare=False)
    """The loss the generation's first publication was charged (the ledger's record)."""

    kind: ClassVar[str] = "continual"
    answer_format: ClassVar[str] = CONTINUAL_FORMAT
    plan_class: ClassVar[str] = "continual"

    @property
    def loss(self) -> Loss:
        """The lifetime ε at the generation's first publication; nothing at a later one."""
        return PureDP(self.epsilon if self.step.opening else Fraction(0))

    @property
    def tables(self) -> tuple[Table, ...]:
        """The one table read."""
        return (self.table,)

    @property
    def slot(self) -> str:
        """The ledger slot of the publication (its idempotency key)."""
        return slot(self.series, self.step)

    @property
    def text(self) -> str:
        """The audit trail's text: the series and how far this publication goes."""
        r = self.request
        value = f", SUM({r.value})" if r.value else ""
        return (
            f"CONTINUAL(COUNT(*){value} PER {r.period} OF {r.time} FROM {r.start}, "
            f"{r.horizon} periods, R = {self.max_rows}) FROM {r.table}: periods "
            f"{self.step.measured}..{self.step.closed} of generation {self.step.generation}"
        )

    def fingerprint(self) -> str:
        """A hash naming exactly what is released (the series and this step)."""
        payload = {
            "kind": "continual",
            "series": self.series,
            "request": request_doc(self.request),
            "shape": [self.max_rows, str(self.columns.unit), str(self.columns.value)],
            "epsilon": str(self.epsilon),
            "step": [self.step.generation, self.step.opening, self.step.measured, self.step.closed],
            "loss": str(self.loss),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def lifetime_map(self) -> Loss:
        """The loss of every node the series will ever measure, at the sensitivity the catalog
        requires: ``R·L`` for the counts' vector, ``R·L·B`` for the sums' (L1), with ``L``
        counted from the tree's nodes (the most nodes one period lies in).
        """
        rows = self.max_rows * self.tree.most_nodes_per_period()
        total = scaled_epsilon(self.counts.epsilon, self.counts.sensitivity, rows)
        if self.sums is not None:
            total += scaled_epsilon(self.sums.epsilon, self.sums.sensitivity, rows * self.bound)
        return PureDP(total)

    def privacy_map(self) -> Loss:
        """The lifetime loss at the first publication. A later one is covered by that charge
        (nothing more) only if it measures nodes never measured in its generation — exactly
        those ending in ``[measured, closed)`` — and the first publication was charged at least
        the lifetime loss its mechanisms cost; otherwise the map is the whole lifetime loss,
        which a later publication (declaring nothing) is refused for.
        """
        lifetime = self.lifetime_map()
        if self.step.opening:
            return lifetime
        fresh = (
            self.previous is not None
            and bool(np.array_equal(self.previous.mask, self.tree.measured(self.step.measured)))
            and self.step.closed > self.step.measured
        )
        if fresh and self.covered is not None and within(lifetime, self.covered):
            return PureDP(Fraction(0))
        return lifetime

    # -- measuring ------------------------------------------------------------------------------

    def new_nodes(self) -> npt.NDArray[np.bool_]:
        """The nodes this publication measures: those whose last period closed since the last."""
        return self.tree.measured(self.step.closed) & ~self.tree.measured(self.step.measured)

    def statement(self, dialect: Dialect, key: int) -> str | None:
        """The exact statement: kept rows (and sums) per day over the new nodes' periods."""
        new = self.new_nodes()
        if not new.any():
            return None
        first = int(self.tree.start[new].min())
        return kept_per_day(
            self.columns,
            dialect,
            start_day=_days(self.bounds[0]),
            first_day=_days(self.bounds[first]),
            end_day=_days(self.bounds[self.step.closed]),
            max_rows=self.max_rows,
            key=key,
        )

    def prepare(self, dialect: Dialect, salt: int) -> Measure[Stored]:
        """The statement now (the series' key: drawn now at the first publication, the stored one
        after); the exact values and the new nodes' noise behind the gate.
        """
        key = salt if self.previous is None else self.previous.key
        statement = self.statement(dialect, key)
        read = [self.request.time, *(c for c in (self._unit(), self.request.value) if c)]
        reads = [(self.table.name, read)]

        def measure(fetch: Fetch) -> Measured[Stored]:
            rows = fetch(statement, reads) if statement is not None else []
            stored = self.measure(rows, key)
            return Measured(self.record(stored), stored)

        return measure

    def measure(
        self, rows: Sequence[Sequence[Any]], key: int, rng: RandomSource | None = None
    ) -> Stored:
        """The stored nodes plus the new ones: exact values from the engine's rows, then noise."""
        counts, sums = self.exact_nodes(rows)
        new = self.new_nodes()
        size = self.tree.size
        before = self.previous
        out_counts = before.counts.copy() if before is not None else np.zeros(size, np.int64)
        out_counts[new] = self.counts.release(counts[new], rng=rng)
        out_sums = None
        if self.sums is not None:
            out_sums = (
                before.sums.copy()
                if before is not None and before.sums is not None
                else np.zeros(size, np.int64)
            )
            out_sums[new] = self.sums.release(sums[new], rng=rng)
        return Stored(out_counts, out_sums, self.tree.measured(self.step.closed), key)

    def exact_nodes(
        self, rows: Sequence[Sequence[Any]]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every node's exact count and sum from the engine's ``(day, count[, sum])`` rows.

        Only the new nodes' values are right (the rows cover their periods only).
        """
        edges = np.array([_days(b) for b in self.bounds], dtype=np.int64)
        per_count = np.zeros(self.step.closed, dtype=np.int64)
        per_sum = np.zeros(self.step.closed, dtype=np.int64)
        for row in rows:
            period = int(np.searchsorted(edges, int(row[0]), side="right")) - 1
            if 0 <= period < self.step.closed:
                per_count[period] += int(row[1] or 0)
                if self.sums is not None:
                    per_sum[period] += int(row[2] or 0)
        return self.tree.node_values(per_count), self.tree.node_values(per_sum)

    def record(self, stored: Stored) -> str:
        """The ledger record: the request, the step, the series' key and every measured node."""

        def listed(values: npt.NDArray[np.int64] | None) -> list[int | None] | None:
            if values is None:
                return None
            return [int(v) if m else None for v, m in zip(values, stored.mask, strict=True)]

        doc = {
            "format": CONTINUAL_FORMAT,
            "request": {
                **request_doc(self.request),
                "series": self.series,
                "epsilon": str(self.epsilon),
                "generation": self.step.generation,
                "opening": self.step.opening,
                "measured": self.step.measured,
                "closed": self.step.closed,
            },
            "key": stored.key,
            "counts": listed(stored.counts),
            "sums": listed(stored.sums),
        }
        return json.dumps(doc)

    def decode(self, record: str) -> Stored:
        """The stored nodes of a ledger record."""
        return decode_record(record)

    def publish(self, value: Stored, confidence: float) -> ContinualRelease:
        """Every closed period's estimates and running totals (post-processing of the nodes)."""
        closed = self.step.closed
        low = self._bounds()[0] if self.request.value else 0
        return ContinualRelease(
            table=self.request.table,
            period=self.request.period,
            periods=self.bounds[:closed],
            counts=estimate(
                self.tree, closed, value.counts, self.counts, confidence, nonnegative=True
            ),
            sums=None
            if self.sums is None or value.sums is None
            else estimate(
                self.tree, closed, value.sums, self.sums, confidence, nonnegative=low >= 0
            ),
            value=self.request.value,
            horizon=self.request.horizon,
            levels=self.tree.levels,
            max_rows=self.max_rows,
            nodes_measured=int(value.mask.sum()),
            nodes=self.tree.size,
            epsilon=float(self.epsilon),
            generation=self.step.generation,
            confidence=confidence,
            loss=self.loss,
        )

    def _unit(self) -> str | None:
        unit = self.table.privacy_unit
        return unit.column if isinstance(unit, IdUnit) else None

    def _bounds(self) -> tuple[Fraction, Fraction]:
        column = self.table.column(self.request.value or "")
        assert column is not None and column.bounds is not None
        return column.bounds


def decode_record(record: str) -> Stored:
    """The stored nodes of a continual publication's ledger record."""
    doc = recorded(record, CONTINUAL_FORMAT)
    mask = np.array([v is not None for v in doc["counts"]], dtype=np.bool_)
    counts = np.array([v or 0 for v in doc["counts"]], dtype=np.int64)
    sums = None if doc["sums"] is None else np.array([v or 0 for v in doc["sums"]], dtype=np.int64)
    return Stored(counts, sums, mask, int(doc["key"]))


def _days(day: date) -> int:
    return (day - _EPOCH).days


# -- planning -------------------------------------------------------------------------------------


def plan_continual(
    catalog: Catalog,
    request: SeriesRequest,
    *,
    series: str,
    epsilon: Fraction | None,
    step: Step,
    previous: Stored | None = None,
    covered: Loss | None = None,
) -> ContinualPlan:
    """Validate a series from the catalog alone and calibrate its noise; reads no data.

    Raises:
        QueryError: the table, a column, the period, the start or the horizon cannot be used.
        InvalidLossError: no ε.
    """
    table = _table(catalog, request)
    bounds = _calendar(request)
    max_rows = _max_rows(table, request.max_rows)
    columns, bound = _columns(table, request)
    epsilon = checked_lifetime(epsilon)
    if not 0 <= step.measured <= step.closed <= request.horizon:
        raise QueryError(
            f"periods {step.measured}..{step.closed} are not within the horizon.",
            clause="as_of",
            fix="publish periods of the series' own horizon.",
        )
    tree = DyadicTree(request.horizon, _levels(request))
    count_eps = epsilon * (1 - SUM_SHARE) if request.value else epsilon
    counts = IntegerLaplace(max_rows * tree.levels, count_eps)
    sums = IntegerLaplace(max_rows * tree.levels * bound, epsilon * SUM_SHARE) if bound else None
    return ContinualPlan(
        request=request,
        series=series,
        epsilon=epsilon,
        step=step,
        table=table,
        columns=columns,
        max_rows=max_rows,
        bound=bound,
        tree=tree,
        bounds=tuple(bounds),
        counts=counts,
        sums=sums,
        previous=previous,
        covered=covered,
    )


def _table(catalog: Catalog, request: SeriesRequest) -> Table:
    table = catalog.table(request.table)
    if table is None or table.public:
        raise QueryError(
            f"there is no private table {request.table!r} in the catalog.",
            clause="table",
            fix="check the table's name.",
        )
    column = table.column(request.time)
    if column is None or column.type != "date":
        raise QueryError(
            f"column {request.time!r} of {request.table!r} is not a declared date column.",
            clause="time",
            why="each row's period comes from its date.",
            fix='name a column declared with type = "date".',
        )
    if request.period not in PERIODS:
        raise QueryError(
            f"period {request.period!r} is not one of {', '.join(PERIODS)}.",
            clause="period",
            fix="pass period='day', 'week' or 'month'.",
        )
    if isinstance(request.horizon, bool) or not 1 <= int(request.horizon) <= MAX_HORIZON:
        raise QueryError(
            f"horizon {request.horizon!r} is not a number of periods from 1 to {MAX_HORIZON}.",
            clause="horizon",
            why="the tree is built for the whole horizon up front; its size bounds the work.",
            fix="pass horizon=365 for a year of days, 52 for a year of weeks.",
        )
    return table


def series_shape(catalog: Catalog, request: SeriesRequest) -> tuple[list[date], list[Any]]:
    """Check a series' declaration against the catalog (reads no data): the first day of each
    period (and the day after the last), and what the catalog resolves for the series — ``R``,
    the unit column, the summed column's bounds — which :func:`series_id` includes.
    """
    table = _table(catalog, request)
    _levels(request)
    bounds = _calendar(request)
    columns, _ = _columns(table, request)
    return bounds, [_max_rows(table, request.max_rows), columns.unit, columns.value]


def checked_lifetime(epsilon: Fraction | None) -> Fraction:
    """The series' lifetime ε, refused unless positive."""
    if epsilon is None or epsilon <= 0:
        raise InvalidLossError(
            "a continual release needs epsilon > 0: the lifetime loss of the whole series.",
            fix="pass epsilon=1, for example.",
        )
    return epsilon


def _levels(request: SeriesRequest) -> int | None:
    full = full_levels(int(request.horizon))
    if request.levels is None:
        return None
    if isinstance(request.levels, bool) or not 1 <= int(request.levels) <= full:
        raise QueryError(
            f"levels {request.levels!r} is not a number of levels from 1 to {full} (the whole "
            f"tree over {request.horizon} periods).",
            clause="levels",
            why="each row lies in one node per level: more levels help long running totals, "
            "fewer help each period's count.",
            fix="leave levels out for the whole tree, or pass 1 for one node per period.",
        )
    return int(request.levels)


def _calendar(request: SeriesRequest) -> list[date]:
    return calendar(request.period, request.start, int(request.horizon))


def _max_rows(table: Table, asked: int | None) -> int:
    unit = table.privacy_unit
    if not isinstance(unit, IdUnit):
        if asked not in (None, 1):
            raise QueryError(
                f"table {table.name!r} protects one row: max_rows is 1, not {asked}.",
                clause="max_rows",
                fix="leave max_rows out for a table whose privacy unit is a row.",
            )
        return 1
    rows = unit.max_rows if asked is None else asked
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= 10**6:
        raise QueryError(
            f"max_rows {rows!r} is not a whole number from 1 to 1000000.",
            clause="max_rows",
            why="it is R, the most rows of one unit counted over the whole horizon.",
            fix="pass the most rows one person may contribute to the series, e.g. max_rows=30.",
        )
    return rows


def _columns(table: Table, request: SeriesRequest) -> tuple[SeriesColumns, int]:
    unit = table.privacy_unit
    unit_col = None
    if isinstance(unit, IdUnit):
        declared = table.column(unit.column)
        unit_col = (unit.column, declared.type if declared is not None else "str")
    value = None
    bound = 0
    if request.value is not None:
        column = table.column(request.value)
        if column is None or column.type != "int" or column.bounds is None:
            raise QueryError(
                f"column {request.value!r} of {table.name!r} is not an int column with bounds.",
                clause="value",
                why="each row's value is clipped to the public bounds, which set the sums' noise.",
                fix="sum an int column declared with bounds = [low, high].",
            )
        low, high = column.bounds
        bound = int(max(abs(low), abs(high)))
        if bound == 0:
            raise QueryError(
                f"column {request.value!r} has bounds [0, 0]: its sum is always 0.",
                clause="value",
                fix="leave value out, or declare wider bounds.",
            )
        value = (column.name, low, high)
    return SeriesColumns(table.name, request.time, unit_col, value), bound


@dataclass(frozen=True)
class ContinualKind:
    """How a publication is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = CONTINUAL_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> ContinualPlan:
        """The plan of the recorded publication (its series, step and lifetime ε)."""
        return plan_continual(
            catalog,
            SeriesRequest(
                table=request["table"],
                time=request["time"],
                period=request["period"],
                start=request["start"],
                horizon=int(request["horizon"]),
                max_rows=request["max_rows"],
                value=request["value"],
                levels=request.get("levels"),
            ),
            series=str(request["series"]),
            epsilon=Fraction(request["epsilon"]),
            step=Step(
                generation=int(request["generation"]),
                opening=bool(request["opening"]),
                measured=int(request["measured"]),
                closed=int(request["closed"]),
            ),
        )


register_product(ContinualKind())
