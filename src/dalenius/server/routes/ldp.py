"""Local-DP collections over HTTP: a curator creates one, devices submit reports, analysts read.

* ``POST /v1/ldp/collections`` (curator) — create; the answer carries the submission key once.
* ``GET /v1/ldp/collections`` and ``GET /v1/ldp/collections/{name}`` (signed in) — describe.
* ``GET /v1/ldp/collections/{name}/parameters`` (submission key) — what a device encodes with.
* ``POST /v1/ldp/collections/{name}/reports`` (submission key in ``X-Collection-Key``) — add
  already-randomised reports; each is validated for shape and type, never a raw value.
* ``GET /v1/ldp/collections/{name}/estimates`` (signed in) — estimates with error bars.
* ``GET /v1/ldp/collections/{name}/series`` (signed in) — estimates per day, week or month of
  arrival and running totals, with error bars.
* ``GET /v1/ldp/collections/{name}/clients`` (curator) — each client's lifetime ε.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr
from starlette.routing import BaseRoute

from dalenius.ldp.collection import PROTOCOLS, CollectionSpec
from dalenius.server.ldpstore import MAX_BATCH, LdpStore, Submission
from dalenius.server.models import TEXT_PATTERN, Number
from dalenius.server.routes.deps import (
    CallerDep,
    CuratorDep,
    GatewayDep,
    PathName,
    errors,
    single_query_values,
)

router = APIRouter(prefix="/v1/ldp")

Label = Annotated[str, Field(max_length=200, pattern=TEXT_PATTERN)]
Real = StrictFloat | StrictInt
collection_key = APIKeyHeader(
    name="X-Collection-Key",
    scheme_name="collection_key",
    auto_error=False,
    description="A collection's submission key (given once, when the collection was created).",
)
KeyHeader = Annotated[str | None, Depends(collection_key)]


class CollectionRequest(BaseModel):
    """A new collection: protocol, ε, the values (domain or candidates) and protocol settings."""

    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")]
    protocol: Literal[PROTOCOLS]  # type: ignore[valid-type]
    epsilon: Number
    client_cap: Number | None = None
    domain: Annotated[list[Label], Field(max_length=4096)] | None = None
    candidates: Annotated[list[Label], Field(max_length=4096)] | None = None
    bits: StrictInt | None = None
    hashes: StrictInt | None = None
    cohorts: StrictInt | None = None
    width: StrictInt | None = None
    points: StrictInt | None = None
    f: Number | None = None
    p: Number | None = None
    q: Number | None = None
    alphabet: Annotated[str, Field(min_length=2, max_length=256, pattern=TEXT_PATTERN)] | None = (
        None
    )
    length: StrictInt | None = None
    tag_bits: StrictInt | None = None
    fragment_hashes: StrictInt | None = None
    fragment_width: StrictInt | None = None
    word_share: Number | None = None
    bound: Real | None = None
    lower: Real | None = None
    upper: Real | None = None


class ReportItem(BaseModel):
    """One already-randomised report."""

    model_config = ConfigDict(extra="forbid")
    client: Annotated[StrictStr, Field(min_length=1, max_length=128, pattern=TEXT_PATTERN)]
    report_id: Annotated[StrictStr, Field(min_length=1, max_length=128, pattern=TEXT_PATTERN)]
    memo: Annotated[StrictStr, Field(min_length=1, max_length=128, pattern=TEXT_PATTERN)] | None = (
        None
    )
    report: Any = Field(description="The report, in the protocol's shape (see the docs).")


class SubmitRequest(BaseModel):
    """A batch of reports (1 to 1,000)."""

    model_config = ConfigDict(extra="forbid")
    reports: Annotated[list[ReportItem], Field(min_length=1, max_length=MAX_BATCH)]


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class CollectionInfo(_Out):
    """A collection's public description."""

    name: str
    protocol: str
    epsilon: float
    client_cap: float | None = None
    parameters: dict[str, Any]
    reports: int
    clients: int
    created_at: str
    created_by: str


