"""Elastic sensitivity: a join of two private tables whose keys declare no truncation.

FLEX (Johnson, Near & Song, VLDB 2018) bounds how far one unit can move a count over a join by
the largest number of rows sharing one key value on each side, ``mf``, which the data has, and
adds noise calibrated to a *smooth* upper bound on that local sensitivity (Nissim, Raskhodnikova
& Smith, STOC 2007), because the local sensitivity itself would leak. Here, with person-level
units whose rows are capped at ``R`` on each side:

* **local sensitivity at distance d**: ``d`` units away, each key value has at most ``mf + d·R``
  rows, and one more unit changes at most
  ``ES(d) = R_a·mf_b + R_b·mf_a + R_a·R_b·(2d + 1)`` joined rows;
* **smooth bound**: ``S = max_{d ≥ 0} e^{−βd}·ES(d)``, certified from above
  (:func:`smooth_bound`); it is β-smooth because ``ES(x, d) ≤ ES(y, d + 1)`` for neighbours;
* **noise**: discrete Laplace of scale ``2S/ε``, which is (ε, δ)-DP when
  ``e^β − 1 ≤ ε / (2 ln(2/δ) + ε)`` (:func:`smoothness`; the proof, for the discrete Laplace, is
  in docs/mechanisms/join_truncation.md).

Only counts are planned this way, as FLEX does (its paper's query class), and without GROUP BY:
several noisy cells would each need their own share of δ. The answer's interval cannot use
``S`` itself (it would publish it); a tenth of ε releases noisy upper bounds of the two ``mf``
(:data:`BOUND_SHARE`), from which each interval is computed (:func:`interval_frequencies`).

Example:
    >>> beta = smoothness(Fraction(9, 20), Fraction(1, 2 * 10**6))
    >>> round(float(beta), 5)
    0.01448
    >>> float(smooth_bound((3, 2), (4, 7), beta)) > 3 * 7 + 2 * 4 + 3 * 2
    True
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from dalenius.core.errors import PrivacyRefusal
from dalenius.core.exact import exp_up, ln_down, ln_up, round_up
from dalenius.core.loss import ApproxDP
from dalenius.plan.nodes import (
    DPQuery,
    Elastic,
    Filter,
    Join,
    Project,
    Relation,
    SemiJoin,
    UnitAggregate,
)
from dalenius.plan.rewrite.bound_contributions import row_multiplicity

BOUND_SHARE = Fraction(1, 10)
"""The share of ε that releases the noisy key frequencies the intervals are computed from."""

SCALE_MARGIN = Fraction(1, 2**46)
"""Taken off β: the smooth bound is rounded up to 48 significant bits, which can make it
smoother by a factor up to ``1 + 2^-47`` — less than ``e^(2^-46)``."""

COUNTS = ("count", "count_distinct")


def smoothness(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The largest β (rounded down) with ``e^β − 1 ≤ ε / (2 ln(2/δ) + ε)``, less the rounding
    margin of :func:`smooth_bound`; ``0`` or less when ε is too small to plan.
    """
    ratio = epsilon / (2 * ln_up(2 / delta) + epsilon)
    return ln_down(1 + ratio) - SCALE_MARGIN


def smooth_bound(rows: tuple[int, int], frequencies: tuple[int, int], beta: Fraction) -> Fraction:
    """``max_{d ≥ 0} e^{−βd}·ES(d)`` rounded up, ``ES(d) = R_a·mf_b + R_b·mf_a + R_a·R_b·(2d + 1)``.

    ``e^{−βd}·(a + b·d)`` is log-concave in ``d``, so over the integers its maximum is at the
    floor or the ceiling of the real maximiser ``1/β − a/b``, or at 0 when that is negative.
    """
    (ra, rb), (fa, fb) = rows, frequencies
    a = ra * fb + rb * fa + ra * rb
    b = 2 * ra * rb
    peak = 1 / beta - Fraction(a, b)
    candidates = {0}
    if peak > 0:
        candidates |= {math.floor(peak), math.floor(peak) + 1}
    best = max(exp_up(-beta * d) * (a + b * d) for d in candidates)
    return round_up(best)


def elastic_joins(relation: Relation) -> list[Join]:
    """The joins of ``relation`` bounded by elastic sensitivity (a truncation without caps)."""
    match relation:
        case Join(left=left, right=right, truncation=t):
            inner = elastic_joins(left) + elastic_joins(right)
            return [*inner, relation] if t is not None and t.elastic else inner
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c) | SemiJoin(child=c):
            return elastic_joins(c)
    return []


