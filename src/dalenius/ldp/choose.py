"""Which frequency oracle to use for a domain size and ε, and building one by name.

All the oracles are pure protocols, so for a value that is rare (the case that matters) each
report adds ``q(1 − q)/(p − q)²`` to the variance of a count. :func:`best_oracle` builds every
candidate with the exact, rounded ``(p, q)`` it would use and picks the smallest of those numbers;
among oracles within 1% of the best it prefers the shorter report (GRR, HR, OLH, then OUE's
``d`` bits). In closed form: GRR's ``(d − 2 + e^ε)/(e^ε − 1)²`` beats OLH's ``4e^ε/(e^ε − 1)²``
exactly when ``d < 3e^ε + 2``.

Example:
    >>> best_oracle(4, 1).name, best_oracle(1000, 1).name
    ('grr', 'olh')
"""

from __future__ import annotations

from collections.abc import Callable

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number
from dalenius.ldp._base import FrequencyOracle
from dalenius.ldp.grr import GeneralizedRR
from dalenius.ldp.hadamard import HadamardResponse
from dalenius.ldp.hashing import LocalHashing
from dalenius.ldp.unary import UnaryEncoding

FACTORIES: dict[str, Callable[[int, Number], FrequencyOracle]] = {
    "grr": lambda d, eps: GeneralizedRR(d, epsilon=eps),
    "sue": lambda d, eps: UnaryEncoding(d, epsilon=eps, optimized=False),
    "oue": lambda d, eps: UnaryEncoding(d, epsilon=eps, optimized=True),
    "blh": lambda d, eps: LocalHashing(d, epsilon=eps, buckets=2),
    "olh": lambda d, eps: LocalHashing(d, epsilon=eps),
    "hr": lambda d, eps: HadamardResponse(d, epsilon=eps),
}
"""Every frequency oracle by its short name."""

_PREFERENCE = ("grr", "hr", "olh", "oue")


def make_oracle(protocol: str, domain_size: int, epsilon: Number) -> FrequencyOracle:
    """The oracle called ``protocol`` (``grr``, ``sue``, ``oue``, ``blh``, ``olh``, ``hr``).

    Example:
        >>> make_oracle("oue", 10, 1).name
        'oue'
    """
    factory = FACTORIES.get(protocol)
    if factory is None:
        raise ConfigurationError(
            f"unknown frequency protocol {protocol!r}.",
            fix=f"use one of {', '.join(FACTORIES)}.",
        )
    return factory(domain_size, epsilon)


def best_oracle(domain_size: int, epsilon: Number) -> FrequencyOracle:
    """The oracle with the smallest variance per report for ``(d, ε)`` (ties: shorter report)."""
    built = [
        make_oracle(name, domain_size, epsilon) for name in _PREFERENCE if _fits(name, domain_size)
    ]
    best = min(o.variance_per_report() for o in built)
    return next(o for o in built if o.variance_per_report() <= best * 1.01)


def _fits(name: str, domain_size: int) -> bool:
    return not (name == "oue" and domain_size > 1 << 16) and not (
        name == "grr" and domain_size > 1 << 20
    )
