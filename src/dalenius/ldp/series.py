"""A local-DP collection's estimates per period — day, week or month — and as running totals.

A deployment that collects every day publishes every day: each period's frequencies (or mean)
from the reports received in it, and the running totals — what the collection's estimate was at
the end of each period, from every report received since the first day. Nothing here draws
noise: the reports were randomised on the devices, so every number is post-processing of them,
and a device's loss over the whole series is what its reports cost, which the collection caps
per device over its lifetime (``client_cap``; ``docs/releases/continual.md``, *Series over a
local-DP collection*).

**Devices, not reports.** Each period's estimate is the collection's own estimator
(:meth:`~dalenius.ldp.collection.CollectionSpec.estimate`) applied to the *independent*
observations among that period's reports (:func:`~dalenius.ldp.collection.independent`): a
device that repeats one memoised response five times in a day is one observation that day, so
its repeats cannot narrow the day's interval. A running total applies the same rule to every
report up to the period's end: a memoised response repeated every day is one observation in it,
not one per day — which is why a running total is the estimator on the reports so far, never a
sum of the periods' estimates (that sum would count a repeated response once per period, and
its interval would pretend those repeats were independent).

**Periods.** A report belongs to the period of the (UTC) day the gateway received it; a period is
published once its last day is over, as a continual release's are
(:mod:`dalenius.core.periods`). Reports before the first day or after the last period are in no
period and in no running total.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from dalenius.core.errors import QueryError
from dalenius.core.periods import calendar, closed_by, period_of, publication_day
from dalenius.ldp.collection import CollectionSpec, independent

EARLY = (
    "a period is published once its last day is over: published early, its estimate would "
    "come from part of its reports and read as the whole period's."
)


@dataclass(frozen=True)
class Arrival:
    """One stored report: its client, memo tag (a fresh report's own id when not memoised), the
    report as canonical JSON text (so exact repeats compare equal) and the UTC day it arrived.
    """

    client: str
    memo: str
    report: str
    day: date


def check_series(spec: CollectionSpec) -> None:
    """Refuse a collection whose estimates cannot form a series (decided from its protocol)."""
    if spec.protocol == "sfp":
        raise QueryError(
            "a series needs one list of values for every period; sequence-fragment puzzles "
            "discover a different list of words from each period's reports.",
            clause="collection",
            fix="read the words discovered from every report with GET …/estimates, or collect "
            "with count-mean sketches over a candidate list (cms, hcms) for a series.",
        )


def collection_series(
    spec: CollectionSpec,
    arrivals: Iterable[Arrival],
    *,
    period: str,
    start: str,
    horizon: int,
    as_of: str | date | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Every closed period's estimate and running total with their intervals (JSON-ready).

    ``periods[i]["estimate"]`` and ``["running"]`` are exactly what the collection's estimator
    gives on that period's independent observations and on those of every report up to the
    period's end; ``reports`` counts the reports received in the period (each in exactly one).
    """
    check_series(spec)
    bounds = calendar(period, start, horizon)
    closed = closed_by(bounds, publication_day(as_of, EARLY))
    if not 0 < confidence < 1:
        raise QueryError(
            f"confidence {confidence!r} is not between 0 and 1.",
            clause="confidence",
            fix="pass e.g. confidence=0.95.",
        )
    grouped: list[list[Arrival]] = [[] for _ in range(closed)]
    for arrival in arrivals:
        index = period_of(bounds, arrival.day)
        if index is not None and index < closed:
            grouped[index].append(arrival)
    decoded: dict[str, Any] = {}
    points = []
    so_far: list[Arrival] = []
    for index, reports in enumerate(grouped):
        so_far.extend(reports)
        estimate = _estimate(spec, reports, confidence, decoded)
        running = _estimate(spec, so_far, confidence, decoded)
        points.append(
            {
                "period": bounds[index].isoformat(),
                "reports": len(reports),
                "estimate": estimate,
                "running": {**running, "reports_received": len(so_far)},
            }
        )
    cap = spec.client_cap
    return {
        "kind": "mean" if spec.protocol in ("1bitmean", "duchi", "piecewise") else "frequency",
        "protocol": spec.protocol,
        "period": period,
        "start": bounds[0].isoformat(),
        "horizon": horizon,
        "closed": closed,
        "confidence": confidence,
        "observations": spec.observations,
        "values": list(spec.labels) or None,
        "epsilon_per_report": float(spec.per_report),
        "lifetime_epsilon": None if cap is None else float(cap),
        "lifetime_epsilon_exact": None if cap is None else str(cap),
        "periods": points,
    }


def _estimate(
    spec: CollectionSpec, reports: Sequence[Arrival], confidence: float, decoded: dict[str, Any]
) -> dict[str, Any]:
    """The collection's estimator on the independent observations among ``reports``."""
    kept = independent(spec.observations, [(a.client, a.memo, a.report) for a in reports])
    observed = []
    for text in kept:
        if text not in decoded:
            decoded[text] = json.loads(text)
        observed.append(decoded[text])
    return spec.estimate(observed, confidence)
