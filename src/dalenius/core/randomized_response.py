"""k-ary randomized response: its calibration, its privacy map and its exact sampler, once.

Each respondent holding one of ``k = m + 1`` categories keeps it with probability ``1 − m·p``, or
moves to each of the ``m`` others with probability ``p``. This is (ε, δ)-DP exactly when
``p >= (1 − δ)/(m + e^ε)`` (the derivation is in ``docs/mechanisms/randomized_response.md``).

Three users share it: the central mechanism (:mod:`dalenius.mechanisms.randomized_response`,
survey answers with (ε, δ) and a rational ``p``), and two local protocols, k-RR
(:mod:`dalenius.ldp.grr`, pure ε) and local hashing (:mod:`dalenius.ldp.hashing`, randomized
response over the hash buckets). Mechanisms and local protocols are sibling layers that may not
import each other, so the one implementation lives here, below both; each user keeps only what
belongs to its framework (validation, estimators, report formats).

Example:
    >>> move_probability(2, Fraction(0))
    Fraction(1, 2)
    >>> p = move_probability(4, Fraction(1))
    >>> (1 - 3 * p) / p <= Fraction(2.718281828459045)
    True
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.exact import exp_bounds, grid_up, ln_bounds, round_up

MOVE_BITS = 32
"""A ``p`` derived from ε is rounded up to a multiple of ``2**-32``: one 32-bit uniform word
decides each report exactly."""


def move_probability(categories: int, epsilon: Fraction, delta: Fraction = Fraction(0)) -> Fraction:
    """The smallest safe ``p`` on the ``2**-32`` grid: ``>= (1 − δ)/(m + e^ε)``, capped at ``1/k``.

    The lower bound of ``e^ε`` makes the threshold larger, and rounding ``p`` up keeps it above:
    a larger ``p`` only moves more reports.

    Example:
        >>> move_probability(3, Fraction(0))
        Fraction(1, 3)
    """
    m = categories - 1
    e_lo, _ = exp_bounds(epsilon)
    bound = (1 - delta) / (m + e_lo)
    return min(grid_up(bound, MOVE_BITS), Fraction(1, categories))


def epsilon_for(categories: int, p: Fraction, delta: Fraction = Fraction(0)) -> Fraction:
    """The ε (rounded up) that k-ary randomized response with ``p`` satisfies at δ.

    ``ε = ln((1 − m·p − δ)/p)``, or 0 when that is not positive.

    Example:
        >>> round(float(epsilon_for(2, Fraction(1, 4))), 12)  # ln 3
        1.098612288668
    """
    m = categories - 1
    ratio = (1 - m * p - delta) / p
    if ratio <= 1:
        return Fraction(0)
    _, hi = ln_bounds(ratio)
    return round_up(hi)


def respond(
    codes: npt.NDArray[np.int64], categories: int, moves: int, draws: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Each respondent's report, from one uniform integer per respondent.

    ``draws`` are uniform below some ``D`` and ``p = moves/D``: a draw ``r < m·moves`` moves the
    answer to the ``(r // moves + 1)``-th next category (cyclically), each of the ``m`` others
    with probability exactly ``moves/D = p``; any other draw keeps it.

    Example:
        >>> respond(np.array([0, 0, 0]), 3, 1, np.array([0, 1, 2]))
        array([1, 2, 0])
    """
    m = categories - 1
    moved = draws < m * moves
    return np.where(moved, (codes + draws // moves + 1) % categories, codes)
