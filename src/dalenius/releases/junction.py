"""A decomposable model from noisy marginals: AIM's estimator without general inference.

AIM (McKenna et al. 2022) estimates, after each measurement, the distribution of maximum entropy
that best fits every noisy marginal measured so far; Private-PGM (``mbi``) solves that for any
graph, by convex optimisation and message passing over a junction tree of the graph's
triangulation, at the price of JAX as a dependency. Dalenius restricts the model instead: the
graph whose edges join the columns of each measured marginal is kept **chordal**, with cliques of
at most three columns (AIM's selection only offers marginals that keep it so, or that fall inside
a clique). On a chordal graph the distribution of maximum entropy that agrees with consistent
clique marginals is the junction-tree factorisation ``P = Π P(C) / Π P(S)`` (cliques ``C``,
separators ``S``), in closed form, and every clique is small enough to fit directly:

1. **combine** repeated measurements of the same columns by inverse variance;
2. **make consistent**: for every set of columns shared by two measurements (their intersections,
   smaller sets first, the empty set — the row count — first of all), the inverse-variance
   average of the measurements' projections replaces each projection, the difference spread
   evenly over the cells it sums (the consistency step of PriView, Qardaji, Yang & Li 2014);
   processing subsets first keeps the sets already made consistent so;
3. **fit each clique** to the measured marginals that touch it (their projections onto the
   clique, negatives clipped, normalised) by iterative proportional fitting, from the clique's
   own measurement when it has one and from the uniform table otherwise (the maximum-entropy
   start), as MST fits each pair to its two columns;
4. the **junction tree** (a maximum spanning tree of the cliques weighted by shared columns)
   gives each clique's conditional given its separator; rows are drawn from the root clique down,
   and the model's marginal on any set of columns is computed exactly by summing the tree's
   factors (a message from each clique of the smallest subtree that covers the set).

Everything here reads only noisy measurements: post-processing, free of privacy loss.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Attrs = tuple[int, ...]
"""A set of columns, as their sorted indices."""

Array = npt.NDArray[np.float64]

MAX_CLIQUE = 3
"""The largest clique (in columns) the model keeps."""

IPF_ROUNDS = 100
"""At most this many sweeps of iterative proportional fitting per clique."""

IPF_TOLERANCE = 1e-9
"""A clique's fit stops once every fitted margin is this close (in probability) to its target."""


@dataclass(frozen=True)
class NoisyMarginal:
    """Noisy counts over ``attrs`` (one array axis per column) and the noise variance per cell."""

    attrs: Attrs
    values: Array
    variance: float


def chordal_cliques(columns: int, sets: Iterable[Attrs]) -> list[Attrs] | None:
    """The maximal cliques of the graph joining the columns of each set, or ``None`` when that
    graph is not chordal or has a clique of more than :data:`MAX_CLIQUE` columns.

    Maximum cardinality search (Tarjan & Yannakakis 1984) visits the columns in an order whose
    reverse is a perfect elimination order exactly when the graph is chordal: then each column's
    neighbours visited before it form a clique, and the maximal cliques are among those sets plus
    the column. Isolated columns are cliques of one.
    """
    adjacent: list[set[int]] = [set() for _ in range(columns)]
    for s in sets:
        for a, b in itertools.combinations(s, 2):
            adjacent[a].add(b)
            adjacent[b].add(a)
    weight = [0] * columns
    visited: list[int] = []
    seen = [False] * columns
    found: list[frozenset[int]] = []
    for _ in range(columns):
        v = max((u for u in range(columns) if not seen[u]), key=lambda u: (weight[u], -u))
        earlier = adjacent[v] & set(visited)
        if any(b not in adjacent[a] for a, b in itertools.combinations(earlier, 2)):
            return None
        if len(earlier) + 1 > MAX_CLIQUE:
            return None
        found.append(frozenset(earlier | {v}))
        seen[v] = True
        visited.append(v)
        for u in adjacent[v]:
            if not seen[u]:
                weight[u] += 1
    maximal = {c for c in found if not any(c < other for other in found)}
    return sorted(tuple(sorted(c)) for c in maximal)


def model_cells(cliques: Sequence[Attrs], sizes: Sequence[int]) -> int:
    """The model's size: the cells of all its cliques' tables."""
    return sum(math.prod(sizes[a] for a in c) for c in cliques)


