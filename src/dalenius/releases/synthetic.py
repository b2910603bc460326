"""Synthetic microdata with a differential-privacy guarantee: MST over a table's public domains.

MST (McKenna, Miklau & Sheldon 2021, "Winning the NIST contest") releases a table of made-up rows
whose low-order statistics follow the real table's:

1. **measure** every column's counts (1-way marginals) with discrete Gaussian noise;
2. **select** the d − 1 pairs of columns that best explain the data, as a maximum spanning tree:
   each round the exponential mechanism picks, among the pairs that join two components, one
   whose 2-way counts are far from what the noisy 1-way counts predict (score: the L1 distance);
3. **measure** the selected 2-way marginals with discrete Gaussian noise;
4. **estimate** a tree-shaped model from the noisy measurements and **sample** rows from it.

ρ is split in three equal parts (1-way, selection, 2-way); a unit with at most ``R`` rows moves
each marginal by at most ``R`` in L1 and L2 and each score by at most ``R``. The exponential
mechanism with ε satisfies ε²/8-zCDP (Cesar & Rogers 2021), so each of the d − 1 rounds uses
``ε = √(8ρ_select/(d − 1))``.

Estimation: the selected pairs form a tree, and the model that agrees with consistent marginals
on a tree is the tree factorisation ``P(x) = Π_edges P(x_i, x_j) / Π_nodes P(x_i)^(deg − 1)``, in
closed form — so no general graphical-model inference is needed (mbi / Private-PGM solves that
harder problem for arbitrary graphs, at the price of JAX as a dependency). The noisy
measurements are made consistent first: each column's distribution combines its own 1-way
measurement with the margins of its incident 2-way measurements by inverse variance, negatives
are clipped, then each 2-way table is fitted to its two column distributions by iterative
proportional fitting. Rows are drawn from the root of the tree down, each column given its parent.
Everything after the measurements is post-processing; the sampling's randomness protects nothing
and is seeded from the OS generator.

Numeric columns with public bounds are binned into ``bins`` equal intervals (the synthetic value is
the bin's label, ``[low, high)``); categorical columns need public key lists. Rows with a NULL in a
chosen column are left out (say so in the release's columns).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms.exponential import ExponentialMechanism
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.plan.expr import BinOp, Col, Expr, Func, Lit
from dalenius.plan.nodes import DPQuery, GroupKey, Measurement, Query, output_fields
from dalenius.plan.protocol import (
    Fetch,
    Measure,
    Measured,
    as_declared,
    loss_parts,
    recorded,
    register_product,
    request_doc,
    rho_of,
    scaled_epsilon,
    scaled_rho,
)
from dalenius.releases.density import rho_for
from dalenius.sql.bind import to_query
from dalenius.sql.emit import ExactSQL, exact_queries
from dalenius.sql.filters import product_filter

SYNTHETIC_FORMAT = "synthetic-1"
"""The ledger record's format: the request, the noisy measurements and the sampling seed."""

SCORE_SLACK = Fraction(1, 1000)
"""Added to the selection scores' sensitivity R. A score is a float L1 distance (numpy's pairwise
sum: error below log2(cells)·2⁻⁵³ of the sum of its terms, under 10⁻⁷ for counts below 10¹⁰)
rounded to the nearest fraction with denominator at most 10⁶ (error at most 5·10⁻⁷), so two
neighbours' scores differ by at most R + 2·(10⁻⁷ + 5·10⁻⁷) < R + 1/1000: the exponential mechanism
is calibrated for that, rounding toward safety."""

MAX_CELLS = 5_000_000
"""At most this many cells in the largest 2-way marginal times the number of pairs."""

MAX_ROWS = 10_000_000
"""At most this many synthetic rows per release."""


@dataclass(frozen=True)
class SynthRequest:
    """The table and columns to synthesise, numeric columns in ``bins`` bins, ``rows`` rows."""

    table: str
    columns: tuple[str, ...] | None = None
    bins: int = 10
    rows: int | None = None
    where: str | None = None


