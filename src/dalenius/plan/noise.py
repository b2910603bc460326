"""Which noise mechanism answers a measurement, and how wide its error bar is.

Every measurement is an integer in grid units, so it is released with an exact integer mechanism
drawn from the OS generator — no floating-point noise ever touches the exact value: the discrete
Laplace mechanism (two-sided geometric noise) of scale ``sensitivity_units / epsilon``, or, for a
measurement the planner gave a share of ρ (on a dataset accounted in zCDP), the discrete Gaussian
calibrated to ``sensitivity_units`` as its L2 sensitivity (``docs/mechanisms/gaussian_sql.md``).
"""

from __future__ import annotations

import functools
from fractions import Fraction

from dalenius.core.loss import ZCDP
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.nodes import Measurement

NoiseMechanism = IntegerLaplace | IntegerGaussian
"""A measurement's mechanism: both release integers, both have an exact error bar."""


def mechanism_for(m: Measurement) -> NoiseMechanism | None:
    """The mechanism releasing ``m``; ``None`` when its sensitivity is zero (it is data-independent)."""
    if m.sensitivity_units == 0:
        return None
    if m.gaussian:
        return _gaussian(m.sensitivity_units, m.rho)
    return _mechanism(m.sensitivity_units, m.epsilon)


def error_units(m: Measurement, confidence: float) -> int:
    """Half-width, in grid units, of the interval holding the noise with probability ``confidence``."""
    if m.sensitivity_units == 0:
        return 0
    if m.gaussian:
        return _gaussian_error_units(m.sensitivity_units, m.rho, confidence)
    return _error_units(m.sensitivity_units, m.epsilon, confidence)


@functools.lru_cache(maxsize=1024)
def _gaussian(sensitivity: int, rho: Fraction) -> IntegerGaussian:
    return IntegerGaussian(sensitivity, ZCDP(rho))


@functools.lru_cache(maxsize=4096)
def _gaussian_error_units(sensitivity: int, rho: Fraction, confidence: float) -> int:
    return int(_gaussian(sensitivity, rho).error_bar(confidence))


@functools.lru_cache(maxsize=1024)
def _mechanism(sensitivity: int, epsilon: Fraction) -> IntegerLaplace:
    # Mechanisms are immutable once built; building one certifies its sampling tables.
    return IntegerLaplace(sensitivity, epsilon)


@functools.lru_cache(maxsize=4096)
def _error_units(sensitivity: int, epsilon: Fraction, confidence: float) -> int:
    return int(_mechanism(sensitivity, epsilon).error_bar(confidence))
