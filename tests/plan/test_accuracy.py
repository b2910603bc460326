"""Accuracy first: the computed ε meets every target, and is the smallest that does.

Minimality is checked exactly, from the same tail-bound function the error bars use: at the
chosen share the error bar is within the target; at 99% of it (and at the grid point below) it is
not.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import ConfigurationError, PrivacyRefusal
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session, connect
from dalenius.mechanisms.laplace import IntegerLaplace, integer_laplace_error_bar
from dalenius.plan.accuracy import GRID_DIGITS, error_at, min_share, parse_targets
from dalenius.plan.nodes import Measurement
from dalenius.plan.noise import error_units

F = Fraction
GROUPED = "SELECT education, COUNT(*) AS n, SUM(capital_gain) AS gain FROM adult GROUP BY education"


@pytest.fixture(scope="module")
def catalog(adult_catalog_path: Path) -> Catalog:
    return load_catalog(adult_catalog_path)


@pytest.fixture
def session(catalog: Catalog) -> Session:
    return connect(catalog, budget=1000)


def _measurement(sensitivity: int, granularity: Fraction) -> Measurement:
    return Measurement(
        name="m0",
        kind="sum",
        arg=None,
        arg_type="int",
        bounds=None,
        center=F(0),
        granularity=granularity,
        row_units=sensitivity,
        sensitivity_units=sensitivity,
        epsilon=F(1),
        edges=(),
        distinct_unit=False,
    )


def test_the_cheap_error_bar_is_the_mechanisms_own() -> None:
    for s, eps, conf in [(1, F(1, 2), 0.95), (7, F(3, 1000), 0.99), (1024, F(5), 0.5)]:
        assert integer_laplace_error_bar(s, eps, conf) == IntegerLaplace(s, eps).error_bar(conf)


@pytest.mark.parametrize(
    ("sensitivity", "granularity", "target", "confidence"),
    [
        (1, F(1), F(50), 0.95),
        (1, F(1), F(0), 0.95),  # an exact count with probability 95%
        (5, F(1), F(3), 0.99),
        (1, F(1), F(1000), 0.5),
        (2048, F(1, 64), F(2500), 0.95),
        (3, F(1), F(123456), 0.999),
    ],
)
def test_min_share_meets_the_target_and_one_percent_less_does_not(
    sensitivity: int, granularity: Fraction, target: Fraction, confidence: float
) -> None:
    m = _measurement(sensitivity, granularity)
    share = min_share(m, target, confidence)
    assert error_at(m, share, confidence) <= target
    assert error_at(m, share * F(99, 100), confidence) > target
    # And the grid point just below misses too: the share is the smallest on its grid.
    digits = len(str(share.numerator)) if share.denominator != 1 else GRID_DIGITS
    assert digits <= GRID_DIGITS + 1
    step = F(10) ** (len(str(int(share * 10**12))) - GRID_DIGITS - 12)
    assert error_at(m, share - step, confidence) > target


def test_query_targets_are_met_minimally_per_measurement(session: Session) -> None:
    explained = session.explain(GROUPED, target_error={"n": 20, "gain": 400_000}, confidence=0.9)
    allocation = explained.accuracy
    assert allocation is not None
    assert sum(allocation.shares.values()) == allocation.epsilon == explained.loss.epsilon
    by_output = {t.output: t for t in allocation.targets}
    assert set(by_output) == {"n", "gain"}
    for m in explained.measurements:
        target = by_output["n" if m.label == "COUNT(*)" else "gain"].target
        share = allocation.shares[m.name]
        assert m.epsilon == share
        assert F(m.error).limit_denominator() <= target
    for t in allocation.targets:
        assert t.error_below is not None and t.error <= t.target < t.error_below
    # The released intervals have exactly the targeted half-widths (at most).
    result = session.query(GROUPED, target_error={"n": 20, "gain": 400_000}, confidence=0.9)
    assert result.loss == PureDP(allocation.epsilon)
    for row, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        assert highs[1] - row[1] <= 20
        assert highs[2] - lows[2] <= 2 * 400_000
    assert result.accuracy is not None and result.accuracy["epsilon_exact"]


def test_the_explained_error_bars_come_from_the_same_function(session: Session) -> None:
    sql = "SELECT education, COUNT(*), SUM(age) FROM adult GROUP BY education"
    plan = session.prepare(sql, None, targets=parse_targets(2500), confidence=0.95).plan
    for m in plan.measurements:
        assert error_units(m, 0.95) * m.granularity <= 2500
        smaller = Measurement(**{**m.__dict__, "epsilon": m.epsilon * F(99, 100)})
        assert error_units(smaller, 0.95) * m.granularity > 2500


def test_relative_targets_need_an_expected_magnitude(session: Session) -> None:
    with pytest.raises(ConfigurationError, match="expected"):
        session.explain("SELECT COUNT(*) FROM adult", target_relative=0.05)
    explained = session.explain("SELECT COUNT(*) FROM adult", target_relative=0.05, expected=30000)
    assert explained.accuracy is not None
    assert explained.accuracy.targets[0].target == 1500
    assert explained.accuracy.targets[0].asked == "5% of 30000"


@pytest.mark.parametrize(
    ("sql", "kwargs", "error", "message"),
    [
        ("SELECT AVG(age) FROM adult", {"target_error": 1}, PrivacyRefusal, "AVG"),
        ("SELECT MEDIAN(age) FROM adult", {"target_error": 1}, PrivacyRefusal, "rank"),
        (
            "SELECT COUNT(*) FROM adult",
            {"target_error": 1, "epsilon": 1},
            ConfigurationError,
            "both",
        ),
        ("SELECT COUNT(*) AS n FROM adult", {"target_error": {"m": 1}}, ConfigurationError, "'m'"),
        (
            "SELECT COUNT(*) AS n, SUM(age) AS s FROM adult",
            {"target_error": {"n": 5}},
            PrivacyRefusal,
            "no error target",
        ),
        ("SELECT SUM(capital_gain) FROM adult", {"target_error": 0.001}, PrivacyRefusal, "ε above"),
        ("SELECT COUNT(*) FROM adult", {"target_error": -1}, ConfigurationError, "target_error"),
        ("SELECT COUNT(*) FROM adult", {"target_error": "1e400"}, ConfigurationError, "too large"),
    ],
)
def test_targets_that_cannot_be_met_are_refused_before_reading_data(
    session: Session, sql: str, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        session.query(sql, **kwargs)  # type: ignore[arg-type]
    assert "Fix:" in str(caught.value)
    assert session.remaining() == PureDP(F(1000))


def test_a_batch_gets_the_smallest_total_or_the_best_worst_ratio(session: Session) -> None:
    queries = [
        {"sql": "SELECT COUNT(*) AS n FROM adult WHERE age > 40", "target_error": 30},
        {"sql": GROUPED, "target_error": {"n": 40, "gain": 500_000}},
    ]
    free = session.plan_batch(queries)
    singles = [
        session.explain(q["sql"], target_error=q["target_error"]).loss.epsilon  # type: ignore[arg-type]
        for q in queries
    ]
    assert free.epsilon == sum(singles)
    budget = free.epsilon / 2
    tight = session.plan_batch(queries, epsilon=budget)
    assert tight.epsilon <= budget
    assert tight.scale > 1
    # The smallest common factor: a factor 0.1% smaller does not fit the budget.
    less = session.plan_batch(
        [
            {**q, "target_error": _scaled(q["target_error"], tight.scale * F(999, 1000))}
            for q in queries
        ]
    )
    assert less.epsilon > budget
    results = session.query_batch(tight)
    assert sum(r.spent.epsilon for r in results) == tight.epsilon  # type: ignore[attr-defined]
    assert session.remaining() == PureDP(F(1000) - tight.epsilon)


def _scaled(target: object, factor: Fraction) -> object:
    if isinstance(target, dict):
        return {k: F(v) * factor for k, v in target.items()}
    return F(target) * factor  # type: ignore[arg-type]


def test_a_target_looser_than_the_largest_noise_gets_the_noise_floor(session: Session) -> None:
    sql = "SELECT COUNT(*) AS n, SUM(capital_gain) AS gain FROM adult"
    explained = session.explain(sql, target_error={"n": "1e-90", "gain": "1e29"})
    assert explained.accuracy is not None
    by = {t.output: t for t in explained.accuracy.targets}
    assert by["n"].error == 0 and by["n"].error_below is not None and by["n"].error_below > 0
    assert by["gain"].error <= F(10) ** 29 and by["gain"].error_below is None
    assert "noise floor" in str(explained)
