"""Argument checks shared by the mechanisms, raising errors that say what, why and how to fix.

Every check runs before any random bit is drawn, so a refused call costs no privacy.

Example:
    >>> positive_fraction("0.5", "sensitivity")
    Fraction(1, 2)
    >>> confidence_fraction(0.95)
    Fraction(19, 20)
"""

from __future__ import annotations

import math
import operator
from decimal import Decimal
from fractions import Fraction
from typing import SupportsFloat

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number, as_fraction


def _exact(value: Number | SupportsFloat, name: str) -> Fraction:
    """Read a number exactly (a float through its shortest decimal form)."""
    if isinstance(value, bool):
        raise ConfigurationError(f"{name} must be a number, got the boolean {value}.")
    try:
        if isinstance(value, Fraction):
            return value
        if isinstance(value, int):
            return Fraction(value)
        if isinstance(value, Decimal | str):
            result = Fraction(value)
        else:
            as_float = float(value)
            if not math.isfinite(as_float):
                raise ValueError
            result = Fraction(repr(as_float))
    except (ValueError, TypeError, ZeroDivisionError, OverflowError, ArithmeticError):
        raise ConfigurationError(
            f"{name} must be a finite number, got {value!r}.",
            fix=f"pass {name} as an int, a Fraction or a finite float.",
        ) from None
    return result


def positive_fraction(value: Number | SupportsFloat, name: str) -> Fraction:
    """``value`` as an exact positive rational, or a :class:`ConfigurationError`."""
    result = _exact(value, name)
    if result <= 0:
        raise ConfigurationError(
            f"{name} must be > 0, got {value!r}.",
            why=f"a mechanism calibrated to {name} = {value!r} would add no noise or be undefined.",
            fix=f"pass a positive {name}.",
        )
    return result


def epsilon_fraction(value: Number | SupportsFloat) -> Fraction:
    """A positive ε read exactly (the same rational calibrates the noise and is charged)."""
    return as_fraction(value, "epsilon")


def confidence_fraction(value: Number | SupportsFloat) -> Fraction:
    """A confidence level strictly between 0 and 1, read exactly."""
    result = _exact(value, "confidence")
    if not 0 < result < 1:
        raise ConfigurationError(
            f"confidence must be strictly between 0 and 1, got {value!r}.",
            why="an error bar at confidence 1 would be infinite, and at 0 meaningless.",
            fix="pass a level such as 0.95.",
        )
    return result


def draw_count(size: int) -> int:
    """A non-negative number of draws (an int or a numpy integer)."""
    try:
        if isinstance(size, bool):
            raise TypeError
        count = operator.index(size)
    except TypeError:
        raise ConfigurationError(f"size must be an integer, got {size!r}.") from None
    if count < 0:
        raise ConfigurationError(f"size must be >= 0, got {count}.", fix="pass 0 or more draws.")
    return count
