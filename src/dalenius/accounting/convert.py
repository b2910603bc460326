"""Conversions between loss types, each rounded toward safety.

Two directions matter and they round oppositely:

* a **loss** (what a release spends) is converted *up* by :func:`convert`: the result is a loss
  that the mechanism provably satisfies in the target definition;
* a **cap** (what a budget allows) is converted *down* by :func:`cap_as`: any total that fits the
  converted cap provably fits the original one.

Conversions that have no sound direction (an (ε, δ) loss with δ > 0 cannot be charged as pure ε or
as zCDP ρ; a zCDP loss cannot be charged as pure ε) are refused with a
:class:`~dalenius.core.errors.ConfigurationError` that says which definition would accept it.

References: Bun & Steinke (2016), "Concentrated differential privacy: simplifications, extensions
and lower bounds", Propositions 1.3 (ε-DP ⇒ ε²/2-zCDP) and 1.4 (ρ-zCDP ⇒ (ρ + 2√(ρ ln 1/δ), δ)-DP).

Example:
    >>> convert(PureDP(Fraction(1, 2)), "zcdp")
    ZCDP(rho=Fraction(1, 8))
    >>> round(float(zcdp_to_approx(Fraction(1, 2), Fraction(1, 10**6)).epsilon), 4)
    5.7565
"""

from __future__ import annotations

from fractions import Fraction

from dalenius.accounting.definitions import Definition, definition_of, parse_definition
from dalenius.core.errors import ConfigurationError, InvalidLossError
from dalenius.core.exact import grid_down, grid_up, ln_up, sqrt_down, sqrt_up
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP


def pure_to_zcdp(epsilon: Fraction) -> ZCDP:
    """The zCDP loss implied by pure ε-DP: ρ = ε²/2 (exact).

    Example:
        >>> pure_to_zcdp(Fraction(1))
        ZCDP(rho=Fraction(1, 2))
    """
    return ZCDP(Fraction(epsilon) ** 2 / 2)


def _check_delta(delta: Fraction) -> Fraction:
    delta = Fraction(delta)
    if not 0 < delta < 1:
        raise InvalidLossError(
            f"delta must be in (0, 1) to convert zCDP to (epsilon, delta), got {float(delta):.6g}.",
            why="ρ-zCDP implies (ε, δ)-DP only for δ > 0, and δ >= 1 promises nothing.",
            fix="use a small positive delta such as 1e-6.",
        )
    return delta


def zcdp_to_approx(rho: Fraction, delta: Fraction) -> ApproxDP:
    """The (ε, δ) guarantee of ρ-zCDP: ε = ρ + 2·√(ρ·ln(1/δ)), rounded up.

    Args:
        rho: the zCDP loss, ``>= 0``.
        delta: the target δ, in ``(0, 1)``.

    Returns:
        An :class:`ApproxDP` whose ε is at least the exact value (within 2⁻¹²⁶ of it).

    Example:
        >>> zcdp_to_approx(Fraction(0), Fraction(1, 100))
        ApproxDP(epsilon=Fraction(0, 1), delta=Fraction(1, 100))
    """
    rho = ZCDP(Fraction(rho)).rho
    delta = _check_delta(delta)
    epsilon = rho + 2 * sqrt_up(rho * ln_up(1 / delta))
    return ApproxDP(grid_up(epsilon), delta)


def approx_to_zcdp_cap(epsilon: Fraction, delta: Fraction) -> ZCDP:
    """The largest ρ (rounded down) whose (ε, δ) conversion stays within ``(epsilon, delta)``.

    A zCDP dataset whose custodian thinks in (ε, δ) gets this ρ as its cap: any total ρ' <= ρ
    converts, by :func:`zcdp_to_approx`, to an ε' <= ``epsilon`` at the same δ. The closed form is
    ρ* = (√(L + ε) − √L)² with L = ln(1/δ); it is bounded from below and then checked against the
    upward conversion, so the guarantee holds for the rounded numbers actually used.

    Example:
        >>> cap = approx_to_zcdp_cap(Fraction(1), Fraction(1, 10**6))
        >>> zcdp_to_approx(cap.rho, Fraction(1, 10**6)).epsilon <= 1
        True
    """
    epsilon = ApproxDP(Fraction(epsilon), Fraction(0)).epsilon
    delta = _check_delta(delta)
    # ρ* decreases in L, so an upper bound on L gives a lower bound on ρ*.
    log_inv_delta = ln_up(1 / delta)
    gap = sqrt_down(log_inv_delta + epsilon) - sqrt_up(log_inv_delta)
    rho = grid_down(gap * gap) if gap > 0 else Fraction(0)
    shrink = Fraction(1) - Fraction(1, 2**64)
    while rho > 0 and zcdp_to_approx(rho, delta).epsilon > epsilon:
        rho = grid_down(rho * shrink)
    return ZCDP(rho)


