"""Private partition selection: which groups of a GROUP BY without public keys may be released.

Each observed group's count of privacy units gets discrete Laplace noise of scale ``t`` (the
count vector has L1 sensitivity Δ, so ``t = Δ/ε`` gives ε-DP on groups present in both
neighbouring datasets). A group is released only if its noisy count reaches a threshold τ. A group
that exists only because of one unit has a true count of at most ``c`` (1 for distinct units) and
there are at most ``k`` such groups, so it is released with probability at most

    k · P(c + Z ≥ τ) = k · q^(τ−c) / (1 + q),   q = exp(−1/t),

which τ makes at most δ. Together: (ε, δ)-DP for the released groups and their counts (Korolova
et al. 2009; Desfontaines et al. 2022 for the tight analysis of thresholding).

Example:
    >>> from fractions import Fraction
    >>> laplace_threshold(Fraction(2), Fraction(1, 10**6), groups=1, max_count=1)
    28
"""

from __future__ import annotations

import math
from fractions import Fraction

from dalenius.core.errors import ConfigurationError
from dalenius.mechanisms._bounds import exp_bounds


def laplace_threshold(scale: Fraction, delta: Fraction, *, groups: int, max_count: int) -> int:
    """The smallest τ with ``groups · P(max_count + Z >= τ) <= delta`` for discrete Laplace ``Z``.

    Args:
        scale: the discrete Laplace scale ``t`` used for the counts.
        delta: the failure probability to spend.
        groups: the most groups one unit can create (its L0 contribution).
        max_count: the most one unit adds to one group's count.

    The tail is certified with rational bounds on ``exp``, so τ is never too small.
    """
    if not 0 < delta < 1:
        raise ConfigurationError(
            f"delta must be in (0, 1) for partition selection, got {float(delta):.3g}.",
            fix="pass a small delta such as 1e-6.",
        )
    if scale <= 0 or groups < 1 or max_count < 1:
        raise ConfigurationError("scale, groups and max_count must be positive.")
    target = delta / groups

    def tail_upper(m: int) -> Fraction:
        # P(Z >= m) = q^m / (1 + q) for m >= 0; an upper bound from exp bounds.
        _, qm_hi = exp_bounds(-Fraction(m) / scale)
        q_lo, _ = exp_bounds(-1 / scale)
        return qm_hi / (1 + q_lo)

    guess = float(scale) * math.log(groups / (float(delta) * (1 + math.exp(-1 / float(scale)))))
    m = max(0, math.ceil(guess))
    while m > 0 and tail_upper(m - 1) <= target:
        m -= 1
    while tail_upper(m) > target:
        m += 1
    return max_count + m
