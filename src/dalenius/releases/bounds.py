"""Clipping bounds chosen privately: a noisy log-scale histogram, read off at a threshold.

A custodian who cannot say what range a numeric column spans declares ``bounds = "private"`` (and
a ``bounds_epsilon``); the first query that must clip the column asks this release for its bounds,
and every later query on the same data version reuses them (the ledger's answer cache). It is
Google's ApproxBounds, in the form Tumult's ``get_bounds`` also uses:

1. every value falls into one bin of a fixed, data-independent set of bins whose edges are signed
   powers of two (``[2^k, 2^(k+1))`` and their mirror images, and a bin around zero);
2. the rows per bin are counted with each privacy unit's rows capped at ``R``, so one unit changes
   the count vector by at most ``R`` in L1, and discrete Laplace noise of scale ``R/ε`` is added
   to every bin;
3. the bounds are the outer edges of the lowest and the highest bin whose noisy count reaches a
   threshold ``τ`` chosen (from the plan, never the data) so that an empty bin passes it with
   probability at most :data:`FALSE_BIN_RATE` over all bins.

Steps 1–2 are ε-DP (Laplace mechanism on a histogram); step 3 reads only the noisy counts, so it
is post-processing. The released record holds the whole noisy histogram, which is free to show.
The derivation, the choice of τ and what the bounds cost in accuracy are in
``docs/mechanisms/private_bounds.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dalenius.core.catalog import Catalog, Column, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import QueryError
from dalenius.core.loss import Loss, PureDP, as_fraction
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.nodes import DPQuery, Measurement, Query
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
from dalenius.releases._counts import norm
from dalenius.sql.bind import to_query
from dalenius.sql.emit import exact_queries

if TYPE_CHECKING:
    import pandas as pd

FORMAT = "bounds-1"

FALSE_BIN_RATE = Fraction(1, 1000)
"""The chance, over all bins together, that a bin holding no row passes the threshold."""

TOP_POWER = 62
"""The largest bin starts at 2^62: beyond it values are clipped (no bound is that wide anyway)."""

FLOAT_BOTTOM_POWER = -20
"""A float's smallest bins start at ±2^-20 (about 10⁻⁶); smaller magnitudes share the zero bin."""


@dataclass(frozen=True)
class BoundsRequest:
    """Choose the bounds of ``table.column`` privately, spending ``epsilon``."""

    table: str
    column: str
    epsilon: Fraction


def bin_edges(column_type: str) -> tuple[Fraction, ...]:
    """The lower edges of the bins, ascending; bin ``i`` holds ``[edges[i], edges[i+1])`` (the
    first also everything below it, the last everything above).

    Integers: ``{0}``, ``[2^k, 2^(k+1) − 1]`` and their negatives, ``k = 0 … 62``. Floats:
    ``[2^k, 2^(k+1))`` and mirror images ``[−2^(k+1), −2^k)`` for ``k = −20 … 62``, and the bin
    ``[−2^−20, 2^−20)`` around zero.

    Example:
        >>> edges = bin_edges("int")
        >>> len(edges), edges[62:67]
        (127, (Fraction(-1, 1), Fraction(0, 1), Fraction(1, 1), Fraction(2, 1), Fraction(4, 1)))
        >>> len(bin_edges("float"))
        167
    """
    if column_type == "int":
        negative = [-(Fraction(2) ** (k + 1) - 1) for k in range(TOP_POWER, -1, -1)]
        positive = [Fraction(2) ** k for k in range(TOP_POWER + 1)]
        return (*negative, Fraction(0), *positive)
    powers = range(TOP_POWER, FLOAT_BOTTOM_POWER - 1, -1)
    negative = [-(Fraction(2) ** (k + 1)) for k in powers]
    zero = -(Fraction(2) ** FLOAT_BOTTOM_POWER)
    positive = [Fraction(2) ** k for k in reversed(powers)]
    return (*negative, zero, *positive)


def bin_range(edges: Sequence[Fraction], i: int, column_type: str) -> tuple[Fraction, Fraction]:
    """The closed range of values bin ``i`` stands for (its outer bins end at ±2^63)."""
    low = edges[i]
    top = Fraction(2) ** (TOP_POWER + 1)
    high = edges[i + 1] if i + 1 < len(edges) else top
    if column_type == "int":
        return low, high - 1
    return low, high


def threshold(bins: int, scale: Fraction) -> int:
    """The smallest ``τ ≥ 1`` with ``bins · P(Z ≥ τ) ≤`` :data:`FALSE_BIN_RATE` for discrete
    Laplace noise ``Z`` of ``scale`` (``P(Z ≥ τ) = p^τ / (1 + p)``, ``p = e^(−1/scale)``).

    Example:
        >>> threshold(127, Fraction(20))
        222
    """
    p = math.exp(-1 / float(scale))
    target = float(FALSE_BIN_RATE) * (1 + p) / bins
    tau = max(1, math.ceil(math.log(target) / math.log(p)))
    while tau > 1 and bins * p ** (tau - 1) / (1 + p) <= float(FALSE_BIN_RATE):
        tau -= 1
    return tau


