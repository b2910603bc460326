"""Privacy loss types: ε (pure DP), (ε, δ) (approximate DP) and ρ (zero-concentrated DP).

All losses are exact rationals (:class:`fractions.Fraction`). A number a user types as a float is
read through its shortest decimal form (``0.1`` becomes ``1/10``), and that same rational is used
both to calibrate noise and to charge the budget, so what is charged is exactly what the noise
protects. Composition and conversion live in :mod:`dalenius.accounting`.

Example:
    >>> PureDP(as_fraction(0.1, "epsilon"))
    PureDP(epsilon=Fraction(1, 10))
    >>> str(ApproxDP(Fraction(1, 2), Fraction(1, 10**6)))
    'ε=0.5, δ=1e-06'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import SupportsFloat

from dalenius.core.errors import InvalidLossError

Number = int | float | str | Fraction | Decimal


def as_fraction(value: Number | SupportsFloat, name: str, *, allow_zero: bool = False) -> Fraction:
    """Read a user-supplied privacy parameter as an exact, validated rational.

    Args:
        value: an int, float, decimal string, Fraction or Decimal.
        name: the parameter's name, for the error message (``epsilon``, ``delta``, ``rho``).
        allow_zero: whether 0 is acceptable (δ = 0 is, ε = 0 is not for a release).

    Raises:
        InvalidLossError: for booleans, NaN, infinities, negative numbers, unparsable text,
            or zero when ``allow_zero`` is false.

    Example:
        >>> as_fraction("0.25", "epsilon")
        Fraction(1, 4)
    """
    if isinstance(value, bool):
        raise InvalidLossError(
            f"{name} must be a number, got the boolean {value}.",
            fix=f"pass {name}=1.0, for example.",
        )
    try:
        if isinstance(value, Fraction):
            frac = value
        elif isinstance(value, int):
            frac = Fraction(value)
        elif isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError
            frac = Fraction(value)
        elif isinstance(value, str):
            text = value.strip()
            if text.lower() in {"nan", "inf", "+inf", "-inf", "infinity", "-infinity"}:
                raise ValueError
            # Only plain ASCII decimals and fractions: no digit separators ("1_000"), no
            # digits of other scripts, which Python's own parsers would accept.
            if not text.isascii() or "_" in text:
                raise ValueError
            frac = Fraction(text)
        else:
            as_float = float(value)
            if not math.isfinite(as_float):
                raise ValueError
            frac = Fraction(repr(as_float))
    except (ValueError, ZeroDivisionError, TypeError, OverflowError):
        raise InvalidLossError(
            f"{name} must be a finite number, got {value!r}.",
            fix=f"pass a positive finite {name}, such as 1.0 or 0.1.",
        ) from None
    if frac < 0 or (frac == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidLossError(
            f"{name} must be {bound}, got {value!r}.",
            why="a privacy loss is a non-negative quantity; zero loss would mean infinite noise.",
            fix=f"pass a positive finite {name}, such as 1.0 or 0.1.",
        )
    return frac


def _fmt(x: Fraction) -> str:
    return f"{float(x):.6g}"


def _coerce(obj: object, name: str) -> None:
    """Let loss dataclasses accept plain numbers while storing exact, validated Fractions."""
    value: object = getattr(obj, name)
    if not isinstance(value, Fraction):
        object.__setattr__(obj, name, as_fraction(value, name, allow_zero=True))  # type: ignore[arg-type]


@dataclass(frozen=True, order=True)
class PureDP:
    """Pure ε-differential privacy: Pr[M(D) ∈ S] ≤ e^ε · Pr[M(D') ∈ S]."""

    epsilon: Fraction

    def __post_init__(self) -> None:
        _coerce(self, "epsilon")
        if self.epsilon < 0:
            raise InvalidLossError(f"epsilon must be >= 0, got {self.epsilon}.")

    def __str__(self) -> str:
        return f"ε={_fmt(self.epsilon)}"


@dataclass(frozen=True, order=True)
class ApproxDP:
    """Approximate (ε, δ)-differential privacy: Pr[M(D) ∈ S] ≤ e^ε · Pr[M(D') ∈ S] + δ."""

    epsilon: Fraction
    delta: Fraction

    def __post_init__(self) -> None:
        _coerce(self, "epsilon")
        _coerce(self, "delta")
        if self.epsilon < 0:
            raise InvalidLossError(f"epsilon must be >= 0, got {self.epsilon}.")
        if not 0 <= self.delta < 1:
            raise InvalidLossError(
                f"delta must be in [0, 1), got {_fmt(self.delta)}.",
                why="δ is a probability of failure; δ >= 1 promises nothing.",
                fix="use a δ far below 1/n, such as 1e-6.",
            )

    def __str__(self) -> str:
        return f"ε={_fmt(self.epsilon)}, δ={_fmt(self.delta)}"


@dataclass(frozen=True, order=True)
class ZCDP:
    """ρ-zero-concentrated differential privacy (Bun & Steinke 2016)."""

    rho: Fraction

    def __post_init__(self) -> None:
        _coerce(self, "rho")
        if self.rho < 0:
            raise InvalidLossError(f"rho must be >= 0, got {self.rho}.")

    def __str__(self) -> str:
        return f"ρ={_fmt(self.rho)}"


Loss = PureDP | ApproxDP | ZCDP
"""Any privacy loss; which one a dataset uses is chosen by its custodian."""
