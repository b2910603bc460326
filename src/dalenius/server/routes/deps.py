"""Who is calling: the bearer-token dependency every endpoint uses, and the curator check."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dalenius.server.errors import ForbiddenError, InvalidRequestError
from dalenius.server.gateway import Gateway
from dalenius.server.models import TEXT_PATTERN, ErrorResponse
from dalenius.server.store import Caller

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="An API token issued by a curator: 'Authorization: Bearer dlt_…'.",
)


# Dependencies that do no I/O are coroutines, so FastAPI runs them on the event loop instead of
# handing each to a worker thread.


async def gateway(request: Request) -> Gateway:
    """The gateway this application serves."""
    found: Gateway = request.app.state.gateway
    return found


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    service: Annotated[Gateway, Depends(gateway)],
) -> Caller:
    """The signed-in caller (or 401), after their rate limit (or 429).

    The sign-in middleware has already authenticated the request before its body was read
    (:class:`~dalenius.server.middleware.SignInMiddleware`); this only hands its answer on, or
    signs in here when the routes are served without it.
    """
    found = getattr(request.state, "caller", None)
    if isinstance(found, Caller):
        return found
    token = credentials.credentials if credentials is not None else None
    client = request.client.host if request.client is not None else ""
    signed_in: Caller = await asyncio.wrap_future(
        service.sign_in_pool.submit(service.authenticate, token, client)
    )
    request.state.caller = signed_in
    return signed_in


async def curator(who: Annotated[Caller, Depends(caller)]) -> Caller:
    """The signed-in caller, if a curator (or 403)."""
    if not who.is_curator:
        raise ForbiddenError(
            "Only curators may use this endpoint.",
            why="it changes or reads records of other analysts.",
            fix="ask a curator, or sign in with a curator's token.",
        )
    return who


async def single_query_values(request: Request, who: Annotated[Caller, Depends(caller)]) -> None:
    """Refuse a query parameter given twice: which one counts would be a guess.

    It depends on :func:`caller` so that authentication is still checked first.
    """
    if not request.scope.get("query_string"):
        return  # most requests have none: parsing nothing costs more than this check
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key in seen:
            raise InvalidRequestError(
                f"The query parameter {key!r} is given more than once.",
                [{"location": f"query.{key}", "problem": "given more than once"}],
            )
        seen.add(key)


async def run_query_work(service: Gateway, who: Caller, work: Callable[[], Any]) -> Any:
    """Run an explain or a query on the gateway's query pool, in one of the caller's slots.

    Over the caller's limit, the request is refused at once (429) and costs nothing.
    """
    return await asyncio.wrap_future(service.submit_query_work(who, work))


CallerDep = Annotated[Caller, Depends(caller)]
CuratorDep = Annotated[Caller, Depends(curator)]
GatewayDep = Annotated[Gateway, Depends(gateway)]


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI descriptions of the error answers a route may give (every one has the same shape)."""
    meaning = {
        400: "Bad input (SQL refused, a parameter out of range, a malformed body).",
        401: "No token, or not a valid one.",
        403: "The caller's role may not do this.",
        404: "No such thing, or a dataset not granted to the caller.",
        409: "Conflicts with the record (budget exceeded, name taken, retry in progress).",
        413: "The request body is too large.",
        429: "Too many requests for this token (see Retry-After), or too many of its queries "
        "running at once.",
        503: "The engine failed before any noise was drawn; nothing was spent.",
    }
    base = (400, 401, 413, 429)
    return {
        status: {"model": ErrorResponse, "description": meaning[status]}
        for status in sorted({*base, *statuses})
    }


F = TypeVar("F", bound=Callable[..., Any])


def documented(
    verb: Callable[..., Callable[[F], F]],
    path: str,
    model: Any,
    *statuses: int,
    operation_id: str,
    **settings: Any,
) -> Callable[[F], F]:
    """``verb`` (``router.get``, ``router.post`` …) with the settings most routes share: the
    response shape ``model`` with unset fields left out, and the error answers ``statuses``
    documented (:func:`errors`). ``settings`` go to ``verb`` as they are (``status_code`` …).
    """
    return verb(
        path,
        response_model_exclude_unset=True,
        response_model=model,
        responses=errors(*statuses),
        operation_id=operation_id,
        **settings,
    )


PathName = Annotated[str, Path(max_length=200, pattern=TEXT_PATTERN)]
"""A name in a URL path (dataset, principal, token id)."""
QueryFilter = Annotated[str | None, Query(max_length=200, pattern=TEXT_PATTERN)]
"""An optional filter in the query string."""
