"""Sequential and parallel composition, and the budget arithmetic built on them.

Under every definition Dalenius supports, sequential composition adds the losses component by
component: ε's add (pure DP), ε's and δ's add (basic composition of (ε, δ)-DP), ρ's add (zCDP).
Losses are first converted to the dataset's definition with
:func:`~dalenius.accounting.convert.convert` (rounding up); the sums themselves are exact.
Parallel composition over *disjoint* parts of the data costs only the largest part's loss.

A budget check compares component by component: a request fits when ``spent + request <= cap`` in
every component. What remains is ``cap - spent``, clamped at zero.

Example:
    >>> compose([PureDP(Fraction(1, 10)), PureDP(Fraction(1, 5))], "pure")
    PureDP(epsilon=Fraction(3, 10))
    >>> fits(PureDP(Fraction(1, 2)), PureDP(Fraction(1, 2)), PureDP(Fraction(1)))
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from dalenius.accounting.convert import convert
from dalenius.accounting.definitions import (
    Definition,
    definition_of,
    parse_definition,
    zero_loss,
)
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP


def components(loss: Loss) -> tuple[tuple[str, Fraction], ...]:
    """The named components of a loss, in the order they are reported.

    Example:
        >>> components(ApproxDP(Fraction(1), Fraction(1, 10**6)))
        (('epsilon', Fraction(1, 1)), ('delta', Fraction(1, 1000000)))
    """
    if isinstance(loss, PureDP):
        return (("epsilon", loss.epsilon),)
    if isinstance(loss, ApproxDP):
        return (("epsilon", loss.epsilon), ("delta", loss.delta))
    return (("rho", loss.rho),)


def _build(definition: Definition, values: list[Fraction]) -> Loss:
    if definition == "pure":
        return PureDP(values[0])
    if definition == "approx":
        return ApproxDP(values[0], values[1])
    return ZCDP(values[0])


def _values(loss: Loss, definition: Definition) -> list[Fraction]:
    return [value for _, value in components(convert(loss, definition))]


def compose(losses: Iterable[Loss], definition: Definition | str) -> Loss:
    """Sequential composition: the sum of ``losses``, each converted (up) to ``definition``.

    Raises:
        ConfigurationError: if a loss has no sound conversion to ``definition``.
        InvalidLossError: if the (ε, δ) sum reaches δ >= 1, which promises nothing.

    Example:
        >>> compose([], "zcdp")
        ZCDP(rho=Fraction(0, 1))
    """
    return compose_counted(((loss, 1) for loss in losses), definition)


def compose_counted(losses: Iterable[tuple[Loss, int]], definition: Definition | str) -> Loss:
    """Sequential composition of ``count`` copies of each loss: exactly :func:`compose` of them.

    A ledger adds up thousands of charges, most of them equal; it counts equal charges in SQL and
    composes the counts here.

    Example:
        >>> compose_counted([(PureDP(Fraction(1, 10)), 3), (PureDP(Fraction(1, 2)), 1)], "pure")
        PureDP(epsilon=Fraction(4, 5))
    """
    target = parse_definition(definition)
    totals = [value for _, value in components(zero_loss(target))]
    for loss, count in losses:
        if count < 0:
            raise ValueError(f"a loss cannot be composed {count} times")
        for i, value in enumerate(_values(loss, target)):
            totals[i] += value * count
    return _build(target, totals)


def parallel(losses: Iterable[Loss], definition: Definition | str) -> Loss:
    """Parallel composition over disjoint parts: the component-wise maximum of ``losses``.

    Valid only when each privacy unit can influence at most one of the parts (a partition of the
    units, such as the groups of a GROUP BY with one group per unit); the caller vouches for that.

    Example:
        >>> parallel([PureDP(Fraction(1)), PureDP(Fraction(1, 2))], "pure")
        PureDP(epsilon=Fraction(1, 1))
    """
    target = parse_definition(definition)
    best = [value for _, value in components(zero_loss(target))]
    for loss in losses:
        best = [max(a, b) for a, b in zip(best, _values(loss, target), strict=True)]
    return _build(target, best)


def leq(a: Loss, b: Loss) -> bool:
    """Whether ``a <= b`` in every component (``a`` is converted up to ``b``'s definition).

    Example:
        >>> leq(PureDP(Fraction(1)), ApproxDP(Fraction(1), Fraction(0)))
        True
    """
    target = definition_of(b)
    return all(x <= y for x, (_, y) in zip(_values(a, target), components(b), strict=True))


def minimum(a: Loss, b: Loss) -> Loss:
    """The component-wise minimum of two losses of one definition (the tighter of two caps).

    Example:
        >>> minimum(ApproxDP(Fraction(1), Fraction(1, 10)), ApproxDP(Fraction(2), Fraction(1, 100)))
        ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 100))
    """
    target = definition_of(a)
    if definition_of(b) != target:
        raise ConfigurationError(
            f"Cannot take the minimum of {a} and {b}: they are losses of different definitions.",
            fix="convert both caps to the dataset's definition with cap_as first.",
        )
    values = [min(x, y) for (_, x), (_, y) in zip(components(a), components(b), strict=True)]
    return _build(target, values)


def remaining(spent: Loss, cap: Loss) -> Loss:
    """What is left of ``cap`` after ``spent`` (converted up to the cap's type), clamped at zero.

    Example:
        >>> remaining(PureDP(Fraction(3, 4)), PureDP(Fraction(1)))
        PureDP(epsilon=Fraction(1, 4))
        >>> remaining(PureDP(Fraction(2)), PureDP(Fraction(1)))
        PureDP(epsilon=Fraction(0, 1))
    """
    target = definition_of(cap)
    values = [
        max(c - s, Fraction(0))
        for s, (_, c) in zip(_values(spent, target), components(cap), strict=True)
    ]
    return _build(target, values)


def fits(spent: Loss, request: Loss, cap: Loss) -> bool:
    """Whether ``spent + request <= cap`` in every component of the cap's definition.

    Example:
        >>> fits(PureDP(Fraction(1, 2)), PureDP(Fraction(3, 5)), PureDP(Fraction(1)))
        False
    """
    return shortfall(spent, request, cap) is None


@dataclass(frozen=True)
class Shortfall:
    """The first component in which a request does not fit: its name, the request, what is left."""

    measure: str
    requested: Fraction
    remaining: Fraction


def shortfall(spent: Loss, request: Loss, cap: Loss) -> Shortfall | None:
    """The first component in which ``spent + request`` exceeds ``cap``, or ``None`` if it fits.

    Example:
        >>> shortfall(PureDP(Fraction(1, 2)), PureDP(Fraction(3, 5)), PureDP(Fraction(1)))
        Shortfall(measure='epsilon', requested=Fraction(3, 5), remaining=Fraction(1, 2))
    """
    target = definition_of(cap)
    used = _values(spent, target)
    asked = _values(request, target)
    for (name, limit), before, value in zip(components(cap), used, asked, strict=True):
        # Compared as a sum, not against the clamped remainder: when a cap was lowered below
        # what is already spent, even a zero request does not fit.
        if before + value > limit:
            return Shortfall(name, value, max(limit - before, Fraction(0)))
    return None