class CreatedCollection(CollectionInfo):
    """A new collection, with its submission key (shown only now)."""

    submission_key: str


class CollectionList(BaseModel):
    """Every collection."""

    collections: list[CollectionInfo]


class ClientCharge(_Out):
    """A client's lifetime ε in a collection after a submission."""

    client: str
    epsilon: float
    reports: int


class SubmitResult(_Out):
    """What a submission stored."""

    accepted: int
    duplicates: int
    clients: list[ClientCharge]


class EstimateRow(_Out):
    """One value's estimate with its error bar."""

    value: str
    estimate: float
    lower: float
    upper: float
    stderr: float


class Estimates(_Out):
    """Estimates from every stored report (frequencies: ``rows``; means: ``mean``).

    With no reports yet (``reports`` 0) ``rows`` and ``mean`` are null: no estimate, rather than
    zeros with an interval of width zero.
    """

    collection: str
    protocol: str
    kind: str
    reports: int
    confidence: float
    rows: list[EstimateRow] | None = None
    mean: float | None = None
    lower: float | None = None
    upper: float | None = None
    stderr: float | None = None


class SeriesPoint(_Out):
    """One closed period: the reports received in it, its estimate and the running total."""

    period: str
    reports: int
    estimate: dict[str, Any]
    running: dict[str, Any]


class CollectionSeries(_Out):
    """A collection's estimates per period and as running totals, with their intervals.

    ``lifetime_epsilon`` is the collection's cap on each device's loss over its whole life (null
    when the collection has none): everything here is post-processing of the reports.
    """

    collection: str
    protocol: str
    kind: str
    period: str
    start: str
    horizon: int
    closed: int
    confidence: float
    epsilon_per_report: float
    lifetime_epsilon: float | None
    periods: list[SeriesPoint]


class ClientList(BaseModel):
    """Clients' lifetime ε."""

    clients: list[ClientCharge]


def store(request: Request, gateway: GatewayDep) -> LdpStore:
    """The process's collection store, over the gateway's database (created on first use)."""
    found = getattr(request.app.state, "ldp_store", None)
    if found is None:
        found = LdpStore(gateway.store.backend)
        request.app.state.ldp_store = found
    return found


StoreDep = Annotated[LdpStore, Depends(store)]


def device(name: PathName, ldp: StoreDep, key: KeyHeader = None) -> CollectionSpec:
    """The collection a device's key opens (401 without a key or with a wrong one; 404 unknown).

    A dependency, so the key is checked before the body is read.
    """
    return ldp.check_key(name, key)


DeviceDep = Annotated[CollectionSpec, Depends(device)]
Confidence = Annotated[float, Query(gt=0, lt=1, description="Confidence of the error bars.")]
Limit = Annotated[int, Query(ge=1, le=1000, description="The most clients to return.")]


@router.post(
    "/collections",
    status_code=201,
    response_model=CreatedCollection,
    responses=errors(403, 409),
    operation_id="create_ldp_collection",
    tags=["curator", "ldp"],
    dependencies=[Depends(single_query_values)],
)
def create_collection(body: CollectionRequest, caller: CuratorDep, ldp: StoreDep) -> dict[str, Any]:
    """Create a collection (the answer's ``submission_key`` is shown only once)."""
    settings = body.model_dump(exclude_none=True, exclude={"name"})
    return ldp.create(body.name, settings, by=caller.name)


@router.get(
    "/collections",
    response_model=CollectionList,
    responses=errors(),
    operation_id="list_ldp_collections",
    tags=["analyst", "ldp"],
    dependencies=[Depends(single_query_values)],
)
def list_collections(caller: CallerDep, ldp: StoreDep) -> dict[str, Any]:
    """Every collection, with its parameters and counts."""
    return {"collections": [ldp.describe(name) for name in ldp.names()]}


