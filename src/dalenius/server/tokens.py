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

import base64
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


SCRAM_ITERATIONS = 4096
"""PBKDF2 rounds of a SCRAM verifier: PostgreSQL's default. The token's 256 random bits, not the
rounds, are what makes guessing it from a stolen verifier hopeless."""


def scram_salt(principal: str) -> bytes:
    """The SCRAM salt of all of a principal's tokens: derived from the name, so that the
    listener's challenge does not depend on which token a client holds, nor on whether the name
    exists. A salt defends low-entropy passwords against precomputation; a token has 256 random
    bits, so a salt known in advance costs nothing.

    Example:
        >>> len(scram_salt("alice")), scram_salt("alice") == scram_salt("bob")
        (16, False)
    """
    return hashlib.sha256(b"dalenius scram salt\x00" + principal.encode("utf-8")).digest()[:16]


def scram_verifier(token: str, salt: bytes) -> str:
    """The SCRAM-SHA-256 verifier of a token, in PostgreSQL's own stored form.

    ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` (RFC 5802, RFC 7677): it lets
    the PostgreSQL listener check a client's proof of the token without the token crossing the
    network, and, like the hash, it cannot be used to sign in.

    Example:
        >>> scram_verifier("dlt_x", b"0123456789abcdef")[:30]
        'SCRAM-SHA-256$4096:MDEyMzQ1Njc'
    """
    salted = hashlib.pbkdf2_hmac("sha256", token.encode("utf-8"), salt, SCRAM_ITERATIONS)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = base64.b64encode
    return (
        f"SCRAM-SHA-256${SCRAM_ITERATIONS}:{b64(salt).decode()}"
        f"${b64(stored_key).decode()}:{b64(server_key).decode()}"
    )


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
