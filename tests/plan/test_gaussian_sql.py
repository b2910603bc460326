"""Gaussian noise for SQL aggregates on zCDP datasets: chosen where its errors are smaller, at the
same charge ρ = ε²/2, audited bottom-up, its noise the exact discrete Gaussian it claims."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.support.seeded import SeededRandom

import dalenius
from dalenius.core.loss import ZCDP, PureDP
from dalenius.engine.noise import audited_loss, build_mechanisms
from dalenius.engine.policy import Policy, PolicyRefusal
from dalenius.mechanisms import IntegerGaussian, IntegerLaplace
from dalenius.plan.noise import error_units, mechanism_for
from dalenius.plan.protocol import within

QUERY = "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY sex"
WIDE = "SELECT sex, COUNT(*) AS n, SUM(capital_loss) AS s FROM adult GROUP BY sex"


@pytest.fixture
def zcdp(adult_catalog_path: Path) -> dalenius.Session:
    return dalenius.connect(str(adult_catalog_path), budget=ZCDP(Fraction(2)), ledger="memory:")


@pytest.fixture
def pure(adult_catalog_path: Path) -> dalenius.Session:
    return dalenius.connect(str(adult_catalog_path), budget=PureDP(Fraction(2)), ledger="memory:")


def test_a_zcdp_dataset_gets_gaussian_noise_at_the_same_charge(zcdp: dalenius.Session) -> None:
    plan = zcdp.plan(QUERY, 1)
    assert plan.loss == ZCDP(Fraction(1, 2))
    assert all(m.rho == Fraction(1, 4) and m.epsilon == 0 for m in plan.measurements)
    assert all(isinstance(mechanism_for(m), IntegerGaussian) for m in plan.measurements)
    # The map recomputed from the mechanisms equals the declared loss, exactly.
    audited = audited_loss(plan, build_mechanisms(plan))
    assert audited == ZCDP(Fraction(1, 2)) and within(audited, plan.loss)
    before = zcdp.remaining()
    result = zcdp.query(QUERY, epsilon=1)
    assert zcdp.remaining() == ZCDP(before.rho - Fraction(1, 2))
    for row, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        for value, low, high in zip(row[1:], lows[1:], highs[1:], strict=True):
            assert low <= value <= high


def test_its_error_bars_are_smaller_than_laplace_at_the_same_charge(
    zcdp: dalenius.Session, pure: dalenius.Session
) -> None:
    gaussian, laplace = zcdp.plan(QUERY, 1), pure.plan(QUERY, 1)
    assert isinstance(mechanism_for(laplace.measurements[0]), IntegerLaplace)
    for g, lap in zip(gaussian.measurements, laplace.measurements, strict=True):
        assert error_units(g, 0.95) < error_units(lap, 0.95)
    doc = zcdp.explain(QUERY, epsilon=1).to_dict()
    assert doc["loss"]["rho"] == 0.5
    assert {m["mechanism"].split(" (")[0] for m in doc["measurements"]} == {"discrete Gaussian"}
    assert doc["measurements"][0]["rho_exact"] == "1/4"


def test_a_measurement_beyond_the_samplers_range_keeps_laplace_and_the_total_is_exact(
    zcdp: dalenius.Session,
) -> None:
    plan = zcdp.plan(WIDE, 1)
    count, total = plan.measurements
    assert isinstance(mechanism_for(total), IntegerLaplace) and total.epsilon == Fraction(1, 2)
    assert isinstance(mechanism_for(count), IntegerGaussian)
    # (ε² − ε_L²)/2 = (1 − 1/4)/2 for the one Gaussian measurement.
    assert count.rho == Fraction(3, 8)
    assert audited_loss(plan, build_mechanisms(plan)) == ZCDP(Fraction(1, 2))


def test_laplace_plans_keep_their_fingerprints(pure: dalenius.Session) -> None:
    plan = pure.plan(QUERY, 1)
    assert all(m.rho == 0 for m in plan.measurements)
    from dalenius.plan.nodes import _jsonable

    assert "rho" not in str(_jsonable(plan))


def test_a_query_with_a_quantile_or_a_target_keeps_laplace(zcdp: dalenius.Session) -> None:
    median = zcdp.plan("SELECT MEDIAN(age) FROM adult", 1)
    assert all(m.rho == 0 for m in median.measurements)
    assert median.loss == PureDP(Fraction(1))


def test_the_gaussian_noise_is_the_discrete_gaussian_it_claims(zcdp: dalenius.Session) -> None:
    """The count's noise, drawn through the plan's mechanism, against the exact pmf."""
    count = zcdp.plan(QUERY, 1).measurements[0]
    mechanism = mechanism_for(count)
    assert isinstance(mechanism, IntegerGaussian) and mechanism.sigma2 == 2
    draws = mechanism.release(np.zeros(40_000, dtype=np.int64), rng=SeededRandom(7))
    support = np.arange(-12, 13)
    pmf = np.exp(-(support.astype(float) ** 2) / 4)
    pmf /= pmf.sum()
    observed = np.array([(draws == z).sum() for z in support])
    assert observed.sum() == draws.size  # no draw beyond ±12 (P < 1e-15)
    keep = pmf * draws.size >= 5
    chi2 = (((observed - pmf * draws.size) ** 2) / (pmf * draws.size))[keep].sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_the_floor_applies_to_a_zcdp_release() -> None:
    policy = Policy(min_epsilon=Fraction(1, 10))
    policy.check(ZCDP(Fraction(1, 200)))  # ε = 0.1 costs ρ = 0.005
    with pytest.raises(PolicyRefusal, match="below this dataset's floor"):
        policy.check(ZCDP(Fraction(1, 201)))