@router.get(
    "/collections/{name}",
    response_model=CollectionInfo,
    responses=errors(404),
    operation_id="get_ldp_collection",
    tags=["analyst", "ldp"],
    dependencies=[Depends(single_query_values)],
)
def get_collection(name: PathName, caller: CallerDep, ldp: StoreDep) -> dict[str, Any]:
    """One collection's parameters and counts."""
    return ldp.describe(name)


@router.get(
    "/collections/{name}/parameters",
    response_model=dict[str, Any],
    responses=errors(404),
    operation_id="get_ldp_parameters",
    tags=["device", "ldp"],
)
def parameters(spec: DeviceDep) -> dict[str, Any]:
    """What a device needs to encode its reports (authenticated by the submission key)."""
    return spec.client_parameters()


@router.post(
    "/collections/{name}/reports",
    response_model=SubmitResult,
    responses=errors(404, 409),
    operation_id="submit_ldp_reports",
    tags=["device", "ldp"],
)
def submit(name: PathName, spec: DeviceDep, body: SubmitRequest, ldp: StoreDep) -> dict[str, Any]:
    """Add already-randomised reports; all are validated before any is stored."""
    batch = [Submission(r.client, r.report_id, r.memo, r.report) for r in body.reports]
    return ldp.submit(name, spec, batch)


@router.get(
    "/collections/{name}/estimates",
    response_model=Estimates,
    responses=errors(404),
    operation_id="get_ldp_estimates",
    tags=["analyst", "ldp"],
    dependencies=[Depends(single_query_values)],
)
def estimates(
    name: PathName, caller: CallerDep, ldp: StoreDep, confidence: Confidence = 0.95
) -> dict[str, Any]:
    """Estimates with error bars from every stored report."""
    return ldp.estimate(name, confidence)


Day = Annotated[str, Query(min_length=10, max_length=10, pattern=r"^\d{4}-\d{2}-\d{2}$")]


@router.get(
    "/collections/{name}/series",
    response_model=CollectionSeries,
    responses=errors(404),
    operation_id="get_ldp_series",
    tags=["analyst", "ldp"],
    dependencies=[Depends(single_query_values)],
)
def series(
    name: PathName,
    caller: CallerDep,
    ldp: StoreDep,
    period: Annotated[Literal["day", "week", "month"], Query(description="The period.")],
    start: Day,
    horizon: Annotated[int, Query(ge=1, le=1024, description="Periods in the series.")],
    as_of: Annotated[
        str | None,
        Query(
            min_length=10,
            max_length=10,
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            description="Publish the periods closed by this day (default today, UTC).",
        ),
    ] = None,
    confidence: Confidence = 0.95,
) -> dict[str, Any]:
    """Estimates per period (reports grouped by the day they arrived) and running totals, each
    with its interval; free (post-processing of the reports, each device's loss within the
    collection's lifetime cap).
    """
    return ldp.series(
        name, period=period, start=start, horizon=horizon, as_of=as_of, confidence=confidence
    )


@router.get(
    "/collections/{name}/clients",
    response_model=ClientList,
    responses=errors(403, 404),
    operation_id="list_ldp_clients",
    tags=["curator", "ldp"],
    dependencies=[Depends(single_query_values)],
)
def clients(
    name: PathName, caller: CuratorDep, ldp: StoreDep, limit: Limit = 100
) -> dict[str, Any]:
    """Each client's lifetime ε in the collection (largest first)."""
    return {"clients": ldp.clients(name, limit)}


def curator_routes() -> list[BaseRoute]:
    """The routes only curators may use."""
    return [r for r in router.routes if "curator" in getattr(r, "tags", ())]


def device_routes() -> list[BaseRoute]:
    """The routes devices call with a collection key instead of a principal's token."""
    devices = {"submit_ldp_reports", "get_ldp_parameters"}
    return [r for r in router.routes if getattr(r, "operation_id", None) in devices]