@dataclass(frozen=True)
class Domain:
    """One column's public values: category keys, or bin labels of a numeric column."""

    name: str
    labels: tuple[Any, ...]
    binned: bool = False


@dataclass(frozen=True)
class SynthPlan:
    """A synthetic release ready to run: the exact statement, the domains, the loss split."""

    request: SynthRequest
    domains: tuple[Domain, ...]
    exact: DPQuery
    tables: tuple[Table, ...]
    loss: Loss
    rho: Fraction
    max_rows: int

    # -- the release protocol (dalenius.plan.protocol) ----------------------------------------

    kind: ClassVar[str] = "synthetic"
    answer_format: ClassVar[str] = SYNTHETIC_FORMAT
    plan_class: ClassVar[str] = "synthetic"

    @property
    def text(self) -> str:
        """The audit trail's text: what the analyst asked."""
        where = f" WHERE {self.request.where}" if self.request.where else ""
        names = ", ".join(d.name for d in self.domains)
        return f"SYNTHETIC({names}) FROM {self.request.table}{where}"

    def privacy_map(self) -> Loss:
        """MST's three steps composed in zCDP, each mechanism at the unit's row cap.

        One unit's at most R rows change every marginal by at most R in L2 (and the tree's
        score, an L1 distance to a public product, by at most R, plus :data:`SCORE_SLACK` for the
        score's floating-point sum and its rounding): d Gaussian 1-way marginals,
        d − 1 exponential-mechanism rounds (ε-DP with a bounded range is ε²/8-zCDP, Cesar &
        Rogers 2021) and d − 1 Gaussian 2-way marginals.
        """
        required = self.exact.query.unit.max_rows
        d = len(self.domains)
        one, selector, two = self.mechanisms()
        total = d * scaled_rho(rho_of(one.loss), one.sensitivity, required)
        if selector is not None:
            score = required + SCORE_SLACK
            epsilon = scaled_epsilon(selector.epsilon, selector.sensitivity, score)
            total += (d - 1) * epsilon * epsilon / 8
            total += (d - 1) * scaled_rho(rho_of(two.loss), two.sensitivity, required)
        return as_declared(total, self.loss)

    def prepare(self, dialect: Dialect, salt: int) -> Measure[tuple[Measurements, int]]:
        """The exact contingency statement now; the measurements behind the gate.

        The record keeps the noisy measurements and the sampling seed (drawn now, from the OS
        generator), so the same request gives back the same rows at no cost.
        """
        statement = self.sql(dialect, salt).main
        seed = int(system_random().uint64(1)[0] % (2**63))

        def measure(fetch: Fetch) -> Measured[tuple[Measurements, int]]:
            measured = self.measure(self.contingency(fetch(statement)))
            doc = {
                "format": SYNTHETIC_FORMAT,
                "request": request_doc(self.request),
                "measurements": measured.to_json(),
                "seed": seed,
            }
            return Measured(json.dumps(doc), (measured, seed))

        return measure

    def decode(self, record: str) -> tuple[Measurements, int]:
        """The measurements and sampling seed of a ledger record."""
        doc = recorded(record, SYNTHETIC_FORMAT)
        return Measurements.from_json(doc["measurements"]), int(doc["seed"])

    def publish(self, value: tuple[Measurements, int], confidence: float) -> SyntheticRelease:
        """The synthetic rows (post-processing of the measurements; no interval applies)."""
        return self.synthesise(value[0], seed=value[1])

    def sql(self, dialect: Dialect | str, salt: int = 0) -> ExactSQL:
        """The exact contingency table (counts per combination of values present)."""
        return exact_queries(self.exact, dialect, salt=salt)

    def fingerprint(self) -> str:
        """A hash naming exactly what is released."""
        payload = {
            "kind": "synthetic",
            "request": [
                self.request.table,
                list(self.request.columns or ()),
                self.request.bins,
                self.request.rows,
                self.request.where,
            ],
            "domains": [[d.name, [str(v) for v in d.labels]] for d in self.domains],
            "loss": str(self.loss),
            "plan": self.exact.fingerprint(),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def contingency(self, rows: Sequence[tuple[Any, ...]]) -> Contingency:
        """The exact contingency table from the engine's rows (kept sparse: only cells present)."""
        index = [
            {i: i for i in range(len(d.labels))}
            if d.binned
            else {_norm(v): i for i, v in enumerate(d.labels)}
            for d in self.domains
        ]
        k = len(self.domains)
        codes: list[tuple[int, ...]] = []
        counts: list[int] = []
        for row in rows:
            cell = tuple(index[j].get(_norm(row[j]), -1) for j in range(k))
            if min(cell) >= 0 and row[k]:
                codes.append(cell)
                counts.append(int(row[k]))
        return Contingency(
            codes=np.asarray(codes, dtype=np.int64).reshape(-1, k),
            counts=np.asarray(counts, dtype=np.int64),
            sizes=tuple(len(d.labels) for d in self.domains),
        )

    def mechanisms(self) -> tuple[IntegerGaussian, ExponentialMechanism | None, IntegerGaussian]:
        """The mechanisms of steps 1–3, a third of ρ each: the 1-way marginals' Gaussian (each
        of the d marginals), the tree's selector (each of its d − 1 rounds; none for one
        column) and the 2-way marginals' Gaussian (each of the d − 1 edges).
        """
        d = len(self.domains)
        r = self.max_rows
        third = self.rho / 3
        one = _vector_gaussian(r, third / d)
        rounds = _em_epsilon(third, d - 1) if d > 1 else None
        selector = ExponentialMechanism(r + SCORE_SLACK, rounds) if rounds is not None else None
        two = _vector_gaussian(r, third / max(d - 1, 1))
        return one, selector, two

    def measure(self, table: Contingency, rng: RandomSource | None = None) -> Measurements:
        """Steps 1–3: noisy 1-way marginals, the private tree, noisy 2-way marginals."""
        d = len(self.domains)
        one_mech, selector, two_mech = self.mechanisms()
        one = [one_mech.release(_marginal(table, (i,)), rng=rng) for i in range(d)]
        edges: list[tuple[int, int]] = []
        if selector is not None:
            estimate = [np.maximum(o, 0) / max(float(np.maximum(o, 0).sum()), 1.0) for o in one]
            total = float(np.mean([o.sum() for o in one]))
            component = list(range(d))
            for _ in range(d - 1):
                candidates = [
                    (i, j)
                    for i in range(d)
                    for j in range(i + 1, d)
                    if component[i] != component[j]
                ]
                scores = [
                    Fraction(
                        float(
                            np.abs(
                                _marginal(table, (i, j))
                                - total * np.outer(estimate[i], estimate[j])
                            ).sum()
                        )
                    ).limit_denominator(10**6)
                    for i, j in candidates
                ]
                i, j = candidates[selector.select(scores, rng=rng)]
                edges.append((i, j))
                old, new = component[j], component[i]
                component = [new if c == old else c for c in component]
        two = [
            two_mech.release(_marginal(table, e).reshape(-1), rng=rng).reshape(_shape(self, e))
            for e in edges
        ]
        return Measurements(
            one=[o.astype(np.float64) for o in one],
            one_variance=float(one_mech.sigma2),
            edges=edges,
            two=[t.astype(np.float64) for t in two],
            two_variance=float(two_mech.sigma2),
        )

    def synthesise(
        self, measured: Measurements, rows: int | None = None, seed: int | None = None
    ) -> SyntheticRelease:
        """Step 4 (post-processing): a consistent tree model, then rows sampled from it."""
        model = fit_tree(measured, [len(d.labels) for d in self.domains])
        n = rows if rows is not None else self.request.rows
        if n is None:
            n = max(0, round(float(np.mean([o.sum() for o in measured.one]))))
        if not 0 <= n <= MAX_ROWS:
            raise QueryError(
                f"rows must be between 0 and {MAX_ROWS}, got {n}.", fix="ask for fewer rows."
            )
        generator = np.random.default_rng(
            seed if seed is not None else int(system_random().uint64(1)[0])
        )
        codes = model.sample(n, generator)
        data = {
            d.name: np.asarray(d.labels, dtype=object)[codes[:, i]]
            for i, d in enumerate(self.domains)
        }
        return SyntheticRelease(
            columns=tuple(d.name for d in self.domains),
            data=data,
            edges=tuple((self.domains[i].name, self.domains[j].name) for i, j in measured.edges),
            rows=n,
            loss=self.loss,
            measurements=measured,
        )


@dataclass(frozen=True)
class Contingency:
    """A sparse contingency table: the code of each cell present, and its count."""

    codes: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]
    sizes: tuple[int, ...]

    @property
    def total(self) -> int:
        """The number of rows counted."""
        return int(self.counts.sum())