def choose(noisy: Sequence[int], tau: int) -> tuple[int, int] | None:
    """The lowest and the highest bin whose noisy count reaches ``tau`` (``None``: no bin does).

    Example:
        >>> choose([0, 50, 3, 70, 1], 10), choose([0, 1], 10)
        ((1, 3), None)
    """
    passed = [i for i, c in enumerate(noisy) if c >= tau]
    if not passed:
        return None
    return passed[0], passed[-1]


@dataclass(frozen=True)
class BoundsRelease:
    """Privately chosen bounds of one column, with the noisy histogram they were read from.

    Attributes:
        table, column: what was bounded.
        bounds: ``(low, high)``, or ``None`` when no bin reached the threshold.
        counts: the noisy number of rows in each bin (post-processing is free: show them).
        edges: the bins' lower edges (see :func:`bin_edges`).
        threshold: the noisy count a bin had to reach.
        epsilon: what the choice cost.
    """

    table: str
    column: str
    column_type: str
    bounds: tuple[Fraction, Fraction] | None
    counts: tuple[int, ...]
    edges: tuple[Fraction, ...] = field(repr=False)
    threshold: int
    epsilon: Fraction

    def bins(self) -> list[dict[str, Any]]:
        """The bins that reached the threshold or hold the bounds, with their noisy counts."""
        rows = []
        for i, c in enumerate(self.counts):
            if c >= self.threshold:
                low, high = bin_range(self.edges, i, self.column_type)
                rows.append({"low": _number(low), "high": _number(high), "noisy_rows": c})
        return rows

    def to_pandas(self) -> pd.DataFrame:
        """:meth:`bins` as a DataFrame (pandas is imported here, not with the module: a
        process that answers queries need not hold it).
        """
        import pandas as pd

        return pd.DataFrame(self.bins(), columns=["low", "high", "noisy_rows"])

    def to_json(self) -> dict[str, Any]:
        """The bounds, the threshold and the bins that reached it."""
        return {
            "table": self.table,
            "column": self.column,
            "bounds": None if self.bounds is None else [_number(b) for b in self.bounds],
            "threshold": self.threshold,
            "bins": self.bins(),
        }

    def __str__(self) -> str:
        name = f"{self.table}.{self.column}"
        if self.bounds is None:
            head = (
                f"Bounds of {name}: none — no range of values held enough rows to reach the "
                f"threshold of {self.threshold} noisy rows."
            )
        else:
            low, high = (_number(b) for b in self.bounds)
            head = f"Bounds of {name}: [{low}, {high}] (chosen privately, ε = {float(self.epsilon):g})."
        lines = [head, f"Bins with at least {self.threshold} noisy rows:"]
        for row in self.bins():
            lines.append(f"  [{row['low']}, {row['high']}]: {row['noisy_rows']}")
        if len(lines) == 2:
            lines.append("  (none)")
        return "\n".join(lines)


@dataclass(frozen=True)
class BoundsPlan:
    """Count rows per bin (units capped at ``R`` rows), add discrete Laplace noise of scale
    ``R/ε`` to every bin, read the bounds off at the threshold.
    """

    request: BoundsRequest
    column_type: str
    edges: tuple[Fraction, ...]
    exact: DPQuery
    tables: tuple[Table, ...]
    loss: Loss
    mechanism: IntegerLaplace = field(compare=False)
    tau: int
    kind: ClassVar[str] = "bounds"
    answer_format: ClassVar[str] = FORMAT
    plan_class: ClassVar[str] = "bounds"

    @property
    def text(self) -> str:
        """The audit trail's text of the request."""
        return f"BOUNDS({self.request.column}) FROM {self.request.table}"

    def fingerprint(self) -> str:
        """The table, the column, the loss and the exact statement's plan, hashed."""
        payload = [
            self.request.table,
            self.request.column,
            str(self.loss),
            self.exact.fingerprint(),
        ]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()

    def privacy_map(self) -> Loss:
        """The loss of the noise drawn, at the sensitivity the unit's row cap requires."""
        # One unit's at most R rows each fall into one bin: the count vector moves by ≤ R in L1.
        required = self.exact.query.unit.max_rows
        m = self.mechanism
        return PureDP(scaled_epsilon(m.epsilon, m.sensitivity, required))

    def prepare(self, dialect: Dialect, salt: int) -> Measure[tuple[int, ...]]:
        """Write the exact statement; its measure step counts rows per bin and adds the noise."""
        statement = exact_queries(self.exact, dialect, salt=salt).main

        def measure(fetch: Fetch) -> Measured[tuple[int, ...]]:
            counts = bin_counts(fetch(statement), len(self.edges))
            noisy = tuple(int(v) for v in self.mechanism.release(counts))
            doc = {
                "format": FORMAT,
                "request": request_doc(self.request),
                "counts": list(noisy),
                "threshold": self.tau,
            }
            return Measured(json.dumps(doc), noisy)

        return measure

    def decode(self, record: str) -> tuple[int, ...]:
        """The noisy counts of a ledger record."""
        return tuple(int(v) for v in recorded(record, FORMAT)["counts"])

    def publish(self, value: Sequence[int], confidence: float) -> BoundsRelease:
        """The bounds read off the noisy counts at the threshold (post-processing)."""
        picked = choose(value, self.tau)
        bounds = None
        if picked is not None:
            bounds = (
                bin_range(self.edges, picked[0], self.column_type)[0],
                bin_range(self.edges, picked[1], self.column_type)[1],
            )
        return BoundsRelease(
            self.request.table,
            self.request.column,
            self.column_type,
            bounds,
            tuple(value),
            self.edges,
            self.tau,
            self.request.epsilon,
        )


