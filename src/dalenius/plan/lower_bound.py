"""The accuracy floor γ explain shows beside each measurement's error (course document 004, Thm 4).

Why: an error bar alone does not say whether a better mechanism could do much better. Course
document 004, Theorem 4, answers it: for any family of one-dimensional (ε, δ)-DP mechanisms on a
domain ``D``, the worst expected error ``γ = max_d E|Y_d − d|`` is at least
``(1−δ)·diam(D)/(2(1 + e^ε))``.

Applied to one group's answer: take two neighbouring tables whose exact answers ``a`` and ``b``
differ by the most one privacy unit can move that answer, ``Δ∞``. Any (ε, δ)-DP mechanism
answering the query gives, on these two tables, a family ``{Y_a, Y_b}`` that satisfies the
theorem's premise on the two-point domain ``{a, b}`` of diameter ``Δ∞``. So on one of the two
tables its mean absolute error is at least ``(1−δ)·Δ∞/(2(1 + e^ε))`` — for every mechanism, not
only Dalenius's. It is a bound on the *worst case over tables* of the *mean absolute* error,
not a confidence half-width, and not a statement about this table.

``Δ∞`` is the per-group (L∞) sensitivity, not the L1 sensitivity over all groups: a unit can put
all its capped rows in one group, so for counts and sums the two coincide, but ``COUNT(DISTINCT
unit)`` moves each group by at most 1 however many groups a unit reaches. It is attained by
some pair of neighbouring tables whenever the table's values can reach the clipping bounds; a
filter that keeps values away from the bounds makes it an upper bound, and γ then is the floor
for the query class "answers one unit can move by Δ∞", which this query belongs to.
"""

from __future__ import annotations

from fractions import Fraction

from dalenius.mechanisms.calibration import accuracy_lower_bound
from dalenius.plan.nodes import Measurement

CITATION = "course document 004, Theorem 4"

BASIS = (
    "γ: no (ε, δ)-DP mechanism answering a query that one privacy unit can move by Δ has a "
    "worst-case mean absolute error below γ = (1−δ)·Δ/(2(1+e^ε)), Δ the most one unit moves "
    f"one group's answer ({CITATION}); γ is a floor on the mean |error|, not on the error bar."
)
"""What the γ column means, shown once under explain's table."""


def group_sensitivity(m: Measurement) -> Fraction:
    """``Δ∞``: the most one privacy unit moves one group's exact answer, in the value's units.

    Example:
        >>> from dalenius.plan.nodes import Measurement
        >>> m = Measurement("m0", "count_distinct", None, "int", None, Fraction(0), Fraction(1),
        ...                 1, 3, Fraction(1), distinct_unit=True)
        >>> group_sensitivity(m)
        Fraction(1, 1)
    """
    if m.distinct_unit and m.sensitivity_units > 0:
        # Each unit is counted at most once in each group.
        return m.granularity * m.row_units
    return m.sensitivity


def measurement_floor(m: Measurement, delta: Fraction = Fraction(0)) -> Fraction:
    """γ for one group's answer of ``m`` at the measurement's ε and ``delta`` (rounded down).

    0 when nothing one unit does moves the answer (sensitivity 0: the answer is exact).
    """
    diameter = group_sensitivity(m)
    if diameter == 0 or m.epsilon == 0:
        return Fraction(0)
    return accuracy_lower_bound(diameter, m.epsilon, delta)
