"""The outermost layer of every request: an id, a size limit, safe headers, a log line, no stack traces.

This is plain ASGI rather than a framework middleware so it can see every byte of the body (to
stop an oversized upload while it streams, whatever ``Content-Length`` claims) and every exception
(to answer with the JSON error shape instead of a traceback, and to log the traceback under the
request's id where operators look).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from starlette.routing import BaseRoute, Match

from dalenius.core.errors import UserError
from dalenius.server.errors import (
    ForbiddenError,
    RequestTooLargeError,
    UnknownHostError,
    error_body,
    error_bytes,
    error_headers,
    status_for,
)
from dalenius.server.gateway import Gateway
from dalenius.server.requestlog import RequestLog
from dalenius.server.store import Caller, RequestRecord

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_log = logging.getLogger("dalenius.server")

CONSOLE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""The console's Content-Security-Policy: its own files only, no inline script, no framing."""

PERMISSIONS_POLICY = (
    "accelerometer=(), camera=(), clipboard-read=(), display-capture=(), fullscreen=(), "
    "geolocation=(), gyroscope=(), magnetometer=(), microphone=(), midi=(), payment=(), "
    "usb=(), interest-cohort=()"
)
"""The console needs no device or browser feature; none is granted to it or to a frame."""

_SAFE_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CONSOLE_POLICY.encode()),
    (b"permissions-policy", PERMISSIONS_POLICY.encode()),
)


class _TooLarge(Exception):
    """Raised inside ``receive`` when the body passes the limit."""


class GatewayMiddleware:
    """Request id, body-size limit, security headers, request log and a last-resort error answer.

    Args:
        app: the application it wraps.
        max_body: the largest request body accepted, in bytes.
        log: where a line per request goes.
        body_limits: larger limits for some POST routes, as (path regular expression, bytes):
            a route whose requests are batches (devices' local-DP reports) gets room for a full
            batch without raising the limit of every other route.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body: int,
        log: RequestLog,
        allowed_hosts: tuple[str, ...] = (),
        body_limits: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.body_limits = tuple((re.compile(path), limit) for path, limit in body_limits)
        self.log = log
        self.allowed_hosts = frozenset(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request (other ASGI traffic passes through).

        Long because the request's id, timing, size limit, security headers and access-log line
        share the state of one ASGI call, and the wrapped ``send`` that writes the headers must
        close over it.
        """
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:16]
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status: dict[str, Any] = {"code": 500, "sent": False, "too_large": False}
        api = scope.get("path", "").startswith("/v1/")
        max_body = self._limit(scope)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["sent"] = True
                message["headers"] = _response_headers(message, request_id, api)
            await send(message)

        async def send_checked(message: Message) -> None:
            # The framework may turn the interrupted body into an error of its own; whatever
            # it answers, the client is told the real reason.
            if status["too_large"]:
                if message["type"] == "http.response.start" and not status["sent"]:
                    await _send_error(
                        send_with_headers, RequestTooLargeError(max_body), request_id, state
                    )
                return
            await send_with_headers(message)

        async def receive_limited() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                status["seen"] = status.get("seen", 0) + len(message.get("body", b""))
                if status["seen"] > max_body:
                    status["too_large"] = True
                    raise _TooLarge
            return message

        declared = _content_length(scope)
        try:
            if self.allowed_hosts and _host(scope) not in self.allowed_hosts:
                raise UnknownHostError(_host(scope))
            if declared is not None and declared > max_body:
                status["too_large"] = True
                raise _TooLarge
            await self.app(scope, receive_limited, send_checked)
        except Exception as error:
            if isinstance(error, _TooLarge) or status["too_large"]:
                error = RequestTooLargeError(max_body)
            else:
                _log.exception(
                    "request %s failed: %s %s", request_id, scope.get("method"), scope.get("path")
                )
            if not status["sent"]:
                await _send_error(send_with_headers, error, request_id, state)
        finally:
            await self._record(scope, state, request_id, status["code"], started)

    def _limit(self, scope: Scope) -> int:
        """The largest body this request may have: its route's, else the gateway's."""
        if scope.get("method") == "POST":
            path = scope.get("path", "")
            for pattern, limit in self.body_limits:
                if pattern.fullmatch(path):
                    return max(limit, self.max_body)
        return self.max_body

    async def _record(
        self, scope: Scope, state: dict[str, Any], request_id: str, status: int, started: float
    ) -> None:
        caller = state.get("caller")
        client = scope.get("client")
        record = RequestRecord(
            at=datetime.now(UTC),
            request_id=request_id,
            principal=getattr(caller, "name", ""),
            token_id=getattr(caller, "token_id", ""),
            client=str(client[0]) if client else "",
            method=str(scope.get("method", "")),
            path=str(scope.get("path", ""))[:500],
            status=status,
            code=str(state.get("error_code", "ok" if status < 400 else "error")),
            millis=round((time.perf_counter() - started) * 1000, 3),
        )
        if not self.log.offer(record):
            await anyio.to_thread.run_sync(self.log.put, record)


