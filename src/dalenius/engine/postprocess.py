"""Post-processing: from a query's noisy measurements to its answer rows and their intervals.

A query is released in three steps: noise the exact measurements, select groups and quantiles,
then post-process. Only :func:`~dalenius.engine.noise.add_noise` touches exact values (the noise step, with the
mechanisms and the bottom-up loss audit, is its own module, :mod:`dalenius.engine.noise`): it
adds discrete Laplace noise to every measurement of every observed group, applies the private
partition selection (groups without public keys), and runs the exponential-mechanism selections
for quantiles, MEDIAN, MIN and MAX in the released groups. Its result — noisy integers, released
group keys and chosen bins — is what the ledger records.
Everything after it (:func:`post_process`) is post-processing and costs no privacy: statistics
(AVG = noisy SUM / noisy COUNT, variances), output expressions, HAVING, ORDER BY, LIMIT, intervals.

Error bars come from each mechanism's exact tail bound and cover the noise only, not the bias
from clipping to the bounds. A statistic built from k measurements takes each of their intervals
at confidence 1 − β/k (union bound) and reports every value they allow, so the stated confidence is
a lower bound. With a noisy count below 1, an average is the midpoint of the bounds and a variance
that of a uniform spread over them (they carry no information). Quantiles report their error as a
rank: the released value's rank is within ±r of the target with the stated confidence.
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from fractions import Fraction
from operator import itemgetter
from typing import Any, cast

import numpy as np

from dalenius.core.errors import InternalError
from dalenius.engine.noise import Exact, GroupKeyTuple, Noisy
from dalenius.mechanisms.exponential import PermuteAndFlip
from dalenius.plan.derive import FieldInfo, bounds_of
from dalenius.plan.evaluate import evaluate
from dalenius.plan.explain import min_people_note
from dalenius.plan.expr import BinOp, Col, Func, Lit, Neg, aggregates_read, columns, walk
from dalenius.plan.functions import FUNCTIONS
from dalenius.plan.hints import query_notes
from dalenius.plan.nodes import (
    VECTOR_KINDS,
    DPQuery,
    Measurement,
    OrderItem,
    Statistic,
    agg_ref,
    key_ref,
)
from dalenius.plan.noise import error_units

Cell = Any


def exact_values(
    plan: DPQuery,
    main_rows: Sequence[tuple[Any, ...]],
    histogram_rows: Mapping[str, Sequence[tuple[Any, ...]]],
) -> Exact:
    """Arrange the engine's rows per group: the public key product, or the groups observed."""
    n_keys = len(plan.group_by)
    key_of = _normaliser([k.type for k in plan.group_by])
    groups, slots, find = _slots(plan, main_rows, key_of)
    scalars_m = [m for m in plan.measurements if m.kind not in VECTOR_KINDS]
    scalars = {m.name: np.zeros(len(groups), dtype=np.int64) for m in scalars_m}
    # Rows outside the public keys are dropped; the rest are written column by column.
    if None in slots:
        kept = [(i, row) for i, row in zip(slots, main_rows, strict=True) if i is not None]
        at = np.fromiter((i for i, _ in kept), dtype=np.int64, count=len(kept))
        rows: Sequence[tuple[Any, ...]] = [row for _, row in kept]
    else:
        at, rows = np.fromiter(slots, dtype=np.int64, count=len(slots)), main_rows
    for j, m in enumerate(scalars_m):
        scalars[m.name][at] = _exact_column(rows, n_keys + j)
    histograms = {}
    for m in plan.measurements:
        if m.kind not in VECTOR_KINDS:
            continue
        counts = np.zeros((len(groups), len(m.edges) - 1), dtype=np.int64)
        for row in histogram_rows.get(m.name, ()):
            i = find(row)
            if i is None or row[n_keys] is None:
                continue
            if not 0 <= int(row[n_keys]) < counts.shape[1]:
                # Bins are in range by construction, and a unit's groups are capped: a defect.
                raise InternalError(f"{m.name}: bin {row[n_keys]} outside 0..{counts.shape[1] - 1}")
            counts[i, int(row[n_keys])] = _bounded(
                int(counts[i, int(row[n_keys])]) + _bounded(row[n_keys + 1])
            )
        histograms[m.name] = counts
    return Exact(groups=groups, scalars=scalars, histograms=histograms)


