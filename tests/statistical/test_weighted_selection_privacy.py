"""Weighted partition selection on the production release path: a unit's own key, measured.

Units hold up to six ZIP codes; two units each hold a ZIP nobody else has (one holds only that
ZIP, the other holds it and two common ones). Over many releases (``add_noise``, OS randomness)
each rare ZIP must appear at the rate the exact discrete Gaussian tail gives for its unit's
weight — checked with a Clopper–Pearson interval at 1 − 10⁻⁶ — and that rate must be within the
δ the selection is calibrated to.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.support.exact import exact_data

from dalenius.core.catalog import load_catalog
from dalenius.engine.noise import add_noise, build_mechanisms
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

ALPHA = 1e-6
DELTA = Fraction(1, 50)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    folder = tmp_path_factory.mktemp("weighted")
    rng = np.random.Generator(np.random.PCG64(8))  # test data only, not noise
    common = pd.DataFrame(
        {"pid": np.arange(3, 2003).repeat(3), "zip": rng.choice(["a", "b", "c", "d"], 6000)}
    )
    rare = pd.DataFrame({"pid": [1, 1, 2, 2, 2], "zip": ["alone", "alone", "r3", "a", "b"]})
    pd.concat([common, rare]).to_csv(folder / "t.csv", index=False)
    (folder / "t.toml").write_text(
        '[tables.t]\nsource = { csv = "t.csv" }\n'
        'privacy_unit = { column = "pid", max_rows = 6, max_groups = 6 }\n'
        '[tables.t.columns]\npid = { type = "int" }\nzip = { type = "str" }\n'
    )
    catalog = load_catalog(folder / "t.toml")
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


def _upper_tail(sigma2: Fraction, m: int) -> float:
    s2 = float(sigma2)
    radius = int(12 * math.sqrt(s2)) + 2
    z = np.arange(-radius, radius + 1, dtype=np.float64)
    mass = np.exp(-(z * z) / (2 * s2))
    return float(mass[max(m + radius, 0) :].sum() / mass.sum())


@pytest.mark.statistical
def test_a_key_held_by_one_unit_appears_at_its_exact_rate_within_delta(session: Session) -> None:
    plan, exact = exact_data(session, "SELECT zip, COUNT(*) FROM t GROUP BY zip", 1, DELTA)
    assert plan.selection is not None
    assert plan.measurement(plan.selection.measurement).kind == "degrees"
    cal = build_mechanisms(plan).weighted
    assert cal is not None
    runs = 4000
    seen = {"alone": 0, "r3": 0}
    for _ in range(runs):
        groups = add_noise(plan, exact).groups
        for key in seen:
            seen[key] += (key,) in groups
    for key, degree in [("alone", 1), ("r3", 3)]:
        exact_rate = _upper_tail(cal.sigma2, cal.threshold - cal.weights[degree - 1])
        assert degree * exact_rate <= float(cal.tail) * (1 + 1e-9)  # float vs certified
        assert cal.tail <= DELTA
        interval = stats.binomtest(seen[key], runs).proportion_ci(confidence_level=1 - ALPHA)
        assert interval.low <= exact_rate <= interval.high, (key, seen[key], exact_rate)