def _host(scope: Scope) -> str:
    """The host the request names (its ``Host`` header, without the port), in lower case."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"host":
            text = str(value.decode("latin-1")).strip().lower()
            if text.startswith("["):
                return text[1 : text.find("]")] if "]" in text else text
            return text.rsplit(":", 1)[0] if text.count(":") == 1 else text
    return ""


class SignInMiddleware:
    """Authenticate every API request, and refuse a curator endpoint to an analyst, before its body is read.

    So a malformed body without a token gets 401 (not 400), an analyst's malformed body on a
    curator endpoint gets 403, and each counts towards the failed-sign-in or per-token rate limit.
    Sign-in runs on the gateway's own small thread pool, apart from the threads that run queries,
    so one analyst's slow queries never delay another's sign-in.

    Args:
        app: the application it wraps.
        gateway: whose store and rate limits decide.
        curator_routes: the routes only curators may use.
        device_routes: routes that authenticate by a key of their own (local-DP devices
            submitting reports), not by a principal's token; they are passed through.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        gateway: Gateway,
        curator_routes: list[BaseRoute],
        device_routes: Sequence[BaseRoute] = (),
    ) -> None:
        self.app = app
        self.gateway = gateway
        self.curator_routes = curator_routes
        self.device_routes = list(device_routes)
        self._kinds: dict[tuple[str, str], str] = {}

    def _kind(self, scope: Scope) -> str:
        """``device``, ``curator`` or ``any``: who may call the route a request names.

        Matching a request against every route costs more than the rest of its sign-in, and
        a gateway sees few distinct paths, so the answer is kept per method and path (at most
        :data:`_KINDS_KEPT` paths of up to :data:`_PATH_KEPT` characters, so memory stays
        bounded whatever paths clients send; the routes never change while the application
        runs).
        """
        key = (str(scope.get("method", "")), str(scope.get("path", "")))
        found = self._kinds.get(key)
        if found is None:
            if any(route.matches(scope)[0] == Match.FULL for route in self.device_routes):
                found = "device"
            elif any(route.matches(scope)[0] == Match.FULL for route in self.curator_routes):
                found = "curator"
            else:
                found = "any"
            if len(key[1]) <= _PATH_KEPT:
                if len(self._kinds) >= _KINDS_KEPT:
                    self._kinds.clear()
                self._kinds[key] = found
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Sign the request in, or answer its refusal."""
        path = str(scope.get("path", ""))
        if (
            scope["type"] != "http"
            or not path.startswith("/v1/")
            or path == OPENAPI_PATH
            or self._kind(scope) == "device"
        ):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        try:
            token = _bearer(scope)
            client = scope.get("client")
            address = str(client[0]) if client else ""
            caller: Caller = await asyncio.wrap_future(
                self.gateway.sign_in_pool.submit(self.gateway.authenticate, token, address)
            )
            state["caller"] = caller
            if not caller.is_curator and self._kind(scope) == "curator":
                raise ForbiddenError(
                    "Only curators may use this endpoint.",
                    why="it changes or reads records of other analysts.",
                    fix="ask a curator, or sign in with a curator's token.",
                )
        except UserError as error:
            await _send_error(send, error, str(state.get("request_id", "")), state)
            return
        await self.app(scope, receive, send)


_KINDS_KEPT = 4096
"""How many (method, path) pairs the sign-in remembers the route kind of."""
_PATH_KEPT = 256
"""The longest path whose route kind is remembered."""

OPENAPI_PATH = "/v1/openapi.json"
"""The one API path open without a token: the API's description."""


def _bearer(scope: Scope) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, or ``None``."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"authorization":
            scheme, _, token = str(value.decode("latin-1")).strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _response_headers(message: Message, request_id: str, api: bool) -> list[tuple[bytes, bytes]]:
    """A response's headers with the security headers, its request id and, for the API, no-store.

    Every 429 says when to retry: an answer that did not work a time out gets ``Retry-After: 1``,
    the shortest useful wait.
    """
    headers = [
        (k, v)
        for k, v in message.get("headers", [])
        if k.lower() not in {h for h, _ in _SAFE_HEADERS}
    ]
    headers.extend(_SAFE_HEADERS)
    headers.append((b"x-request-id", request_id.encode()))
    if message["status"] == 429 and not any(k.lower() == b"retry-after" for k, _ in headers):
        headers.append((b"retry-after", b"1"))
    if api:
        headers.append((b"cache-control", b"no-store"))
    return headers


async def _send_error(
    send: Send, error: BaseException, request_id: str, state: dict[str, Any]
) -> None:
    status = status_for(error)
    body = error_body(error, request_id)
    state["error_code"] = body["error"]["code"]
    payload = error_bytes(error, request_id)
    extra = [(k.lower().encode(), v.encode()) for k, v in error_headers(error).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
