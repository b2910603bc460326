"""Which noise mechanism answers a measurement, and how wide its error bar is.

Every measurement is an integer in grid units, so it is released with the exact discrete Laplace
mechanism (two-sided geometric noise) of scale ``sensitivity_units / epsilon``, drawn from the OS
generator: no floating-point noise ever touches the exact value.
"""

from __future__ import annotations

from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.nodes import Measurement


def mechanism_for(m: Measurement) -> IntegerLaplace | None:
    """The mechanism releasing ``m``; ``None`` when its sensitivity is zero (it is data-independent)."""
    if m.sensitivity_units == 0:
        return None
    return IntegerLaplace(m.sensitivity_units, m.epsilon)


def error_units(m: Measurement, confidence: float) -> int:
    """Half-width, in grid units, of the interval holding the noise with probability ``confidence``."""
    mech = mechanism_for(m)
    return 0 if mech is None else int(mech.error_bar(confidence))
