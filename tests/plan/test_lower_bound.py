"""Explain's accuracy floor γ (course document 004, Theorem 4) beside each measurement's error.

γ = (1−δ)·Δ∞/(2(1+e^ε)) with Δ∞ the most one unit moves one group's answer. Checked against the
formula computed independently, against Δ∞ rather than the L1 sensitivity where they differ, and
against the mechanism's own mean absolute error (a floor must lie below what is achieved).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import load_catalog
from dalenius.engine.session import Session, connect
from dalenius.plan.lower_bound import BASIS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def adult(adult_catalog_path: Path) -> Session:
    return connect(load_catalog(adult_catalog_path), budget=1000)


@pytest.fixture(scope="module")
def pums(shared_data: Path) -> Session:
    return connect(load_catalog(FIXTURES / "pums.toml"), budget=1000)


def _gamma(diameter: float, epsilon: float, delta: float = 0.0) -> float:
    return (1 - delta) * diameter / (2 * (1 + math.exp(epsilon)))


def test_each_measurement_shows_the_floor_of_its_sensitivity_and_epsilon(adult: Session) -> None:
    sql = "SELECT COUNT(*) AS n, SUM(capital_loss) AS loss FROM adult"
    out = adult.explain(sql, epsilon=1).to_dict()
    assert len(out["measurements"]) == 2
    for m in out["measurements"]:
        expected = _gamma(m["sensitivity"], m["epsilon"])
        assert m["lower_bound"] == pytest.approx(expected, rel=1e-9)
        # Rounded down: it stays a true lower bound.
        assert m["lower_bound"] <= expected
    sensitivities = sorted(m["sensitivity"] for m in out["measurements"])
    assert sensitivities == [1.0, 5000.0]
    assert "Theorem 4" in out["lower_bound_basis"]


def test_the_course_table_is_reproduced_for_its_diameter_and_losses(adult: Session) -> None:
    # Course document 004, Table 4: records 1504..4500 at (0.1, 0.1) → γ ≥ 640. Explain's pure ε
    # measurement of a sum of values of that diameter shows the δ = 0 bound, 640 / 0.9.
    out = adult.explain("SELECT SUM(capital_loss) FROM adult", epsilon="0.1").to_dict()
    (m,) = out["measurements"]
    assert m["lower_bound"] == pytest.approx(_gamma(5000, 0.1), rel=1e-9)


def test_distinct_units_use_the_per_group_sensitivity_not_the_l1_one(pums: Session) -> None:
    # pid may reach 2 groups: the L1 sensitivity is 2, but each group's count moves by at most 1.
    sql = "SELECT sex, COUNT(DISTINCT pid) AS people FROM pums GROUP BY sex"
    (m,) = pums.explain(sql, epsilon=1).to_dict()["measurements"]
    assert m["sensitivity"] == 2
    assert m["lower_bound"] == pytest.approx(_gamma(1, 1), rel=1e-9)


def test_a_private_selection_uses_its_delta(adult: Session) -> None:
    sql = "SELECT occupation, COUNT(*) FROM adult GROUP BY occupation"
    explained = adult.explain(sql, epsilon=1, delta="1e-2").to_dict()
    selected = [m for m in explained["measurements"] if "truncated" in m["mechanism"]]
    assert selected
    for m in selected:
        assert m["lower_bound"] == pytest.approx(_gamma(m["sensitivity"], m["epsilon"], 1e-2))


def test_a_rank_selection_has_no_floor(adult: Session) -> None:
    out = adult.explain("SELECT MEDIAN(age) FROM adult", epsilon=1).to_dict()
    ranks = [m for m in out["measurements"] if "rank" in m["mechanism"]]
    assert ranks and all(m["lower_bound"] is None for m in ranks)


def test_the_floor_lies_below_the_mean_error_dalenius_achieves(adult: Session) -> None:
    # Discrete Laplace of scale t (grid units) has E|X| = 2q/(1 − q²), q = exp(−1/t).
    for eps in ("0.1", "1", "5"):
        out = adult.explain("SELECT COUNT(*) FROM adult", epsilon=eps).to_dict()
        (m,) = out["measurements"]
        q = math.exp(-1 / m["noise_scale"])
        assert 0 < m["lower_bound"] < 2 * q / (1 - q * q)


def test_the_text_shows_the_column_and_what_it_means(adult: Session) -> None:
    text = str(adult.explain("SELECT COUNT(*) FROM adult", epsilon=1))
    assert "floor γ" in text
    assert f"±{_gamma(1, 1):.4g}" in text
    assert BASIS in text


def test_the_floor_is_exact_for_a_fraction_epsilon(adult: Session) -> None:
    explained = adult.explain("SELECT COUNT(*) FROM adult", epsilon=Fraction(1, 3))
    (m,) = explained.measurements
    assert isinstance(m.lower_bound, Fraction)
    assert m.lower_bound == pytest.approx(_gamma(1, 1 / 3), rel=1e-9)
