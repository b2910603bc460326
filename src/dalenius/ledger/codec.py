"""Exact text encodings of losses and timestamps, as the ledger stores them.

Losses are stored as exact rationals (``numerator/denominator``), never as floats, so what the
ledger adds up is exactly what was charged. Timestamps are stored as ISO-8601 text in UTC with
microseconds, so comparing the text compares the times, in SQLite and PostgreSQL alike.

Example:
    >>> encode_loss(ApproxDP(Fraction(1, 2), Fraction(1, 10**6)))
    'approx:1/2,1/1000000'
    >>> decode_loss("zcdp:1/8")
    ZCDP(rho=Fraction(1, 8))
"""

from __future__ import annotations

from datetime import UTC, datetime
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


def encode_time(moment: datetime) -> str:
    """ISO-8601 text in UTC with microseconds (sorts as the times do).

    Example:
        >>> encode_time(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC))
        '2024-01-02T03:04:05.000000+00:00'
    """
    if moment.tzinfo is None:
        raise InternalError(
            "The ledger's clock returned a naive datetime; it must be timezone-aware."
        )
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def decode_time(text: str) -> datetime:
    """Read a timestamp written by :func:`encode_time`."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InternalError(f"The ledger holds a malformed time {text!r}.") from None
