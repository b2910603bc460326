"""Plain-Python oracles, written from the papers' definitions, independent of the numpy code."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any


def classes(rows: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], list[int]]:
    out: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        out[row].append(i)
    return out


def emd_equal(p: Counter[Any], q: Counter[Any]) -> float:
    np_, nq = sum(p.values()), sum(q.values())
    return 0.5 * sum(abs(p[v] / np_ - q[v] / nq) for v in set(p) | set(q))


def emd_ordered(p: Counter[Any], q: Counter[Any]) -> float:
    values = sorted(q)
    m = len(values)
    if m <= 1:
        return 0.0
    np_, nq = sum(p.values()), sum(q.values())
    cum, total = 0.0, 0.0
    for v in values[:-1]:
        cum += p[v] / np_ - q[v] / nq
        total += abs(cum)
    return total / (m - 1)


def class_passes(model: tuple[Any, ...], sens: list[Any], q: Counter[Any], ordered: bool) -> bool:
    kind = model[0]
    counts = Counter(sens)
    n = len(sens)
    if kind == "k":
        return n >= model[1]
    if kind == "l":
        return len(counts) >= model[1]
    if kind == "entropy":
        h = -sum(c / n * math.log(c / n) for c in counts.values())
        return math.exp(h) >= model[1] * (1 - 1e-12)
    if kind == "recursive":
        c, ell = model[1], model[2]
        r = sorted(counts.values(), reverse=True)
        return r[0] < c * sum(r[ell - 1 :])
    if kind == "t":
        d = emd_ordered(counts, q) if ordered else emd_equal(counts, q)
        return d <= model[1] + 1e-12
    if kind == "alpha":
        return n >= model[2] and max(counts.values()) <= model[1] * n + 1e-12 * n
    if kind == "beta":
        nq = sum(q.values())
        return all((counts[v] / n - q[v] / nq) / (q[v] / nq) <= model[1] + 1e-12 for v in counts)
    raise AssertionError(kind)


def node_outcome(
    data: list[tuple[Any, ...]],
    sensitive: list[Any],
    chains: list[dict[Any, tuple[Any, ...]]],
    node: tuple[int, ...],
    models: list[tuple[Any, ...]],
    ordered: bool,
) -> tuple[list[tuple[Any, ...]], list[bool]]:
    """Generalised rows and whether each row is kept (its class passes every model)."""
    gen = [tuple(chains[a][row[a]][node[a]] for a in range(len(node))) for row in data]
    q = Counter(sensitive)
    kept = [True] * len(data)
    for members in classes(gen).values():
        sens = [sensitive[i] for i in members]
        if not all(class_passes(m, sens, q, ordered) for m in models):
            for i in members:
                kept[i] = False
    return gen, kept


def loss(
    metric: str,
    data: list[tuple[Any, ...]],
    chains: list[dict[Any, tuple[Any, ...]]],
    numeric: list[bool],
    node: tuple[int, ...],
    gen: list[tuple[Any, ...]],
    kept: list[bool],
) -> float:
    n, d = len(data), len(node)
    if metric == "discernibility":
        sizes = Counter(g for g, k in zip(gen, kept, strict=True) if k)
        return float(sum(s * s for s in sizes.values()) + kept.count(False) * n)
    total = 0.0
    for a in range(d):
        values = sorted({row[a] for row in data})
        under: dict[Any, list[Any]] = defaultdict(list)
        for u in values:
            under[chains[a][u][node[a]]].append(u)
        height = len(next(iter(chains[a].values()))) - 1
        counts = Counter(row[a] for row in data)
        for i, row in enumerate(data):
            v = row[a]
            if metric == "precision":
                total += 1.0 if not kept[i] else node[a] / height
                continue
            label = chains[a][v][node[a]]
            covered = under[label]
            if metric == "entropy":
                below = sum(counts[u] for u in covered) if kept[i] else n
                total += -math.log2(counts[v] / below)
                continue
            if not kept[i] or label == "*":
                total += 1.0
            elif node[a] == 0:
                total += 0.0
            elif numeric[a]:
                total += (max(covered) - min(covered)) / (max(values) - min(values))
            else:
                total += (len(covered) - 1) / (len(values) - 1)
    return total if metric == "entropy" else total / (n * d)


def mondrian_strict(
    points: Sequence[tuple[int, ...]],
    sens: list[Any],
    models: Sequence[tuple[Any, ...]],
) -> list[frozenset[int]]:
    """Strict Mondrian on records, recursively, from its definition.

    A partition is cut on its widest dimension (width over the whole table's, ties to the first
    dimension), at the median record (the ((n − 1) // 2)-th in value order): records ≤ the median
    go left, unless < gives halves at least as balanced or ≤ would leave nothing on the right;
    if a half fails a model the next widest dimension is tried.
    """
    q = Counter(sens)
    d = len(points[0])
    span = [max(max(p[a] for p in points) - min(p[a] for p in points), 1) for a in range(d)]

    def ok(rows: list[int]) -> bool:
        return all(class_passes(m, [sens[r] for r in rows], q, False) for m in models)

    def cut(rows: list[int]) -> list[frozenset[int]]:
        widths = [
            (max(points[r][a] for r in rows) - min(points[r][a] for r in rows)) / span[a]
            for a in range(d)
        ]
        for a in sorted(range(d), key=lambda b: -widths[b]):
            if widths[a] == 0:
                continue
            values = sorted(points[r][a] for r in rows)
            n = len(values)
            med = values[(n - 1) // 2]
            le = sum(v <= med for v in values)
            lt = sum(v < med for v in values)
            use_le = le < n and (abs(2 * le - n) <= abs(2 * lt - n) or lt == 0)
            left = [r for r in rows if (points[r][a] <= med if use_le else points[r][a] < med)]
            right = [r for r in rows if r not in set(left)]
            if left and right and ok(left) and ok(right):
                return cut(left) + cut(right)
        return [frozenset(rows)]

    return cut(list(range(len(points))))