def _slots(
    plan: DPQuery,
    main_rows: Sequence[tuple[Any, ...]],
    key_of: Callable[[Sequence[Any]], GroupKeyTuple],
) -> tuple[list[GroupKeyTuple], list[int | None], Callable[[Sequence[Any]], int | None]]:
    """The released groups, each row's group among them (``None``: outside the public keys),
    and how to find any other row's group (a histogram's).

    With one public key of integers or texts (a public table's 100,000 suppliers), rows are
    looked up by their key's value, with no key tuple per row.
    """
    if not plan.public_groups:
        row_keys = [key_of(row) for row in main_rows]
        groups = _sorted_groups(set(row_keys))
        observed = {g: i for i, g in enumerate(groups)}
        return groups, [observed[key] for key in row_keys], lambda row: observed.get(key_of(row))
    groups = list(itertools.product(*[k.keys or () for k in plan.group_by]))
    if len(plan.group_by) == 1:
        values = list(map(itemgetter(0), main_rows))
        if all(type(v) is int or type(v) is str for v in itertools.chain(values, *groups)):
            by_value: dict[Any, int] = {g[0]: i for i, g in enumerate(groups)}
            return (
                groups,
                list(map(by_value.get, values)),
                lambda row: by_value.get(key_of(row)[0]),
            )
    index = {key_of(g): i for i, g in enumerate(groups)}
    return groups, [index.get(key_of(row)) for row in main_rows], lambda row: index.get(key_of(row))


def _exact_column(rows: Sequence[tuple[Any, ...]], column: int) -> Any:
    """The exact integers in ``column`` of ``rows``, each within :data:`EXACT_LIMIT` (NULL, an
    empty group's sum, is 0): read at once when they are all integers within it (a sum per
    supplier of TPC-H's 100,000), else one by one (:func:`_bounded`).
    """
    values = list(map(itemgetter(column), rows))
    if all(type(v) is int for v in values):
        try:
            at_once = np.array(values, dtype=np.int64)
        except OverflowError:
            pass
        else:
            if not len(at_once) or (at_once.min() >= -EXACT_LIMIT and at_once.max() <= EXACT_LIMIT):
                return at_once
    return [_bounded(v) for v in values]


def rank_error(stat: Statistic, m: Measurement, confidence: float) -> int:
    """With probability >= ``confidence`` the released bin holds a rank within this of the target."""
    mechanism = PermuteAndFlip(m.sensitivity_units, stat.epsilon)
    return math.ceil(mechanism.utility_error_bar(len(m.edges) - 1, Fraction(repr(confidence))))


