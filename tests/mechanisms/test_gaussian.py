"""Integer and grid Gaussian: calibration to zCDP and (ε, δ), validation, error bars, grid."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from tests.support.seeded import SeededRandom

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ZCDP, ApproxDP, PureDP
from dalenius.mechanisms import GridGaussian, IntegerGaussian, discrete_gaussian
from dalenius.mechanisms.calibration import discrete_gaussian_delta
from dalenius.mechanisms.gaussian import gaussian_error_bar


def dgauss_tail(sigma2: float, h: int) -> float:
    """P(|Z| > h) for the discrete Gaussian, in floating point."""
    radius = int(40 * math.sqrt(sigma2)) + 50
    support = np.arange(-radius, radius + 1)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * sigma2))
    return float(weights[np.abs(support) > h].sum() / weights.sum())


def test_zcdp_calibration_is_exact() -> None:
    m = IntegerGaussian(3, ZCDP(Fraction(1, 8)))
    assert m.sigma2 == Fraction(9) / (2 * Fraction(1, 8))
    assert m.sigma == 6
    assert m.loss == ZCDP(Fraction(1, 8))
    assert m.granularity == 1


def test_approx_calibration_satisfies_the_exact_discrete_bound() -> None:
    loss = ApproxDP(Fraction(1, 2), Fraction(1, 10**6))
    m = IntegerGaussian(2, loss)
    assert discrete_gaussian_delta(2, m.sigma2, loss.epsilon) <= loss.delta
    # and it is not wastefully large: 1 % less noise would break the bound
    assert discrete_gaussian_delta(2, m.sigma2 * Fraction(98, 100), loss.epsilon) > loss.delta


@pytest.mark.parametrize(
    "loss",
    [
        PureDP(Fraction(1)),
        ApproxDP(Fraction(1), Fraction(0)),
        ApproxDP(Fraction(0), Fraction(1, 10)),
    ],
)
def test_unsuitable_losses_are_refused(loss: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        IntegerGaussian(1, loss)  # type: ignore[arg-type]
    assert info.value.fix


def test_zero_rho_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="rho"):
        GridGaussian(1, ZCDP(Fraction(0)))


def test_large_noise_moves_integers_to_a_coarser_integer_grid() -> None:
    m = IntegerGaussian(1000, ZCDP(Fraction(1, 1000)))
    assert m.granularity > 1 and m.granularity.denominator == 1
    g = int(m.granularity)
    assert g & (g - 1) == 0
    assert m.sigma2 >= Fraction(1000**2) / (2 * Fraction(1, 1000))
    out = np.concatenate([m.release([v], rng=SeededRandom(1)) for v in (0, 12345, -999)])
    assert np.all(out % g == 0)
    assert m.error_bar(0.9) % g == g // 2
    # A vector would be rounded coordinate by coordinate, each possibly a whole step: refused.
    with pytest.raises(ConfigurationError, match="one answer only"):
        m.release([0, 12345, -999])


def test_a_grid_release_of_several_values_pays_for_their_rounding() -> None:
    one = GridGaussian(Fraction(5), ZCDP(Fraction(1, 2)))
    many = GridGaussian(Fraction(5), ZCDP(Fraction(1, 2)), answers=10)
    assert many.grid_sensitivity == one.grid_sensitivity + 4  # ceil(√10)
    assert many.sigma2 > one.sigma2
    many.release(np.zeros(10))
    with pytest.raises(ConfigurationError, match="answers=11"):
        many.release(np.zeros(11))
    with pytest.raises(ConfigurationError, match="answers=2"):
        one.release([1.0, 2.0])


def test_rounding_really_can_move_every_value_of_a_vector_by_a_step() -> None:
    """Why ``answers`` matters: neighbours 0.49 apart in L2 whose rounded vectors differ by √n."""
    g, n = 1.0, 16
    x = np.full(n, 0.49)
    y = np.full(n, 0.51)  # ‖x − y‖₂ = 0.08, while the rounded vectors differ by 1 in every place
    assert np.linalg.norm(x - y) < 0.1
    assert np.linalg.norm(np.floor(x / g + 0.5) - np.floor(y / g + 0.5)) == math.sqrt(n)


def test_noise_too_wide_for_any_grid_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="4096") as info:
        GridGaussian(Fraction(1, 2**20), ZCDP(Fraction(1, 10**9)), granularity=Fraction(1, 2**20))
    assert "loss" in (info.value.fix or "")


def test_discrete_gaussian_validates() -> None:
    with pytest.raises(ConfigurationError):
        discrete_gaussian(Fraction(0), 3)
    with pytest.raises(ConfigurationError, match="4096"):
        discrete_gaussian(Fraction(5000**2), 3)
    assert discrete_gaussian(Fraction(1, 3), 0).shape == (0,)


def test_integer_release_checks_type_and_keeps_shape() -> None:
    m = IntegerGaussian(1, ZCDP(Fraction(1)))
    out = m.release(np.ones((2, 5), dtype=np.int32), rng=SeededRandom(2))
    assert out.shape == (2, 5) and out.dtype == np.int64
    with pytest.raises(ConfigurationError, match="GridGaussian"):
        m.release([0.5])  # type: ignore[list-item]
    assert m.release([]).shape == (0,)


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(1), Fraction(10), Fraction(900)])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.99])
def test_error_bar_is_minimal_and_valid(sigma2: Fraction, confidence: float) -> None:
    h = gaussian_error_bar(sigma2, Fraction(repr(confidence)))
    beta = 1 - confidence
    assert dgauss_tail(float(sigma2), h) <= beta * (1 + 1e-9)
    if h > 0:
        assert dgauss_tail(float(sigma2), h - 1) > beta * (1 - 1e-9)


def test_grid_gaussian_grid_and_calibration() -> None:
    m = GridGaussian(Fraction(5), ZCDP(Fraction(1, 2)))
    g = m.granularity
    assert m.grid_sensitivity == math.ceil(Fraction(5) / g)
    assert m.sigma2 >= Fraction(25)  # Δ²/(2ρ)
    assert m.sigma2 <= Fraction(25) * Fraction(1025, 1024) ** 2
    out = m.release_each(np.linspace(-100, 100, 999), rng=SeededRandom(3))
    units = out / float(g)
    assert np.all(units == np.round(units))
    with pytest.raises(ConfigurationError):
        m.release([math.nan])
    m.check_range(1000)
    with pytest.raises(ConfigurationError, match="exact range"):
        m.check_range(float(m.max_exact) * 2)


def test_grid_gaussian_error_bar_includes_rounding() -> None:
    m = GridGaussian(Fraction(1), ZCDP(Fraction(1, 2)), granularity=Fraction(1, 8))
    units = gaussian_error_bar(m.sigma2 / m.granularity**2, Fraction(95, 100))
    assert m.error_bar(0.95) == float(m.granularity * (units + Fraction(1, 2)))
