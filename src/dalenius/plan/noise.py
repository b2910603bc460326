"""Which noise mechanism answers a measurement, and how wide its error bar is.

Every measurement is an integer in grid units, so it is released with the exact discrete Laplace
mechanism (two-sided geometric noise) of scale ``sensitivity_units / epsilon``, drawn from the OS
generator: no floating-point noise ever touches the exact value.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.nodes import Measurement


def mechanism_for(m: Measurement) -> IntegerLaplace | None:
    """The mechanism releasing ``m``; ``None`` when its sensitivity is zero (it is data-independent)."""
    if m.sensitivity_units == 0:
        return None
    return _mechanism(m.sensitivity_units, m.epsilon)


def error_units(m: Measurement, confidence: float) -> int:
    """Half-width, in grid units, of the interval holding the noise with probability ``confidence``."""
    if m.sensitivity_units == 0:
        return 0
    return _error_units(m.sensitivity_units, m.epsilon, confidence)


@functools.lru_cache(maxsize=1024)
def _mechanism(sensitivity: int, epsilon: Fraction) -> IntegerLaplace:
    # Mechanisms are immutable once built; building one certifies its sampling tables.
    return IntegerLaplace(sensitivity, epsilon)


@functools.lru_cache(maxsize=4096)
def _error_units(sensitivity: int, epsilon: Fraction, confidence: float) -> int:
    return int(_mechanism(sensitivity, epsilon).error_bar(confidence))
