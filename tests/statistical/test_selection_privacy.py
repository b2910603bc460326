"""Private group keys and quantiles, measured over many runs of the production release path.

False-alarm rate: each test rejects only at p < 1e-6 (one-sided binomial), so a correct
implementation fails one run in a million per test.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.support.exact import exact_data

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.engine.noise import add_noise, selection_utilities
from dalenius.engine.postprocess import rank_error
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

ALPHA = 1e-6


@pytest.fixture(scope="module")
def shops(tmp_path_factory: pytest.TempPathFactory) -> Session:
    folder = tmp_path_factory.mktemp("shops")
    rng = np.random.Generator(np.random.PCG64(5))  # test data only, not noise
    common = pd.DataFrame({"pid": np.arange(2, 2002), "shop": rng.choice(["a", "b", "c"], 2000)})
    rare = pd.DataFrame(
        {"pid": [1, 1, 1], "shop": ["rare", "rare", "rare"]}
    )  # one unit, three rows
    pd.concat([common, rare]).to_csv(folder / "t.csv", index=False)
    (folder / "t.toml").write_text(
        '[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = { column = "pid", max_rows = 3, max_groups = 1 }\n'
        '[tables.t.columns]\npid = { type = "int" }\nshop = { type = "str" }\n'
    )
    catalog = load_catalog(folder / "t.toml")
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


@pytest.mark.statistical
def test_a_key_held_by_one_unit_appears_with_probability_at_most_delta(shops: Session) -> None:
    delta = Fraction(1, 50)
    plan, exact = exact_data(shops, "SELECT shop, COUNT(*) FROM t GROUP BY shop", 1, delta)
    assert ("rare",) in exact.groups
    runs = 3000
    seen = sum(("rare",) in add_noise(plan, exact).groups for _ in range(runs))
    # One-sided test of "rate <= delta"; also report the 99.9999% upper confidence bound.
    assert stats.binomtest(seen, runs, float(delta), alternative="greater").pvalue > ALPHA
    upper = stats.binomtest(seen, runs).proportion_ci(confidence_level=1 - ALPHA).high
    assert upper < 3 * float(delta), (seen, upper)
    # The common keys, held by hundreds of units, are released essentially always.
    assert all(
        all(k in add_noise(plan, exact).groups for k in [("a",), ("b",), ("c",)]) for _ in range(20)
    )


@pytest.mark.statistical
def test_private_keys_through_the_whole_query_path(shops: Session) -> None:
    shops.ledger.set_dataset(shops.dataset, definition="approx")
    shops.ledger.set_budget("analyst", shops.dataset, ApproxDP(Fraction(100), Fraction(1, 100)))
    result = shops.query(
        "SELECT shop, COUNT(*) FROM t GROUP BY shop", epsilon=1, delta=Fraction(1, 10**6)
    )
    assert set(result.column("shop")) == {"a", "b", "c"}
    assert result.loss == ApproxDP(Fraction(1), Fraction(1, 10**6))


@pytest.mark.statistical
def test_dp_median_of_age_is_within_its_documented_error(adult_catalog_path: Path) -> None:
    catalog = load_catalog(adult_catalog_path)
    with Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog)) as session:
        plan, exact = exact_data(session, "SELECT MEDIAN(age) FROM adult", 1)
    stat = plan.statistics[0]
    m = plan.measurement(stat.inputs[0])
    counts = [int(c) for c in exact.histograms[m.name][0]]
    r = rank_error(stat, m, 0.95)
    utilities = selection_utilities(stat, m, counts)
    runs = 400
    hits = 0
    for _ in range(runs):
        chosen = add_noise(plan, exact).bins["s0"][0]
        hits += utilities[chosen] >= -r  # the bin holds a rank within r of n/2
    assert stats.binomtest(hits, runs, 0.95, alternative="less").pvalue > ALPHA, (hits, runs)
    # In years: the documented error spans the ages whose ranks are within r of the median.
    ages = np.repeat(np.arange(17, 81), counts)
    n = len(ages)
    assert (
        ages[max(0, math.floor(n / 2 - r))] >= 36 and ages[min(n - 1, math.ceil(n / 2 + r))] <= 38
    )
    assert PureDP(Fraction(1)) == plan.loss
