"""The three accounting definitions a custodian may choose for a dataset, and their zero losses.

A dataset's *definition* fixes the type in which every loss charged against it is added up:
``"pure"`` (ε, sequential composition), ``"approx"`` ((ε, δ), basic composition) or ``"zcdp"``
(ρ, additive). Naming the definition once per dataset keeps the ledger's sums homogeneous, so
composition is a plain exact sum and never mixes incomparable quantities.

Example:
    >>> parse_definition("zCDP")
    'zcdp'
    >>> zero_loss("approx")
    ApproxDP(epsilon=Fraction(0, 1), delta=Fraction(0, 1))
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP

Definition = Literal["pure", "approx", "zcdp"]
"""Name of an accounting definition."""

DEFINITIONS: tuple[Definition, ...] = ("pure", "approx", "zcdp")
"""Every accounting definition, in order of increasing generality of the losses they add."""

_BY_NAME: dict[str, Definition] = {
    **{name: name for name in DEFINITIONS},
    "epsilon": "pure",
    "epsilon-delta": "approx",
    "rho": "zcdp",
}


def parse_definition(name: str) -> Definition:
    """Read a definition name (case-insensitive), refusing unknown ones with the valid choices.

    Raises:
        ConfigurationError: if ``name`` is not one of :data:`DEFINITIONS`.

    Example:
        >>> parse_definition("pure")
        'pure'
    """
    found = _BY_NAME.get(str(name).strip().lower())
    if found is not None:
        return found
    raise ConfigurationError(
        f"Unknown accounting definition {name!r}.",
        why="a dataset's losses are added up under exactly one definition.",
        fix=f"use one of {', '.join(DEFINITIONS)}.",
    )


def definition_of(loss: Loss) -> Definition:
    """The definition whose native loss type ``loss`` is.

    Example:
        >>> definition_of(PureDP(Fraction(1)))
        'pure'
    """
    if isinstance(loss, PureDP):
        return "pure"
    if isinstance(loss, ApproxDP):
        return "approx"
    if isinstance(loss, ZCDP):
        return "zcdp"
    raise ConfigurationError(
        f"Expected a privacy loss (PureDP, ApproxDP or ZCDP), got {type(loss).__name__}.",
        fix="build the loss with dalenius.core.loss.PureDP, ApproxDP or ZCDP.",
    )


def zero_loss(definition: Definition) -> Loss:
    """The loss of releasing nothing, in the native type of ``definition``."""
    if definition == "pure":
        return PureDP(Fraction(0))
    if definition == "approx":
        return ApproxDP(Fraction(0), Fraction(0))
    return ZCDP(Fraction(0))
