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
Strict Mondrian never separates records with equal quasi-identifiers, so it partitions the
frequency set (one weighted row per distinct combination, built by one ``GROUP BY`` in DuckDB)
instead of the records: the medians are weighted, the partitions the same. Relaxed Mondrian may
cut such records apart, so it partitions the records themselves.
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
from dalenius.anonymity.models import BoolArray, ClassStats, FloatArray, IntArray, Model
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
    cls: IntArray,
    n_classes: int,
    count: IntArray,
    scodes: Sequence[IntArray],
    enc: Encoded,
    models: Sequence[Model],
) -> BoolArray:
    stats = ClassStats(cls, count, scodes, enc.sensitive, n_classes)
    ok = np.ones(n_classes, dtype=bool)
    for model in models:
        ok &= model.passes(stats)
    return ok


def partition(
    ranks: IntArray,
    scodes: Sequence[IntArray],
    enc: Encoded,
    models: Sequence[Model],
    mode: str,
    count: IntArray | None = None,
) -> IntArray:
    """Partition id of every row (``ranks``: rows × quasi-identifiers, in Mondrian order).

    ``count`` weighs each row (the records a frequency-set row stands for; strict mode only).
    """
    n, d = ranks.shape
    if count is None:
        count = np.ones(n, dtype=np.int64)
    elif mode != "strict":
        raise ValueError("relaxed Mondrian cuts records apart; it cannot run on weighted rows")
    span = (
        np.maximum(ranks.max(axis=0) - ranks.min(axis=0), 1).astype(np.float64) if n else np.ones(d)
    )
    part = np.zeros(n, dtype=np.int64)
    if not bool(np.all(_passing(part, 1, count, scodes, enc, models))):
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
            done, new_part = _split(
                sel, part[sel], dim, ranks, count, scodes, enc, models, mode, n_parts
            )
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
    count: IntArray,
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
    weight = count[sel]
    first = np.searchsorted(p, p, side="left")
    size = np.bincount(p, weights=weight, minlength=n_parts).astype(np.int64)[p]
    if mode == "relaxed":  # unit weights
        left = np.arange(len(p)) - first < size // 2
    else:
        # the median record, at (size − 1) // 2 of the partition's records in value order
        through = np.cumsum(weight)
        before = through - weight - np.where(first > 0, through[first - 1], 0)
        target = (size - 1) // 2
        at = (before <= target) & (target < before + weight)
        med_of = np.zeros(n_parts, dtype=np.int64)
        med_of[p[at]] = value[at]
        med = med_of[p]
        le = np.bincount(p, weights=weight * (value <= med), minlength=n_parts)[p]
        lt = np.bincount(p, weights=weight * (value < med), minlength=n_parts)[p]
        use_le = (le < size) & ((np.abs(2 * le - size) <= np.abs(2 * lt - size)) | (lt == 0))
        left = np.where(use_le, value <= med, value < med)
    side = np.where(left, 0, 1)
    cls = p * 2 + side
    cls_inv, cls_ids = pd.factorize(cls, sort=False)
    ok = _passing(
        np.asarray(cls_inv, dtype=np.int64),
        len(cls_ids),
        weight,
        [s[sel] for s in scodes],
        enc,
        models,
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


def _labels(lv: Levels, rank: IntArray, lo: IntArray, hi: IntArray) -> tuple[pa.Array, FloatArray]:
    """Label and NCP span of each partition's range [lo, hi] of ranks for one attribute.

    Many partitions share a range, so each distinct range is labelled once.
    """
    pairs, back = np.unique(np.column_stack([lo, hi]), axis=0, return_inverse=True)
    names, spans = _range_labels(lv, rank, pairs[:, 0], pairs[:, 1])
    at = pa.array(np.asarray(back, dtype=np.int64).reshape(-1))
    return pa.array(names, type=pa.string()).take(at), np.asarray(spans)[at.to_numpy()]


def _range_labels(
    lv: Levels, rank: IntArray, lo: IntArray, hi: IntArray
) -> tuple[list[str], list[float]]:
    """Label and NCP span of each range [lo, hi] of ranks for one attribute."""
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


def _rows(loaded: Loaded, enc: Encoded) -> tuple[IntArray, list[IntArray], list[IntArray]]:
    """Every record's row id, quasi-identifier codes and sensitive codes (relaxed mode)."""
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
    return (
        np.asarray(arrays["rid"], dtype=np.int64),
        [np.asarray(arrays[f"q{i}"], dtype=np.int64) for i in range(len(enc.qis))],
        [np.asarray(arrays[f"s{j}"], dtype=np.int64) for j in range(len(enc.sensitive))],
    )


def mondrian_release(
    loaded: Loaded, enc: Encoded, models: Sequence[Model], mode: str, identifiers: Sequence[str]
) -> tuple[pa.Table, dict[str, Any]]:
    """Partition with Mondrian (strict: the frequency set; relaxed: the records), release in DuckDB."""
    orders = [_order(lv) for lv in enc.levels]
    if mode == "strict":
        codes, scodes, count = list(enc.base), list(enc.sensitive_codes), enc.count
    else:
        rid, codes, scodes = _rows(loaded, enc)
        count = np.ones(len(rid), dtype=np.int64)
    ranks = np.column_stack([orders[i][c] for i, c in enumerate(codes)])
    part = partition(ranks, scodes, enc, models, mode, count if mode == "strict" else None)
    n_parts = int(part.max()) + 1
    weight = count.astype(np.float64)
    ncp = 0.0
    labels: dict[str, Any] = {}
    for i, lv in enumerate(enc.levels):
        lo, hi = _extent(part, ranks[:, i], n_parts)
        names, spans = _labels(lv, orders[i], lo, hi)
        labels[f"g{i}"] = names
        ncp += float((weight * spans[part]).sum())
    index = {c: i for i, c in enumerate(enc.qis)}
    select = []
    for col in loaded.columns:
        if col in identifiers:
            continue
        select.append(f"p.g{index[col]} AS {quote(col)}" if col in index else f"src.{quote(col)}")
    if mode == "strict":
        # one row per distinct quasi-identifier combination: its codes and released labels
        keep = _distinct_rows(codes) if scodes else np.arange(len(part))
        columns = {f"q{i}": pa.array(c[keep]) for i, c in enumerate(codes)}
        columns.update({g: names.take(pa.array(part[keep])) for g, names in labels.items()})
        loaded.con.register("__parts", pa.table(columns))
        joins = "".join(
            f" JOIN {mapping_table_name(i)} m{i} ON src.{quote(c)} IS NOT DISTINCT FROM m{i}.v"
            for i, c in enumerate(enc.qis)
        )
        on = " AND ".join(f"p.q{i} = m{i}.c" for i in range(len(enc.qis)))
        sql = (
            f"SELECT {', '.join(select)} FROM {SOURCE_TABLE} src{joins} JOIN __parts p ON {on} "
            "ORDER BY src.rowid"
        )
    else:
        columns = {"pid": pa.array(np.arange(n_parts)), **labels}
        loaded.con.register("__parts", pa.table(columns))
        loaded.con.register("__rows", pa.table({"rid": rid, "pid": part}))
        sql = (
            f"SELECT {', '.join(select)} FROM {SOURCE_TABLE} src JOIN __rows r ON r.rid = src.rowid "
            f"JOIN __parts p ON p.pid = r.pid ORDER BY src.rowid"
        )
    table = loaded.con.sql(sql).to_arrow_table()
    sizes = np.bincount(part, weights=weight)
    n = float(weight.sum())
    k = max((m.min_class_size() for m in models), default=1)
    loss = {
        "ncp": ncp / (n * len(enc.levels)),
        "discernibility": float((sizes * sizes).sum()),
        "average_class_size": (n / n_parts) / k,
    }
    return table, {"algorithm": f"mondrian-{mode}", "loss": loss, "partitions": n_parts}


def _distinct_rows(codes: Sequence[IntArray]) -> IntArray:
    """The first row of each distinct combination of ``codes``."""
    frame = pd.DataFrame(dict(enumerate(codes)))
    return np.flatnonzero(~frame.duplicated().to_numpy())


def _extent(part: IntArray, rank: IntArray, n_parts: int) -> tuple[IntArray, IntArray]:
    """The lowest and highest rank in each partition."""
    order = np.lexsort((rank, part))
    sorted_part = part[order]
    starts = np.searchsorted(sorted_part, np.arange(n_parts), side="left")
    ends = np.searchsorted(sorted_part, np.arange(n_parts), side="right") - 1
    ranked = rank[order]
    return ranked[starts], ranked[ends]
