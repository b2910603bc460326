"""Synthetic microdata with a differential-privacy guarantee: MST over a table's public domains.

MST (McKenna, Miklau & Sheldon 2021, "Winning the NIST contest") releases a table of made-up rows
whose low-order statistics follow the real table's:

1. **measure** every column's counts (1-way marginals) with discrete Gaussian noise;
2. **select** the d − 1 pairs of columns that best explain the data, as a maximum spanning tree:
   each round the exponential mechanism picks, among the pairs that join two components, one
   whose 2-way counts are far from what the noisy 1-way counts predict (score: the L1 distance);
3. **measure** the selected 2-way marginals with discrete Gaussian noise (each in the round that
   selected it: the selection never reads a 2-way measurement);
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dalenius.core.catalog import Catalog
from dalenius.core.loss import Loss
from dalenius.core.rng import RandomSource
from dalenius.mechanisms.exponential import ExponentialMechanism
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.plan.protocol import (
    as_declared,
    loss_parts,
    register_product,
    rho_of,
    scaled_epsilon,
    scaled_rho,
)
from dalenius.releases.synth_table import (
    MAX_CELLS,
    MAX_ROWS,
    Contingency,
    Domain,
    SynthesisSteps,
    SyntheticRelease,
    em_epsilon,
    marginal,
    plan_columns,
    recorded_columns,
    rows_from,
    synth_loss,
    vector_gaussian,
    workload_error,
)

__all__ = [
    "MAX_CELLS",
    "MAX_ROWS",
    "Contingency",
    "Domain",
    "Measurements",
    "SynthPlan",
    "SynthRequest",
    "SyntheticRelease",
    "fit_tree",
    "plan_synthetic",
    "workload_error",
]

SYNTHETIC_FORMAT = "synthetic-1"
"""The ledger record's format: the request, the noisy measurements and the sampling seed."""

SCORE_SLACK = Fraction(1, 1000)
"""Added to the selection scores' sensitivity R. A score is a float L1 distance (numpy's pairwise
sum: error below log2(cells)·2⁻⁵³ of the sum of its terms, under 10⁻⁷ for counts below 10¹⁰)
rounded to the nearest fraction with denominator at most 10⁶ (error at most 5·10⁻⁷), so two
neighbours' scores differ by at most R + 2·(10⁻⁷ + 5·10⁻⁷) < R + 1/1000: the exponential mechanism
is calibrated for that, rounding toward safety."""


@dataclass(frozen=True)
class SynthRequest:
    """The table and columns to synthesise, numeric columns in ``bins`` bins, ``rows`` rows."""

    table: str
    columns: tuple[str, ...] | None = None
    bins: int = 10
    rows: int | None = None
    where: str | None = None