def elastic_plan(plan: DPQuery, epsilon: Fraction, delta: Fraction | None) -> DPQuery:
    """``plan`` answered with elastic sensitivity, or a refusal naming what stands in the way.

    ε is split: :data:`BOUND_SHARE` for the noisy key frequencies, the rest, and δ, equally over
    the counts. Each count's ``sensitivity_units`` is its noise's floor, the smooth bound with
    every key value held once (``mf = 1``): explain shows it as the least the noise can be; the
    noise itself is calibrated at run time from the data's frequencies, never from this.
    """
    joins = elastic_joins(plan.query.relation)
    why = _unplannable(plan, joins, delta)
    if why is not None:
        clause, what, fix = why
        raise PrivacyRefusal(
            what,
            clause=clause,
            why="a join of two private tables on a key no catalog caps is bounded by elastic "
            "sensitivity (FLEX), which this planner offers for counts without GROUP BY, with a "
            "delta, on one such join",
            fix=fix,
        )
    assert delta is not None
    join = joins[0]
    t = join.truncation
    assert t is not None
    counts = [m for m in plan.measurements if m.sensitivity_units > 0]
    share = epsilon * (1 - BOUND_SHARE) / len(counts)
    delta_share = delta / len(counts)
    beta = smoothness(share, delta_share)
    if beta <= 0:
        raise PrivacyRefusal(
            f"epsilon = {float(epsilon):g} is too small for elastic sensitivity.",
            clause="JOIN",
            fix="use a larger epsilon, or ask the custodian to declare join_rows_per_key.",
        )
    rows = (
        t.left_rows or row_multiplicity(join.left),
        t.right_rows or row_multiplicity(join.right),
    )
    floor = smooth_bound(rows, (1, 1), beta)
    measurements = tuple(
        replace(m, epsilon=share, sensitivity_units=math.ceil(2 * floor)) if m in counts else m
        for m in plan.measurements
    )
    elastic = Elastic(
        left_rows=rows[0],
        right_rows=rows[1],
        bound_epsilon=epsilon * BOUND_SHARE,
        delta=delta_share,
        beta=beta,
    )
    return replace(plan, measurements=measurements, loss=ApproxDP(epsilon, delta), elastic=elastic)


def _outermost_join(relation: Relation) -> Join | None:
    """The last join of ``relation`` (the one whose rows the aggregate reads)."""
    match relation:
        case Join():
            return relation
        case Filter(child=c) | Project(child=c) | SemiJoin(child=c):
            return _outermost_join(c)
    return None


def _unplannable(
    plan: DPQuery, joins: list[Join], delta: Fraction | None
) -> tuple[str, str, str] | None:
    """The clause, message and fix of what elastic sensitivity cannot answer, or ``None``."""
    declare = "ask the custodian to declare join_rows_per_key on both join keys (truncation)"
    if len(joins) > 1:
        return (
            "JOIN",
            "only one join of two private tables without join_rows_per_key can be planned.",
            declare + ".",
        )
    if _outermost_join(plan.query.relation) is not joins[0]:
        # A join after it (a public lookup) would repeat each joined row; ES counts them once.
        return (
            "JOIN",
            "a join without join_rows_per_key must be the last join of the query.",
            "join the lookup tables to either private table before it, or " + declare + ".",
        )
    if plan.query.group_by:
        return (
            "GROUP BY",
            "GROUP BY over a join without join_rows_per_key is not planned.",
            ("ask for each group's count in its own query with WHERE, or " + declare + "."),
        )
    if any(m.kind not in COUNTS for m in plan.measurements) or (
        plan.statistics and any(s.kind == "quantile" for s in plan.statistics)
    ):
        return (
            "SELECT",
            "only counts are planned over a join without join_rows_per_key.",
            ("ask for COUNT(*), COUNT(col) or COUNT(DISTINCT col), or " + declare + "."),
        )
    if plan.min_people is not None or plan.selection is not None:
        return (
            "SELECT",
            "a minimum-frequency rule or private selection needs declared caps.",
            (declare + "."),
        )
    if not delta:
        what = "a join of two private tables without join_rows_per_key needs a delta."
        return "JOIN", what, "pass delta (for example 1e-6), or " + declare + "."
    return None


def interval_frequencies(
    released: tuple[int, int], rows: tuple[int, int], bound_epsilon: Fraction, failure: Fraction
) -> tuple[int, int]:
    """Upper bounds of the two key frequencies from their noisy release, each failing with
    probability at most ``failure / 2``.

    Each frequency was released with discrete Laplace noise of scale ``R / (ε_b/2)`` (one unit
    moves a side's largest key frequency by at most its ``R``); ``P(Z ≤ −k) ≤ e^{−k/t}``, so
    adding ``t·ln(2/failure)`` rounded up bounds it from above.
    """
    out = []
    for value, r in zip(released, rows, strict=True):
        scale = Fraction(r) / (bound_epsilon / 2)
        margin = math.ceil(scale * ln_up(2 / failure))
        out.append(max(value + margin, 0))
    return out[0], out[1]