def bin_counts(rows: Sequence[Sequence[Any]], bins: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The exact statement's ``(bin, count)`` rows as a vector over every bin (absent ones 0)."""
    counts = np.zeros(bins, dtype=np.int64)
    for row in rows:
        key = norm(row[0])
        if isinstance(key, int) and 0 <= key < bins:
            counts[key] += int(row[1] or 0)
    return counts


def plan_bounds(catalog: Catalog, request: BoundsRequest) -> BoundsPlan:
    """Validate the request from the catalog alone and build the plan (reads no data)."""
    table = catalog.table(request.table)
    if table is None:
        raise QueryError(
            f"no table {request.table!r} in the catalog.",
            fix=f"name one of: {', '.join(catalog.table_names)}.",
        )
    column = table.column(request.column)
    if column is None or not column.is_numeric:
        numeric = [c.name for c in table.columns if c.is_numeric]
        raise QueryError(
            f"{request.table}.{request.column} is not a numeric column.",
            fix=f"name one of: {', '.join(numeric) or '(none: the table has no numeric column)'}.",
        )
    if table.public:
        raise QueryError(
            f"{request.table} is public: its bounds can be read from it, with no noise.",
            fix="choose bounds privately for a column of a private table.",
        )
    epsilon = as_fraction(request.epsilon, "epsilon")
    edges = bin_edges(column.type)
    exact, tables = _binned_counts(catalog, table, column, edges)
    rows = exact.query.unit.max_rows
    mechanism = IntegerLaplace(rows, epsilon)
    tau = threshold(len(edges), mechanism.scale)
    request = replace(request, table=table.name, column=column.name, epsilon=epsilon)
    return BoundsPlan(request, column.type, edges, exact, tables, PureDP(epsilon), mechanism, tau)


def _binned_counts(
    catalog: Catalog, table: Table, column: Column, edges: Sequence[Fraction]
) -> tuple[DPQuery, tuple[Table, ...]]:
    """``SELECT bin(x), COUNT(*) … WHERE x IS NOT NULL GROUP BY 1`` as an exact plan, the bin
    found by a binary search written as nested ``CASE`` (its keys, ``0 … bins − 1``, are public).
    """
    name = '"' + column.name.replace('"', '""') + '"'
    binned = _search(name, edges, 0, len(edges))
    relation = '"' + table.name.replace('"', '""') + '"'
    text = f"SELECT {binned} AS bin, COUNT(*) FROM {relation} WHERE {name} IS NOT NULL GROUP BY bin"
    resolved = to_query(text, catalog)
    query: Query = replace(resolved.query, having=None, order_by=(), limit=None, offset=0)
    count = Measurement(
        "m0",
        "count",
        None,
        "int",
        None,
        Fraction(0),
        Fraction(1),
        1,
        query.unit.max_rows,
        Fraction(1),
    )
    return DPQuery(query, (count,), (), None, PureDP(Fraction(1))), resolved.tables


def _search(column: str, edges: Sequence[Fraction], start: int, stop: int) -> str:
    """The bin index of ``column`` among ``edges[start:stop]``, as nested ``CASE``."""
    if stop - start == 1:
        return str(start)
    middle = (start + stop) // 2
    return (
        f"CASE WHEN {column} >= {_literal(edges[middle])} "
        f"THEN {_search(column, edges, middle, stop)} "
        f"ELSE {_search(column, edges, start, middle)} END"
    )


def _literal(value: Fraction) -> str:
    """An edge as an exact SQL decimal literal (edges are dyadic: their decimals end)."""
    if value.denominator == 1:
        return str(value.numerator)
    k = value.denominator.bit_length() - 1
    digits = abs(value.numerator) * 5**k
    whole, frac = divmod(digits, 10**k)
    return f"{'-' if value < 0 else ''}{whole}.{frac:0{k}d}"


def _number(value: Fraction) -> int | float:
    """A bound as JSON shows it."""
    return int(value) if value.denominator == 1 else float(value)


@dataclass(frozen=True)
class BoundsKind:
    """Fetching a choice of bounds again by its ledger entry id."""

    answer_format: ClassVar[str] = FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> BoundsPlan:
        """The plan of a recorded request, at its recorded ε."""
        epsilon, _, _ = loss_parts(loss)
        assert epsilon is not None
        return plan_bounds(catalog, BoundsRequest(request["table"], request["column"], epsilon))


register_product(BoundsKind())
