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
   classes are suppressed, so they prune through the monotone models they imply
   (:meth:`~dalenius.anonymity.models.Model.implied`: t = 0.2 on a categorical attribute needs
   each class to hold the values that cover 80% of the table's distribution, a distinct
   ℓ-diversity); the nodes left are evaluated in full — unless step 2 excludes them.
2. **Loss bounds (branch and bound).** Each metric has a lower bound that never decreases up the
   lattice (the loss without suppression, see :mod:`dalenius.anonymity.metrics`). Candidates are
   visited in increasing bound; once the bound exceeds the best loss found, no later node can win.

Each check rolls the node's classes up from the smallest cached frequency set of one of its
specialisations (ARX's roll-up), and a node's loss is summed from integer counts per generalised
label, so it is the same to the last bit whichever set it came from.

Ties are broken by (loss, sum of levels, levels) so the answer does not depend on visiting order;
the tests compare it with exhaustive search on every lattice of up to 500 nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from dalenius.anonymity.encode import Encoded
from dalenius.anonymity.metrics import SEPARABLE, CostTables, cost_tables, lower_bounds
from dalenius.anonymity.models import (
    BoolArray,
    ClassStats,
    DistinctLDiversity,
    FloatArray,
    IntArray,
    KAnonymity,
    Model,
)
from dalenius.core.errors import ConfigurationError

MAX_NODES = 2_000_000
"""The largest lattice searched (product of the hierarchies' level counts)."""

Progress = Callable[[int, int], None]
LabelArray = npt.NDArray[np.int32]


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
    labels: dict[tuple[int, int], LabelArray] = field(default_factory=dict)
    """(attribute, level) -> each row's label code at that level, computed once when first read."""
    pairs: dict[tuple[int, int, int], IntArray] = field(default_factory=dict)
    """(attribute a, level of a, level of a + 1) -> each row's mixed-radix code of the two labels."""


def dense_ids(key: IntArray, bound: int) -> tuple[IntArray, int]:
    """Dense group ids ``0..g-1`` of non-negative integer keys below ``bound``, and ``g``.

    When the key space is small next to the rows, a presence table and a running sum number the
    groups in key order without hashing (several times faster than a hash table on the lattice's
    frequency sets); otherwise pandas' hash factorisation is used.
    """
    if bound <= 4 * len(key) + 65_536:
        seen = np.zeros(bound, dtype=bool)
        seen[key] = True
        return _number(seen, key)
    ids, uniques = pd.factorize(key, sort=False)
    return np.asarray(ids, dtype=np.int64), len(uniques)


def _number(present: BoolArray, key: IntArray) -> tuple[IntArray, int]:
    """Each key's rank among the keys marked ``present`` (the ids of :func:`dense_ids`)."""
    where = np.flatnonzero(present)
    ranks = np.empty(len(present), dtype=np.int64)  # read only where present
    ranks[where] = np.arange(len(where))
    return ranks[key], len(where)


def _distinct(
    cls: IntArray, codes: IntArray, n_classes: int, m: int, limit: int
) -> IntArray | None:
    """Distinct codes per class from a presence table, or None if it would exceed ``limit`` cells.

    Each class's row of the table is padded to whole 64-bit words, so the marks of a class are
    counted with a popcount per word (numpy ≥ 2) rather than a reduction along a short axis.
    """
    words = -(-m // 8)
    if n_classes * words * 8 > limit:
        return None
    seen = np.zeros(n_classes * words * 8, dtype=bool)
    seen[cls * (words * 8) + codes] = True
    if not hasattr(np, "bitwise_count"):  # numpy < 2
        return np.asarray(np.count_nonzero(seen.reshape(n_classes, words * 8), axis=1), np.int64)
    bits = np.bitwise_count(seen.view(np.uint64)).reshape(n_classes, words)
    return np.asarray(bits[:, 0] if words == 1 else bits.sum(axis=1), dtype=np.int64)


def _snapshot(source: _Snapshot, cls: IntArray, n_classes: int) -> _Snapshot:
    key = cls
    groups = n_classes
    if source.scodes:
        combined = cls.copy()
        bound = n_classes
        for codes, size in zip(source.scodes, _sizes(source), strict=True):
            combined = combined * size + codes
            bound *= size
        key, groups = dense_ids(combined, bound)
    first = np.empty(groups, dtype=np.int64)
    first[key[::-1]] = np.arange(len(key) - 1, -1, -1)  # the first row of each group
    count = np.bincount(key, weights=source.count, minlength=groups).astype(np.int64)
    return _Snapshot([b[first] for b in source.base], [c[first] for c in source.scodes], count)


def _sizes(snap: _Snapshot) -> list[int]:
    return [int(c.max()) + 1 if len(c) else 1 for c in snap.scodes]


SNAPSHOT_BUDGET = 4
"""Roll-up frequency sets kept, in all, at most this many times the base frequency set's rows
(with their label codes cached per level as int32, memory stays a small multiple of the set's)."""


class Evaluator:
    """Evaluates lattice nodes of one frequency set against a set of models.

    Every evaluation reads the smallest cached frequency set of a specialisation of the node
    (ARX's roll-up: the classes of a node are unions of the classes of any specialisation), and
    computes the loss from integer counts per generalised label, so a node's loss is the same
    bit for bit whichever frequency set it was rolled up from.
    """

    def __init__(self, enc: Encoded, models: Sequence[Model], metric: str, limit: int) -> None:
        self.enc = enc
        self.models = list(models)
        self.others = [m for m in models if not m.monotone_with_suppression]
        self.all_mono = not self.others
        # the monotone models, and those the others imply (they prune without changing results)
        self.mono = [m for m in models if m.monotone_with_suppression]
        for model in self.others:
            self.mono += [m for m in model.implied(enc.sensitive) if m not in self.mono]
        self.metric = metric
        self.limit = limit
        self.tables: CostTables | None = cost_tables(enc, metric) if metric in SEPARABLE else None
        self._tables = [
            [np.asarray(lv.codes[level], dtype=np.int64) for level in range(lv.height + 1)]
            for lv in enc.levels
        ]
        self._widths = [
            [int(codes.max()) + 1 if len(codes) else 1 for codes in per_level]
            for per_level in self._tables
        ]
        self._delta = suppression_deltas(enc, self.tables, self._tables, self._widths)
        self._base = _Snapshot(list(enc.base), list(enc.sensitive_codes), enc.count)
        self._snapshots: list[_Snapshot] = []
        self._specs: list[tuple[int, ...]] = []
        self._rows: list[int] = []
        self._kept_rows = 0
        self._spec_array = np.zeros((0, len(enc.levels)), dtype=np.int64)
        self._row_array = np.zeros(0, dtype=np.int64)
        self._last: tuple[tuple[int, ...], _Snapshot, ClassStats] | None = None
        self._mono: dict[tuple[int, ...], int] = {}
        # k and ℓ of the monotone models, when they are all k-anonymity or distinct ℓ-diversity
        self._thresholds: tuple[int, int] | None = None
        if all(isinstance(m, KAnonymity | DistinctLDiversity) for m in self.mono):
            self._thresholds = (
                max((m.k for m in self.mono if isinstance(m, KAnonymity)), default=1),
                max((m.l for m in self.mono if isinstance(m, DistinctLDiversity)), default=1),
            )
        self.cache: dict[tuple[int, ...], NodeResult] = {}

    def classes(self, node: tuple[int, ...]) -> tuple[IntArray, int]:
        """Class id of each frequency row at ``node``, and the number of classes."""
        return self._group(self._base, node)

    def _labels(self, snap: _Snapshot, attribute: int, level: int) -> LabelArray:
        got = snap.labels.get((attribute, level))
        if got is None:
            got = self._tables[attribute][level][snap.base[attribute]].astype(np.int32)
            snap.labels[(attribute, level)] = got
        return got

    def _pair(self, snap: _Snapshot, a: int, levels: tuple[int, int]) -> IntArray:
        """Per row, label(a) · width(a + 1) + label(a + 1) at ``levels`` (cached per snapshot)."""
        got = snap.pairs.get((a, *levels))
        if got is None:
            width = self._widths[a + 1][levels[1]]
            dtype = np.int32 if self._widths[a][levels[0]] * width < 2**31 else np.int64
            got = self._tables[a][levels[0]][snap.base[a]].astype(dtype)
            got *= width
            got += self._tables[a + 1][levels[1]][snap.base[a + 1]]
            snap.pairs[(a, *levels)] = got
        return got

    def _key(self, snap: _Snapshot, node: Sequence[int]) -> tuple[IntArray, int] | None:
        """Each row's mixed-radix key of its labels at ``node`` and the key space's size, or
        None when the key space exceeds 2⁶²; attributes are read two at a time (cached pairs).
        """
        stride = math.prod(self._widths[a][level] for a, level in enumerate(node))
        if stride > 2**62:
            return None
        d = len(node)
        if d == 1:
            return self._labels(snap, 0, node[0]).astype(np.int64), stride
        key = self._pair(snap, 0, (node[0], node[1])).astype(np.int64)
        for a in range(2, d - 1, 2):
            key *= self._widths[a][node[a]] * self._widths[a + 1][node[a + 1]]
            key += self._pair(snap, a, (node[a], node[a + 1]))
        if d % 2:
            key *= self._widths[d - 1][node[d - 1]]
            key += self._labels(snap, d - 1, node[d - 1])
        return key, stride

    def _group(self, snap: _Snapshot, node: Sequence[int]) -> tuple[IntArray, int]:
        """Dense class ids of the rows of ``snap`` at ``node`` (mixed-radix key, then numbered)."""
        if not node:
            return np.zeros(len(snap.count), dtype=np.int64), 1 if len(snap.count) else 0
        keyed = self._key(snap, node)
        if keyed is None:
            frame = pd.DataFrame({a: self._labels(snap, a, lv) for a, lv in enumerate(node)})
            ids = frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy()
            return np.asarray(ids, dtype=np.int64), int(ids.max()) + 1 if len(ids) else 0
        return dense_ids(*keyed)

    def _rolled(self, node: tuple[int, ...]) -> tuple[_Snapshot, ClassStats]:
        """The class statistics of ``node`` from the smallest frequency set below it."""
        if self._last is not None and self._last[0] == node:
            return self._last[1], self._last[2]
        source = self._snapshot_for(node)
        cls, n_classes = self._group(source, node)
        stats = ClassStats(cls, source.count, source.scodes, self.enc.sensitive, n_classes)
        self._keep(node, source, cls, n_classes)
        self._last = (node, source, stats)
        return source, stats

    def _keep(
        self, node: tuple[int, ...], source: _Snapshot, cls: IntArray, n_classes: int
    ) -> None:
        """Cache ``node``'s frequency set for later roll-ups when it is much smaller than its source."""
        if self._wants(len(source.count), n_classes):
            snap = _snapshot(source, cls, n_classes)
            if len(snap.count) * 3 < len(source.count) * 2:
                self._snapshots.append(snap)
                self._specs.append(node)
                self._rows.append(len(snap.count))
                self._kept_rows += len(snap.count)
                self._spec_array = np.asarray(self._specs)
                self._row_array = np.asarray(self._rows)

    def _wants(self, rows: int, n_classes: int) -> bool:
        return (
            n_classes * 2 < rows
            and len(self._snapshots) < 512
            and self._kept_rows + n_classes <= SNAPSHOT_BUDGET * len(self.enc.count)
        )

    def _fast_suppressed(self, node: tuple[int, ...]) -> int | None:
        """Records the monotone models suppress at ``node``, or None to take the general path.

        The monotone models are k-anonymity and distinct ℓ-diversity, which read only class
        sizes and distinct values per class: sizes are counted straight into the key space (for
        k alone, no class numbering at all), and classes are numbered from the same counts.
        """
        if self._thresholds is None or not node:
            return None
        k, ell = self._thresholds
        source = self._snapshot_for(node)
        rows = len(source.count)
        keyed = self._key(source, node)
        if keyed is None or keyed[1] > 4 * rows + 65_536:
            return None
        key, stride = keyed
        sizes = np.bincount(key, weights=source.count, minlength=stride)
        present = sizes > 0
        if ell < 2 and not self._wants(rows, int(np.count_nonzero(present))):
            return int(sizes[sizes < k].sum())
        cls, n_classes = _number(present, key)  # the numbering of dense_ids
        self._keep(node, source, cls, n_classes)
        size = sizes[present]
        ok = size >= k
        for codes, sens in zip(source.scodes, self.enc.sensitive, strict=True):
            if ell < 2:
                break
            distinct = _distinct(cls, codes, n_classes, sens.m, 4 * rows + 65_536)
            if distinct is None:
                return None
            ok &= distinct >= ell
        return int(size[~ok].sum())

    def _loss(
        self, node: tuple[int, ...], source: _Snapshot, stats: ClassStats, ok: BoolArray
    ) -> float:
        """The loss of releasing ``node`` with the classes that fail (``~ok``) suppressed."""
        size = stats.size
        if self.metric == "discernibility":
            kept = size[ok].astype(np.float64)
            return float((kept * kept).sum()) + float(size[~ok].sum()) * self.enc.n
        assert self.tables is not None
        total = sum(float(self.tables.totals[a][level]) for a, level in enumerate(node))
        if not ok.all():
            dropped = ~ok[stats.cls]
            weight = source.count[dropped].astype(np.float64)
            for a, level in enumerate(node):
                labels = self._tables[a][level][source.base[a][dropped]]
                per_label = np.bincount(labels, weights=weight, minlength=self._widths[a][level])
                total += float(per_label @ self._delta[a][level])
        return total / self.tables.scale

    def mono_suppressed(self, node: tuple[int, ...]) -> int:
        """Records the monotone models suppress at ``node``, rolled up from a cached specialisation.

        Classes of a node are unions of the classes of any of its specialisations, so they can
        be computed from that specialisation's (much smaller) frequency set — ARX's roll-up.
        """
        hit = self.cache.get(node)
        if hit is not None:
            return hit.mono_suppressed
        known = self._mono.get(node)
        if known is None:
            known = self._fast_suppressed(node)
        if known is None:
            _, stats = self._rolled(node)
            ok = self.passing(stats, self.mono)
            known = int(stats.size[~ok].sum())
        self._mono[node] = known
        return known

    def _snapshot_for(self, node: tuple[int, ...]) -> _Snapshot:
        if not len(self._specs):
            return self._base
        below = np.all(self._spec_array <= np.asarray(node), axis=1)
        if not below.any():
            return self._base
        rows = np.where(below, self._row_array, np.iinfo(np.int64).max)
        return self._snapshots[int(np.argmin(rows))]

    def stats(self, node: tuple[int, ...]) -> ClassStats:
        """The class statistics of ``node`` over the full frequency set (row by row)."""
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
        source, stats = self._rolled(node)
        size = stats.size
        mono_ok = self.passing(stats, self.mono)
        ok = mono_ok & self.passing(stats, self.others) if self.others else mono_ok
        suppressed = int(size[~ok].sum())
        feasible = suppressed <= self.limit
        fsize = size.astype(np.float64)
        result = NodeResult(
            node=node,
            suppressed=suppressed,
            feasible=feasible,
            loss=self._loss(node, source, stats, ok) if feasible else math.inf,
            classes=int(ok.sum()),
            mono_suppressed=int(size[~mono_ok].sum()),
            all_classes_square=float((fsize * fsize).sum()),
        )
        self.cache[node] = result
        return result


def suppression_deltas(
    enc: Encoded,
    tables: CostTables | None,
    codes: Sequence[Sequence[IntArray]],
    widths: Sequence[Sequence[int]],
) -> list[list[FloatArray]]:
    """Per quasi-identifier, level and generalised label: what suppressing one record adds.

    For every separable metric the extra cost of suppressing a record over releasing it
    generalised depends only on its generalised label: NCP and precision ``1 − cost``, and
    non-uniform entropy ``log2(n / count(label))``. Taking it per label lets a node's loss be
    computed from any roll-up of the frequency set.
    """
    out: list[list[FloatArray]] = []
    if tables is None:
        return out
    for a in range(len(enc.levels)):
        per_level = []
        for level, table in enumerate(codes[a]):
            width = widths[a][level]
            if tables.metric == "entropy":
                label_counts = np.bincount(table[enc.base[a]], weights=enc.count, minlength=width)
                with np.errstate(divide="ignore"):
                    delta = np.where(label_counts > 0, np.log2(enc.n / label_counts), 0.0)
            else:  # 1 − cost, the same for every value of a label: read it at one of them
                delta = np.zeros(width)
                first = np.full(width, -1, dtype=np.int64)
                first[table[::-1]] = np.arange(len(table) - 1, -1, -1)
                rep = first[first >= 0]
                delta[first >= 0] = tables.top[a][rep] - tables.per_value[a][level][rep]
            per_level.append(np.asarray(delta, dtype=np.float64))
        out.append(per_level)
    return out


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
    if not heights:
        return np.zeros((1, 0), dtype=np.int64)
    # the grid's coordinates in C order: the order of itertools.product
    grid = np.indices(tuple(h + 1 for h in heights), dtype=np.int64)
    return np.ascontiguousarray(grid.reshape(len(heights), total).T)


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
        node = tuple(int(x) for x in node_arr)
        result = ev.evaluate(node)
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
    hs = [int(h) for h in heights]
    rad = [int(r) for r in radix]
    # A node's cone (its generalisations, or its specialisations) is a box of the lattice; with
    # nodes numbered in mixed radix its indices are sums of one offset per attribute.
    up = [[radix[a] * np.arange(lv, h + 1) for lv in range(h + 1)] for a, h in enumerate(hs)]
    down = [[radix[a] * np.arange(lv + 1) for lv in range(h + 1)] for a, h in enumerate(hs)]

    def tag(levels: list[int], offsets: list[list[IntArray]], value: int) -> None:
        box = offsets[0][levels[0]]
        for a in range(1, len(levels)):
            box = (box[:, None] + offsets[a][levels[a]]).ravel()
        status[box[status[box] == 0]] = value

    for start in order[status[order] == 0]:
        if status[start] != 0:
            continue
        path = [int(start)]
        current = [int(x) for x in nodes[start]]
        levels = [list(current)]
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
            levels.append(list(current))
        lo, hi = 0, len(path) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if ev.mono_suppressed(tuple(levels[mid])) <= ev.limit:
                tag(levels[mid], up, 1)
                hi = mid - 1
            else:
                tag(levels[mid], down, -1)
                lo = mid + 1
        if progress is not None:
            progress(int(np.count_nonzero(status)) // 2, len(nodes))