def _refuse(loss: Loss, definition: Definition, why: str, fix: str) -> ConfigurationError:
    return ConfigurationError(
        f"A loss of {loss} cannot be charged to a dataset accounted as {definition!r}.",
        why=why,
        fix=fix,
    )


def convert(loss: Loss, definition: Definition | str) -> Loss:
    """Express a *spent* loss in ``definition``'s type, rounding up (the result is always sound).

    Pure ε becomes (ε, 0) or ρ = ε²/2; (ε, 0) becomes pure ε; everything else that would need an
    unsound step is refused.

    Raises:
        ConfigurationError: when no sound conversion exists (say why, and what would work).

    Example:
        >>> convert(PureDP(Fraction(1, 10)), "approx")
        ApproxDP(epsilon=Fraction(1, 10), delta=Fraction(0, 1))
    """
    target = parse_definition(definition)
    source = definition_of(loss)
    if source == target:
        return loss
    if isinstance(loss, PureDP):
        if target == "approx":
            return ApproxDP(loss.epsilon, Fraction(0))
        return pure_to_zcdp(loss.epsilon)
    if isinstance(loss, ApproxDP):
        if loss.delta == 0:
            return convert(PureDP(loss.epsilon), target)
        raise _refuse(
            loss,
            target,
            "an (ε, δ) guarantee with δ > 0 implies neither a pure ε nor a zCDP ρ.",
            "account this dataset as 'approx', or use a mechanism with a pure or zCDP guarantee.",
        )
    if target == "approx":
        raise _refuse(
            loss,
            target,
            "converting ρ to (ε, δ) needs a δ, and adding per-release conversions wastes budget.",
            "account this dataset as 'zcdp' (ρ adds up; convert the total with zcdp_to_approx).",
        )
    raise _refuse(
        loss,
        target,
        "a zCDP guarantee does not imply any pure ε.",
        "account this dataset as 'zcdp', or use a mechanism with a pure ε guarantee.",
    )


def cap_as(cap: Loss, definition: Definition | str) -> Loss:
    """Express a budget *cap* in ``definition``'s type, rounding down (never allowing more).

    A pure cap ε allows (ε, 0) under 'approx'; an (ε, δ) cap allows ε under 'pure' and, for δ > 0,
    :func:`approx_to_zcdp_cap` under 'zcdp'; a ρ cap allows ε = √(2ρ) (rounded down) under 'pure'.

    Raises:
        ConfigurationError: when the cap cannot be met by totals of the target type.

    Example:
        >>> cap_as(ZCDP(Fraction(1, 2)), "pure")
        PureDP(epsilon=Fraction(1, 1))
    """
    target = parse_definition(definition)
    source = definition_of(cap)
    if source == target:
        return cap
    if isinstance(cap, PureDP):
        if target == "approx":
            return ApproxDP(cap.epsilon, Fraction(0))
        raise ConfigurationError(
            f"A pure cap of {cap} cannot bound a dataset accounted as 'zcdp'.",
            why="no total ρ, however small, guarantees a pure ε.",
            fix="give the cap as rho, or as (epsilon, delta) with delta > 0.",
        )
    if isinstance(cap, ApproxDP):
        if target == "pure":
            return PureDP(cap.epsilon)
        if cap.delta == 0:
            raise ConfigurationError(
                f"A cap of {cap} cannot bound a dataset accounted as 'zcdp'.",
                why="zCDP implies (ε, δ)-DP only for δ > 0.",
                fix="give the cap as rho, or with a positive delta such as 1e-6.",
            )
        return approx_to_zcdp_cap(cap.epsilon, cap.delta)
    if target == "pure":
        return PureDP(sqrt_down(2 * cap.rho))
    raise ConfigurationError(
        f"A zCDP cap of {cap} cannot bound a dataset accounted as 'approx'.",
        why="(ε, δ) losses do not add up to a zCDP ρ.",
        fix="give the cap as (epsilon, delta), or account the dataset as 'zcdp'.",
    )
