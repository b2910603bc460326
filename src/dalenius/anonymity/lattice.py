"""Optimal full-domain generalisation with record suppression: an exact lattice search.

A *node* of the generalisation lattice chooses one level per quasi-identifier; releasing it means
generalising every value to that level and suppressing the records of every equivalence class
that fails a privacy model. A node is *feasible* when at most ``suppression_limit · n`` records are
suppressed. The search returns the feasible node with the least information loss.

How it stays exact while skipping most nodes:

1. **Privacy pruning (Flash / OLA style).** For models that stay monotone under suppression
   (k-anonymity, distinct ℓ-diversity), feasibility is monotone: if a node is feasible, so is every
   generalisation; if not, neither is any specialisation. Binary search along chains of the lattice
   finds the border with few evaluations, tagging whole cones at each step. Other models
   (entropy/recursive ℓ, t-closeness, β-likeness, δ-disclosure, (α,k)) are not monotone once
   classes are suppressed, so they never prune: the nodes the monotone models leave are all
   evaluated in full — unless step 2 excludes them.
2. **Loss bounds (branch and bound).** Each metric has a lower bound that never decreases up the
   lattice (the loss without suppression, see :mod:`dalenius.anonymity.metrics`). Candidates are
   visited in increasing bound; once the bound exceeds the best loss found, no later node can win.

Ties are broken by (loss, sum of levels, levels) so the answer does not depend on visiting order;
the tests compare it with exhaustive search on every lattice of up to 500 nodes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dalenius.anonymity.encode import Encoded
from dalenius.anonymity.metrics import SEPARABLE, CostTables, cost_tables, lower_bounds, node_loss
from dalenius.anonymity.models import BoolArray, ClassStats, IntArray, Model
from dalenius.core.errors import ConfigurationError

MAX_NODES = 2_000_000
"""The largest lattice searched (product of the hierarchies' level counts)."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class NodeResult:
    """One evaluated node.

    Attributes:
        node: the level of each quasi-identifier.
        suppressed: records suppressed because their class fails a model.
        feasible: whether ``suppressed`` is within the limit.
        loss: the information loss (``math.inf`` when not feasible).
        classes: equivalence classes released.
        mono_suppressed: records suppressed by the monotone models alone.
    """

    node: tuple[int, ...]
    suppressed: int
    feasible: bool
    loss: float
    classes: int
    mono_suppressed: int
    all_classes_square: float = 0.0


@dataclass
class SearchResult:
    """The outcome of a lattice search."""

    best: NodeResult | None
    closest: NodeResult  # the evaluated node with the fewest suppressed records
    evaluated: int
    total: int
    results: dict[tuple[int, ...], NodeResult] = field(default_factory=dict)


@dataclass
class _Snapshot:
    """A frequency set: representative base codes, sensitive codes and counts per row."""

    base: list[IntArray]
    scodes: list[IntArray]
    count: IntArray


def _snapshot(source: _Snapshot, cls: IntArray, n_classes: int) -> _Snapshot:
    key = cls
    groups = n_classes
    if source.scodes:
        combined = cls.copy()
        for codes, size in zip(source.scodes, _sizes(source), strict=True):
            combined = combined * size + codes
        ids, uniques = pd.factorize(combined, sort=False)
        key, groups = np.asarray(ids, dtype=np.int64), len(uniques)
    first = np.empty(groups, dtype=np.int64)
    first[key[::-1]] = np.arange(len(key) - 1, -1, -1)  # the first row of each group
    count = np.bincount(key, weights=source.count, minlength=groups).astype(np.int64)
    return _Snapshot([b[first] for b in source.base], [c[first] for c in source.scodes], count)


def _sizes(snap: _Snapshot) -> list[int]:
    return [int(c.max()) + 1 if len(c) else 1 for c in snap.scodes]


class Evaluator:
    """Evaluates lattice nodes of one frequency set against a set of models."""

    def __init__(self, enc: Encoded, models: Sequence[Model], metric: str, limit: int) -> None:
        self.enc = enc
        self.models = list(models)
        self.mono = [m for m in models if m.monotone_with_suppression]
        self.metric = metric
        self.limit = limit
        self.tables: CostTables | None = cost_tables(enc, metric) if metric in SEPARABLE else None
        self._tables = [
            [np.asarray(lv.codes[level], dtype=np.int64) for level in range(lv.height + 1)]
            for lv in enc.levels
        ]
        self._widths = [
            [max(len(set(lv.codes[level])), 1) for level in range(lv.height + 1)]
            for lv in enc.levels
        ]
        self._base = _Snapshot(list(enc.base), list(enc.sensitive_codes), enc.count)
        self._snapshots: list[_Snapshot] = []
        self._specs: list[tuple[int, ...]] = []
        self._rows: list[int] = []
        self.cache: dict[tuple[int, ...], NodeResult] = {}

    def classes(self, node: tuple[int, ...]) -> tuple[IntArray, int]:
        """Class id of each frequency row at ``node``, and the number of classes."""
        return self._group(self.enc.base, node)

    def _group(self, base: Sequence[IntArray], node: Sequence[int]) -> tuple[IntArray, int]:
        key = np.zeros(len(base[0]) if base else 0, dtype=np.int64)
        stride = 1
        for a in reversed(range(len(node))):
            key += self._tables[a][node[a]][base[a]] * stride
            stride *= self._widths[a][node[a]]
            if stride > 2**62:
                frame = pd.DataFrame(
                    {b: self._tables[b][node[b]][base[b]] for b in range(len(node))}
                )
                ids = frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy()
                return np.asarray(ids, dtype=np.int64), int(ids.max()) + 1 if len(ids) else 0
        ids, uniques = pd.factorize(key, sort=False)
        return np.asarray(ids, dtype=np.int64), len(uniques)

    def mono_suppressed(self, node: tuple[int, ...]) -> int:
        """Records the monotone models suppress at ``node``, rolled up from a cached specialisation.

        Classes of a node are unions of the classes of any of its specialisations, so they can
        be computed from that specialisation's (much smaller) frequency set — ARX's roll-up.
        """
        hit = self.cache.get(node)
        if hit is not None:
            return hit.mono_suppressed
        source = self._snapshot_for(node)
        cls, n_classes = self._group(source.base, node)
        stats = ClassStats(cls, source.count, source.scodes, self.enc.sensitive, n_classes)
        ok = self.passing(stats, self.mono)
        size = stats.size
        if len(self._snapshots) < 256 and n_classes * 2 < len(source.count):
            self._snapshots.append(_snapshot(source, cls, n_classes))
            self._specs.append(node)
            self._rows.append(len(self._snapshots[-1].count))
        return int(size[~ok].sum())

    def _snapshot_for(self, node: tuple[int, ...]) -> _Snapshot:
        if not self._snapshots:
            return self._base
        below = np.all(np.asarray(self._specs) <= np.asarray(node), axis=1)
        if not below.any():
            return self._base
        rows = np.where(below, np.asarray(self._rows), np.iinfo(np.int64).max)
        return self._snapshots[int(np.argmin(rows))]

    def stats(self, node: tuple[int, ...]) -> ClassStats:
        """The class statistics of ``node``."""
        cls, n_classes = self.classes(node)
        return ClassStats(
            cls, self.enc.count, self.enc.sensitive_codes, self.enc.sensitive, n_classes
        )

    def passing(self, stats: ClassStats, models: Sequence[Model]) -> BoolArray:
        """Per class: whether it satisfies every model in ``models``."""
        ok = np.ones(stats.n_classes, dtype=bool)
        for model in models:
            ok &= model.passes(stats)
        return ok

    def evaluate(self, node: tuple[int, ...]) -> NodeResult:
        """Evaluate ``node`` (cached)."""
        hit = self.cache.get(node)
        if hit is not None:
            return hit
        stats = self.stats(node)
        size = stats.size
        fsize = size.astype(np.float64)
        ok = self.passing(stats, self.models)
        suppressed = int(size[~ok].sum())
        mono_ok = self.passing(stats, self.mono) if self.mono else np.ones(len(size), bool)
        mono_suppressed = int(size[~mono_ok].sum())
        feasible = suppressed <= self.limit
        loss = math.inf
        if feasible:
            loss = node_loss(self.enc, self.metric, node, self.tables, ok[stats.cls], size, ok)
        result = NodeResult(
            node=node,
            suppressed=suppressed,
            feasible=feasible,
            loss=loss,
            classes=int(ok.sum()),
            mono_suppressed=mono_suppressed,
            all_classes_square=float((fsize * fsize).sum()),
        )
        self.cache[node] = result
        return result


def all_nodes(heights: Sequence[int]) -> IntArray:
    """Every node of the lattice, one row each (last attribute varying fastest)."""
    total = math.prod(h + 1 for h in heights)
    if total > MAX_NODES:
        raise ConfigurationError(
            f"the generalisation lattice has {total:,} nodes, more than the {MAX_NODES:,} searched.",
            why="the optimal search visits every candidate node; so many cannot be searched here.",
            fix="use fewer quasi-identifiers or hierarchies with fewer levels, or Mondrian "
            "(algorithm = 'mondrian').",
        )
    return np.array(
        list(itertools.product(*(range(h + 1) for h in heights))), dtype=np.int64
    ).reshape(total, len(heights))


def _key(result: NodeResult) -> tuple[float, int, tuple[int, ...]]:
    return (result.loss, sum(result.node), result.node)


def search(
    enc: Encoded,
    models: Sequence[Model],
    *,
    metric: str = "ncp",
    suppression_limit: float = 0.0,
    exhaustive: bool = False,
    progress: Progress | None = None,
) -> SearchResult:
    """Find the feasible node of least loss (see the module docstring for why it is exact).

    Args:
        enc: the encoded table.
        models: privacy models every released class must satisfy.
        metric: one of :data:`dalenius.anonymity.metrics.METRICS`.
        suppression_limit: the largest share of records that may be suppressed, in [0, 1].
        exhaustive: evaluate every node (the reference the tests compare with).
        progress: called with (nodes settled, total nodes) as the search advances.
    """
    heights = enc.heights
    nodes = all_nodes(heights)
    total = len(nodes)
    limit = math.floor(suppression_limit * enc.n + 1e-9)
    ev = Evaluator(enc, models, metric, limit)
    status = np.zeros(total, dtype=np.int8)  # -1 infeasible (monotone models), +1 feasible, 0 ?
    bounds = lower_bounds(enc, metric, nodes, ev.tables)
    start: NodeResult | None = None
    if not exhaustive:
        start = _greedy(ev, heights)
        if start is not None and metric != "discernibility":
            # Nodes whose bound exceeds a known solution cannot win: leave them unsettled.
            status[bounds > start.loss + _slack(start.loss)] = 2
        if ev.mono:
            _flash(ev, nodes, status, progress)
    heights_sum = nodes.sum(axis=1)
    order = np.lexsort((heights_sum, bounds))
    best: NodeResult | None = start
    cone_roots: list[IntArray] = []
    settled = int(np.count_nonzero(status))
    for count, idx in enumerate(order):
        if progress is not None and count % 64 == 0:
            progress(min(settled + count, total), total)
        if status[idx] < 0 or status[idx] == 2:
            continue
        if not exhaustive and best is not None and bounds[idx] > best.loss + _slack(best.loss):
            break
        node_arr = nodes[idx]
        if (
            not exhaustive
            and cone_roots
            and np.any(np.all(node_arr >= np.asarray(cone_roots), axis=1))
        ):
            continue
        result = ev.evaluate(tuple(int(x) for x in node_arr))
        if (
            metric == "discernibility"
            and best is not None
            and result.all_classes_square > best.loss + _slack(best.loss)
        ):
            # Σ|E|² without suppression bounds the loss of this node's whole upward cone.
            cone_roots.append(node_arr)
        if result.feasible and (best is None or _key(result) < _key(best)):
            best = result
    if progress is not None:
        progress(total, total)
    evaluated = list(ev.cache.values())
    closest = min(evaluated, key=lambda r: (r.suppressed, sum(r.node)))
    return SearchResult(best, closest, len(ev.cache), total, dict(ev.cache))


def _greedy(ev: Evaluator, heights: Sequence[int]) -> NodeResult | None:
    """A good feasible node, fast: from the top, step down while a child stays feasible.

    Its loss is an upper bound that lets the exact search ignore most of the lattice.
    """
    current = ev.evaluate(tuple(heights))
    if not current.feasible:
        return None
    best = current
    while True:
        children = []
        for a in range(len(heights)):
            if current.node[a] > 0:
                child = list(current.node)
                child[a] -= 1
                children.append(ev.evaluate(tuple(child)))
        feasible = [c for c in children if c.feasible]
        if not feasible:
            return best
        current = min(feasible, key=_key)
        if _key(current) < _key(best):
            best = current


def _slack(loss: float) -> float:
    """Room for rounding between a bound and a loss summed in another order."""
    return 1e-9 * max(1.0, abs(loss))


def _flash(ev: Evaluator, nodes: IntArray, status: np.ndarray, progress: Progress | None) -> None:
    """Settle the feasibility of every node under the monotone models, by binary search on chains."""
    heights = np.array(ev.enc.heights, dtype=np.int64)
    radix = np.ones(len(heights), dtype=np.int64)
    for a in range(len(heights) - 2, -1, -1):
        radix[a] = radix[a + 1] * (heights[a + 1] + 1)
    order = np.argsort(nodes.sum(axis=1), kind="stable")
    small = nodes.astype(np.int16)
    hs = [int(h) for h in heights]
    rad = [int(r) for r in radix]
    for start in order[status[order] == 0]:
        if status[start] != 0:
            continue
        path = [int(start)]
        current = [int(x) for x in nodes[start]]
        while True:
            step = -1
            # climb along the attribute with the most levels left, through unsettled nodes
            for a in sorted(range(len(hs)), key=lambda b: current[b] - hs[b]):
                if current[a] < hs[a] and status[path[-1] + rad[a]] == 0:
                    step = a
                    break
            if step < 0:
                break
            current[step] += 1
            path.append(path[-1] + rad[step])
        lo, hi = 0, len(path) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            idx = path[mid]
            open_ = np.flatnonzero(status == 0)
            if ev.mono_suppressed(tuple(int(x) for x in nodes[idx])) <= ev.limit:
                status[open_[(small[open_] >= small[idx]).all(axis=1)]] = 1
                hi = mid - 1
            else:
                status[open_[(small[open_] <= small[idx]).all(axis=1)]] = -1
                lo = mid + 1
        if progress is not None:
            progress(int(np.count_nonzero(status)) // 2, len(nodes))
