"""The outermost layer of every request: an id, a size limit, safe headers, a log line, no stack traces.

This is plain ASGI rather than a framework middleware so it can see every byte of the body (to
stop an oversized upload while it streams, whatever ``Content-Length`` claims) and every exception
(to answer with the JSON error shape instead of a traceback, and to log the traceback under the
request's id where operators look).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread

from dalenius.server.errors import RequestTooLargeError, error_body, status_for
from dalenius.server.requestlog import RequestLog
from dalenius.server.store import RequestRecord

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

_SAFE_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CONSOLE_POLICY.encode()),
)


class _TooLarge(Exception):
    """Raised inside ``receive`` when the body passes the limit."""


class GatewayMiddleware:
    """Request id, body-size limit, security headers, request log and a last-resort error answer.

    Args:
        app: the application it wraps.
        max_body: the largest request body accepted, in bytes.
        log: where a line per request goes.
    """

    def __init__(self, app: ASGIApp, *, max_body: int, log: RequestLog) -> None:
        self.app = app
        self.max_body = max_body
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request (other ASGI traffic passes through)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:16]
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status: dict[str, Any] = {"code": 500, "sent": False, "too_large": False}
        api = scope.get("path", "").startswith("/v1/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["sent"] = True
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in {h for h, _ in _SAFE_HEADERS}
                ]
                headers.extend(_SAFE_HEADERS)
                headers.append((b"x-request-id", request_id.encode()))
                if api:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        async def send_checked(message: Message) -> None:
            # The framework may turn the interrupted body into an error of its own; whatever
            # it answers, the client is told the real reason.
            if status["too_large"]:
                if message["type"] == "http.response.start" and not status["sent"]:
                    await _send_error(
                        send_with_headers, RequestTooLargeError(self.max_body), request_id, state
                    )
                return
            await send_with_headers(message)

        async def receive_limited() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                status["seen"] = status.get("seen", 0) + len(message.get("body", b""))
                if status["seen"] > self.max_body:
                    status["too_large"] = True
                    raise _TooLarge
            return message

        declared = _content_length(scope)
        try:
            if declared is not None and declared > self.max_body:
                status["too_large"] = True
                raise _TooLarge
            await self.app(scope, receive_limited, send_checked)
        except Exception as error:
            if isinstance(error, _TooLarge) or status["too_large"]:
                error = RequestTooLargeError(self.max_body)
            else:
                _log.exception(
                    "request %s failed: %s %s", request_id, scope.get("method"), scope.get("path")
                )
            if not status["sent"]:
                await _send_error(send_with_headers, error, request_id, state)
        finally:
            await self._record(scope, state, request_id, status["code"], started)

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


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_error(
    send: Send, error: BaseException, request_id: str, state: dict[str, Any]
) -> None:
    status = status_for(error)
    body = error_body(error, request_id)
    state["error_code"] = body["error"]["code"]
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
