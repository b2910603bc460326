"""Laplace perturbation of records: course calibration, certified discrete δ, grid, clamping."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from tests.support.seeded import SeededRandom

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.mechanisms import RecordPerturbation
from dalenius.mechanisms.perturbation import discrete_laplace_delta


def brute_delta(shift: int, scale: float, epsilon: float) -> float:
    q = math.exp(-1 / scale)
    c = (1 - q) / (1 + q)
    reach = int(80 * scale) + shift + 10
    z = np.arange(-reach, reach + 1)
    return float(
        np.maximum(0, c * q ** np.abs(z) - math.exp(epsilon) * c * q ** np.abs(z - shift)).sum()
    )


@pytest.mark.parametrize(
    ("shift", "scale", "epsilon"),
    [
        (1, Fraction(1, 3), Fraction(1)),
        (4, Fraction(1), Fraction(1)),
        (37, Fraction(25, 2), Fraction(1, 2)),
        (1000, Fraction(900), Fraction(1, 3)),
        (6, Fraction(2), Fraction(0)),
    ],
)
def test_closed_form_discrete_delta_is_an_exact_upper_bound(
    shift: int, scale: Fraction, epsilon: Fraction
) -> None:
    brute = brute_delta(shift, float(scale), float(epsilon))
    certified = float(discrete_laplace_delta(shift, scale, epsilon))
    assert certified >= brute * (1 - 1e-12)
    assert certified == pytest.approx(brute, rel=1e-9, abs=1e-15)


def test_discrete_delta_grows_with_the_shift() -> None:
    deltas = [discrete_laplace_delta(k, Fraction(10), Fraction(1, 2)) for k in range(1, 60)]
    assert deltas == sorted(deltas)


def test_pure_perturbation_uses_diameter_over_epsilon() -> None:
    m = RecordPerturbation(0, 100, Fraction(1, 2))
    assert m.loss == PureDP(Fraction(1, 2))
    assert m.scale == 200
    assert m.grid_shift * m.granularity == 100


@pytest.mark.parametrize(
    ("epsilon", "delta", "b"), [("0.1", "0.1", 14589), ("2", "0.5", 1112), ("11", "0.7", 245)]
)
def test_course_scales_and_certified_guarantee(epsilon: str, delta: str, b: int) -> None:
    m = RecordPerturbation(1504, 4500, epsilon, delta)
    assert round(float(m.scale)) == b
    assert m.loss == ApproxDP(Fraction(epsilon), Fraction(delta))
    assert discrete_laplace_delta(m.grid_shift, m.unit_scale, m.epsilon) <= m.delta
    tight = RecordPerturbation(1504, 4500, epsilon, delta, tight=True)
    assert tight.scale < m.scale
    assert discrete_laplace_delta(tight.grid_shift, tight.unit_scale, tight.epsilon) <= tight.delta


def test_release_clamps_rounds_and_keeps_shape() -> None:
    m = RecordPerturbation(0, 10, 1)
    out = m.release(np.array([[-1e9, 5.0], [1e9, 7.3]]), rng=SeededRandom(1))
    assert out.shape == (2, 2)
    units = out / float(m.granularity)
    assert np.all(units == np.round(units))
    with pytest.raises(ConfigurationError, match="NaN"):
        m.release([math.nan])


def test_validation() -> None:
    with pytest.raises(ConfigurationError, match="high > low"):
        RecordPerturbation(5, 5, 1)
    with pytest.raises(ConfigurationError, match="delta"):
        RecordPerturbation(0, 1, 1, 1)
    with pytest.raises(ConfigurationError, match="power of two"):
        RecordPerturbation(0, 1, 1, granularity=Fraction(1, 3))


def test_error_bar_covers_noise_and_rounding() -> None:
    m = RecordPerturbation(0, 100, 1)
    assert m.error_bar(0.95) >= float(m.scale) * math.log(1 / 0.05)
