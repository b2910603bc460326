"""A collection's series per period: each period is the collection's own estimator on that
period's reports, no report is counted twice, memoised repeats do not narrow an interval, and
the intervals cover at their stated level (seeded simulations: the reports' randomness is drawn
from seeded generators here, in tests only; devices use the OS's).
"""

from __future__ import annotations

import json
from datetime import date, timedelta

import numpy as np
import pytest

from dalenius.core.errors import QueryError
from dalenius.ldp._draws import SimulationDraws
from dalenius.ldp.collection import CollectionSpec, independent
from dalenius.ldp.microsoft import OneBitMean, OneBitMeanClient
from dalenius.ldp.series import Arrival, collection_series

START = date(2024, 3, 1)
DOMAIN = ["red", "green", "blue", "black"]


def _grr_arrivals(
    spec: CollectionSpec, days: int, seed: int
) -> tuple[list[Arrival], list[np.ndarray]]:
    """Fresh grr reports over ``days`` days (a varying number of devices a day, some reporting
    twice), one before the first day and one after the last; and each day's true values."""
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = SimulationDraws(seed + 1)
    arrivals, truths = [], []
    for day in range(-1, days + 1):
        devices = int(rng.integers(150, 260))
        values = rng.choice(4, size=devices, p=[0.4, 0.3, 0.2, 0.1])
        twice = values[: devices // 10]  # a tenth of the devices send a second, fresh report
        values = np.concatenate([values, twice])
        reports = spec.oracle._perturb(values.astype(np.int64), draws)
        clients = [*range(devices), *range(devices // 10)]
        for i, (client, report) in enumerate(zip(clients, reports, strict=True)):
            when = START + timedelta(days=day)
            arrivals.append(Arrival(f"d{client}", f"\x1f{day}.{i}", json.dumps(int(report)), when))
        if 0 <= day < days:
            truths.append(np.bincount(values, minlength=4))
    return arrivals, truths


def _grr() -> CollectionSpec:
    return CollectionSpec({"protocol": "grr", "epsilon": 2, "domain": DOMAIN, "client_cap": 40})


def test_each_period_is_the_collections_estimator_on_that_periods_reports_counted_once() -> None:
    spec = _grr()
    arrivals, _ = _grr_arrivals(spec, days=9, seed=20260301)
    for period, horizon in (("day", 9), ("week", 2)):
        out = collection_series(
            spec, arrivals, period=period, start="2024-03-01", horizon=horizon, as_of="2024-03-10"
        )
        length = 1 if period == "day" else 7
        closed = 9 // length
        assert out["closed"] == closed and len(out["periods"]) == closed
        assert out["lifetime_epsilon"] == 40 and out["lifetime_epsilon_exact"] == "40"
        assert out["epsilon_per_report"] == float(spec.per_report) <= 2
        in_range: list[Arrival] = []
        for i, point in enumerate(out["periods"]):
            first = START + timedelta(days=i * length)
            mine = [a for a in arrivals if first <= a.day < first + timedelta(days=length)]
            in_range += mine
            assert point["period"] == first.isoformat() and point["reports"] == len(mine)
            assert point["estimate"] == spec.estimate([json.loads(a.report) for a in mine], 0.95)
            running = spec.estimate([json.loads(a.report) for a in in_range], 0.95)
            assert point["running"] == {**running, "reports_received": len(in_range)}
        # Every report in a closed period is in exactly one period; none before the first day,
        # none of a period still open (the day after the ninth, the week not over) is in any.
        assert sum(p["reports"] for p in out["periods"]) == len(in_range)
        assert len({id(a) for a in in_range}) == len(in_range)
        assert out["periods"][-1]["running"]["reports"] == len(in_range) < len(arrivals)


def _memoised(repeats: int, seed: int, days: int = 4) -> tuple[list[Arrival], np.ndarray]:
    """1BitMean devices with fixed counters, each reporting its memoised response ``repeats``
    times on each day it reports (about 70% of the days)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    mechanism = OneBitMean(epsilon=1, bound=10, points=10)  # integers are grid points: no α
    values = rng.integers(0, 11, 120)
    present = rng.random((days, values.size)) < 0.7
    arrivals = []
    for d, value in enumerate(values):
        client = OneBitMeanClient(mechanism, secret=rng.bytes(32))
        point, bit = client.report(float(value))
        for day in range(days):
            if present[day, d]:
                when = START + timedelta(days=day)
                arrivals += [Arrival(f"d{d}", f"p{point}", json.dumps(bit), when)] * repeats
    return arrivals, values


def _mean_spec() -> CollectionSpec:
    return CollectionSpec({"protocol": "1bitmean", "epsilon": 1, "bound": 10, "points": 10})


def test_memoised_repeats_within_a_period_do_not_narrow_its_interval() -> None:
    spec = _mean_spec()
    once, _ = _memoised(1, seed=7)
    five, _ = _memoised(5, seed=7)  # the same devices, secrets and days: each report five times
    kwargs = {"period": "day", "start": "2024-03-01", "horizon": 4, "as_of": "2024-03-05"}
    a, b = collection_series(spec, once, **kwargs), collection_series(spec, five, **kwargs)
    for p, q in zip(a["periods"], b["periods"], strict=True):
        assert q["reports"] == 5 * p["reports"]
        assert p["estimate"] == q["estimate"] and p["running"]["mean"] == q["running"]["mean"]
        assert (p["running"]["lower"], p["running"]["upper"]) == (
            q["running"]["lower"],
            q["running"]["upper"],
        )
        # A running total counts a device's response once, however many days repeat it.
        assert p["running"]["reports"] <= 120
    # Counted as fresh reports, the repeats would narrow the day's interval (what is avoided).
    day = [json.loads(x.report) for x in five if x.day == START]
    naive = spec.estimate(day, 0.95)
    kept = b["periods"][0]["estimate"]
    assert naive["upper"] - naive["lower"] < 0.5 * (kept["upper"] - kept["lower"])
    assert independent("response", [(x.client, x.memo, x.report) for x in five if x.day == START])


def _floor(level: float, units: int) -> float:
    """The least share of covering intervals to accept: ``level`` less 3.72 standard deviations
    of a mean over ``units`` independent units, each the share of its own intervals that cover
    (intervals within a unit may be dependent, so a unit's share has variance at most
    ``level·(1 − level)``): below it with probability under 1e-4 when the level is met.
    """
    return level - 3.72 * (level * (1 - level) / units) ** 0.5


def test_frequency_intervals_cover_at_their_stated_level() -> None:
    """grr at 90%: each day's four intervals (fresh reports each day, so days are independent
    units) and the running totals' (one unit per simulation: they share the days' reports)."""
    spec = _grr()
    days, trials = 4, 100
    per_day: list[float] = []
    running_share: list[float] = []
    for trial in range(trials):
        arrivals, truths = _grr_arrivals(spec, days=days, seed=1000 + trial)
        out = collection_series(
            spec, arrivals, period="day", start="2024-03-01", horizon=days, confidence=0.9
        )
        running, hits = np.zeros(4), 0
        for point, truth in zip(out["periods"], truths, strict=True):
            running += truth
            pairs = zip(point["estimate"]["rows"], truth, strict=True)
            per_day.append(np.mean([r["lower"] <= v <= r["upper"] for r, v in pairs]))
            pairs = zip(point["running"]["rows"], running, strict=True)
            hits += sum(r["lower"] <= v <= r["upper"] for r, v in pairs)
        running_share.append(hits / (4 * days))
    assert np.mean(per_day) >= _floor(0.9, days * trials), np.mean(per_day)
    assert np.mean(running_share) >= _floor(0.9, trials), np.mean(running_share)


def test_memoised_mean_intervals_cover_at_their_stated_level() -> None:
    """1BitMean at 95%, devices repeating their memoised response 1 to 3 times on the days they
    report: each day's interval covers the mean of that day's devices, each running total's the
    mean of every device seen so far (one unit per simulation: the days share devices)."""
    spec = _mean_spec()
    days, trials = 3, 300
    shares = []
    for trial in range(trials):
        arrivals, values = _memoised(int(1 + trial % 3), seed=5000 + trial, days=days)
        out = collection_series(spec, arrivals, period="day", start="2024-03-01", horizon=days)
        seen: set[str] = set()
        hits = []
        for day, point in enumerate(out["periods"]):
            today = {a.client for a in arrivals if a.day == START + timedelta(days=day)}
            seen |= today
            for view, who in (("estimate", today), ("running", seen)):
                truth = float(np.mean([values[int(c[1:])] for c in who]))
                hits.append(point[view]["lower"] <= truth <= point[view]["upper"])
        shares.append(np.mean(hits))
    assert np.mean(shares) >= _floor(0.95, trials), np.mean(shares)


def test_a_series_is_refused_before_any_report_is_read() -> None:
    spec = _grr()

    def never():  # a refusal must not depend on the reports: none is read
        raise AssertionError("a report was read")
        yield

    cases = [
        ({"period": "month", "start": "2024-03-05", "horizon": 2}, "start"),
        ({"period": "fortnight", "start": "2024-03-01", "horizon": 2}, "period"),
        ({"period": "day", "start": "2024-03-01", "horizon": 5000}, "horizon"),
        ({"period": "day", "start": "2024-03-01", "horizon": 2, "as_of": "2999-01-01"}, "as_of"),
        ({"period": "day", "start": "2024-03-01", "horizon": 2, "confidence": 1.5}, "confidence"),
    ]
    for kwargs, clause in cases:
        with pytest.raises(QueryError) as caught:
            collection_series(spec, never(), **kwargs)  # type: ignore[arg-type]
        assert caught.value.clause == clause
    sfp = CollectionSpec({"protocol": "sfp", "epsilon": 8, "alphabet": "ab", "length": 2})
    with pytest.raises(QueryError, match="different list of words"):
        collection_series(sfp, never(), period="day", start="2024-03-01", horizon=2)
