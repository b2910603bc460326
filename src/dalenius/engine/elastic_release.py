"""Releasing counts over a join bounded by elastic sensitivity (:mod:`dalenius.plan.elastic`).

The one step of the SQL path whose noise is calibrated after the data is read: the engine gives
the exact counts and each side's largest key frequency ``mf`` (after the unit caps); each count
gets discrete Laplace noise of scale ``2·S/ε_m``, ``S`` the certified smooth bound at those
frequencies; then the two frequencies are released with discrete Laplace noise of their own
(``ε_b/2`` each, one unit moving a side's ``mf`` by at most its ``R``). The interval of each count
is computed at publication from those *released* frequencies only — the exact ``S`` is never
published. Its loss is audited from the plan's parameters (:func:`elastic_loss`), which the
mechanisms built from the data must match.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from dalenius.core.loss import ApproxDP
from dalenius.engine.noise import Exact, Noisy
from dalenius.engine.postprocess import Answer, post_process
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.elastic import interval_frequencies, smooth_bound, smoothness
from dalenius.plan.nodes import DPQuery, Elastic
from dalenius.plan.protocol import LossDefect

FREQUENCIES = "__frequencies"
"""The released record's entry holding the two noisy key frequencies."""


def elastic_loss(plan: DPQuery) -> ApproxDP:
    """The plan's loss composed from its parts: each count ``(ε_m, δ_m)`` when its β meets the
    smoothness condition at that share, plus the frequencies' pure ``ε_b``.

    Raises:
        LossDefect: a count's β is larger than its (ε, δ) allows.
    """
    elastic = _elastic(plan)
    epsilon, delta = elastic.bound_epsilon, Fraction(0)
    for m in plan.measurements:
        if m.sensitivity_units == 0:
            continue
        if elastic.beta > smoothness(m.epsilon, elastic.delta):
            raise LossDefect(f"the count {m.name}'s smoothness exceeds what its (ε, δ) allows")
        epsilon += m.epsilon
        delta += elastic.delta
    return ApproxDP(epsilon, delta)


def release(plan: DPQuery, exact: Exact, frequencies: tuple[int, int]) -> Noisy:
    """Noisy counts at the smooth bound of ``frequencies``, and the frequencies released."""
    elastic = _elastic(plan)
    rows = (elastic.left_rows, elastic.right_rows)
    bound = smooth_bound(rows, frequencies, elastic.beta)
    values: dict[str, list[int]] = {}
    for m in plan.measurements:
        exact_m = exact.scalars[m.name]
        if m.sensitivity_units == 0:
            values[m.name] = [int(v) for v in exact_m]
            continue
        mechanism = IntegerLaplace(2 * bound, m.epsilon)
        values[m.name] = [int(v) for v in mechanism.release(exact_m)]
    values[FREQUENCIES] = [
        int(IntegerLaplace(r, elastic.bound_epsilon / 2).release([f])[0])
        for f, r in zip(frequencies, rows, strict=True)
    ]
    return Noisy(groups=list(exact.groups), values=values)


def publish(plan: DPQuery, noisy: Noisy, confidence: float) -> Answer:
    """The answer, each count's interval from the released frequencies.

    With probability at least ``1 − (1 − confidence)/2`` both released frequencies, raised by
    their margin, bound the true ones, so the smooth bound computed from them bounds the noise's
    scale; the interval holds the noise with probability ``1 − (1 − confidence)/2`` at that
    scale; together at least ``confidence``.
    """
    elastic = _elastic(plan)
    rows = (elastic.left_rows, elastic.right_rows)
    failure = (1 - Fraction(confidence)) / 2
    released = noisy.values[FREQUENCIES]
    upper = interval_frequencies((released[0], released[1]), rows, elastic.bound_epsilon, failure)
    bound = smooth_bound(rows, upper, elastic.beta)
    widened = tuple(
        replace(m, sensitivity_units=math.ceil(2 * bound)) if m.sensitivity_units else m
        for m in plan.measurements
    )
    return post_process(replace(plan, measurements=widened), noisy, 1 - float(failure))


def _elastic(plan: DPQuery) -> Elastic:
    if plan.elastic is None:
        raise AssertionError("not a plan bounded by elastic sensitivity")
    return plan.elastic
