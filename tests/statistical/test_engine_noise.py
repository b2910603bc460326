"""Released answers, through the whole production path, follow the calibrated noise.

False-alarm rate: each test rejects at p < 1e-6 (chi-square / binomial), so a correct
implementation fails one run in a million per test.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

ALPHA = 1e-6
DRAWS = 1200


@pytest.mark.statistical
def test_released_counts_follow_discrete_laplace_and_intervals_cover(
    adult_catalog_path: Path,
) -> None:
    catalog = load_catalog(adult_catalog_path)
    executor = DuckDBExecutor(catalog)
    sql = "SELECT COUNT(*) FROM adult WHERE age >= 40"
    epsilon = Fraction(1, 2)
    errors, covered = [], 0
    exact = None
    for _ in range(DRAWS):
        ledger = open_ledger(None)  # a fresh ledger each time: no cached answer, a fresh draw
        ledger.set_budget("analyst", catalog.name, PureDP(Fraction(1)))
        session = Session(catalog, ledger=ledger, executor=executor)
        if exact is None:
            exact = exact_answer(session, sql).rows[0][0]
        result = session.query(sql, epsilon=epsilon)
        value = result.rows[0][0]
        low, high = result.lows[0][0], result.highs[0][0]
        errors.append(value - exact)
        covered += low <= exact <= high
    errors_arr = np.array(errors)
    # Discrete Laplace with scale t = Δ/ε = 2: P(k) = (1-q)/(1+q) q^|k|, q = e^(-1/2).
    q = math.exp(-1 / 2)
    support = np.arange(-8, 9)
    pmf = (1 - q) / (1 + q) * q ** np.abs(support)
    observed = np.array(
        [(errors_arr == k).sum() for k in support] + [(np.abs(errors_arr) > 8).sum()]
    )
    expected = np.append(pmf, 1 - pmf.sum()) * DRAWS
    assert stats.chisquare(observed, expected).pvalue > ALPHA
    # Coverage of the 95% intervals: at least 95% (the discrete bound is conservative).
    assert stats.binomtest(covered, DRAWS, 0.95, alternative="less").pvalue > ALPHA
