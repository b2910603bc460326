"""Accuracy first, through the production path: released errors meet the target at the stated
confidence over repeated draws.

Each draw is a fresh release (a fresh ledger, so nothing is answered from the record) of a grouped
query whose COUNT and SUM were given error targets; every group's noise is an independent draw.
The miss rate (|released − exact| > target) is compared, two-sided, with the exact miss
probability of the chosen noise (which the chosen ε keeps at most 1 − confidence), and one-sided
with 1 − confidence itself. False-alarm rate: each assertion rejects at p < 1e-6.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
from scipy import stats
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.accuracy import parse_targets
from dalenius.plan.noise import mechanism_for

ALPHA = 1e-6
DRAWS = 120  # × 16 groups × 2 aggregates = 3,840 released values
CONFIDENCE = 0.9
SQL = "SELECT education, COUNT(*) AS n, SUM(age) AS years FROM adult GROUP BY education"
TARGETS = {"n": 12, "years": 900}


def _miss_probability(scale: float, units: int) -> float:
    """Exact P(|Z| > h) for discrete Laplace noise: 2q^(h+1)/(1+q), q = e^(−1/scale)."""
    q = math.exp(-1 / scale)
    return 2 * q ** (units + 1) / (1 + q)


@pytest.mark.statistical
def test_released_errors_meet_the_targets_at_the_stated_confidence(
    adult_catalog_path: Path,
) -> None:
    catalog = load_catalog(adult_catalog_path)
    executor = DuckDBExecutor(catalog)
    misses = {"n": 0, "years": 0}
    total = 0
    exact = None
    plan = None
    for _ in range(DRAWS):
        ledger = open_ledger(None)
        ledger.set_budget("analyst", catalog.name, PureDP(100))
        session = Session(catalog, ledger=ledger, executor=executor)
        if exact is None:
            exact = {row[0]: row for row in exact_answer(session, SQL).rows}
            targets = parse_targets(TARGETS)
            plan = session.prepare(SQL, None, targets=targets, confidence=CONFIDENCE).plan
        result = session.query(SQL, target_error=TARGETS, confidence=CONFIDENCE)
        for row in result.rows:
            truth = exact[row[0]]
            misses["n"] += abs(row[1] - truth[1]) > TARGETS["n"]
            misses["years"] += abs(row[2] - truth[2]) > TARGETS["years"]
            total += 1
    assert plan is not None
    beta = 1 - CONFIDENCE
    for m, name in zip(plan.measurements, ("n", "years"), strict=True):
        mech = mechanism_for(m)
        assert mech is not None
        units = math.floor(TARGETS[name] / m.granularity)
        p_exact = _miss_probability(float(mech.scale), units)
        assert p_exact <= beta
        # Minimal ε: with 1% less ε the exact miss probability would exceed the allowed one.
        less = float(m.sensitivity_units / (m.epsilon * Fraction(99, 100)))
        assert _miss_probability(less, units) > beta
        assert stats.binomtest(misses[name], total, beta, alternative="greater").pvalue > ALPHA
        assert stats.binomtest(misses[name], total, p_exact).pvalue > ALPHA