def estimate(
    measurements: Sequence[NoisyMarginal], sizes: Sequence[int], cliques: Sequence[Attrs]
) -> JunctionModel:
    """The decomposable model on ``cliques`` fitted to the noisy measurements (steps 1–4).

    Every measured set must lie inside a clique (the chordal graph of the measured sets has them).
    """
    views = consistent(combine(measurements), sizes)
    total = max(float(next(iter(views)).values.sum()), 0.0) if views else 0.0
    tables = [fit_clique(c, views, sizes) for c in cliques]
    return JunctionModel.build(list(cliques), tables, sizes, total)


def combine(measurements: Sequence[NoisyMarginal]) -> list[NoisyMarginal]:
    """Repeated measurements of the same columns averaged by inverse variance (step 1)."""
    groups: dict[Attrs, list[NoisyMarginal]] = {}
    for m in measurements:
        groups.setdefault(m.attrs, []).append(m)
    out = []
    for attrs, group in groups.items():
        weights = [1.0 / m.variance for m in group]
        values = sum(w * m.values for w, m in zip(weights, group, strict=True)) / sum(weights)
        out.append(NoisyMarginal(attrs, np.asarray(values, dtype=np.float64), 1.0 / sum(weights)))
    return out


def consistent(views: Sequence[NoisyMarginal], sizes: Sequence[int]) -> list[NoisyMarginal]:
    """The measurements adjusted to agree on every set of columns they share (step 2)."""
    tables = {v.attrs: v.values.astype(np.float64, copy=True) for v in views}
    variance = {v.attrs: v.variance for v in views}
    shared: set[Attrs] = {(), *tables}
    while True:
        more = {tuple(sorted(set(a) & set(b))) for a, b in itertools.combinations(shared, 2)}
        if more <= shared:
            break
        shared |= more
    for common in sorted(shared, key=lambda s: (len(s), s)):
        holders = [a for a in tables if set(common) <= set(a)]
        if len(holders) < 2:
            continue
        projections, weights, spreads = [], [], []
        for a in holders:
            spread = math.prod(sizes[c] for c in a) / math.prod(sizes[c] for c in common)
            projections.append(_project(tables[a], a, common))
            weights.append(1.0 / (variance[a] * spread))
            spreads.append(spread)
        target = sum(w * p for w, p in zip(weights, projections, strict=True)) / sum(weights)
        for a, p, spread in zip(holders, projections, spreads, strict=True):
            tables[a] += _expand((target - p) / spread, common, a)
    return [NoisyMarginal(a, tables[a], variance[a]) for a in tables]


def fit_clique(clique: Attrs, views: Sequence[NoisyMarginal], sizes: Sequence[int]) -> Array:
    """The clique's distribution fitted to every view's projection onto it (step 3)."""
    shape = tuple(sizes[c] for c in clique)
    sums: dict[Attrs, tuple[Array, float]] = {}
    for view in views:
        common = tuple(c for c in clique if c in view.attrs)
        if not common:
            continue
        spread = math.prod(sizes[c] for c in view.attrs) / math.prod(sizes[c] for c in common)
        weight = 1.0 / (view.variance * spread)
        projected = _project(view.values, view.attrs, common)
        summed, weights = sums.get(common, (np.zeros(projected.shape), 0.0))
        sums[common] = (summed + weight * projected, weights + weight)
    targets = {c: _distribution(t / w) for c, (t, w) in sums.items()}
    own = targets.pop(clique, None)
    table = own if own is not None else np.full(shape, 1.0 / math.prod(shape))
    table = table + 1e-9 / table.size  # no structural zero: every margin can still be fitted
    table /= table.sum()
    order = sorted(targets, key=len, reverse=True)
    for _ in range(IPF_ROUNDS):
        worst = 0.0
        for common in order:
            current = _project(table, clique, common)
            worst = max(worst, float(np.abs(current - targets[common]).max()))
            ratio = np.divide(
                targets[common], current, out=np.zeros_like(current), where=current > 0
            )
            table = table * _expand(ratio, common, clique)
        if worst < IPF_TOLERANCE:
            break
    total = float(table.sum())
    return table / total if total > 0 else np.full(shape, 1.0 / math.prod(shape))


def _distribution(values: Array) -> Array:
    """Negatives clipped, normalised to sum 1 (uniform when nothing is left)."""
    clipped = np.maximum(values, 0.0)
    total = float(clipped.sum())
    if total <= 0:
        return np.full(values.shape, 1.0 / max(values.size, 1))
    out: Array = clipped / total
    return out


