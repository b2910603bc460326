"""The exact text encoding of losses, as the ledger stores them.

Losses are stored as exact rationals (``numerator/denominator``), never as floats, so what the
ledger adds up is exactly what was charged. (Times are encoded by
:func:`dalenius.ledger.storage.encode_time`, shared with the gateway's records.)

Example:
    >>> encode_loss(ApproxDP(Fraction(1, 2), Fraction(1, 10**6)))
    'approx:1/2,1/1000000'
    >>> decode_loss("zcdp:1/8")
    ZCDP(rho=Fraction(1, 8))
"""

from __future__ import annotations

from fractions import Fraction

from dalenius.core.errors import InternalError, InvalidLossError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP


def _frac(x: Fraction) -> str:
    return f"{x.numerator}/{x.denominator}"


def encode_loss(loss: Loss) -> str:
    """The exact text form of a loss: ``kind:num/den[,num/den]``."""
    if isinstance(loss, PureDP):
        return f"pure:{_frac(loss.epsilon)}"
    if isinstance(loss, ApproxDP):
        return f"approx:{_frac(loss.epsilon)},{_frac(loss.delta)}"
    return f"zcdp:{_frac(loss.rho)}"


def _parse_fraction(text: str) -> Fraction:
    numerator, slash, denominator = text.partition("/")
    if not slash or not numerator.isdigit() or not denominator.isdigit():
        raise ValueError(text)
    return Fraction(int(numerator), int(denominator))


def decode_loss(text: str) -> Loss:
    """Read a loss written by :func:`encode_loss`.

    Raises:
        InternalError: if the text is not a valid encoding (a corrupted or foreign ledger).
    """
    kind, _, body = text.partition(":")
    try:
        parts = [_parse_fraction(part) for part in body.split(",")]
        if kind == "pure" and len(parts) == 1:
            return PureDP(parts[0])
        if kind == "approx" and len(parts) == 2:
            return ApproxDP(parts[0], parts[1])
        if kind == "zcdp" and len(parts) == 1:
            return ZCDP(parts[0])
    except (ValueError, ZeroDivisionError, InvalidLossError):
        pass
    raise InternalError(f"The ledger holds a malformed loss {text!r}; the store may be corrupted.")