@dataclass
class Measurements:
    """The noisy measurements (what the ledger records): 1-way, the tree's edges, 2-way."""

    one: list[npt.NDArray[np.float64]]
    one_variance: float
    edges: list[tuple[int, int]]
    two: list[npt.NDArray[np.float64]]
    two_variance: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "one": [o.tolist() for o in self.one],
            "one_variance": self.one_variance,
            "edges": [list(e) for e in self.edges],
            "two": [t.tolist() for t in self.two],
            "two_variance": self.two_variance,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Measurements:
        """Inverse of :meth:`to_json`."""
        return Measurements(
            one=[np.asarray(o, dtype=np.float64) for o in doc["one"]],
            one_variance=float(doc["one_variance"]),
            edges=[(int(a), int(b)) for a, b in doc["edges"]],
            two=[np.asarray(t, dtype=np.float64) for t in doc["two"]],
            two_variance=float(doc["two_variance"]),
        )


@dataclass
class TreeModel:
    """A distribution factorised along a tree: the root's distribution and each child's conditional."""

    order: list[int]
    parent: list[int]
    marginals: list[npt.NDArray[np.float64]]
    conditionals: dict[int, npt.NDArray[np.float64]] = field(default_factory=dict)

    def sample(self, n: int, generator: np.random.Generator) -> npt.NDArray[np.int64]:
        """``n`` rows of codes, drawn from the root down."""
        codes = np.zeros((n, len(self.marginals)), dtype=np.int64)
        for node in self.order:
            par = self.parent[node]
            if par < 0:
                codes[:, node] = generator.choice(
                    self.marginals[node].size, size=n, p=self.marginals[node]
                )
                continue
            table = self.conditionals[node]  # rows: parent value, columns: child value
            cumulative = np.cumsum(table, axis=1)
            u = generator.random(n)
            codes[:, node] = (
                (u[:, None] > cumulative[codes[:, par]]).sum(axis=1).clip(0, table.shape[1] - 1)
            )
        return codes


