"""Integer and grid Laplace: calibration, validation, error bars and the output grid."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.seeded import SeededRandom

from dalenius.core.errors import ConfigurationError, InvalidLossError
from dalenius.core.loss import PureDP
from dalenius.mechanisms import GridLaplace, IntegerLaplace, discrete_laplace
from dalenius.mechanisms.laplace import laplace_error_bar, laplace_tail


def exact_tail(scale: float, h: int) -> float:
    """P(|Z| > h) for the discrete Laplace distribution, in floating point."""
    q = math.exp(-1 / scale)
    return 2 * q ** (h + 1) / (1 + q)


def test_integer_laplace_calibration_is_exact() -> None:
    m = IntegerLaplace(3, Fraction(1, 10))
    assert m.scale == 30
    assert m.loss == PureDP(Fraction(1, 10))
    assert m.sensitivity == 3


def test_integer_laplace_accepts_floats_through_their_decimal_form() -> None:
    m = IntegerLaplace(1, 0.1)  # type: ignore[arg-type]
    assert m.epsilon == Fraction(1, 10)
    assert m.scale == 10


def test_huge_terms_round_the_scale_up() -> None:
    epsilon = Fraction(10**40 + 1, 10**40 * 3)
    m = IntegerLaplace(1, epsilon)
    assert m.scale >= 1 / epsilon
    assert m.scale.denominator < 2**62 and m.scale.numerator < 2**62
    assert m.scale - 1 / epsilon < Fraction(1, 2**40)
    assert m.loss.epsilon == epsilon


@pytest.mark.parametrize("epsilon", [0, -1, float("nan"), float("inf"), "x"])
def test_bad_epsilon_is_refused(epsilon: object) -> None:
    with pytest.raises(InvalidLossError):
        IntegerLaplace(1, epsilon)  # type: ignore[arg-type]


@pytest.mark.parametrize("sensitivity", [0, -2, float("nan"), True])
def test_bad_sensitivity_is_refused(sensitivity: object) -> None:
    with pytest.raises(ConfigurationError, match="sensitivity"):
        IntegerLaplace(sensitivity, Fraction(1))  # type: ignore[arg-type]


def test_scale_beyond_the_supported_maximum_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="2\\*\\*40") as info:
        IntegerLaplace(2**40, Fraction(1, 2))
    assert info.value.fix is not None


def test_integer_release_keeps_shape_and_type() -> None:
    m = IntegerLaplace(1, Fraction(1))
    out = m.release(np.arange(12).reshape(3, 4), rng=SeededRandom(1))
    assert out.shape == (3, 4)
    assert out.dtype == np.int64
    assert m.release([]).shape == (0,)


def test_integer_release_refuses_floats() -> None:
    m = IntegerLaplace(1, Fraction(1))
    with pytest.raises(ConfigurationError, match="GridLaplace"):
        m.release(np.array([1.5]))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        m.release(np.array([True]))  # type: ignore[arg-type]


def test_integer_release_clamps_absurd_inputs_instead_of_overflowing() -> None:
    m = IntegerLaplace(1, Fraction(1))
    out = m.release(np.array([2**63 - 1, -(2**63)], dtype=np.int64), rng=SeededRandom(2))
    assert abs(int(out[0]) - 2**62) < 1000
    assert abs(int(out[1]) + 2**62) < 1000


def test_discrete_laplace_validates_arguments() -> None:
    with pytest.raises(ConfigurationError):
        discrete_laplace(Fraction(0), 3)
    with pytest.raises(ConfigurationError):
        discrete_laplace(Fraction(1), -1)
    with pytest.raises(ConfigurationError):
        discrete_laplace(Fraction(1), 2.5)  # type: ignore[arg-type]
    assert discrete_laplace(Fraction(1), np.int64(4)).shape == (4,)  # type: ignore[arg-type]
    assert discrete_laplace(Fraction(1), 0).shape == (0,)


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(1), Fraction(7, 2), Fraction(2000)])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.999])
def test_integer_error_bar_is_the_smallest_valid_half_width(
    scale: Fraction, confidence: float
) -> None:
    h = laplace_error_bar(scale, Fraction(repr(confidence)))
    beta = 1 - confidence
    assert exact_tail(float(scale), h) <= beta * (1 + 1e-9)
    if h > 0:
        assert exact_tail(float(scale), h - 1) > beta * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(
    numerator=st.integers(1, 10**6),
    denominator=st.integers(1, 10**4),
    confidence=st.fractions(Fraction(1, 100), Fraction(999, 1000)),
)
def test_error_bar_is_certified_and_minimal(
    numerator: int, denominator: int, confidence: Fraction
) -> None:
    scale = Fraction(numerator, denominator)
    h = laplace_error_bar(scale, confidence)
    assert laplace_tail(scale, h, upper=True) <= 1 - confidence
    if h > 0:
        assert laplace_tail(scale, h - 1, upper=True) > 1 - confidence


def test_error_bar_grows_with_confidence_and_validates() -> None:
    m = IntegerLaplace(1, Fraction(1, 2))
    bars = [m.error_bar(c) for c in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)]
    assert bars == sorted(bars)
    for bad in (0, 1, 1.5, -0.1, float("nan")):
        with pytest.raises(ConfigurationError, match="confidence"):
            m.error_bar(bad)


def test_grid_laplace_automatic_granularity() -> None:
    m = GridLaplace(Fraction(5), Fraction(1, 4))
    g = m.granularity
    assert g.numerator == 1 or g.denominator == 1
    assert (g.numerator * g.denominator) & (g.numerator * g.denominator - 1) == 0
    assert m.unit_scale >= 1024
    assert g <= Fraction(5, 1024) < 2 * g  # at least 1024 steps per Δ (Δ < scale here)
    assert m.scale >= Fraction(5) / Fraction(1, 4)
    assert m.scale <= Fraction(5) / Fraction(1, 4) * Fraction(1025, 1024)
    assert m.grid_sensitivity == math.ceil(Fraction(5) / g)
    assert m.loss == PureDP(Fraction(1, 4))


def test_automatic_grid_at_epsilon_one_needs_one_word_per_draw() -> None:
    m = GridLaplace(Fraction(1), Fraction(1))
    assert 1024 <= m.unit_scale < 2048
    assert m._sampler.stages == 2


def test_grid_laplace_user_granularity_and_tight_rounding_sensitivity() -> None:
    m = GridLaplace(Fraction(1), Fraction(1), granularity=Fraction(1))
    assert m.grid_sensitivity == 1
    assert m.scale == 1
    m = GridLaplace(Fraction(3, 2), Fraction(1), granularity=Fraction(1))
    assert m.grid_sensitivity == 2


@pytest.mark.parametrize("granularity", [Fraction(3), Fraction(1, 3), Fraction(0), Fraction(-2)])
def test_grid_laplace_refuses_non_power_of_two_granularity(granularity: Fraction) -> None:
    with pytest.raises(ConfigurationError, match="power of two"):
        GridLaplace(Fraction(1), Fraction(1), granularity=granularity)


def test_grid_laplace_refuses_a_grid_too_fine_for_the_scale() -> None:
    with pytest.raises(ConfigurationError, match="coarser granularity"):
        GridLaplace(Fraction(1), Fraction(1, 1000), granularity=Fraction(1, 2**40))


def test_grid_release_lies_on_the_grid_and_keeps_shape() -> None:
    m = GridLaplace(Fraction(1), Fraction(1, 2), answers=3000)
    exact = np.linspace(-1e6, 1e6, 3000).reshape(3, 1000, 1)
    out = m.release(exact, rng=SeededRandom(3))
    assert out.shape == exact.shape
    units = out / float(m.granularity)
    assert np.all(units == np.round(units))
    assert np.all(np.abs(units) < 2**53)


def test_a_grid_release_of_several_values_pays_for_their_rounding() -> None:
    one = GridLaplace(Fraction(1), Fraction(1), granularity=Fraction(1, 1024))
    many = GridLaplace(Fraction(1), Fraction(1), granularity=Fraction(1, 1024), answers=5)
    assert (one.grid_sensitivity, many.grid_sensitivity) == (1024, 1029)
    assert many.scale > one.scale
    with pytest.raises(ConfigurationError, match="answers=2"):
        one.release([0.0, 1.0])
    with pytest.raises(ConfigurationError, match="answers"):
        GridLaplace(Fraction(1), Fraction(1), answers=0)


def test_grid_release_refuses_nan_and_infinity() -> None:
    m = GridLaplace(Fraction(1), Fraction(1))
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ConfigurationError, match="NaN or infinite"):
            m.release([1.0, bad])
    with pytest.raises(ConfigurationError):
        m.release(["a"])  # type: ignore[list-item]


def test_grid_release_clamps_values_beyond_the_exact_range() -> None:
    m = GridLaplace(Fraction(1), Fraction(1), granularity=Fraction(1, 1024))
    out = m.release_each([1e300, -1e300], rng=SeededRandom(4))
    limit = float(m.max_exact)
    assert abs(out[0] - limit) < 100 and abs(out[1] + limit) < 100
    assert np.all(out * 1024 == np.round(out * 1024))


def test_check_range_refuses_public_bounds_beyond_the_grid() -> None:
    m = GridLaplace(Fraction(1), Fraction(1), granularity=Fraction(1, 1024))
    m.check_range(10**9)
    with pytest.raises(ConfigurationError, match="exact range") as info:
        m.check_range(2**50)
    assert "granularity" in (info.value.fix or "")


def test_grid_error_bar_covers_noise_and_rounding() -> None:
    m = GridLaplace(Fraction(2), Fraction(1, 2), granularity=Fraction(1, 4))
    units = laplace_error_bar(m.unit_scale, Fraction(95, 100))
    assert m.error_bar(0.95) == float(m.granularity * (units + Fraction(1, 2)))
    assert m.error_bar(0.95) >= float(m.scale) * math.log(1 / 0.05) * 0.99
