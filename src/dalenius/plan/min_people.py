"""The minimum-frequency rule: the threshold that keeps cells of fewer than ``k`` people hidden.

Statistical agencies publish no cell resting on fewer than ``k`` people. An exact threshold on
the true count would not be differentially private (whether a cell appears would hinge on one
person), so the catalog's ``min_people = k`` thresholds the cell's *noisy* count of privacy units
instead: the count is already released under ε (a measurement charged like any other, or the
partition selection's own count), and dropping the cells whose noisy count is below a public
threshold ``T`` is post-processing — it costs no ε and no δ.

What the rule guarantees is then a probability, not a certainty: a cell whose true count is at
most ``c_max = per_group·(k − 1)`` (the most a cell of fewer than ``k`` units counts; ``per_group``
is 1 for distinct units) is released only if its noise reaches ``T − c_max``, so with probability
at most ``P(Z >= T − c_max)``. :func:`min_people_rule` picks the smallest ``T`` whose certified
bound on that tail is at most :data:`FAILURE` and records the bound (shown by ``explain``):

* public keys: ``Z`` is the discrete Laplace noise of the count, ``P(Z >= m) = a^m / (1 + a)``
  with ``a = exp(−1/t)``;
* private keys: ``Z`` is the truncated selection's noise, conditioned on ``|Z| <= K`` (``K`` with
  probability ``mix``, else ``K + 1``), whose tail is the mass of its outermost points
  (:func:`dalenius.mechanisms.partition_selection.shift_delta`) and 0 past ``K``.

The derivation is in ``docs/sql.md`` (section "Minimum frequency").

Example:
    >>> from dalenius.mechanisms.partition_selection import Powers
    >>> untruncated_tail(Powers(base=Fraction(1, 2)), 3)
    Fraction(1, 12)
    >>> truncated_tail(Powers(base=Fraction(1, 2)), 2, 3)
    Fraction(0, 1)
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Final

from dalenius.core.errors import InternalError
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.mechanisms.partition_selection import Powers, shift_delta
from dalenius.plan.nodes import Measurement, MinPeople, Selection
from dalenius.plan.noise import mechanism_for

FAILURE: Final = Fraction(1, 10**6)
"""The most probability, per cell, that a cell of fewer than ``min_people`` units is released."""


def untruncated_tail(powers: Powers, m: int) -> Fraction:
    """An upper bound on ``P(Z >= m)``, ``m >= 1``, for discrete Laplace ``Z``: ``a^m / (1 + a)``."""
    a_lo, _ = powers(1)
    _, am_hi = powers(m)
    return am_hi / (1 + a_lo)


def truncated_tail(powers: Powers, truncation: int, m: int) -> Fraction:
    """An upper bound on ``P(Z >= m)``, ``m >= 1``, for discrete Laplace conditioned on
    ``|Z| <= truncation``: the mass of its ``truncation − m + 1`` outermost points, or 0.
    """
    if m > truncation:
        return Fraction(0)
    return shift_delta(powers, truncation, truncation - m + 1)


def smallest_margin(tail: Callable[[int], Fraction], failure: Fraction) -> int:
    """The smallest ``m >= 1`` found with ``tail(m) <= failure`` (``tail`` non-increasing).

    Doubling then bisection: a bound that is not exactly monotone can only make ``m`` larger
    than needed, never one whose tail exceeds ``failure``.
    """
    high = 1
    while tail(high) > failure:
        high *= 2
    low = high // 2  # tail(low) > failure, or low == 0
    while high - low > 1:
        mid = (low + high) // 2
        if tail(mid) <= failure:
            high = mid
        else:
            low = mid
    return high


def min_people_rule(
    m: Measurement,
    people: int,
    per_group: int,
    selection: Selection | None,
    *,
    failure: Fraction = FAILURE,
    powers: Powers | None = None,
) -> MinPeople:
    """The rule for the noisy unit count ``m``: cells released iff their noisy count >= ``T``.

    Args:
        m: the count of privacy units per cell (priced: its ε share is set).
        people: the catalog's ``min_people`` (``k >= 2``).
        per_group: the most one unit adds to one cell's count.
        selection: the truncated partition selection drawing ``m``'s noise, if the keys are
            private (its truncation ``K`` and mix are read), else ``None`` (plain discrete
            Laplace).
        failure: the largest probability accepted that a cell of fewer than ``people`` units
            is released.
        powers: bounds on the powers of ``a = exp(−1/t)`` (the exact tests pass a rational
            base); by default from the count's own noise scale.
    """
    if people < 2 or per_group < 1:
        raise InternalError(
            f"min_people needs k >= 2 and per_group >= 1, got {people}, {per_group}"
        )
    if powers is None:
        mechanism = mechanism_for(m) if m.epsilon > 0 else None
        if not isinstance(mechanism, IntegerLaplace):
            # The rule's tail bound is the discrete Laplace's: a Gaussian plan never has a rule.
            raise InternalError(f"the min_people count {m.name} has no Laplace noise to threshold")
        powers = Powers(scale=mechanism.scale)
    at = powers

    def tail(margin: int) -> Fraction:
        if selection is None:
            return untruncated_tail(at, margin)
        k, mix = selection.threshold - 1, selection.mix
        return mix * truncated_tail(at, k, margin) + (1 - mix) * truncated_tail(at, k + 1, margin)

    margin = smallest_margin(tail, failure)
    most = per_group * (people - 1)
    return MinPeople(
        measurement=m.name, people=people, threshold=most + margin, failure=tail(margin)
    )