@dataclass(frozen=True)
class Answer:
    """Released outputs: one row per group, each aggregate with its error bar.

    ``lows``/``highs`` hold interval ends (``None`` for keys and quantiles); ``rank_errors`` holds
    the rank error of quantile outputs (``None`` elsewhere); ``notes`` the catalog's hints about
    the query (:mod:`dalenius.plan.hints`).
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    lows: tuple[tuple[Cell, ...], ...]
    highs: tuple[tuple[Cell, ...], ...]
    kinds: tuple[str, ...]
    rank_errors: tuple[int | None, ...] = ()
    notes: tuple[str, ...] = ()


def post_process(plan: DPQuery, noisy: Noisy, confidence: float) -> Answer:
    """Compute statistics, outputs, HAVING, ORDER BY and LIMIT from the released values.

    Long because its steps (statistics, HAVING, ORDER BY, OFFSET and LIMIT, output columns with
    their error bars) must run in this order over column lists that all of them share.
    """
    query = plan.query
    n = len(noisy.groups)
    stats = [_statistic(plan, s, i, noisy, confidence) for i, s in enumerate(plan.statistics)]
    # Column by column: one list per key and aggregate. Expressions (HAVING, ORDER BY, derived
    # outputs) are evaluated on one dict per group, built only when some expression needs it.
    table: dict[str, list[Any]] = {
        key_ref(k): [group[k] for group in noisy.groups] for k in range(len(query.group_by))
    }
    for a, (values, _, _) in enumerate(stats):
        table[agg_ref(a)] = values
    needs_env = (
        query.having is not None
        or bool(query.order_by)
        or any(not isinstance(o.expr, Col) for o in query.outputs)
    )
    envs: list[dict[str, Any]] = (
        [{name: column[g] for name, column in table.items()} for g in range(n)] if needs_env else []
    )
    keep = [g for g in range(n) if query.having is None or evaluate(query.having, envs[g]) is True]
    for item in reversed(query.order_by):
        keep.sort(key=_sorter(item, envs))
    end = None if query.limit is None else query.offset + query.limit
    keep = keep[query.offset : end]
    every = keep == list(range(n))  # every group, in order: columns are read as they are
    columns_out, kinds, rank_errors = [], [], []
    cols_values: list[list[Cell]] = []
    cols_lows: list[list[Cell]] = []
    cols_highs: list[list[Cell]] = []
    for out in query.outputs:
        columns_out.append(out.name)
        refs = aggregates_read(out.expr)
        kinds.append(_kind(plan, out.expr, refs))
        # A bare key or aggregate (the common case) is read directly: with thousands of groups,
        # evaluating it for every group and interval end dominated post-processing.
        plain = out.expr.name if isinstance(out.expr, Col) else None
        if plain is not None:
            column = table[plain]
            values = _cells(column if every else map(column.__getitem__, keep))
        else:
            values = [_cell(evaluate(out.expr, envs[g])) for g in keep]
        lows: list[Cell] = [None] * len(keep)
        highs: list[Cell] = [None] * len(keep)
        rank: int | None = None
        if len(refs) == 1:
            a = refs[0]
            _, a_lows, a_highs = stats[a]
            stat = plan.statistics[a]
            if stat.kind == "quantile":
                rank = rank_error(stat, plan.measurement(stat.inputs[0]), confidence)
            elif plain is not None and every and None not in a_lows and None not in a_highs:
                lows, highs = _cells(a_lows), _cells(a_highs)
            elif plain is not None:
                for j, g in enumerate(keep):
                    low, high = a_lows[g], a_highs[g]
                    if low is not None and high is not None:
                        lows[j] = low if type(low) is int else _cell(low)
                        highs[j] = high if type(high) is int else _cell(high)
            else:
                lows, highs = _images(out.expr, agg_ref(a), keep, envs, stats[a], values)
        cols_values.append(values)
        cols_lows.append(lows)
        cols_highs.append(highs)
        rank_errors.append(rank)
    rows = tuple(zip(*cols_values, strict=True)) if cols_values and keep else ()
    return Answer(
        columns=tuple(columns_out),
        rows=rows,
        lows=tuple(zip(*cols_lows, strict=True)) if rows else (),
        highs=tuple(zip(*cols_highs, strict=True)) if rows else (),
        kinds=tuple(kinds),
        rank_errors=tuple(rank_errors),
        notes=query_notes(query) + _rule_notes(plan),
    )


def _rule_notes(plan: DPQuery) -> tuple[str, ...]:
    """The catalog's ``min_people`` rule, so that a missing cell is explained (from the plan only)."""
    return () if plan.min_people is None else (min_people_note(plan.min_people),)


def _sorter(item: OrderItem, envs: list[dict[str, Any]]) -> Callable[[int], tuple[bool, Any]]:
    def key(g: int) -> tuple[bool, Any]:
        return _order_key(evaluate(item.expr, envs[g]), item.descending, item.nulls_first)

    return key


def output_kinds(plan: DPQuery) -> tuple[str, ...]:
    """Each output column's kind, as :func:`post_process` will report it, known before any data
    is read (a PostgreSQL client describes a statement's columns before it runs it).
    """
    return tuple(_kind(plan, out.expr, aggregates_read(out.expr)) for out in plan.query.outputs)


def key_types(plan: DPQuery) -> tuple[str | None, ...]:
    """The catalog type of each output that is a bare group key (``None`` for the others)."""
    names = {key_ref(k): key.type for k, key in enumerate(plan.query.group_by)}
    return tuple(
        names.get(out.expr.name) if isinstance(out.expr, Col) else None
        for out in plan.query.outputs
    )


def _kind(plan: DPQuery, expr: Any, refs: list[int]) -> str:
    if not refs:
        return "key"
    if isinstance(expr, Col) and len(refs) == 1:
        return {"count": "count", "sum": "sum", "avg": "avg", "var": "var", "quantile": "quantile"}[
            plan.statistics[refs[0]].kind
        ]
    return "derived"


Triple = tuple[list[Any], list[Any], list[Any]]


