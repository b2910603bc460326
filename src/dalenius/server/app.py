"""The FastAPI application: the versioned JSON API under ``/v1``, its OpenAPI document, the console.

:func:`create_app` builds the application around a :class:`~dalenius.server.gateway.Gateway`;
:func:`from_environment` is the factory ``dalenius serve`` hands to uvicorn (by import string, so
the command line never imports the server package: the two are independent siblings). Every
answer that is not a success has the one JSON error shape of :mod:`dalenius.server.errors`.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from dalenius import __version__
from dalenius.core.errors import ConfigurationError, DaleniusError, EvaluationFailed, UserError
from dalenius.server.config import GatewayConfig, load_config, with_listen, with_pg_listen
from dalenius.server.errors import (
    InvalidRequestError,
    error_body,
    error_bytes,
    error_headers,
    plain_error,
    status_for,
)
from dalenius.server.gateway import Gateway
from dalenius.server.ldpstore import SUBMIT_PATH, submission_bytes
from dalenius.server.middleware import GatewayMiddleware, SignInMiddleware
from dalenius.server.pgwire.listener import PgListener, WireSettings
from dalenius.server.routes import analyst, attacks, curator, ldp, releases
from dalenius.server.startup import DEMO_CONFIG, issue_from_environment, prepare_demo

STATIC = Path(__file__).resolve().parent / "static"

DESCRIPTION = """\
Differentially private answers to aggregate SQL, under budgets that are never overspent.