@dataclass(frozen=True)
class SynthPlan(SynthesisSteps["Measurements"]):
    """An MST release ready to run (a :class:`SynthRequest`): the exact statement, the domains,
    the loss split in three.
    """

    # -- the release protocol (dalenius.plan.protocol) ----------------------------------------

    answer_format: ClassVar[str] = SYNTHETIC_FORMAT
    plan_class: ClassVar[str] = "synthetic"
    method: ClassVar[str] = "mst"

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

    def measurements_from(self, doc: dict[str, Any]) -> Measurements:
        """The measurements of a record's JSON."""
        return Measurements.from_json(doc)

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

    def mechanisms(self) -> tuple[IntegerGaussian, ExponentialMechanism | None, IntegerGaussian]:
        """The mechanisms of steps 1–3, a third of ρ each: the 1-way marginals' Gaussian (each
        of the d marginals), the tree's selector (each of its d − 1 rounds; none for one
        column) and the 2-way marginals' Gaussian (each of the d − 1 edges).
        """
        d = len(self.domains)
        r = self.max_rows
        third = self.rho / 3
        one = vector_gaussian(r, third / d)
        rounds = em_epsilon(third, d - 1) if d > 1 else None
        selector = ExponentialMechanism(r + SCORE_SLACK, rounds) if rounds is not None else None
        two = vector_gaussian(r, third / max(d - 1, 1))
        return one, selector, two

    def measure(self, table: Contingency, rng: RandomSource | None = None) -> Measurements:
        """Steps 1–3: noisy 1-way marginals, then the private tree a round at a time, each round
        selecting a pair and measuring its 2-way marginal (the selection never reads the 2-way
        measurements, so measuring each pair at once changes no distribution). After each round
        the progress callback, if any, learns the round, the ρ drawn so far and the pair.
        """
        d = len(self.domains)
        one_mech, selector, two_mech = self.mechanisms()
        one = [one_mech.release(marginal(table, (i,)), rng=rng) for i in range(d)]
        edges: list[tuple[int, int]] = []
        two: list[npt.NDArray[np.int64]] = []
        if selector is not None:
            estimate = [np.maximum(o, 0) / max(float(np.maximum(o, 0).sum()), 1.0) for o in one]
            total = float(np.mean([o.sum() for o in one]))
            component = list(range(d))
            spent = d * rho_of(one_mech.loss)
            for _ in range(d - 1):
                i, j = _select_pair(table, component, estimate, total, selector, rng)
                edges.append((i, j))
                old, new = component[j], component[i]
                component = [new if c == old else c for c in component]
                two.append(
                    two_mech.release(marginal(table, (i, j)).reshape(-1), rng=rng).reshape(
                        _shape(self, (i, j))
                    )
                )
                spent += selector.epsilon * selector.epsilon / 8 + rho_of(two_mech.loss)
                self.report(len(edges), d - 1, spent, (i, j))
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
        return rows_from(
            self.domains,
            model.sample,
            n,
            seed,
            edges=tuple((self.domains[i].name, self.domains[j].name) for i, j in measured.edges),
            loss=self.loss,
            measurements=measured,
            method="mst",
        )


def _select_pair(
    table: Contingency,
    component: Sequence[int],
    estimate: Sequence[npt.NDArray[Any]],
    total: float,
    selector: ExponentialMechanism,
    rng: RandomSource | None,
) -> tuple[int, int]:
    """Step 2, one round: among the pairs joining two components, the exponential mechanism
    picks one whose 2-way counts are far (L1) from what the noisy 1-way counts predict.
    """
    d = len(component)
    candidates = [(i, j) for i in range(d) for j in range(i + 1, d) if component[i] != component[j]]
    scores = [
        Fraction(
            float(
                np.abs(marginal(table, (i, j)) - total * np.outer(estimate[i], estimate[j])).sum()
            )
        ).limit_denominator(10**6)
        for i, j in candidates
    ]
    return candidates[selector.select(scores, rng=rng)]


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


def plan_synthetic(
    catalog: Catalog,
    request: SynthRequest,
    *,
    epsilon: Fraction | None,
    delta: Fraction | None,
    rho: Fraction | None = None,
) -> SynthPlan:
    """Validate a synthetic-data request and fix its domains and loss; reads no data."""
    columns = plan_columns(
        catalog, request.table, request.columns, request.bins, request.where, request.rows
    )
    loss, total_rho = synth_loss(epsilon, delta, rho)
    r, d = columns.max_rows, len(columns.domains)
    # Decided here, before any data is read: the noise of each marginal must fit the integer grid.
    vector_gaussian(r, total_rho / 3 / d)
    vector_gaussian(r, total_rho / 3 / max(d - 1, 1))
    return SynthPlan(request, columns.domains, columns.exact, columns.tables, loss, total_rho, r)


def _shape(plan: SynthPlan, edge: tuple[int, int]) -> tuple[int, int]:
    return (len(plan.domains[edge[0]].labels), len(plan.domains[edge[1]].labels))


@dataclass(frozen=True)
class SyntheticKind:
    """How a synthetic release is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = SYNTHETIC_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> SynthPlan:
        """The plan of the recorded request under the loss it was charged."""
        epsilon, delta, rho = loss_parts(loss)
        return plan_synthetic(
            catalog,
            SynthRequest(**recorded_columns(request)),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )


register_product(SyntheticKind())