def _statistic(
    plan: DPQuery, stat: Statistic, index: int, noisy: Noisy, confidence: float
) -> Triple:
    """Values and interval ends of one aggregate for every released group.

    Long because it has one branch per statistic (count and sum, average, variance, quantile), each
    turning its noisy measurements into values and error bars for every group.
    """
    beta = 1 - confidence
    n = len(noisy.groups)
    if stat.kind in ("count", "sum"):
        m = plan.measurement(stat.inputs[0])
        h = error_units(m, confidence)
        g = m.granularity
        vals = noisy.values[m.name]
        if stat.kind == "count":
            # Released r = max(v, 0); interval [r - h, r + h] clipped at 0 (see _clamp).
            released = [max(v, 0) for v in vals]
            return released, [max(r - h, 0) for r in released], [r + h for r in released]
        # The same clamps in grid units (g > 0, and the domain's ends are 0 or open): integers
        # throughout, scaled once per value (a key list of a public table has 100,000 cells).
        floor, ceiling = sign_range(m.bounds)
        lo = None if floor is None else 0
        hi = None if ceiling is None else 0
        fast = _sums_at_once(vals, h, lo, hi, g)
        if fast is not None:
            return fast
        units = [_clamp_units(v, lo, hi) for v in vals]
        return (
            [_scaled(u, g) for u in units],
            [_scaled(_clamp_units(u - h, lo, hi), g) for u in units],
            [_scaled(_clamp_units(u + h, lo, hi), g) for u in units],
        )
    if stat.kind == "avg":
        s_m, c_m = plan.measurement(stat.inputs[0]), plan.measurement(stat.inputs[1])
        level = 1 - beta / 2
        hs, hc = error_units(s_m, level) * s_m.granularity, error_units(c_m, level)
        assert stat.bounds is not None
        out: Triple = ([], [], [])
        for s, c in zip(noisy.values[s_m.name], noisy.values[c_m.name], strict=True):
            value, low, high = _average(
                Fraction(s) * s_m.granularity, Fraction(c), hs, hc, s_m.center, stat.bounds
            )
            out[0].append(_num(value))
            out[1].append(_num(low))
            out[2].append(_num(high))
        return out
    if stat.kind == "var":
        s_m, s2_m, c_m = (plan.measurement(x) for x in stat.inputs)
        level = 1 - beta / 3
        hs = error_units(s_m, level) * s_m.granularity
        hs2 = error_units(s2_m, level) * s2_m.granularity
        hc = error_units(c_m, level)
        assert stat.bounds is not None
        out = ([], [], [])
        for s, s2, c in zip(
            noisy.values[s_m.name], noisy.values[s2_m.name], noisy.values[c_m.name], strict=True
        ):
            triple = _variance(
                Fraction(s) * s_m.granularity,
                Fraction(s2) * s2_m.granularity,
                Fraction(c),
                hs,
                hs2,
                hc,
                stat,
            )
            for k in range(3):
                out[k].append(_num(triple[k]))
        return out
    m = plan.measurement(stat.inputs[0])
    chosen = noisy.bins[f"s{index}"]
    integer_bins = m.arg_type == "int" and m.edges[1] - m.edges[0] == 1
    values = [
        _num(m.edges[b]) if integer_bins else _num((m.edges[b] + m.edges[b + 1]) / 2)
        for b in chosen
    ]
    return values, [None] * n, [None] * n


def sign_range(bounds: tuple[Fraction, Fraction] | None) -> tuple[Fraction | None, Fraction | None]:
    """What the sign of the values' bounds says about their exact sum: ``(0, None)`` when no
    value is negative (the sum is ``>= 0``), ``(None, 0)`` when none is positive.
    """
    if bounds is None:
        return None, None
    low, high = bounds
    return (Fraction(0) if low >= 0 else None), (Fraction(0) if high <= 0 else None)


def _clamp(x: Fraction, floor: Fraction | None, ceiling: Fraction | None) -> Fraction:
    """``x`` projected onto ``[floor, ceiling]`` (either end may be open).

    A count or a one-signed sum is released clamped, ``r = clamp(v)``, and its interval is the
    noisy value's half-width ``h`` moved to ``r`` and clipped to the domain: ``[r − h, r + h] ∩ D``.
    Coverage: the exact answer ``x`` lies in ``D`` and projection onto an interval is 1-Lipschitz,
    so ``|r − x| = |clamp(v) − clamp(x)| ≤ |v − x|``; whenever the noisy interval covers ``x``
    (probability ≥ 1 − β) so does the released one. It always holds ``r`` and never has width
    zero when ``h > 0`` (``D`` is a half-line), where clipping ``[v − h, v + h]`` itself gave
    ``0 [0, 0]`` for ``v ≤ −h`` — a certainty the noise never gave.
    """
    if floor is not None and x < floor:
        return floor
    if ceiling is not None and x > ceiling:
        return ceiling
    return x


