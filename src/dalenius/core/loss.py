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
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import SupportsFloat

from dalenius.core.errors import InvalidLossError

Number = int | float | str | Fraction | Decimal

MAX_DIGITS = 50
"""Most significant digits a typed number may have (``0.1`` has 1; a 400-digit fraction is refused)."""

MAX_EXPONENT = 100
"""Typed numbers lie within 10**-100 … 10**100 in magnitude (or are 0): every parameter's own range
is far inside, and reading ``1e999999999`` exactly would take unbounded time and memory."""

_RATIO = re.compile(r"\s*([+-]?\d{1,50})\s*/\s*(\d{1,50})\s*")


MAX_QUERY_EPSILON = Fraction(1000)
"""Largest ε one release may spend: past it the guarantee means nothing, and exact tail bounds
of the noise (``exp(-ε·k)`` as exact rationals) would take time growing with ε. The one limit
Python, the CLI, HTTP and the PostgreSQL listener state, in :func:`epsilon_too_large`'s words."""


def epsilon_too_large(shown: object) -> InvalidLossError:
    """The refusal of an ε above :data:`MAX_QUERY_EPSILON`, worded the same on every front end.

    Example:
        >>> print(epsilon_too_large("1e400"))
        epsilon = 1e400 is above the largest accepted, 1000.
        Why: at such an epsilon the noise is negligible and the privacy guarantee meaningless.
        Fix: use epsilon <= 1000; typical values are 0.1 to 10.
    """
    return InvalidLossError(
        f"epsilon = {_short(shown)} is above the largest accepted, {MAX_QUERY_EPSILON}.",
        why="at such an epsilon the noise is negligible and the privacy guarantee meaningless.",
        fix=f"use epsilon <= {MAX_QUERY_EPSILON}; typical values are 0.1 to 10.",
    )


def read_number(text: str, name: str) -> Fraction:
    """Read a typed decimal (or ``n/d``) exactly, in time bounded by its length.

    The exponent and digit count are checked on a :class:`~decimal.Decimal` first, before an
    exact rational is built, so ``1e999999999`` is refused at once instead of computing 10**10**9.

    Raises:
        InvalidLossError: for unreadable text, NaN/infinities, over :data:`MAX_DIGITS` significant
            digits, or a magnitude outside 10**±:data:`MAX_EXPONENT`.

    Example:
        >>> read_number("1e-5", "delta")
        Fraction(1, 100000)
    """
    # Only plain ASCII decimals and fractions: no digit separators ("1_000"), no digits of
    # other scripts, which Python's own parsers would accept.
    if not text.isascii() or "_" in text:
        raise _unreadable(name, text)
    ratio = _RATIO.fullmatch(text)
    if ratio:
        if int(ratio.group(2)) == 0:
            raise _unreadable(name, text)
        return Fraction(int(ratio.group(1)), int(ratio.group(2)))
    try:
        number = Decimal(text.strip())
    except ArithmeticError:
        raise _unreadable(name, text) from None
    if not number.is_finite():
        raise _unreadable(name, text)
    return _checked(number, name, text)


def _checked(number: Decimal, name: str, shown: object) -> Fraction:
    if number.is_zero():
        return Fraction(0)
    digits = len("".join(map(str, number.as_tuple().digits)).strip("0"))
    if digits > MAX_DIGITS:
        raise InvalidLossError(
            f"{name} has {digits} significant digits; at most {MAX_DIGITS} are accepted.",
            fix=f"round {name} to fewer digits, e.g. {float(number):.6g}.",
        )
    if not -MAX_EXPONENT <= number.adjusted() < MAX_EXPONENT:
        if name == "epsilon" and number.adjusted() > 0:
            raise epsilon_too_large(shown)
        size = "too large" if number.adjusted() > 0 else "too small"
        raise InvalidLossError(
            f"{name} = {_short(shown)} is {size}: numbers are accepted from "
            f"10^-{MAX_EXPONENT} to 10^{MAX_EXPONENT} in magnitude.",
            fix=f"pass {name} as a number of ordinary size, such as 1.0 or 0.1.",
        )
    return Fraction(number)


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} characters)"


def _unreadable(name: str, value: object) -> InvalidLossError:
    return InvalidLossError(
        f"{name} must be a finite number, got {_short(repr(value))}.",
        fix=f"pass a positive finite {name}, such as 1.0 or 0.1.",
    )


def as_fraction(value: Number | SupportsFloat, name: str, *, allow_zero: bool = False) -> Fraction:
    """Read a user-supplied privacy parameter as an exact, validated rational.

    Args:
        value: an int, float, decimal string, Fraction or Decimal.
        name: the parameter's name, for the error message (``epsilon``, ``delta``, ``rho``).
        allow_zero: whether 0 is acceptable (δ = 0 is, ε = 0 is not for a release).

    Raises:
        InvalidLossError: for booleans, NaN, infinities, negative numbers, unparsable text,
            numbers too long or too large/small to read in bounded time (:func:`read_number`),
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
            frac = value  # computed, not typed: already exact
        elif isinstance(value, int):
            frac = _checked(Decimal(value), name, value) if value else Fraction(0)
        elif isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError
            frac = _checked(value, name, value)
        elif isinstance(value, str):
            frac = read_number(value, name)
        else:
            as_float = float(value)
            if not math.isfinite(as_float):
                raise ValueError
            frac = read_number(repr(as_float), name)
    except InvalidLossError:
        raise
    except (ValueError, ZeroDivisionError, TypeError, OverflowError, ArithmeticError):
        raise _unreadable(name, value) from None
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
