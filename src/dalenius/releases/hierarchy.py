"""Consistent hierarchical tables: noisy counts at every level, made consistent, non-negative, integral.

A hierarchy is a list of columns with public key lists, from the coarsest to the finest
(``state → education``); its tree is the nation (the root), each key of the first column, each
pair of keys of the first two, and so on. One release measures the count of every node of every
level with independent noise — each privacy unit (at most ``R`` rows) changes each level's counts
by at most ``R`` in L1 and L2, and the nodes of one level are disjoint, so a level costs what one
count costs and the levels compose sequentially (a split the custodian sets, equal by default).
This is the measurement design of the 2020 US Census TopDown algorithm, on one machine.

Post-processing (free) then makes the tables agree, in three products:

* **noisy**: the measurements as drawn, each with its exact error bar;
* **consistent**: the generalised least-squares estimate under "children sum to their parent",
  weighted by each level's noise variance — the best linear unbiased estimate (Hay, Rastogi,
  Miklau & Suciu 2010, generalised to unequal variances), computed by one bottom-up and one
  top-down pass; its interval comes from a Chernoff bound on the exact linear combination of
  noises behind each estimate;
* **final**: non-negative integers that add up exactly, top-down as in TopDown: the root is
  rounded, then at each parent the children's consistent estimates are projected onto
  "non-negative and summing to the parent" (a weighted simplex projection, in closed form) and
  rounded by largest remainders, which is the exact optimum of that one-constraint problem — so no
  integer-programming solver is needed. Its interval is the consistent one, clamped at 0 and
  widened to contain the final value, so it still covers the exact count; a final value at or
  above the consistent interval's top gets a half-width above it, so no interval of a noisy
  count has width zero.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dalenius.core.catalog import Catalog, Key, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP
from dalenius.core.rng import RandomSource
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.nodes import DPQuery
from dalenius.plan.protocol import (
    Fetch,
    LossDefect,
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
from dalenius.releases._counts import keyed_counts, norm
from dalenius.releases._intervals import chernoff_half_widths, noise_variance
from dalenius.releases.density import rho_for
from dalenius.sql.emit import ExactSQL, exact_queries

HIERARCHY_FORMAT = "hierarchy-1"
"""The ledger record's format: the request and every node's noisy count."""

MAX_NODES = 20_000
"""At most this many nodes in the tree (the consistent estimate's coefficients are nodes²)."""


@dataclass(frozen=True)
class HierarchyRequest:
    """The columns of the hierarchy, coarsest first, of one table, with an optional filter.

    ``split``: the share of the loss each level gets, root first (``len(levels) + 1`` weights);
    equal shares by default.
    """

    table: str
    levels: tuple[str, ...]
    where: str | None = None
    split: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Tree:
    """The nodes, level by level: node ``i`` has a key path, a level and a parent."""

    paths: tuple[tuple[Key, ...], ...]
    level: npt.NDArray[np.int64] = field(compare=False)
    parent: npt.NDArray[np.int64] = field(compare=False)
    depth: int

    @staticmethod
    def build(key_lists: Sequence[Sequence[Key]]) -> Tree:
        """The complete tree of the key lists (root, then every prefix of the product)."""
        paths: list[tuple[Key, ...]] = [()]
        level = [0]
        parent = [-1]
        index: dict[tuple[Key, ...], int] = {(): 0}
        for depth in range(1, len(key_lists) + 1):
            for path in itertools.product(*key_lists[:depth]):
                index[path] = len(paths)
                paths.append(path)
                level.append(depth)
                parent.append(index[path[:-1]])
        return Tree(tuple(paths), np.array(level), np.array(parent), len(key_lists))

    def children(self) -> list[list[int]]:
        """Each node's children, in order."""
        out: list[list[int]] = [[] for _ in self.paths]
        for node, par in enumerate(self.parent):
            if par >= 0:
                out[int(par)].append(node)
        return out


def consistent(
    tree: Tree, noisy: npt.NDArray[np.float64], variance: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Weighted least squares under "children sum to their parent" (exact, two passes).

    ``noisy`` may have trailing batch dimensions (every column is estimated the same way; the
    estimate is linear). Bottom-up, each node's subtree estimate ``z`` combines its own
    measurement with its children's sum by inverse variance; top-down, each parent's final value
    is shared among its children in proportion to their subtree variances.
    """
    return tree_least_squares(tree.children(), noisy, variance)


def tree_least_squares(
    children: Sequence[Sequence[int]],
    noisy: npt.NDArray[np.float64],
    variance: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """:func:`consistent` for any tree given by its children lists, every parent numbered
    before its children (the root first); continual releases run it on each measured subtree.
    """
    z = np.array(noisy, dtype=np.float64, copy=True)
    s = np.array(variance, dtype=np.float64, copy=True)
    for node in reversed(range(len(children))):
        kids = list(children[node])
        if not kids:
            continue
        below = z[kids].sum(axis=0)
        below_var = s[kids].sum()
        own = 1.0 / variance[node]
        z[node] = (noisy[node] * own + below / below_var) / (own + 1.0 / below_var)
        s[node] = 1.0 / (own + 1.0 / below_var)
    x = z.copy()
    for node in range(len(children)):
        kids = list(children[node])
        if not kids:
            continue
        gap = x[node] - z[kids].sum(axis=0)
        share = s[kids] / s[kids].sum()
        x[kids] = z[kids] + np.multiply.outer(share, gap) if np.ndim(gap) else z[kids] + share * gap
    return x


def nonnegative_integers(
    tree: Tree, estimate: npt.NDArray[np.float64], variance: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Non-negative integers that add up exactly, top-down from the consistent estimate.

    At each parent (already final) the children's estimates are projected onto
    ``{x ≥ 0, Σx = parent}`` in the inverse-variance norm (closed form: a water level ``τ`` with
    ``x_c = max(0, e_c − τ·v_c)``), then rounded by largest remainders.
    """
    children = tree.children()
    final = np.zeros(len(tree.paths), dtype=np.int64)
    final[0] = max(0, round(float(estimate[0])))
    for node in range(len(tree.paths)):
        kids = children[node]
        if not kids:
            continue
        target = int(final[node])
        e = estimate[kids]
        v = variance[kids]
        projected = _simplex_projection(e, v, float(target))
        base = np.floor(projected).astype(np.int64)
        remainder = target - int(base.sum())
        if remainder > 0:
            order = np.argsort(-(projected - base), kind="stable")[:remainder]
            base[order] += 1
        final[kids] = base
    return final


def _simplex_projection(
    e: npt.NDArray[np.float64], v: npt.NDArray[np.float64], total: float
) -> npt.NDArray[np.float64]:
    """``argmin Σ (x−e)²/v`` over ``x ≥ 0, Σx = total``: ``x = max(0, e − τv)`` for the right τ."""
    if total <= 0:
        return np.zeros_like(e)
    lo, hi = float(((e - total) / v).min()) - 1.0, float((e / v).max()) + 1.0
    for _ in range(200):  # bisection on τ: Σ max(0, e − τv) is decreasing in τ
        mid = (lo + hi) / 2
        if np.maximum(0.0, e - mid * v).sum() > total:
            lo = mid
        else:
            hi = mid
    x = np.maximum(0.0, e - hi * v)
    if x.sum() > 0:
        x *= total / x.sum()
    return x


@dataclass(frozen=True)
class HierarchyPlan:
    """A hierarchical release ready to run: the exact statement, the mechanisms and the loss."""

    request: HierarchyRequest
    tree: Tree
    exact: DPQuery
    tables: tuple[Table, ...]
    loss: Loss
    mechanisms: tuple[IntegerGaussian | IntegerLaplace, ...] = field(compare=False)
    max_rows: int
    _widths: dict[float, npt.NDArray[np.float64]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @functools.cached_property
    def variance(self) -> npt.NDArray[np.float64]:
        """Each node's noise variance (its level's mechanism)."""
        return np.array([noise_variance(self.mechanisms[int(d)]) for d in self.tree.level])

    @functools.cached_property
    def coefficients(self) -> npt.NDArray[np.float64]:
        """``a[v, u]``: the consistent estimate of node ``v`` is ``Σ_u a[v, u]·noisy_u`` (public)."""
        return consistent(self.tree, np.eye(len(self.tree.paths)), self.variance)

    def half_widths(self, beta: float) -> npt.NDArray[np.float64]:
        """Per node, the consistent estimate's interval half-width at ``1 − beta`` (public, cached)."""
        cached = self._widths.get(beta)
        if cached is None:
            cached = chernoff_half_widths(self.coefficients, self.tree.level, self.mechanisms, beta)
            self._widths[beta] = cached
        return cached

    # -- the release protocol (dalenius.plan.protocol) ----------------------------------------

    kind: ClassVar[str] = "hierarchy"
    answer_format: ClassVar[str] = HIERARCHY_FORMAT
    plan_class: ClassVar[str] = "hierarchy"

    @property
    def text(self) -> str:
        """The audit trail's text: what the analyst asked."""
        req = self.request
        where = f" WHERE {req.where}" if req.where else ""
        return f"HIERARCHY({' > '.join(req.levels)}) FROM {req.table}{where}"

    def privacy_map(self) -> Loss:
        """The levels' losses, each at the unit's row cap, composed sequentially.

        The nodes of one level are disjoint, so one unit's at most R rows change a level's
        counts by at most R in L1 and in L2: each level costs what one count of sensitivity R
        costs, and the levels add up.
        """
        required = self.exact.query.unit.max_rows
        laplace = [m for m in self.mechanisms if isinstance(m, IntegerLaplace)]
        if len(laplace) == len(self.mechanisms):
            parts = (scaled_epsilon(m.epsilon, m.sensitivity, required) for m in laplace)
            return PureDP(sum(parts, Fraction(0)))
        total = sum(
            (
                scaled_rho(rho_of(m.loss), m.sensitivity, required)
                for m in self.mechanisms
                if isinstance(m, IntegerGaussian)
            ),
            Fraction(0),
        )
        if laplace:  # a mix has no composition here: a defect, refused before the reserve
            raise LossDefect("a hierarchy mixes Laplace and Gaussian levels")
        return as_declared(total, self.loss)

    def prepare(self, dialect: Dialect, salt: int) -> Measure[npt.NDArray[np.int64]]:
        """The exact per-leaf statement now; every node's noisy count behind the gate."""
        statement = self.sql(dialect, salt).main

        def measure(fetch: Fetch) -> Measured[npt.NDArray[np.int64]]:
            noisy = self.measure(self.leaf_counts(fetch(statement)))
            record = {
                "format": HIERARCHY_FORMAT,
                "request": request_doc(self.request),
                "noisy": [int(v) for v in noisy],
            }
            return Measured(json.dumps(record), noisy)

        return measure

    def decode(self, record: str) -> npt.NDArray[np.int64]:
        """Every node's noisy count from a ledger record."""
        return np.asarray(recorded(record, HIERARCHY_FORMAT)["noisy"], dtype=np.int64)

    def publish(self, value: npt.NDArray[np.int64], confidence: float) -> HierarchyRelease:
        """The noisy, consistent and final tables (post-processing)."""
        return self.finish(value, confidence)

    def sql(self, dialect: Dialect | str, salt: int = 0) -> ExactSQL:
        """The exact per-leaf counts for ``dialect`` (``salt`` keys contribution bounding)."""
        return exact_queries(self.exact, dialect, salt=salt)

    def fingerprint(self) -> str:
        """A hash naming exactly what is released."""
        payload = {
            "kind": "hierarchy",
            "request": [
                self.request.table,
                list(self.request.levels),
                self.request.where,
                list(self.request.split or ()),
            ],
            "loss": str(self.loss),
            "plan": self.exact.fingerprint(),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def leaf_counts(self, rows: Sequence[tuple[Any, ...]]) -> npt.NDArray[np.int64]:
        """Every node's exact count from the engine's per-leaf rows (parents are sums)."""
        depth = self.tree.depth
        index = {path: i for i, path in enumerate(self.tree.paths) if len(path) == depth}
        normed = {tuple(norm(k) for k in path): i for path, i in index.items()}
        counts = np.zeros(len(self.tree.paths), dtype=np.int64)
        for row in rows:
            node = normed.get(tuple(norm(k) for k in row[:depth]))
            if node is not None:
                counts[node] += int(row[depth] or 0)
        totals = np.zeros_like(counts)
        for leaf in np.flatnonzero(self.tree.level == depth):
            node = int(leaf)
            while node >= 0:  # a leaf's count goes to every ancestor
                totals[node] += counts[leaf]
                node = int(self.tree.parent[node])
        return totals

    def measure(
        self, exact: npt.NDArray[np.int64], rng: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """Independent noise on every node, each level with its own mechanism."""
        noisy = np.zeros_like(exact)
        for depth, mech in enumerate(self.mechanisms):
            nodes = np.flatnonzero(self.tree.level == depth)
            noisy[nodes] = mech.release(exact[nodes], rng=rng)
        return noisy

    def finish(self, noisy: npt.NDArray[np.int64], confidence: float) -> HierarchyRelease:
        """The three products and their intervals from the noisy measurements (no data)."""
        variance = self.variance
        estimate = consistent(self.tree, noisy.astype(np.float64), variance)
        final = nonnegative_integers(self.tree, estimate, variance)
        beta = 1.0 - confidence
        conf = Fraction(confidence).limit_denominator(10**9)
        per_level = [float(m.error_bar(conf)) for m in self.mechanisms]
        noisy_half = np.array([per_level[int(d)] for d in self.tree.level])
        half = self.half_widths(beta)
        low = np.maximum(estimate - half, 0.0)
        high = estimate + half
        return HierarchyRelease(
            levels=self.request.levels,
            paths=self.tree.paths,
            level=self.tree.level,
            noisy=noisy,
            noisy_low=noisy - noisy_half,
            noisy_high=noisy + noisy_half,
            consistent=estimate,
            consistent_low=np.minimum(low, estimate),
            consistent_high=high,
            final=final,
            final_low=np.minimum(low, final),
            # A final count at or above its interval's top (a negative estimate made 0, or
            # pushed up to add up) keeps a half-width above it: widening keeps the coverage,
            # and [0, 0] would read as a certainty the noise never gave.
            final_high=np.where(high > final, high, final + half),
            confidence=confidence,
            loss=self.loss,
        )


@dataclass(frozen=True)
class HierarchyRelease:
    """Every node's noisy, consistent and final count, each with its interval at ``confidence``."""

    levels: tuple[str, ...]
    paths: tuple[tuple[Key, ...], ...]
    level: npt.NDArray[np.int64]
    noisy: npt.NDArray[np.int64]
    noisy_low: npt.NDArray[np.float64]
    noisy_high: npt.NDArray[np.float64]
    consistent: npt.NDArray[np.float64]
    consistent_low: npt.NDArray[np.float64]
    consistent_high: npt.NDArray[np.float64]
    final: npt.NDArray[np.int64]
    final_low: npt.NDArray[np.float64]
    final_high: npt.NDArray[np.float64]
    confidence: float
    loss: Loss

    def to_pandas(self) -> Any:
        """One row per node: the level, one column per hierarchy column, then the products."""
        import pandas as pd

        data: dict[str, Any] = {"level": self.level}
        for i, name in enumerate(self.levels):
            data[name] = [p[i] if len(p) > i else None for p in self.paths]
        for name in (
            "noisy",
            "noisy_low",
            "noisy_high",
            "consistent",
            "consistent_low",
            "consistent_high",
            "final",
            "final_low",
            "final_high",
        ):
            data[name] = getattr(self, name)
        return pd.DataFrame(data)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "levels": list(self.levels),
            "nodes": [
                {
                    "level": int(lv),
                    "path": [str(k) if not isinstance(k, int | float | bool) else k for k in p],
                    "noisy": int(self.noisy[i]),
                    "noisy_low": float(self.noisy_low[i]),
                    "noisy_high": float(self.noisy_high[i]),
                    "consistent": float(self.consistent[i]),
                    "consistent_low": float(self.consistent_low[i]),
                    "consistent_high": float(self.consistent_high[i]),
                    "final": int(self.final[i]),
                    "final_low": float(self.final_low[i]),
                    "final_high": float(self.final_high[i]),
                }
                for i, (lv, p) in enumerate(zip(self.level, self.paths, strict=True))
            ],
            "confidence": self.confidence,
        }


def plan_hierarchy(
    catalog: Catalog,
    request: HierarchyRequest,
    *,
    epsilon: Fraction | None,
    delta: Fraction | None,
    rho: Fraction | None = None,
) -> HierarchyPlan:
    """Validate a hierarchy request and calibrate each level's noise; reads no data.

    Pure ε (``epsilon`` alone) uses discrete Laplace noise; ``epsilon`` with ``delta`` or ``rho``
    uses discrete Gaussian noise (the Census's choice), charged as (ε, δ) or ρ.
    """
    if not request.levels:
        raise QueryError(
            "a hierarchy needs at least one column.",
            fix="pass levels such as ['state', 'education'].",
        )
    table = catalog.table(request.table)
    if table is None:
        raise QueryError(
            f"there is no table {request.table!r} in the catalog.", fix="check the table's name."
        )
    key_lists: list[tuple[Key, ...]] = []
    for name in request.levels:
        column = table.column(name)
        if column is None or column.keys is None:
            raise QueryError(
                f"column {name!r} of {request.table!r} has no public key list.",
                why="every node of the tree is released, so the tree must come from public keys, not from the data.",
                fix="use columns whose keys the catalog declares.",
            )
        key_lists.append(column.keys)
    nodes = 1 + sum(math.prod(len(k) for k in key_lists[: d + 1]) for d in range(len(key_lists)))
    if nodes > MAX_NODES:
        raise QueryError(
            f"the tree has {nodes} nodes; at most {MAX_NODES} are supported.",
            fix="use fewer or coarser levels.",
        )
    split = _split(request.split, len(key_lists) + 1)
    exact, tables, rows = keyed_counts(catalog, request.table, request.levels, request.where)
    loss, mechanisms = _mechanisms(epsilon, delta, rho, split, rows)
    if any(isinstance(m, IntegerGaussian) and m.granularity > 1 for m in mechanisms):
        # Above σ = 3072 the sampler rounds to a coarser grid, whose sensitivity argument is a
        # scalar one: a unit spread over several nodes could move several rounded counts.
        raise InvalidLossError(
            "the loss per level is too small for this hierarchy's noise (σ above 3072).",
            why="the discrete Gaussian is then drawn on a coarse grid, which a vector of counts cannot use safely.",
            fix="use a larger epsilon or rho, fewer levels, or give the levels with the most weight a larger split.",
        )
    return HierarchyPlan(
        request=request,
        tree=Tree.build(key_lists),
        exact=exact,
        tables=tables,
        loss=loss,
        mechanisms=mechanisms,
        max_rows=rows,
    )


def _split(weights: Sequence[float] | None, levels: int) -> list[Fraction]:
    if weights is None:
        return [Fraction(1, levels)] * levels
    if len(weights) != levels or any(
        not (isinstance(w, int | float) and math.isfinite(w) and w > 0) for w in weights
    ):
        raise QueryError(
            f"split needs {levels} positive weights (the root, then each level), got {list(weights)}.",
            fix=f"pass split=[1] * {levels} for equal shares.",
        )
    exact = [Fraction(w).limit_denominator(10**6) for w in weights]
    total = sum(exact)
    return [w / total for w in exact]


def _mechanisms(
    epsilon: Fraction | None,
    delta: Fraction | None,
    rho: Fraction | None,
    split: list[Fraction],
    rows: int,
) -> tuple[Loss, tuple[IntegerGaussian | IntegerLaplace, ...]]:
    if rho is not None:
        if rho <= 0:
            raise InvalidLossError("rho must be positive.", fix="pass rho=0.5, for example.")
        return ZCDP(rho), tuple(IntegerGaussian(rows, ZCDP(rho * s)) for s in split)
    if epsilon is None or epsilon <= 0:
        raise InvalidLossError(
            "a hierarchical release needs epsilon > 0 (or rho).", fix="pass epsilon=1, for example."
        )
    if delta is None or delta == 0:
        return PureDP(epsilon), tuple(IntegerLaplace(rows, epsilon * s) for s in split)
    if not 0 < delta < 1:
        raise InvalidLossError(
            f"delta must be in (0, 1), got {float(delta):g}.", fix="use delta=1e-6."
        )
    total = rho_for(epsilon, delta)
    return ApproxDP(epsilon, delta), tuple(IntegerGaussian(rows, ZCDP(total * s)) for s in split)


@dataclass(frozen=True)
class HierarchyKind:
    """How a hierarchy is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = HIERARCHY_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> HierarchyPlan:
        """The plan of the recorded request under the loss it was charged."""
        epsilon, delta, rho = loss_parts(loss)
        return plan_hierarchy(
            catalog,
            HierarchyRequest(
                table=request["table"],
                levels=tuple(request["levels"]),
                where=request["where"],
                split=tuple(float(w) for w in request["split"]) if request["split"] else None,
            ),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )


register_product(HierarchyKind())