def _images(
    expr: Any,
    ref: str,
    keep: Sequence[int],
    envs: Sequence[Mapping[str, Any]],
    stat: Triple,
    values: Sequence[Any],
) -> tuple[list[Cell], list[Cell]]:
    """The interval of a derived output ``expr`` of one aggregate ``ref`` in each kept group
    (:func:`_image`; whether ``expr`` is affine in ``ref`` is asked once for them all).
    """
    _, a_lows, a_highs = stat
    affine = _affine(expr, ref)
    lows: list[Cell] = [None] * len(keep)
    highs: list[Cell] = [None] * len(keep)
    for j, g in enumerate(keep):
        if a_lows[g] is not None and a_highs[g] is not None:
            lows[j], highs[j] = _image(
                expr, envs[g], ref, a_lows[g], a_highs[g], values[j], affine=affine
            )
    return lows, highs


def _image(
    expr: Any,
    env: Mapping[str, Any],
    ref: str,
    low: Any,
    high: Any,
    value: Any,
    *,
    affine: bool | None = None,
) -> tuple[Any, Any]:
    """An interval holding ``expr`` for every value of ``ref`` in [low, high], and ``value``.

    Interval arithmetic (:func:`dalenius.plan.derive.bounds_of`) encloses the image of the
    interval even where ``expr`` is not monotone (``ABS(SUM(x))``, ``COUNT(*) * COUNT(*)``), so
    the interval still covers the true answer whenever the aggregate's interval does; where it
    cannot be derived, the expression is evaluated at both ends. Either way the interval is
    widened to the released value itself (floating-point rounding of the post-processing).
    """
    if value is None:
        return None, None  # NULL (SQRT of a negative noisy value): nothing to bound
    if affine is None:
        affine = _affine(expr, ref)
    at_ends = _affine_ends(expr, ref, low, high) if affine else None
    if at_ends is not None:  # the common case, ``0.2 * AVG(x)`` per key: no interval arithmetic
        return _cell(min(*at_ends, value)), _cell(max(*at_ends, value))
    infos: dict[str, FieldInfo] = {}
    for name in columns(expr):
        point = env.get(name)
        if name == ref:
            infos[name] = FieldInfo(_type(low), (Fraction(low), Fraction(high)), None, True)
        elif (
            isinstance(point, int | float) and not isinstance(point, bool) and math.isfinite(point)
        ):
            infos[name] = FieldInfo(_type(point), (Fraction(point), Fraction(point)), None, True)
        else:
            infos[name] = FieldInfo(_type(point), None, None, True)
    try:
        enclosure = bounds_of(expr, infos)
    except (ArithmeticError, ValueError, KeyError):
        enclosure = None
    if enclosure is not None:
        ends = [_num(enclosure[0]), _num(enclosure[1])]
    elif any(isinstance(f, Func) and not FUNCTIONS[f.name].row for f in walk(expr)):
        # Post-only functions are not monotone everywhere (POWER(x, -1) across 0): the ends'
        # values would not enclose the image, so the interval is dropped.
        return None, None
    else:
        ends = [evaluate(expr, {**env, ref: low}), evaluate(expr, {**env, ref: high})]
        if any(e is None for e in ends):
            return None, None
    if value is not None:
        ends.append(value)
    return _cell(min(ends)), _cell(max(ends))


def _affine_image(expr: Any, ref: str, low: Any, high: Any) -> tuple[Any, Any] | None:
    """:func:`_affine_ends` when ``expr`` is affine in ``ref`` alone (:func:`_affine`)."""
    return _affine_ends(expr, ref, low, high) if _affine(expr, ref) else None


def _affine_ends(expr: Any, ref: str, low: Any, high: Any) -> tuple[Any, Any] | None:
    """The ends of ``expr``'s image over ``ref`` in [low, high] when ``expr`` is affine in
    ``ref`` alone (``ref``, finite constants, ``+``, ``-``, ``*`` by a constant, ``/`` by a
    nonzero constant, negation), else ``None``.

    An affine function takes its extremes at the interval's ends, so its exact values there
    (rational arithmetic, as :func:`dalenius.plan.derive.bounds_of` computes them) are the ends
    interval arithmetic gives, without deriving types and four products per operator for each of
    thousands of cells.
    """
    if not _finite(low) or not _finite(high):
        return None
    a, b = _at(expr, ref, Fraction(low)), _at(expr, ref, Fraction(high))
    return _num(min(a, b)), _num(max(a, b))