def fit_tree(measured: Measurements, sizes: Sequence[int]) -> TreeModel:
    """Consistent column distributions and edge tables from noisy measurements, as a tree model."""
    d = len(sizes)
    # Each column: its own measurement, and the margins of its incident 2-way tables, by inverse
    # variance (a 2-way margin sums k cells, so its variance is k times the cell variance).
    marginals = []
    for i in range(d):
        weight = 1.0 / measured.one_variance
        total = measured.one[i] * weight
        for (a, b), table in zip(measured.edges, measured.two, strict=True):
            if i in (a, b):
                margin = table.sum(axis=1) if i == a else table.sum(axis=0)
                cells = table.shape[1] if i == a else table.shape[0]
                w = 1.0 / (measured.two_variance * cells)
                total = total + margin * w
                weight += w
        p = np.maximum(total / weight, 0.0)
        marginals.append(p / p.sum() if p.sum() > 0 else np.full(sizes[i], 1.0 / sizes[i]))
    neighbours: dict[int, list[tuple[int, int]]] = {i: [] for i in range(d)}
    for k, (a, b) in enumerate(measured.edges):
        neighbours[a].append((b, k))
        neighbours[b].append((a, k))
    parent = [-1] * d
    order: list[int] = []
    seen: set[int] = set()
    conditionals: dict[int, npt.NDArray[np.float64]] = {}
    for root in range(d):
        if root in seen:
            continue
        stack = [root]
        seen.add(root)
        while stack:
            node = stack.pop()
            order.append(node)
            for other, k in neighbours[node]:
                if other in seen:
                    continue
                seen.add(other)
                parent[other] = node
                a, b = measured.edges[k]
                table = measured.two[k] if a == node else measured.two[k].T
                joint = _rake(np.maximum(table, 0.0), marginals[node], marginals[other])
                rows = joint.sum(axis=1, keepdims=True)
                cond = np.where(
                    rows > 0, joint / np.where(rows > 0, rows, 1.0), marginals[other][None, :]
                )
                conditionals[other] = cond / cond.sum(axis=1, keepdims=True)
                stack.append(other)
    return TreeModel(order=order, parent=parent, marginals=marginals, conditionals=conditionals)


