"""Information-loss metrics of a generalised release, and the lower bounds the search prunes with.

- ``ncp`` — Normalised Certainty Penalty / Loss Metric (Iyengar 2002; Xu et al. 2006): per
  record and attribute the share of the domain its generalised value covers (numeric: covered
  range over the whole range; categorical: covered values − 1 over all values − 1), averaged;
  a suppressed record costs 1 per attribute. In [0, 1].
- ``precision`` — generalisation intensity (Sweeney's Prec): level / height per attribute,
  averaged over records; suppressed records cost 1. In [0, 1].
- ``entropy`` — non-uniform entropy (Gionis & Tassa 2009): Σ over records and attributes of
  −log2 P(original value | generalised value), with P from the original column; a suppressed
  record costs −log2 P(value). In bits.
- ``discernibility`` — DM* (Bayardo & Agrawal 2005): Σ |E|² over released classes plus n for
  each suppressed record.

Every metric's cost of a suppressed record is at least its cost generalised, so the loss of a
node without suppression is a lower bound of its loss; that bound never decreases up the lattice
(a coarser label covers more), which is what lets the search stop early and stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dalenius.anonymity.encode import Encoded
from dalenius.anonymity.models import BoolArray, FloatArray, IntArray

METRICS = ("ncp", "precision", "entropy", "discernibility")
"""Information-loss metrics the search can minimise."""

SEPARABLE = ("ncp", "precision", "entropy")


@dataclass
class CostTables:
    """Per quasi-identifier and level, the cost of each base value (separable metrics)."""

    metric: str
    per_value: list[list[FloatArray]]  # [attribute][level] -> cost by base code
    top: list[FloatArray]  # [attribute] -> cost of a suppressed record by base code
    totals: list[FloatArray]  # [attribute] -> Σ_rows count · cost at each level
    scale: float  # divide sums by this (n · d for ncp and precision, 1 for entropy)
    row_top: FloatArray  # per frequency row, the cost of suppressing it
    weight: FloatArray  # per frequency row, its count as a float


def cost_tables(enc: Encoded, metric: str) -> CostTables:
    """The per-value costs of ``metric`` (one of :data:`SEPARABLE`)."""
    per_value: list[list[FloatArray]] = []
    top: list[FloatArray] = []
    totals: list[FloatArray] = []
    for a, lv in enumerate(enc.levels):
        value_counts = np.bincount(enc.base[a], weights=enc.count, minlength=len(lv.values))
        levels = []
        for level in range(lv.height + 1):
            if metric == "ncp":
                cost = np.asarray(lv.spans[level], dtype=np.float64)
            elif metric == "precision":
                cost = np.full(len(lv.values), level / lv.height if lv.height else 0.0)
            else:
                codes = np.asarray(lv.codes[level], dtype=np.int64)
                label_counts = np.bincount(codes, weights=value_counts)
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(value_counts > 0, value_counts / label_counts[codes], 1.0)
                cost = -np.log2(ratio)
            levels.append(cost)
        if metric == "entropy":
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(value_counts > 0, value_counts / enc.n, 1.0)
            top_cost = -np.log2(share)
        else:
            top_cost = np.ones(len(lv.values))
        per_value.append(levels)
        top.append(top_cost)
        totals.append(np.array([float((value_counts * c).sum()) for c in levels], dtype=np.float64))
    scale = float(enc.n * len(enc.levels)) if metric in ("ncp", "precision") else 1.0
    row_top = np.zeros(len(enc.count))
    for a in range(len(enc.levels)):
        row_top += top[a][enc.base[a]]
    weight = enc.count.astype(np.float64)
    return CostTables(metric, per_value, top, totals, scale, row_top, weight)


def lower_bounds(
    enc: Encoded, metric: str, nodes: IntArray, tables: CostTables | None
) -> FloatArray:
    """A lower bound of every node's loss, computed without evaluating the node.

    Separable metrics: the loss without suppression (exact when nothing is suppressed).
    Discernibility: n² / (the most classes the node can have), since Σ|E|² ≥ n² / classes.
    """
    if metric in SEPARABLE:
        assert tables is not None
        out = np.zeros(len(nodes))
        for a in range(nodes.shape[1]):
            out += tables.totals[a][nodes[:, a]]
        return np.asarray(out / tables.scale, dtype=np.float64)
    most = np.ones(len(nodes), dtype=np.float64)
    for a, lv in enumerate(enc.levels):
        labels = np.array([len(set(lv.codes[level])) for level in range(lv.height + 1)])
        most *= labels[nodes[:, a]]
    most = np.minimum(most, float(enc.n))
    return np.asarray(float(enc.n) ** 2 / most, dtype=np.float64)


def node_loss(
    enc: Encoded,
    metric: str,
    node: tuple[int, ...],
    tables: CostTables | None,
    kept_rows: BoolArray,
    class_size: IntArray,
    class_kept: BoolArray,
) -> float:
    """The loss of releasing ``node`` with the rows not in ``kept_rows`` suppressed."""
    if metric == "discernibility":
        kept = class_size[class_kept].astype(np.float64)
        suppressed = int(class_size[~class_kept].sum())
        return float((kept * kept).sum()) + float(suppressed) * enc.n
    assert tables is not None
    row_cost = tables.per_value[0][node[0]][enc.base[0]]
    for a in range(1, len(node)):
        row_cost = row_cost + tables.per_value[a][node[a]][enc.base[a]]
    cost = np.where(kept_rows, row_cost, tables.row_top)
    return float((tables.weight * cost).sum()) / tables.scale


def average_class_size(released_rows: int, classes: int, k: int) -> float:
    """C_avg (LeFevre et al. 2006): (released records / classes) / k; 1 is ideal."""
    return (released_rows / classes) / k if classes else 0.0