def _finite(x: Any) -> bool:
    return isinstance(x, int | Fraction) or (isinstance(x, float) and math.isfinite(x))


@functools.lru_cache(maxsize=256)
def _affine(expr: Any, ref: str) -> bool:
    """Whether ``expr`` is affine in the column ``ref`` and reads no other column (asked once
    per output, then remembered: plan expressions are immutable).
    """
    if isinstance(expr, Col):
        return expr.name == ref
    if isinstance(expr, Lit):
        v = expr.value
        return type(v) is int or (type(v) is float and math.isfinite(v))
    if isinstance(expr, Neg):
        return _affine(expr.operand, ref)
    if not isinstance(expr, BinOp) or expr.op not in ("+", "-", "*", "/"):
        return False
    if not (_affine(expr.left, ref) and _affine(expr.right, ref)):
        return False
    if expr.op == "*":
        return not (ref in columns(expr.left) and ref in columns(expr.right))
    if expr.op == "/":
        # By a double constant only: the quotient is then a double whatever the dividend, where
        # an integer one truncates (left to interval arithmetic).
        divisor = expr.right
        return isinstance(divisor, Lit) and type(divisor.value) is float and divisor.value != 0
    return True


def _at(expr: Any, ref: str, x: Fraction) -> Fraction:
    """The exact value of an affine expression (:func:`_affine`) at ``ref = x``."""
    if isinstance(expr, Col):
        return x
    if isinstance(expr, Lit):
        return _constant(expr.value)
    if isinstance(expr, Neg):
        return -_at(expr.operand, ref, x)
    left, right = _at(expr.left, ref, x), _at(expr.right, ref, x)
    if expr.op == "+":
        return left + right
    if expr.op == "-":
        return left - right
    if expr.op == "*":
        return left * right
    return left / right


@functools.lru_cache(maxsize=256)
def _constant(value: Any) -> Fraction:
    """A finite constant as the rational :func:`dalenius.plan.derive.bounds_of` reads it (a
    double by its shortest decimal form).
    """
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(cast(int, value))


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str" if isinstance(value, str) else "null"


def _average(
    s: Fraction,
    c: Fraction,
    hs: Fraction,
    hc: int,
    center: Fraction,
    bounds: tuple[Fraction, Fraction],
) -> tuple[Fraction, Fraction, Fraction]:
    """AVG = centre + SUM/COUNT, clamped to the bounds, with an interval over every allowed ratio."""
    low_b, high_b = bounds
    value = (low_b + high_b) / 2 if c < 1 else min(max(center + s / c, low_b), high_b)
    if c - hc < 1:
        return value, low_b, high_b
    ratios = [(s + ds) / cc for ds in (-hs, hs) for cc in (c - hc, c + hc)]
    low = max(center + min(ratios), low_b)
    high = min(center + max(ratios), high_b)
    return value, min(low, value), max(high, value)


def _variance(
    s: Fraction, s2: Fraction, c: Fraction, hs: Fraction, hs2: Fraction, hc: int, stat: Statistic
) -> tuple[Fraction | float, Fraction | float, Fraction | float]:
    """Variance (or standard deviation) from the centred sum, sum of squares and count."""
    assert stat.bounds is not None
    low_b, high_b = stat.bounds
    top = ((high_b - low_b) / 2) ** 2
    minimum_count = 2 if stat.sample else 1

    def finish(v: Fraction) -> Fraction | float:
        v = min(max(v, Fraction(0)), top)
        return math.sqrt(v) if stat.sqrt else v

    def adjust(v: Fraction, count: Fraction) -> Fraction:
        return v * count / (count - 1) if stat.sample else v

    # Too few (noisy) rows: the variance of a uniform spread over the bounds, i.e. no information.
    value = top / 3 if c < minimum_count else adjust(s2 / c - (s / c) ** 2, c)
    if c - hc < minimum_count:
        return finish(value), finish(Fraction(0)), finish(top)
    c_lo, c_hi = c - hc, c + hc
    e2 = (max(s2 - hs2, Fraction(0)) / c_hi, (s2 + hs2) / c_lo)
    means = [(s + ds) / cc for ds in (-hs, hs) for cc in (c_lo, c_hi)]
    m_lo, m_hi = min(means), max(means)
    sq_hi = max(m_lo * m_lo, m_hi * m_hi)
    sq_lo = Fraction(0) if m_lo <= 0 <= m_hi else min(m_lo * m_lo, m_hi * m_hi)
    low, high = e2[0] - sq_hi, e2[1] - sq_lo
    if stat.sample:
        low, high = low * c_hi / (c_hi - 1), high * c_lo / (c_lo - 1)
    return finish(value), min(finish(low), finish(value)), max(finish(high), finish(value))


