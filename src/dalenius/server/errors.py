"""One JSON error shape for every answer that is not a success, and the HTTP status of each error.

Every error body is ``{"error": {...}}`` where the inner object is
:meth:`dalenius.core.errors.UserError.to_dict` — ``code``, ``message``, ``why``, ``fix``, and for SQL
errors ``clause``, ``line``, ``column``, ``span`` — plus the ``request_id`` that names the request
in the gateway's log. The status says who must act:

====== ======================================================================================
status  meaning (``code``)
====== ======================================================================================
400     bad input: SQL refused, parameter out of range, malformed body (``query_error``,
        ``privacy_refusal``, ``invalid_loss``, ``configuration_error``, ``catalog_error``,
        ``invalid_request``)
401     no token, or not a valid one (``unauthenticated``)
403     a valid token whose role may not do this (``forbidden``)
404     no such thing, or a dataset the caller was not granted (``not_found``)
405     the path exists but not with this method (``method_not_allowed``)
409     the request contradicts the record: the budget would be exceeded (``budget_exceeded``),
        a retry of a request still running (``request_in_progress``), a name taken (``conflict``)
413     the body is larger than ``max_request_bytes`` (``request_too_large``)
421     the ``Host`` header names a host not in ``allowed_hosts`` (``unknown_host``)
429     too many requests for this token (``rate_limited``), or too many of its queries running
        at once (``too_many_running``); every 429 carries ``Retry-After`` (seconds)
500     a bug in Dalenius (``internal_error``); never a stack trace — the log has it
502     the request failed after the data gate: the engine had read the data, the loss was
        charged (``evaluation_failed``); the body is always the same bytes, without a request id
        (the ``X-Request-ID`` header names the request)
503     a registered dataset's files cannot be opened, or the engine failed on a public table
        before anything was reserved; nothing was spent (``dataset_unavailable``,
        ``execution_error``)
====== ======================================================================================

A budget refusal is 409, not 403: the caller is allowed to ask, but the request conflicts with
what the ledger has recorded; a smaller ε may succeed.
"""

from __future__ import annotations

import json
from typing import Any

from dalenius.core.errors import (
    BudgetExceededError,
    EvaluationFailed,
    ExecutionError,
    UserError,
)
from dalenius.ledger import RequestInProgressError
from dalenius.server.slots import BusyError
from dalenius.server.store import ConflictError, NotFoundError


class AuthenticationError(UserError):
    """The request carries no token, or one that is unknown, malformed or revoked."""

    code = "unauthenticated"


class ForbiddenError(UserError):
    """The caller's role may not use this endpoint."""

    code = "forbidden"


class RateLimitedError(UserError):
    """The caller sent requests faster than the configured rate.

    Args:
        retry_after: seconds until the next request will be accepted.
    """

    code = "rate_limited"

    def __init__(self, retry_after: float, rate_per_minute: float) -> None:
        self.retry_after = retry_after
        super().__init__(
            f"Too many requests: this client may make {rate_per_minute:g} requests a minute.",
            why="a per-client limit keeps one client from starving the others.",
            fix=f"wait {retry_after:.1f} s before the next request.",
        )


class RequestTooLargeError(UserError):
    """The request body is larger than the gateway accepts."""

    code = "request_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The request body is larger than {limit} bytes.",
            fix=(
                "send a shorter request (a shorter query, or fewer reports per batch); the limit "
                "is max_request_bytes in the gateway's configuration."
            ),
        )


class UnknownHostError(UserError):
    """The request names a host this gateway is not configured to answer for."""

    code = "unknown_host"

    def __init__(self, host: str) -> None:
        shown = host if len(host) <= 100 else host[:97] + "..."
        super().__init__(
            f"This gateway does not answer for the host {shown!r}.",
            why="the gateway's allowed_hosts setting lists the names it may be reached by "
            "(a guard against DNS rebinding).",
            fix="use the gateway's own address, or ask its operator to add the name to "
            "allowed_hosts.",
        )