Sign in with `Authorization: Bearer <token>` (a curator issues tokens). `explain` shows a query's
cost and expected error before anything is spent; `query` answers with noise and error bars and
charges the caller's budget. Errors have one shape: `{"error": {code, message, why, fix, ...}}`.
"""


def _request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", ""))


def _error_response(request: Request, error: BaseException) -> Response:
    body = error_body(error, _request_id(request))
    request.state.error_code = body["error"]["code"]
    if isinstance(error, EvaluationFailed):
        # The one fixed outcome after the data gate: the same bytes and status every time.
        return Response(
            error_bytes(error, ""), status_code=status_for(error), media_type="application/json"
        )
    return JSONResponse(body, status_code=status_for(error), headers=error_headers(error))


async def _dalenius_error(request: Request, error: Exception) -> Response:
    return _error_response(request, error)


_UNION_TAGS = ("float", "int", "str", "bool", "none", "function-", "lax-or-strict", "constrained-")


def _location(loc: tuple[Any, ...]) -> str:
    # pydantic names the member of a union that failed (``body.epsilon.float``); people need only
    # the field.
    parts = [str(part) for part in loc]
    while len(parts) > 1 and parts[-1].startswith(_UNION_TAGS):
        parts.pop()
    return ".".join(parts)


async def _validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    problems: dict[str, list[str]] = {}
    for problem in error.errors():
        message = str(problem.get("msg", ""))
        found = problems.setdefault(_location(tuple(problem.get("loc", ()))), [])
        if message not in found:
            found.append(message)
    details = [{"location": where, "problem": "; ".join(msgs)} for where, msgs in problems.items()]
    first = details[0] if details else {"location": "request", "problem": "malformed"}
    what = (
        f"The request does not have the documented shape: {first['location']}: {first['problem']}."
    )
    return _error_response(request, InvalidRequestError(what, details))


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    code = codes.get(error.status_code, "invalid_request" if error.status_code < 500 else "error")
    request.state.error_code = code
    message = str(error.detail) if error.detail else "Not found."
    if error.status_code == 404:
        message = f"No endpoint at {request.url.path}."
    fix = "see the OpenAPI document at /v1/openapi.json for every endpoint."
    body = plain_error(code, message, _request_id(request), fix)
    return JSONResponse(body, status_code=error.status_code, headers=dict(error.headers or {}))


def create_app(config: GatewayConfig | None = None, *, gateway: Gateway | None = None) -> FastAPI:
    """The gateway's ASGI application; it owns ``gateway`` and closes it at shutdown.

    Args:
        config: the settings (ignored when ``gateway`` is given); in-memory defaults if ``None``.
        gateway: an already opened gateway.
    """
    service = gateway if gateway is not None else Gateway(config or GatewayConfig())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        listener = await start_pg_listener(service)
        try:
            yield
        finally:
            if listener is not None:
                await listener.stop()
            service.close()

    app = FastAPI(
        title="Dalenius gateway",
        version=__version__,
        description=DESCRIPTION,
        openapi_url="/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.gateway = service
    app.include_router(analyst.router)
    app.include_router(curator.router)
    app.include_router(ldp.router)
    app.include_router(releases.router)
    app.include_router(attacks.router)
    app.add_exception_handler(DaleniusError, _dalenius_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.mount("/console", StaticFiles(directory=STATIC, html=True), name="console")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/console/")

    app.add_middleware(
        SignInMiddleware,
        gateway=service,
        curator_routes=[*curator.router.routes, *ldp.curator_routes()],
        device_routes=ldp.device_routes(),
    )
    app.add_middleware(
        GatewayMiddleware,
        max_body=service.config.limits.max_request_bytes,
        log=service.requests,
        allowed_hosts=service.config.allowed_hosts,
        body_limits=((SUBMIT_PATH, submission_bytes()),),
    )
    return app


async def start_pg_listener(service: Gateway) -> PgListener | None:
    """Start the PostgreSQL protocol listener on the application's event loop, if configured.

    Several worker processes bind one port together (``SO_REUSEPORT``): the kernel spreads the
    connections over them, as it spreads HTTP requests over uvicorn's workers.
    """
    config = service.config
    if config.pg_port is None:
        return None
    context = None
    if config.tls_cert is not None and config.tls_key is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(config.tls_cert, config.tls_key)
    listener = PgListener(service, WireSettings(ssl_context=context))
    await listener.start(config.pg_host, config.pg_port, reuse_port=True)
    return listener


def from_environment() -> FastAPI:
    """The application ``dalenius serve`` runs, configured through environment variables.

    ``DALENIUS_GATEWAY_CONFIG`` names the configuration file; ``DALENIUS_GATEWAY_DEMO`` a demo
    folder instead (its data, configuration and tokens are prepared first);
    ``DALENIUS_GATEWAY_LISTEN`` (``host:port``) overrides the address the configuration gives;
    ``DALENIUS_GATEWAY_PG_LISTEN`` (``host:port``) the PostgreSQL listener's;
    ``DALENIUS_GATEWAY_ISSUE`` (``role:name,…``) creates those principals if missing and prints a
    new token for each; ``DALENIUS_GATEWAY_SLOTS`` names the lock file through which the worker
    processes of one gateway share the running-query limits (set by :func:`prepare_workers`).
    """
    env = dict(os.environ)
    try:
        service = _open_from(env)
        issue_from_environment(service, env.get("DALENIUS_GATEWAY_ISSUE", ""))
    except UserError as error:
        # uvicorn would print a traceback; a configuration mistake deserves its message only.
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    return create_app(gateway=service)


def _open_from(env: dict[str, str]) -> Gateway:
    """The gateway the environment describes (the demo prepared first, if it names one)."""
    demo = env.get("DALENIUS_GATEWAY_DEMO")
    listen = env.get("DALENIUS_GATEWAY_LISTEN")
    pg_listen = env.get("DALENIUS_GATEWAY_PG_LISTEN")
    if demo:
        return prepare_demo(Path(demo), listen, pg_listen)
    path = env.get("DALENIUS_GATEWAY_CONFIG")
    config = with_pg_listen(
        with_listen(load_config(path) if path else GatewayConfig(), listen), pg_listen
    )
    return Gateway(config, shared_slots=env.get("DALENIUS_GATEWAY_SLOTS"))


def prepare_workers(slots_file: str) -> None:
    """Do once, before ``dalenius serve --workers N`` starts its workers, what must happen once.

    The demo is prepared and the start-up tokens are issued and printed here, in the supervising
    process; the environment is then left so that each worker only opens the gateway from the
    configuration file and shares the running-query limits through ``slots_file``. Several
    workers need records they all see: a SQLite file or PostgreSQL, not ``memory:``.

    Raises:
        SystemExit: a configuration mistake (its message printed), or a ``memory:`` store.
    """
    env = os.environ
    try:
        service = _open_from(dict(env))
        try:
            config = service.config
            for key, url in (("ledger", config.ledger), ("state", config.state_url)):
                if url.strip().startswith("memory:"):
                    raise ConfigurationError(
                        f"--workers needs a {key} every worker shares, and {key} = 'memory:' "
                        "lives in one process.",
                        fix=f"set [gateway] {key} to a SQLite file or a postgresql:// URL, or "
                        "serve with one worker.",
                    )
            issue_from_environment(service, env.get("DALENIUS_GATEWAY_ISSUE", ""))
        finally:
            service.close()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    demo = env.pop("DALENIUS_GATEWAY_DEMO", None)
    if demo:
        env["DALENIUS_GATEWAY_CONFIG"] = str(Path(demo) / DEMO_CONFIG)
    env["DALENIUS_GATEWAY_ISSUE"] = ""
    env["DALENIUS_GATEWAY_SLOTS"] = slots_file