def _clamp_units(u: int, floor: int | None, ceiling: int | None) -> int:
    """:func:`_clamp` on grid units."""
    if floor is not None and u < floor:
        return floor
    if ceiling is not None and u > ceiling:
        return ceiling
    return u


_AT_ONCE = 1 << 61
"""The largest grid units :func:`_sums_at_once` takes (values and error bars alike): their sums
and differences stay within a 64-bit integer."""


def _sums_at_once(
    vals: Sequence[int], h: int, lo: int | None, hi: int | None, g: Fraction
) -> Triple | None:
    """The values and interval ends of a sum's cells, as the loop over :func:`_clamp_units` and
    :func:`_scaled` gives them, computed with numpy: ``None`` unless the grid is ``2**-k`` and
    every value and the error bar are within :data:`_AT_ONCE` grid units (else the loop runs).

    With a public table's 100,000 keys, the loop took a third of a second. Here each unit is
    split once into its quotient and remainder by ``2**k``: an exact multiple is the integer
    quotient, any other the double ``float(u) * 2**-k`` — numpy's conversion of a 64-bit integer
    rounds to nearest, ties to even, as ``float(u)`` does, and the scaling by a power of two is
    exact — so every cell is the same number of the same type as the loop's.

    Example:
        >>> g = Fraction(1, 4)
        >>> _sums_at_once([8, -3, 5], 2, 0, None, g)
        ([2, 0, 1.25], [1.5, 0, 0.75], [2.5, 0.5, 1.75])
        >>> [[_scaled(_clamp_units(_clamp_units(v, 0, None) + d, 0, None), g) for v in (8, -3, 5)]
        ...  for d in (0, -2, 2)]
        [[2, 0, 1.25], [1.5, 0, 0.75], [2.5, 0.5, 1.75]]
    """
    n, d = g.numerator, g.denominator
    if n != 1 or d == 1 or d & (d - 1) or d > _AT_ONCE or not vals or type(h) is not int:
        return None
    if not 0 <= h <= _AT_ONCE:
        return None
    if min(vals) < -_AT_ONCE or max(vals) > _AT_ONCE:
        return None
    units = np.asarray(vals, dtype=np.int64)
    low, high = (None if lo is None else np.int64(lo)), (None if hi is None else np.int64(hi))
    units = np.clip(units, low, high) if low is not None or high is not None else units
    ends = [units]
    for step in (-h, h):
        shifted = units + np.int64(step)
        ends.append(np.clip(shifted, low, high) if low is not None or high is not None else shifted)
    scale = 1.0 / d
    out: list[list[Any]] = []
    for arr in ends:
        cells: list[Any] = (arr.astype(np.float64) * scale).tolist()
        exact = np.flatnonzero(arr % d == 0)
        for i, q in zip(exact.tolist(), (arr[exact] // d).tolist(), strict=True):
            cells[i] = q
        out.append(cells)
    return out[0], out[1], out[2]


def _scaled(u: int, g: Fraction) -> int | float:
    """``_num(u * g)`` for an integer ``u``, without a Fraction when ``g`` is a power of two.

    ``float(u) * 2**-k`` rounds ``u`` once and scales it exactly, which is the correctly
    rounded ``u / 2**k`` that ``float(Fraction(u, 2**k))`` gives.

    Example:
        >>> [_scaled(u, Fraction(1, 4)) for u in (8, 3, -3)], _scaled(3, Fraction(8))
        ([2, 0.75, -0.75], 24)
        >>> _scaled(2**60 + 1, Fraction(1, 2)) == _num(Fraction(2**60 + 1, 2))
        True
    """
    n, d = g.numerator, g.denominator
    if d == 1:
        return u * n
    if n == 1 and d & (d - 1) == 0:
        if u % d == 0:
            return u // d
        try:
            return math.ldexp(float(u), 1 - d.bit_length())
        except OverflowError:
            pass
    return _num(u * g)


def _num(x: Fraction | int | float) -> int | float:
    if isinstance(x, int | float):
        return x
    if x.denominator == 1:
        return int(x.numerator)
    try:
        return float(x)
    except OverflowError:
        # Beyond the largest double (a sum of values near 1e308, or its error bar): saturate,
        # which keeps the order of a value and its interval ends, instead of failing.
        return math.copysign(sys.float_info.max, x)


def _cells(values: Iterable[Any]) -> list[Any]:
    """:func:`_cell` of each value, integers and finite doubles passed through without a call
    (``x - x == 0`` is false for an infinity and NaN): with 100,000 released cells the calls
    were a tenth of the post-processing.
    """
    return [v if type(v) is int or (type(v) is float and v - v == 0) else _cell(v) for v in values]


def _cell(value: Any) -> Any:
    kind = type(value)
    if kind is float and not math.isfinite(value):
        # A derived output beyond the doubles (SUM(x) * 1e300) saturates, and NaN is missing:
        # every released cell is a finite number or NULL, whatever the data.
        return None if math.isnan(value) else math.copysign(sys.float_info.max, value)
    if kind is int or kind is float or value is None:
        return value
    if isinstance(value, Fraction):
        return _num(value)
    return value


EXACT_LIMIT = 1 << 62
"""Exact values are clamped to ±2^62 before noise: clamping is 1-Lipschitz (it keeps every
sensitivity) and makes overflow, an error that would depend on the data, impossible."""


def _bounded(value: Any) -> int:
    if type(value) is int and -EXACT_LIMIT <= value <= EXACT_LIMIT:
        return value
    if value is None:
        return 0
    return max(-EXACT_LIMIT, min(EXACT_LIMIT, int(value)))


_NAN = float("nan")


def _norm(value: Any, col_type: str) -> Any:
    """One canonical form per key, so a released key's form says nothing about other rows.

    (-0.0 and 0.0 form one group in the engine, but which of the two it reports depends on the
    rows; every NaN is the same group too.)
    """
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        # An integer key rounded in DECIMAL (ROUND(n, -1) cannot overflow there).
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float):
        if math.isnan(value):
            return _NAN
        value = value + 0.0  # -0.0 → 0.0
        if col_type == "int" and value.is_integer():
            return int(value)
    return value


def _normaliser(types: Sequence[str]) -> Callable[[Sequence[Any]], GroupKeyTuple]:
    """The canonical key (:func:`_norm`) of a row whose first values are the group keys.

    Text, the common case, is its own canonical form; it is passed through without a call (with
    thousands of private groups, normalising dominated the time spent on the engine's rows).
    """
    if len(types) == 1:
        (only,) = types

        def single(row: Sequence[Any]) -> GroupKeyTuple:
            v = row[0]
            return (v if type(v) is str or type(v) is int else _norm(v, only),)

        return single
    n = len(types)

    def several(row: Sequence[Any]) -> GroupKeyTuple:
        return tuple(
            v if type(v) is str or type(v) is int else _norm(v, t)
            for v, t in zip(row[:n], types, strict=True)
        )

    return several


def _sorted_groups(observed: set[GroupKeyTuple]) -> list[GroupKeyTuple]:
    """The observed groups in their release order (:func:`_sort_key`).

    Keys that are all text, or all integers, sort in that order by themselves (the common case,
    and with thousands of private groups the key function was most of the sorting time).
    """
    kinds = {type(v) for group in observed for v in group}
    if kinds in ({str}, {int}):
        return sorted(observed)
    return sorted(observed, key=_sort_key)


def _sort_key(group: GroupKeyTuple) -> tuple[tuple[bool, bool, str, Any], ...]:
    out: list[tuple[bool, bool, str, Any]] = []
    for v in group:
        if v is None:
            out.append((True, False, "NoneType", 0))
        elif isinstance(v, float) and math.isnan(v):
            out.append((False, True, type(v).__name__, 0))
        else:
            out.append((False, False, type(v).__name__, v))
    return tuple(out)


def _order_key(value: Any, descending: bool, nulls_first: bool = False) -> tuple[bool, Any]:
    if value is None:
        return (not nulls_first, 0)
    if descending:
        if isinstance(value, int | float):
            return (nulls_first, -value)
        return (nulls_first, _Reversed(value))
    return (nulls_first, value)


class _Reversed:
    """Inverts the order of a non-numeric sort key (for ORDER BY ... DESC on text)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(self.value > other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.value)
