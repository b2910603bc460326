"""Mondrian multidimensional partitioning (LeFevre, DeWitt & Ramakrishnan 2006), vectorised.

Mondrian cuts the table recursively: each partition is split on the quasi-identifier where it is
widest (normalised), at the median, as long as both halves satisfy every privacy model. Each final
partition is released with its quasi-identifiers replaced by the partition's range (numbers, dates)
or by the lowest hierarchy label that covers its values (categories; ``*`` without a hierarchy).

- **strict**: values equal to the median go to one side (no value is split across partitions);
- **relaxed**: the sorted rows are cut in two equal halves, so equal values may land on both
  sides — partitions are more balanced and loss is lower, but two released ranges may overlap.

All partitions of one depth are split together with numpy (sorting by partition and value once
per dimension tried), so a million rows take a few dozen array passes, not a million Python calls.
Mondrian suppresses nothing: if the whole table does not satisfy the models, it refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dalenius.anonymity.encode import Encoded, mapping_table_name, sensitive_table_name
from dalenius.anonymity.hierarchy import TOP, Levels
from dalenius.anonymity.models import BoolArray, ClassStats, IntArray, Model
from dalenius.anonymity.source import SOURCE_TABLE, Loaded, quote
from dalenius.core.errors import ConfigurationError


def _order(lv: Levels) -> IntArray:
    """Rank of each base code: numeric order, or hierarchy order so subtrees are contiguous."""
    if lv.numeric:
        return np.arange(len(lv.values), dtype=np.int64)
    keys = [
        (*(lv.labels[level][i] for level in range(lv.height, 0, -1)), lv.labels[0][i])
        for i in range(len(lv.values))
    ]
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    rank = np.empty(len(keys), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(keys))
    return rank


def _passing(
    cls: IntArray, n_classes: int, scodes: Sequence[IntArray], enc: Encoded, models: Sequence[Model]
) -> BoolArray:
    stats = ClassStats(cls, np.ones(len(cls), dtype=np.int64), scodes, enc.sensitive, n_classes)
    ok = np.ones(n_classes, dtype=bool)
    for model in models:
        ok &= model.passes(stats)
    return ok


def partition(
    ranks: IntArray, scodes: Sequence[IntArray], enc: Encoded, models: Sequence[Model], mode: str
) -> IntArray:
    """Partition id of every row (``ranks``: rows × quasi-identifiers, in Mondrian order)."""
    n, d = ranks.shape
    span = (
        np.maximum(ranks.max(axis=0) - ranks.min(axis=0), 1).astype(np.float64) if n else np.ones(d)
    )
    part = np.zeros(n, dtype=np.int64)
    if not bool(np.all(_passing(part, 1, scodes, enc, models))):
        raise ConfigurationError(
            "the whole table does not satisfy the models, so Mondrian cannot release it.",
            fix="relax the models, or use the lattice search with a suppression limit.",
        )
    n_parts = 1
    active = np.ones(1, dtype=bool)
    while active.any():
        rows = np.flatnonzero(active[part])
        p = part[rows]
        lo = np.full((n_parts, d), np.iinfo(np.int64).max)
        hi = np.full((n_parts, d), -1)
        for a in range(d):
            np.minimum.at(lo[:, a], p, ranks[rows, a])
            np.maximum.at(hi[:, a], p, ranks[rows, a])
        width = (hi - lo) / span
        width[~active] = 0
        dims = np.argsort(-width, axis=1, kind="stable")
        m = n_parts
        split = np.zeros(m, dtype=bool)
        for r in range(d):
            dim = dims[:, r]
            try_part = active & ~split & (width[np.arange(m), dim] > 0)
            if not try_part.any():
                continue
            sel = rows[try_part[p]]
            done, new_part = _split(sel, part[sel], dim, ranks, scodes, enc, models, mode, n_parts)
            if len(done):
                split[done] = True
                part[sel] = new_part
                n_parts = int(part.max()) + 1
        grown = np.zeros(n_parts, dtype=bool)
        grown[: len(split)] = split
        grown[len(split) :] = True  # the new right halves
        active = grown
    return part


def _split(
    sel: IntArray,
    p: IntArray,
    dim: IntArray,
    ranks: IntArray,
    scodes: Sequence[IntArray],
    enc: Encoded,
    models: Sequence[Model],
    mode: str,
    n_parts: int,
) -> tuple[IntArray, IntArray]:
    """Try to split the partitions of rows ``sel`` on their dimension; returns (split ids, new ids)."""
    value = ranks[sel, dim[p]]
    # one stable sort by (partition, value); rows with equal keys keep their (row) order
    order = np.argsort(p * (int(ranks.max()) + 1) + value, kind="stable")
    sel, p, value = sel[order], p[order], value[order]
    first = np.searchsorted(p, p, side="left")
    pos = np.arange(len(p)) - first
    size = np.bincount(p, minlength=n_parts)[p]
    if mode == "relaxed":
        left = pos < size // 2
    else:
        med_idx = first + (size - 1) // 2
        med = value[med_idx]
        le = np.bincount(p, weights=(value <= med), minlength=n_parts)[p]
        lt = np.bincount(p, weights=(value < med), minlength=n_parts)[p]
        use_le = (le < size) & ((np.abs(2 * le - size) <= np.abs(2 * lt - size)) | (lt == 0))
        left = np.where(use_le, value <= med, value < med)
    side = np.where(left, 0, 1)
    cls = p * 2 + side
    cls_inv, cls_ids = pd.factorize(cls, sort=False)
    ok = _passing(
        np.asarray(cls_inv, dtype=np.int64), len(cls_ids), [s[sel] for s in scodes], enc, models
    )
    both = np.zeros(n_parts * 2, dtype=bool)
    both[cls_ids] = ok
    present = np.zeros(n_parts * 2, dtype=bool)
    present[cls_ids] = True
    good = both[0::2] & both[1::2] & present[0::2] & present[1::2]
    done = np.flatnonzero(good)
    new_ids = np.full(n_parts, -1, dtype=np.int64)
    new_ids[done] = n_parts + np.arange(len(done))
    new_part = np.where(good[p] & (side == 1), new_ids[p], p)
    restored = np.empty_like(new_part)
    restored[order] = new_part
    return done, restored


def _labels(
    lv: Levels, rank: IntArray, lo: IntArray, hi: IntArray
) -> tuple[list[str], list[float]]:
    """Label and NCP span of each partition's range [lo, hi] of ranks for one attribute."""
    code_at = np.argsort(rank)  # code of each rank
    codes = [np.asarray(lv.codes[level], dtype=np.int64) for level in range(lv.height + 1)]
    full = 0.0
    if lv.numeric:
        nums = [float(v) for v in lv.values if v is not None]
        full = max(nums) - min(nums) if nums else 0.0
    labels: list[str] = []
    spans: list[float] = []
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        ca, cb = int(code_at[a]), int(code_at[b])
        if a == b:
            labels.append(lv.labels[0][ca])
            spans.append(0.0)
            continue
        va, vb = lv.values[ca], lv.values[cb]
        if lv.numeric and va is not None and vb is not None and full > 0:
            labels.append(f"[{lv.labels[0][ca]}, {lv.labels[0][cb]}]")
            spans.append((float(vb) - float(va)) / full)
            continue
        level = next(
            (lvl for lvl in range(1, lv.height + 1) if codes[lvl][ca] == codes[lvl][cb]),
            lv.height,
        )
        label = lv.labels[level][ca]
        labels.append(label)
        spans.append(1.0 if label == TOP else lv.spans[level][ca])
    return labels, spans


