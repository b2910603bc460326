"""Cost: how a query's ε is split across its measurements (sequential composition).

Each measurement (a noisy count or a noisy clipped sum, over all groups at once) receives an equal
share ε/k. Group keys are disjoint, so one measurement over many groups costs its share once
(parallel composition); the shares add up exactly to the ε the analyst asked for.

Example:
    >>> from fractions import Fraction
    >>> split_equally(Fraction(1), 3)
    (Fraction(1, 3), Fraction(1, 3), Fraction(1, 3))
"""

from __future__ import annotations

from fractions import Fraction


def split_equally(epsilon: Fraction, parts: int) -> tuple[Fraction, ...]:
    """Split ``epsilon`` into ``parts`` equal exact shares that sum to ``epsilon``."""
    if parts <= 0:
        raise ValueError(f"parts must be positive, got {parts}")
    share = epsilon / parts
    return tuple(share for _ in range(parts))
