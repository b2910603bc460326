"""Endpoints for releases published whole: density curves, consistent hierarchical tables,
synthetic rows (MST, origin–destination flows), perturbed rows (record perturbation), continual
series and privately chosen bounds.

Each spends from the caller's own budget exactly as a query does (reserved, computed behind the
same data path, recorded before the release leaves); an identical request is answered from the
ledger's record at no cost. A refusal decided from the request and the catalog costs nothing.
Synthetic rows can also be streamed with their rounds (``/synthesize/progress``).
"""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from dalenius.server import models
from dalenius.server.routes.deps import (
    CallerDep,
    GatewayDep,
    PathName,
    errors,
    run_query_work,
    single_query_values,
)
from dalenius.server.synth_progress import synthesize_stream

router = APIRouter(prefix="/v1", tags=["analyst"], dependencies=[Depends(single_query_values)])


@router.post(
    "/datasets/{name}/density",
    responses=errors(404, 409, 503),
    operation_id="density",
)
async def density(
    name: PathName, body: models.DensityRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Release the kernel density curve of a column (or the surface of two), with bands."""
    work = partial(gateway.density, caller, name, body)
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@router.post(
    "/datasets/{name}/hierarchy",
    responses=errors(404, 409, 503),
    operation_id="hierarchy",
)
async def hierarchy(
    name: PathName, body: models.HierarchyRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Release counts at every level of a hierarchy, consistent, non-negative and integral."""
    work = partial(gateway.hierarchy, caller, name, body)
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@router.post(
    "/datasets/{name}/continual",
    responses=errors(404, 409, 503),
    operation_id="continual",
)
async def continual(
    name: PathName, body: models.ContinualRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Publish a continual series: counts (and sums) per period under one lifetime loss."""
    work = partial(gateway.continual, caller, name, body)
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@router.post(
    "/datasets/{name}/onthemap",
    responses=errors(404, 409, 503),
    operation_id="onthemap",
)
async def onthemap(
    name: PathName, body: models.OnTheMapRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Release synthetic origin–destination rows (OnTheMap's Multinomial–Dirichlet synthesizer)."""
    work = partial(gateway.onthemap, caller, name, body)
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@router.post(
    "/datasets/{name}/synthesize",
    responses=errors(404, 409, 503),
    operation_id="synthesize",
)
async def synthesize(
    name: PathName, body: models.SynthesizeRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Release synthetic rows of a table with MST (noisy 1- and 2-way marginals, a tree model) or
    AIM (``method: "aim"``: the marginals of a workload its model fits worst, round by round).
    """
    work = partial(gateway.synthesize, caller, name, body)
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@router.post(
    "/datasets/{name}/synthesize/progress",
    responses=errors(404, 409, 503),
    operation_id="synthesize_progress",
    response_class=StreamingResponse,
)
async def synthesize_progress(
    name: PathName,
    body: models.SynthesizeRequest,
    caller: CallerDep,
    gateway: GatewayDep,
    request: Request,
) -> StreamingResponse:
    """The same release as ``/synthesize``, streamed as NDJSON with its rounds.

    A line ``{"progress": {"method", "round", "rounds", "rho_spent", "rho", "marginal", …}}``
    after each round (round of at most rounds, the ρ drawn so far, the columns just measured;
    ``rho_spent_exact`` and ``rho_exact`` as fractions), then the
    answer of ``/synthesize``, or ``{"error": {...}}`` if the release fails after its first
    round. A refusal (bad input, budget) is a plain error answer before the stream starts.
    """
    lines = await synthesize_stream(
        gateway, caller, name, body, str(getattr(request.state, "request_id", ""))
    )
    return StreamingResponse(lines, media_type="application/x-ndjson")


@router.post(
    "/datasets/{name}/bounds",
    responses=errors(404, 409, 503),
    operation_id="choose_bounds",
)
async def choose_bounds(
    name: PathName, body: models.BoundsRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Choose a numeric column's clipping bounds privately (a noisy log-scale histogram); for a
    column declared ``bounds = "private"`` queries then clip to them. Once per data version.
    """
    work = partial(gateway.choose_bounds, caller, name, body)
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@router.post(
    "/datasets/{name}/perturb",
    responses=errors(404, 409, 503),
    operation_id="perturb",
)
async def perturb(
    name: PathName, body: models.PerturbRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Release every row of a table with each value perturbed (record perturbation, course
    document 004), with the error table: per column the scale, mean error, error bar and floor γ.
    """
    work = partial(gateway.perturb, caller, name, body)
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@router.get(
    "/datasets/{name}/releases/{entry_id}",
    responses=errors(404, 503),
    operation_id="fetch_release",
)
def fetch_release(
    name: PathName, entry_id: PathName, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """A release the caller already received (density, hierarchy, synthetic or perturbed rows),
    again by its ledger entry id: the same values, at no cost.
    """
    return gateway.fetch_release(caller, name, entry_id)