def _project(values: Array, attrs: Attrs, keep: Attrs) -> Array:
    """The margin of a table over ``attrs`` onto ``keep`` (a subset), axes in ``keep``'s order."""
    drop = tuple(i for i, a in enumerate(attrs) if a not in keep)
    summed = values.sum(axis=drop) if drop else values
    left = [a for a in attrs if a in keep]
    out: Array = np.transpose(summed, [left.index(a) for a in keep])
    return out


def _expand(values: Array, attrs: Attrs, onto: Attrs) -> Array:
    """A table over ``attrs`` broadcast along the other axes of ``onto`` (a superset)."""
    ordered = np.transpose(values, [attrs.index(a) for a in onto if a in attrs])
    shape = [1] * len(onto)
    i = 0
    for k, a in enumerate(onto):
        if a in attrs:
            shape[k] = ordered.shape[i]
            i += 1
    return ordered.reshape(shape)


@dataclass(frozen=True)
class Factor:
    """A non-negative table over some columns (one axis per column, in ``attrs`` order)."""

    attrs: Attrs
    values: Array


def _product(factors: Sequence[Factor], keep: Attrs) -> Factor:
    """The product of factors, summed onto ``keep`` (columns of at least one factor)."""
    local = {a: i for i, a in enumerate(sorted({a for f in factors for a in f.attrs}))}
    operands: list[Any] = []
    for f in factors:
        operands += [f.values, [local[a] for a in f.attrs]]
    values = np.einsum(*operands, [local[a] for a in keep], optimize=True)
    return Factor(keep, np.asarray(values, dtype=np.float64))


