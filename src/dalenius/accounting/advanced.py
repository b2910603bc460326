"""Advanced composition of k (ε, δ)-DP releases (Dwork, Rothblum & Vadhan 2010), rounded up.

For k adaptively chosen mechanisms, each (ε, δ)-DP, and any δ' > 0, the composition is
(ε', kδ + δ')-DP with

    ε' = ε·√(2k·ln(1/δ')) + k·ε·(e^ε − 1).

For small ε and many releases ε' grows like √k instead of k. The ledger's 'approx' definition
charges by basic composition (each release adds its ε and δ), which is always valid, even for
releases of different sizes decided one at a time; use this function to plan a workload of k
identical releases in advance, and :func:`best_composition` to pick whichever bound is smaller.

Example:
    >>> one = ApproxDP(Fraction(1, 100), Fraction(0))
    >>> loss = advanced_composition(one, 1000, Fraction(1, 10**6))
    >>> round(float(loss.epsilon), 4), float(loss.delta)
    (1.7628, 1e-06)
"""

from __future__ import annotations

from fractions import Fraction

from dalenius.core.errors import ConfigurationError, InvalidLossError
from dalenius.core.exact import exp_up, grid_up, ln_up, sqrt_up
from dalenius.core.loss import ApproxDP, PureDP


def _check(k: int, delta_prime: Fraction) -> Fraction:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigurationError(
            f"The number of releases k must be a positive integer, got {k!r}.",
            fix="pass k >= 1.",
        )
    slack = Fraction(delta_prime)
    if not 0 < slack < 1:
        raise InvalidLossError(
            f"delta_prime must be in (0, 1), got {float(slack):.6g}.",
            why="advanced composition trades a failure probability δ' > 0 for a smaller ε.",
            fix="pass a small delta_prime such as 1e-6.",
        )
    return slack


def advanced_composition(loss: ApproxDP | PureDP, k: int, delta_prime: Fraction) -> ApproxDP:
    """The (ε', kδ + δ') guarantee of k releases that are each ``loss``, with ε' rounded up.

    Args:
        loss: the loss of one release (pure ε counts as (ε, 0)).
        k: how many releases, ``>= 1``.
        delta_prime: the extra failure probability δ', in ``(0, 1)``.

    Raises:
        ConfigurationError: for a ``k`` that is not a positive integer.
        InvalidLossError: for ``delta_prime`` outside (0, 1), or when kδ + δ' >= 1.

    Example:
        >>> advanced_composition(PureDP(Fraction(0)), 5, Fraction(1, 10)).epsilon
        Fraction(0, 1)
    """
    slack = _check(k, delta_prime)
    single = loss if isinstance(loss, ApproxDP) else ApproxDP(loss.epsilon, Fraction(0))
    epsilon = single.epsilon
    spread = epsilon * sqrt_up(2 * k * ln_up(1 / slack))
    drift = k * epsilon * (exp_up(epsilon) - 1)
    return ApproxDP(grid_up(spread + drift), k * single.delta + slack)


def best_composition(loss: ApproxDP | PureDP, k: int, delta_prime: Fraction) -> ApproxDP:
    """The tighter of basic composition (kε, kδ) and advanced composition, compared on ε.

    Basic composition is returned when its ε is no larger, since it also has the smaller δ.

    Example:
        >>> best_composition(PureDP(Fraction(1)), 2, Fraction(1, 10**6))
        ApproxDP(epsilon=Fraction(2, 1), delta=Fraction(0, 1))
    """
    slack = _check(k, delta_prime)
    single = loss if isinstance(loss, ApproxDP) else ApproxDP(loss.epsilon, Fraction(0))
    basic = ApproxDP(k * single.epsilon, k * single.delta)
    advanced = advanced_composition(single, k, slack)
    return basic if basic.epsilon <= advanced.epsilon else advanced