class InvalidRequestError(UserError):
    """The request's JSON body, query string or path does not have the documented shape."""

    code = "invalid_request"

    def __init__(self, what: str, details: list[dict[str, Any]] | None = None) -> None:
        self.details = details or []
        super().__init__(what, fix="see the OpenAPI document at /v1/openapi.json for the shape.")

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready object, with each field's problem under ``details``."""
        out = super().to_dict()
        out["details"] = self.details
        return out


class DatasetUnavailableError(UserError):
    """A registered dataset whose catalog or data cannot be opened on the server right now."""

    code = "dataset_unavailable"


def status_for(error: BaseException) -> int:
    """The HTTP status for an exception (see the module's table).

    Example:
        >>> status_for(AuthenticationError("no token")), status_for(ValueError())
        (401, 500)
    """
    table: tuple[tuple[type[BaseException], int], ...] = (
        (AuthenticationError, 401),
        (ForbiddenError, 403),
        (NotFoundError, 404),
        (BudgetExceededError, 409),
        (RequestInProgressError, 409),
        (ConflictError, 409),
        (RequestTooLargeError, 413),
        (UnknownHostError, 421),
        (RateLimitedError, 429),
        (BusyError, 429),
        (DatasetUnavailableError, 503),
        (UserError, 400),
        (ExecutionError, 503),
    )
    if isinstance(error, EvaluationFailed):
        return error.outcome.status
    for kind, status in table:
        if isinstance(error, kind):
            return status
    return 500


def error_bytes(error: BaseException, request_id: str) -> bytes:
    """The body bytes for an exception: a post-gate outcome's canonical bytes, else its JSON.

    Example:
        >>> error_bytes(EvaluationFailed(), "any-id") == EvaluationFailed().body()
        True
    """
    if isinstance(error, EvaluationFailed):
        return error.body()
    return json.dumps(error_body(error, request_id)).encode()


def error_body(error: BaseException, request_id: str) -> dict[str, Any]:
    """The JSON body for an exception; internal errors say only that they happened.

    A post-gate outcome (:class:`EvaluationFailed`) has its constant body, without a request id.
    """
    if isinstance(error, EvaluationFailed):
        parsed: dict[str, Any] = json.loads(error.body())
        return parsed
    if isinstance(error, UserError):
        detail = _in_gateway_words(error.to_dict())
    elif isinstance(error, ExecutionError):
        detail = {
            "code": ExecutionError.code,
            "message": "The database engine failed on a public table, before anything was "
            "reserved; nothing was released and nothing was spent.",
            "why": None,
            "fix": "try again; if it persists, tell the curator the request id.",
        }
    else:
        detail = {
            "code": "internal_error",
            "message": "The gateway failed to answer because of a bug; nothing was released.",
            "why": None,
            "fix": "tell the curator the request id; the gateway's log has the details.",
        }
    detail["request_id"] = request_id
    return {"error": detail}


def error_headers(error: BaseException) -> dict[str, str]:
    """Headers an error answer carries: how to sign in (401), when to retry (429)."""
    headers: dict[str, str] = {}
    if isinstance(error, AuthenticationError):
        headers["WWW-Authenticate"] = 'Bearer realm="dalenius"'
    if isinstance(error, RateLimitedError):
        headers["Retry-After"] = str(max(1, round(error.retry_after + 0.5)))
    if isinstance(error, BusyError):
        # A slot frees when one of the caller's running queries ends: no time is known, so the
        # shortest useful wait (every 429 carries Retry-After).
        headers["Retry-After"] = "1"
    return headers


def _in_gateway_words(detail: dict[str, Any]) -> dict[str, Any]:
    """The library's texts in the gateway's words: the custodian is the gateway's curator.

    Example:
        >>> _in_gateway_words({"fix": "ask the custodian for more budget."})
        {'fix': 'ask the curator for more budget.'}
    """
    out = dict(detail)
    for key in ("message", "why", "fix"):
        text = out.get(key)
        if isinstance(text, str):
            out[key] = text.replace("custodian", "curator").replace("Custodian", "Curator")
    return out


def plain_error(code: str, message: str, request_id: str, fix: str | None = None) -> dict[str, Any]:
    """An error body for conditions met outside the library (unknown route, wrong method)."""
    return {
        "error": {
            "code": code,
            "message": message,
            "why": None,
            "fix": fix,
            "request_id": request_id,
        }
    }