@dataclass
class JunctionModel:
    """A distribution factorised along a junction tree of small cliques.

    ``marginals[k]`` is the model's exact distribution on clique ``k``; ``conditionals[k]`` its
    distribution given the separator with its parent (for the root, its distribution).
    """

    sizes: tuple[int, ...]
    cliques: list[Attrs]
    parent: list[int]
    separator: list[Attrs]
    order: list[int]
    marginals: list[Array]
    conditionals: list[Array]
    total: float

    @staticmethod
    def build(
        cliques: list[Attrs], tables: list[Array], sizes: Sequence[int], total: float
    ) -> JunctionModel:
        """The junction tree of the cliques, each clique's conditional and exact marginal."""
        parent, separator, order = junction_tree(cliques)
        conditionals: list[Array] = [np.empty(0)] * len(cliques)
        marginals: list[Array] = [np.empty(0)] * len(cliques)
        for k in order:
            table, clique, sep = tables[k], cliques[k], separator[k]
            if parent[k] < 0:
                conditionals[k] = marginals[k] = table
                continue
            given = _expand(_project(table, clique, sep), sep, clique)
            rest = tuple(a for a in clique if a not in sep)
            fallback = _expand(_project(table, clique, rest), rest, clique)
            cond = np.divide(table, given, out=np.zeros_like(table), where=given > 0)
            cond = np.where(given > 0, cond, np.broadcast_to(fallback, table.shape))
            conditionals[k] = cond
            up = _project(marginals[parent[k]], cliques[parent[k]], sep)
            marginals[k] = _expand(up, sep, clique) * cond
        return JunctionModel(
            tuple(sizes), cliques, parent, separator, order, marginals, conditionals, total
        )

    def marginal(self, attrs: Attrs) -> Array:
        """The model's distribution on ``attrs`` (axes in ``attrs``' order), exactly."""
        for k, clique in enumerate(self.cliques):
            if set(attrs) <= set(clique):
                return _project(self.marginals[k], clique, attrs)
        chosen = [next(k for k in self.order if a in self.cliques[k]) for a in attrs]
        paths = [self._path_to_root(k) for k in chosen]
        common = set(paths[0]).intersection(*paths[1:])
        top = next(k for k in paths[0] if k in common)
        nodes: set[int] = set()
        for path in paths:
            nodes.update(path[: path.index(top) + 1])
        found = self._message(top, nodes, set(attrs), root=True)
        out: Array = found.values.transpose([found.attrs.index(a) for a in attrs])
        return out

    def counts(self, attrs: Attrs) -> Array:
        """The model's marginal on ``attrs`` in rows (its distribution times the row count)."""
        return self.total * self.marginal(attrs)

    def _path_to_root(self, k: int) -> list[int]:
        path = [k]
        while self.parent[path[-1]] >= 0:
            path.append(self.parent[path[-1]])
        return path

    def _message(self, k: int, nodes: set[int], keep: set[int], *, root: bool = False) -> Factor:
        """Sum of the subtree of ``nodes`` below ``k`` onto its separator and the kept columns."""
        factors = [Factor(self.cliques[k], self.marginals[k] if root else self.conditionals[k])]
        for child in (c for c in nodes if self.parent[c] == k):
            factors.append(self._message(child, nodes, keep))
        present = {a for f in factors for a in f.attrs}
        out = set(keep) if root else set(self.separator[k]) | (keep & present)
        return _product(factors, tuple(sorted(out & present)))

    def sample(self, n: int, generator: np.random.Generator) -> npt.NDArray[np.int64]:
        """``n`` rows of codes, drawn from the root clique down, each clique given its separator.

        Systematic sampling within each group of rows that share the separator's values: a group
        of ``m`` rows gets the cells at the points ``(u + j)/m`` (``j < m``, one uniform ``u``
        per group) of the conditional's cumulative distribution, so each cell receives
        ``⌊m·p⌋`` or ``⌈m·p⌉`` rows — the model's marginals without the multinomial's sampling
        noise (mbi 2.0's rounding sampler does the same) — assigned to the group's rows in random
        order.
        """
        codes = np.zeros((n, len(self.sizes)), dtype=np.int64)
        for k in self.order:
            clique, sep = self.cliques[k], self.separator[k]
            rest = tuple(a for a in clique if a not in sep)
            table = np.transpose(self.conditionals[k], [clique.index(a) for a in sep + rest])
            groups = math.prod(self.sizes[a] for a in sep)
            flat = table.reshape(groups, -1)
            width = flat.shape[1]
            flat = flat / np.maximum(flat.sum(axis=1, keepdims=True), 1e-300)
            given = (
                np.ravel_multi_index(tuple(codes[:, a] for a in sep), [self.sizes[a] for a in sep])
                if sep
                else np.zeros(n, dtype=np.int64)
            )
            # Group g's cumulative distribution shifted to [g, g + 1]: one sorted array, so one
            # search finds every row's cell without an n × width table.
            cumulative = np.minimum(np.cumsum(flat, axis=1), 1.0) + np.arange(groups)[:, None]
            shuffled = generator.permutation(n)
            order = shuffled[np.argsort(given[shuffled], kind="stable")]
            group = given[order]
            size = np.bincount(given, minlength=groups)
            rank = np.arange(n) - (np.cumsum(size) - size)[group]
            points = group + (generator.random(groups)[group] + rank) / np.maximum(size[group], 1)
            found = np.searchsorted(cumulative.reshape(-1), points, side="right")
            cell = np.empty(n, dtype=np.int64)
            cell[order] = (found - group * width).clip(0, width - 1)
            drawn = np.unravel_index(cell, [self.sizes[a] for a in rest])
            for a, values in zip(rest, drawn, strict=True):
                codes[:, a] = values
        return codes


def junction_tree(cliques: Sequence[Attrs]) -> tuple[list[int], list[Attrs], list[int]]:
    """A junction tree of a chordal graph's cliques: each clique's parent (−1 for the root), its
    separator with the parent, and an order from the root down.

    A maximum spanning tree of the cliques weighted by the columns they share is a junction tree
    (Jensen & Jensen 1994); cliques sharing nothing are joined with an empty separator
    (independence), so the tree is one.
    """
    m = len(cliques)
    links = sorted(
        ((len(set(cliques[i]) & set(cliques[j])), i, j) for i in range(m) for j in range(i + 1, m)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    group = list(range(m))
    neighbours: list[list[int]] = [[] for _ in range(m)]
    for _, i, j in links:
        if group[i] != group[j]:
            old, new = group[j], group[i]
            group = [new if g == old else g for g in group]
            neighbours[i].append(j)
            neighbours[j].append(i)
    parent, order = [-1] * m, []
    separator: list[Attrs] = [()] * m
    if m:
        stack, seen = [0], {0}
        while stack:
            k = stack.pop(0)
            order.append(k)
            for other in neighbours[k]:
                if other not in seen:
                    seen.add(other)
                    parent[other] = k
                    separator[other] = tuple(a for a in cliques[other] if a in cliques[k])
                    stack.append(other)
    return parent, separator, order