def mondrian_release(
    loaded: Loaded, enc: Encoded, models: Sequence[Model], mode: str, identifiers: Sequence[str]
) -> tuple[pa.Table, dict[str, Any]]:
    """Partition the rows with Mondrian and build the release in DuckDB."""
    q_cols = ", ".join(f"m{i}.c AS q{i}" for i in range(len(enc.qis)))
    s_cols = "".join(f", s{j}.c AS s{j}" for j in range(len(enc.sensitive)))
    joins = "".join(
        f" JOIN {mapping_table_name(i)} m{i} ON src.{quote(c)} IS NOT DISTINCT FROM m{i}.v"
        for i, c in enumerate(enc.qis)
    ) + "".join(
        f" JOIN {sensitive_table_name(j)} s{j} ON src.{quote(s.name)} IS NOT DISTINCT FROM s{j}.v"
        for j, s in enumerate(enc.sensitive)
    )
    arrays = loaded.con.execute(
        f"SELECT src.rowid AS rid, {q_cols}{s_cols} FROM {SOURCE_TABLE} src{joins}"
    ).fetchnumpy()
    rid = np.asarray(arrays["rid"], dtype=np.int64)
    orders = [_order(lv) for lv in enc.levels]
    ranks = np.column_stack(
        [orders[i][np.asarray(arrays[f"q{i}"], dtype=np.int64)] for i in range(len(enc.qis))]
    )
    scodes = [np.asarray(arrays[f"s{j}"], dtype=np.int64) for j in range(len(enc.sensitive))]
    part = partition(ranks, scodes, enc, models, mode)
    n_parts = int(part.max()) + 1
    columns: dict[str, Any] = {"pid": pa.array(np.arange(n_parts))}
    ncp = np.zeros(len(part))
    for i, lv in enumerate(enc.levels):
        lo = np.full(n_parts, np.iinfo(np.int64).max)
        hi = np.full(n_parts, -1)
        np.minimum.at(lo, part, ranks[:, i])
        np.maximum.at(hi, part, ranks[:, i])
        labels, spans = _labels(lv, orders[i], lo, hi)
        columns[f"g{i}"] = pa.array(labels, type=pa.string())
        ncp += np.asarray(spans)[part]
    loaded.con.register("__parts", pa.table(columns))
    loaded.con.register("__rows", pa.table({"rid": rid, "pid": part}))
    index = {c: i for i, c in enumerate(enc.qis)}
    select = []
    for col in loaded.columns:
        if col in identifiers:
            continue
        select.append(f"p.g{index[col]} AS {quote(col)}" if col in index else f"src.{quote(col)}")
    table = loaded.con.sql(
        f"SELECT {', '.join(select)} FROM {SOURCE_TABLE} src JOIN __rows r ON r.rid = src.rowid "
        f"JOIN __parts p ON p.pid = r.pid ORDER BY src.rowid"
    ).to_arrow_table()
    sizes = np.bincount(part).astype(np.float64)
    k = max((m.min_class_size() for m in models), default=1)
    loss = {
        "ncp": float(ncp.sum()) / (len(part) * len(enc.levels)),
        "discernibility": float((sizes * sizes).sum()),
        "average_class_size": (len(part) / n_parts) / k,
    }
    return table, {"algorithm": f"mondrian-{mode}", "loss": loss, "partitions": n_parts}