def _rake(
    table: npt.NDArray[np.float64], rows: npt.NDArray[np.float64], cols: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Iterative proportional fitting: a non-negative table with the given row and column sums."""
    joint: npt.NDArray[np.float64] = table + 1e-9 * max(float(table.sum()), 1.0) / table.size
    joint = joint / joint.sum()  # (the tiny floor leaves no structural zero)
    for _ in range(50):
        joint *= (rows / np.maximum(joint.sum(axis=1), 1e-300))[:, None]
        joint *= (cols / np.maximum(joint.sum(axis=0), 1e-300))[None, :]
    return joint


@dataclass(frozen=True)
class SyntheticRelease:
    """Synthetic rows, the tree of column pairs the model keeps, and the loss spent."""

    columns: tuple[str, ...]
    data: dict[str, npt.NDArray[Any]]
    edges: tuple[tuple[str, str], ...]
    rows: int
    loss: Loss
    measurements: Measurements = field(repr=False)

    def to_pandas(self) -> Any:
        """The synthetic table as a DataFrame."""
        import pandas as pd

        return pd.DataFrame({c: self.data[c] for c in self.columns})


def plan_synthetic(
    catalog: Catalog,
    request: SynthRequest,
    *,
    epsilon: Fraction | None,
    delta: Fraction | None,
    rho: Fraction | None = None,
) -> SynthPlan:
    """Validate a synthetic-data request and fix its domains and loss; reads no data.

    Long because it validates the request in order (table, bins, columns, domain sizes, rows, loss),
    each refusal naming the parameter, the reason and the fix, before any data is read.
    """
    table = catalog.table(request.table)
    if table is None:
        raise QueryError(
            f"there is no table {request.table!r} in the catalog.", fix="check the table's name."
        )
    if not 2 <= request.bins <= 1000:
        raise QueryError(
            f"bins must be between 2 and 1000, got {request.bins}.", fix="use bins=10, for example."
        )
    names = request.columns or tuple(
        c.name
        for c in table.columns
        if c.keys is not None or (c.bounds is not None and c.type in ("int", "float"))
    )
    if not names:
        raise QueryError(
            f"{request.table!r} has no column with public keys or bounds.",
            fix="declare keys or bounds in the catalog.",
        )
    quoted = '"' + request.table.replace('"', '""') + '"'
    condition = product_filter(request.where)
    resolved = to_query(
        f"SELECT COUNT(*) FROM {quoted}" + (f" WHERE {condition}" if condition else ""),
        catalog,
    )
    fields = {f.name.lower(): f for f in output_fields(resolved.query.relation)}
    domains: list[Domain] = []
    keys: list[GroupKey] = []
    for name in names:
        column = table.column(name)
        field_ = fields.get(name.lower())
        if column is None or field_ is None:
            raise QueryError(
                f"there is no column {name!r} in {request.table!r}.", fix="check the column's name."
            )
        if column.keys is not None:
            domains.append(Domain(column.name, tuple(column.keys)))
            keys.append(GroupKey(column.name, Col(field_.id), column.type, tuple(column.keys)))
        elif column.bounds is not None and column.type in ("int", "float"):
            low, high = column.bounds
            labels, expr = _bins(Col(field_.id), low, high, request.bins, column.type)
            domains.append(Domain(column.name, labels, binned=True))
            keys.append(GroupKey(column.name, expr, "int", tuple(range(len(labels)))))
        else:
            raise QueryError(
                f"column {name!r} has neither a public key list nor public bounds.",
                why="the synthetic table's values come from public domains, never from the data.",
                fix="declare its keys (or bounds) in the catalog, or leave it out.",
            )
    sizes = [len(d.labels) for d in domains]
    pairs = sum(sizes[i] * sizes[j] for i in range(len(sizes)) for j in range(i + 1, len(sizes)))
    if pairs > MAX_CELLS or math.prod(sizes) > 10**15:
        raise QueryError(
            "the columns' domains are too large to synthesise.",
            fix="use fewer columns or fewer bins.",
        )
    if request.rows is not None and not 0 <= request.rows <= MAX_ROWS:
        raise QueryError(
            f"rows must be between 0 and {MAX_ROWS}, got {request.rows}.", fix="ask for fewer rows."
        )
    query: Query = replace(
        resolved.query, group_by=tuple(keys), having=None, order_by=(), limit=None, offset=0
    )
    r = query.unit.max_rows
    count = Measurement(
        "m0", "count", None, "int", None, Fraction(0), Fraction(1), 1, r, Fraction(1)
    )
    exact = DPQuery(query, (count,), (), None, PureDP(Fraction(1)))
    loss, total_rho = _loss(epsilon, delta, rho)
    # Decided here, before any data is read: the noise of each marginal must fit the integer grid.
    _vector_gaussian(r, total_rho / 3 / len(domains))
    _vector_gaussian(r, total_rho / 3 / max(len(domains) - 1, 1))
    # Public labels for binned numeric columns, as the synthetic rows carry them.
    bin_labels = tuple(domains)
    return SynthPlan(request, bin_labels, exact, resolved.tables, loss, total_rho, r)


def _bins(
    column: Expr, low: Fraction, high: Fraction, bins: int, kind: str
) -> tuple[tuple[Any, ...], Expr]:
    width = (high - low) / bins
    edges = [low + i * width for i in range(bins + 1)]
    labels = tuple(
        f"[{float(edges[i]):g}, {float(edges[i + 1]):g}{']' if i == bins - 1 else ')'}"
        for i in range(bins)
    )
    clipped: Expr = Func("LEAST", (Func("GREATEST", (column, Lit(_num(low)))), Lit(_num(high))))
    index = Func(
        "LEAST",
        (
            Func("FLOOR", (BinOp("/", BinOp("-", clipped, Lit(_num(low))), Lit(_num(width))),)),
            Lit(bins - 1),
        ),
    )
    return labels, index


def _num(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)


def _loss(
    epsilon: Fraction | None, delta: Fraction | None, rho: Fraction | None
) -> tuple[Loss, Fraction]:
    if rho is not None:
        if rho <= 0:
            raise InvalidLossError("rho must be positive.", fix="pass rho=0.5, for example.")
        return ZCDP(rho), rho
    if epsilon is None or epsilon <= 0 or delta is None or not 0 < delta < 1:
        raise InvalidLossError(
            "synthetic data needs epsilon and delta (or rho).",
            why="MST measures with Gaussian noise, which satisfies (ε, δ)-DP and zCDP but never pure ε.",
            fix="pass epsilon=1 and delta=1e-9, for example (the dataset's accounting must be 'approx'), or rho.",
        )
    return ApproxDP(epsilon, delta), rho_for(epsilon, delta)


def _vector_gaussian(rows: int, rho: Fraction) -> IntegerGaussian:
    """Discrete Gaussian noise for a whole marginal (L2 sensitivity ``rows``), on the integer grid.

    Above σ = 3072 the sampler would round to a coarser grid whose sensitivity argument is a
    scalar one; a marginal is a vector, so such a loss is refused instead.
    """
    mech = IntegerGaussian(rows, ZCDP(rho))
    if mech.granularity > 1:
        raise InvalidLossError(
            "the loss is too small for this many columns (the noise per marginal would exceed σ = 3072).",
            fix="use a larger epsilon or rho, or fewer columns.",
        )
    return mech


def _em_epsilon(rho: Fraction, rounds: int) -> Fraction:
    """The largest ε (rounded down) with rounds·ε²/8 ≤ ρ: each exponential mechanism is ε²/8-zCDP."""
    value = Fraction(math.sqrt(float(8 * rho / rounds))).limit_denominator(10**9)
    while rounds * value * value / 8 > rho:
        value *= Fraction(999_999, 1_000_000)
    return value


def _marginal(table: Contingency, axes: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """The exact marginal over ``axes`` (a vector for one axis, a matrix for two)."""
    shape = tuple(table.sizes[a] for a in axes)
    if table.counts.size == 0:
        return np.zeros(shape, dtype=np.int64)
    flat = np.ravel_multi_index(tuple(table.codes[:, a] for a in axes), shape)
    out: npt.NDArray[np.int64] = (
        np.bincount(flat, weights=table.counts, minlength=math.prod(shape))
        .astype(np.int64)
        .reshape(shape)
    )
    return out


def _shape(plan: SynthPlan, edge: tuple[int, int]) -> tuple[int, int]:
    return (len(plan.domains[edge[0]].labels), len(plan.domains[edge[1]].labels))


def _norm(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def workload_error(
    real: Any, synthetic: Any, columns: Sequence[str], *, triples: int = 200, seed: int = 0
) -> dict[str, float]:
    """Average total-variation distance (½·L1 of normalised marginals) over all 1-way and 2-way
    marginals and ``triples`` random 3-way marginals — a custodian's check: it reads the real data.
    """
    import itertools

    rng = np.random.default_rng(seed)  # chooses which triples to compare, not privacy noise

    def tvd(cols: Sequence[str]) -> float:
        a = real.groupby(list(cols), observed=True).size() / len(real)
        b = synthetic.groupby(list(cols), observed=True).size() / max(len(synthetic), 1)
        joined = a.to_frame("a").join(b.to_frame("b"), how="outer").fillna(0.0)
        return float(0.5 * (joined["a"] - joined["b"]).abs().sum())

    out = {"1-way": float(np.mean([tvd([c]) for c in columns]))}
    pairs = list(itertools.combinations(columns, 2))
    out["2-way"] = float(np.mean([tvd(p) for p in pairs])) if pairs else 0.0
    all_triples = list(itertools.combinations(columns, 3))
    if all_triples:
        picks = rng.choice(len(all_triples), size=min(triples, len(all_triples)), replace=False)
        out["3-way"] = float(np.mean([tvd(all_triples[i]) for i in picks]))
    return out


@dataclass(frozen=True)
class SyntheticKind:
    """How a synthetic release is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = SYNTHETIC_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> SynthPlan:
        """The plan of the recorded request under the loss it was charged."""
        epsilon, delta, rho = loss_parts(loss)
        return plan_synthetic(
            catalog,
            SynthRequest(
                table=request["table"],
                columns=tuple(request["columns"]) if request["columns"] is not None else None,
                bins=int(request["bins"]),
                rows=request["rows"],
                where=request["where"],
            ),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )


register_product(SyntheticKind())
