"""A continual release's noise against its exact distribution, its exact privacy loss on a tiny
tree, and the coverage and variance of the intervals it publishes.

False-alarm rate: each assertion rejects at p < 1e-7 (``stats.ALPHA``). Noise comes from the OS
generator through the product's own measure step; data are fixed.
"""

from __future__ import annotations

import itertools
import math
from datetime import date
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA, chi_square_pvalue, discrete_laplace_cdf, quantile_bins

from dalenius.core.catalog import Catalog
from dalenius.releases.continual import ContinualPlan, SeriesRequest, Step, plan_continual

pytestmark = pytest.mark.statistical

START = date(2024, 1, 1)


def plan_for(horizon: int, closed: int, max_rows: int = 2, epsilon: int = 1) -> ContinualPlan:
    catalog = Catalog.from_dict(
        {
            "tables": {
                "t": {
                    "source": pd.DataFrame({"pid": [0], "day": [START]}),
                    "privacy_unit": {"column": "pid", "max_rows": max_rows},
                    "columns": {"pid": "int", "day": "date"},
                }
            }
        }
    )
    request = SeriesRequest("t", "day", "day", START.isoformat(), horizon)
    return plan_continual(
        catalog,
        request,
        series="s",
        epsilon=Fraction(epsilon),
        step=Step(0, True, 0, closed),
    )


def engine_rows(per_day: list[int]) -> list[tuple[int, int]]:
    """The engine's ``(day, kept rows)`` rows for these per-day counts."""
    first = (START - date(1970, 1, 1)).days
    return [(first + d, n) for d, n in enumerate(per_day)]


def pmf_of_combination(scale: float, weights: list[int], radius: int) -> dict[int, float]:
    """The exact pmf of ``Σ w_i·Z_i`` for independent discrete Laplace ``Z_i`` (truncated at
    ``radius`` per draw; the mass left out is below 1e-12)."""
    q = math.exp(-1 / scale)
    support = np.arange(-radius, radius + 1)
    single = (1 - q) / (1 + q) * q ** np.abs(support)
    out: dict[int, float] = {0: 1.0}
    for w in weights:
        nxt: dict[int, float] = {}
        for value, p in out.items():
            for z, pz in zip(support, single, strict=True):
                if pz * p < 1e-18:
                    continue
                key = value + w * int(z)
                nxt[key] = nxt.get(key, 0.0) + p * pz
        out = nxt
    return out


def pvalue_against(draws: np.ndarray, pmf: dict[int, float]) -> float:
    keys = np.array(sorted(pmf))
    cdf_values = np.cumsum([pmf[k] for k in keys])

    def cdf(k: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(keys, np.floor(k), side="right") - 1
        return np.where(idx < 0, 0.0, cdf_values[np.maximum(idx, 0)])

    cuts, probs = quantile_bins(cdf, int(keys[0]), int(keys[-1]), 40, draws.size)
    return chi_square_pvalue(draws, cuts, probs)


def test_the_tiny_trees_nodes_and_published_estimates_have_their_exact_distribution() -> None:
    """T = 2 (nodes: day 0, day 1, both days), R = 2, ε = 1: each node's noise is discrete Laplace
    of scale R·L/ε = 4, and the published estimates 3·x0 − 3·a0 = 2Z0 − Z1 + Z2 and the running
    total 3·(x0 + x1) − 3·(a0 + a1) = Z0 + Z1 + 2Z2 match their exact pmfs.
    """
    plan = plan_for(2, 2)
    assert plan.counts.scale == 4 and plan.tree.levels == 2
    per_day = [5, 9]
    exact = plan.tree.node_values(np.array(per_day))
    draws = 20_000
    nodes = np.array([plan.measure(engine_rows(per_day), key=0).counts for _ in range(draws)])
    noise = nodes - exact
    cdf = discrete_laplace_cdf(4.0)
    for column in noise.T:
        cuts, probs = quantile_bins(cdf, -200, 200, 30, draws)
        assert chi_square_pvalue(column, cuts, probs) > ALPHA
    a = plan.tree.combination(2)
    published = plan.publish(plan.measure(engine_rows(per_day), key=0), 0.9)
    one = plan.measure(engine_rows(per_day), key=0)
    again = plan.publish(one, 0.9).counts
    np.testing.assert_allclose(again.per_period, a @ one.counts)
    assert published.counts.total.size == 2
    period = np.rint(3 * (noise @ a[0])).astype(np.int64)
    total = np.rint(3 * (noise @ (a[0] + a[1]))).astype(np.int64)
    assert pvalue_against(period, pmf_of_combination(4.0, [2, -1, 1], 120)) > ALPHA
    assert pvalue_against(total, pmf_of_combination(4.0, [1, 1, 2], 120)) > ALPHA


def test_neighbours_output_distributions_differ_by_at_most_e_to_the_epsilon_exactly() -> None:
    """On the tiny tree, a unit with R = 2 rows on day 0 and day 1 moves the node vector by
    R·L = 4 in L1; the exact log-ratio of the two output pmfs, over every output in a box around
    them, is at most ε = 1 and reaches it.
    """
    plan = plan_for(2, 2)
    with_unit = plan.tree.node_values(np.array([5, 9]))
    without = plan.tree.node_values(np.array([4, 8]))
    scale = plan.counts.scale
    worst = Fraction(-(10**9))
    for output in itertools.product(range(-2, 15), range(2, 19), range(6, 23)):
        y = np.array(output)
        # log P(y | D) − log P(y | D') = (Σ|y − a'| − Σ|y − a|) / scale, exactly.
        gap = int(np.abs(y - without).sum() - np.abs(y - with_unit).sum())
        worst = max(worst, Fraction(gap) / scale)
    assert worst == 1


@pytest.mark.parametrize("closed", [11, 16])
def test_the_published_intervals_cover_at_their_level_and_the_variances_are_exact(
    closed: int,
) -> None:
    """T = 16 days, published after 11 (a forest of measured subtrees) and 16 days (the whole
    tree): every period's estimate and running total lies in its 90% interval at least 90% of
    the time, and its errors' variance is the exact one reported.
    """
    plan = plan_for(16, closed, max_rows=1, epsilon=2)
    rng = np.random.default_rng(4)  # data only
    per_day = rng.integers(0, 40, size=closed).tolist()
    truth = np.array(per_day, dtype=np.float64)
    draws = 3000
    inside = np.zeros(2 * closed, dtype=np.int64)
    errors = np.zeros((draws, 2 * closed))
    reported = None
    for i in range(draws):
        released = plan.publish(plan.measure(engine_rows(per_day), key=0), 0.9).counts
        est = np.concatenate([released.per_period, released.total])
        low = np.concatenate([released.per_period_low, released.total_low])
        high = np.concatenate([released.per_period_high, released.total_high])
        exact = np.concatenate([truth, np.cumsum(truth)])
        inside += (low <= exact) & (exact <= high)
        errors[i] = est - exact
        reported = np.concatenate([released.per_period_se, released.total_se]) ** 2
    assert reported is not None
    for hits in inside:
        assert stats.binom.cdf(int(hits), draws, 0.9) > ALPHA  # not below 90%
    ratio = errors.var(axis=0) / reported
    assert np.all(np.abs(ratio - 1) < 0.25), ratio
    assert abs(float(ratio.mean()) - 1) < 0.05
