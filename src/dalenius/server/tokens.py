"""API tokens: drawn from :mod:`secrets`, shown once, stored only as a hash, checked in constant time.

A token reads ``dlt_<id>_<secret>``. The ``id`` (8 bytes, hex) is not secret: it names the token in
listings and logs and lets the gateway find its stored hash without searching by secret. The
``secret`` carries 256 bits from the operating system's generator, so a plain SHA-256 of the whole
token is a safe stored form (no password-style stretching is needed against guessing 2^256
values), and the stored hash reveals nothing a thief could sign in with.

Example:
    >>> issued = new_token()
    >>> parse_token(issued.token) == issued.token_id
    True
    >>> verify(issued.token, issued.hash)
    True
    >>> verify(issued.token + "x", issued.hash)
    False
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX = "dlt"
_SHAPE = re.compile(r"^dlt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class IssuedToken:
    """A freshly drawn token: ``token`` is shown once to its owner; only ``hash`` is stored."""

    token_id: str
    token: str
    hash: str


def new_token() -> IssuedToken:
    """Draw a new token from the operating system's cryptographic generator."""
    token_id = secrets.token_hex(8)
    token = f"{PREFIX}_{token_id}_{secrets.token_urlsafe(32)}"
    return IssuedToken(token_id=token_id, token=token, hash=digest(token))


def digest(token: str) -> str:
    """The stored form of a token: hex SHA-256 of its text."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_token(token: str) -> str | None:
    """The id of a well-formed token, or ``None`` if the text cannot be a token."""
    match = _SHAPE.match(token)
    return match.group(1) if match else None


def verify(token: str, stored_hash: str) -> bool:
    """Whether ``token`` hashes to ``stored_hash``, compared in constant time."""
    return hmac.compare_digest(digest(token), stored_hash)
