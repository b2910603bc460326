"""SCRAM-SHA-256 sign-in (RFC 5802, RFC 7677) for the PostgreSQL listener, server side.

The client proves it holds a token without sending it: the gateway keeps, per token, only the
verifier :func:`~dalenius.server.tokens.scram_verifier` wrote when the token was issued. All of a
principal's tokens share one salt derived from the principal's name
(:func:`~dalenius.server.tokens.scram_salt`), so the server's first message is the same whichever
token the client holds, and the same for a name that does not exist — it tells a guesser
nothing. Channel binding (``SCRAM-SHA-256-PLUS``) is not offered; over TLS the listener can take
the token itself (cleartext inside TLS) instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

from dalenius.server.store import Caller
from dalenius.server.tokens import SCRAM_ITERATIONS, scram_salt

MECHANISM = "SCRAM-SHA-256"


class ScramFailure(Exception):
    """The exchange is malformed or the proof is wrong (the listener says only "failed")."""


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramFailure("malformed SCRAM message")
        out[key] = value
    return out


class ScramExchange:
    """One sign-in: the client's first message, the server's, the client's proof, the answer.

    Args:
        user: the name from the startup packet (the client's ``n=`` is ignored, as in
            PostgreSQL).
        verifiers: the user's live tokens and their stored verifiers.
    """

    def __init__(self, user: str, verifiers: Sequence[tuple[Caller, str]]) -> None:
        self.user = user
        self.verifiers = [(caller, _parse(v)) for caller, v in verifiers]
        self.salt = scram_salt(user)
        self.nonce = ""
        self.client_first_bare = ""
        self.server_first = ""

    def first(self, client_first: str) -> str:
        """The server-first message for the client-first message."""
        if not client_first.startswith("n,"):
            # "y" or "p": the client wants channel binding, which is not offered.
            raise ScramFailure("channel binding is not supported")
        _, _, bare = client_first.partition(",")
        _, _, bare = bare.partition(",")
        attributes = _attributes(bare)
        client_nonce = attributes.get("r", "")
        if not client_nonce or "," in client_nonce:
            raise ScramFailure("malformed SCRAM nonce")
        self.client_first_bare = bare
        self.nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self.salt).decode()
        self.server_first = f"r={self.nonce},s={salt},i={SCRAM_ITERATIONS}"
        return self.server_first

    def final(self, client_final: str) -> tuple[Caller, str]:
        """The caller whose token the proof shows, and the server-final message.

        Raises:
            ScramFailure: the nonce or the proof is wrong (the same for every reason).
        """
        head, sep, proof_text = client_final.rpartition(",p=")
        if not sep:
            raise ScramFailure("no proof")
        attributes = _attributes(head)
        if attributes.get("r") != self.nonce or attributes.get("c") != "biws":
            raise ScramFailure("wrong nonce or channel binding")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise ScramFailure("malformed proof") from None
        auth = f"{self.client_first_bare},{self.server_first},{head}".encode()
        found = None
        for caller, (stored_key, server_key) in self.verifiers:
            signature = hmac.digest(stored_key, auth, "sha256")
            if len(proof) != len(signature):
                continue
            client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
            if hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key):
                found = (caller, server_key)
        if found is None:
            raise ScramFailure("wrong proof")
        caller, server_key = found
        server_signature = hmac.digest(server_key, auth, "sha256")
        return caller, "v=" + base64.b64encode(server_signature).decode()


def _parse(verifier: str) -> tuple[bytes, bytes]:
    """StoredKey and ServerKey of a verifier ``SCRAM-SHA-256$i:salt$stored:server``."""
    _, _, rest = verifier.partition("$")
    _, _, keys = rest.partition("$")
    stored, _, server = keys.partition(":")
    return base64.b64decode(stored), base64.b64decode(server)
