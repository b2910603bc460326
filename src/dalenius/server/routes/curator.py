"""Endpoints for curators only: datasets, analysts and tokens, grants, budgets, the whole record.

Every route here depends on :func:`~dalenius.server.routes.deps.curator`, so an analyst's token
gets 403 before anything is read or changed.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from dalenius.server import anonymity, models
from dalenius.server.gateway import MAX_LIST, LossSpec
from dalenius.server.routes.deps import (
    CuratorDep,
    GatewayDep,
    PathName,
    QueryFilter,
    documented,
    errors,
    single_query_values,
)

router = APIRouter(prefix="/v1", tags=["curator"], dependencies=[Depends(single_query_values)])

Limit = Annotated[int, Query(ge=1, le=MAX_LIST, description="The most records to return.")]
Filter = QueryFilter
Name = PathName


def _spec(body: models.LossRequest) -> LossSpec:
    return LossSpec(epsilon=body.epsilon, delta=body.delta, rho=body.rho)


@documented(
    router.post,
    "/datasets",
    models.DatasetDetail,
    403,
    409,
    operation_id="register_dataset",
    status_code=201,
)
def register_dataset(
    body: models.RegisterRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Register a dataset by the path of its catalog file on the server (opened and checked)."""
    cap = _spec(body.total_cap) if body.total_cap is not None else None
    return gateway.register(caller, body.catalog, body.definition, cap)


@router.delete(
    "/datasets/{name}",
    status_code=204,
    response_class=Response,
    responses=errors(403, 404),
    operation_id="remove_dataset",
)
def remove_dataset(name: Name, caller: CuratorDep, gateway: GatewayDep) -> Response:
    """Remove a dataset and its grants; the ledger keeps its budgets and records."""
    gateway.unregister(name)
    return Response(status_code=204)


@documented(
    router.get,
    "/datasets/{name}/accounting",
    models.Accounting,
    403,
    404,
    operation_id="get_accounting",
)
def accounting(name: Name, caller: CuratorDep, gateway: GatewayDep) -> dict[str, object]:
    """A dataset's accounting definition, total cap and what all analysts spent together."""
    return gateway.dataset_accounting(name)


@documented(
    router.put,
    "/datasets/{name}/total-cap",
    models.Accounting,
    403,
    404,
    operation_id="set_total_cap",
)
def set_total_cap(
    name: Name, body: models.LossRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Cap every analyst's losses on a dataset together (colluding analysts add their losses)."""
    return gateway.set_total_cap(name, _spec(body))


@documented(
    router.put,
    "/datasets/{name}/fail-closed",
    models.Accounting,
    403,
    404,
    operation_id="set_fail_closed",
)
def set_fail_closed(
    name: Name, body: models.FailClosedRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Make a failure after the data gate also exhaust that analyst's budget on the dataset."""
    return gateway.set_fail_closed(name, body.fail_closed)


@documented(
    router.delete,
    "/datasets/{name}/total-cap",
    models.Accounting,
    403,
    404,
    operation_id="remove_total_cap",
)
def remove_total_cap(name: Name, caller: CuratorDep, gateway: GatewayDep) -> dict[str, object]:
    """Lift a dataset's total cap (each analyst's own budget still applies)."""
    return gateway.set_total_cap(name, None)


@documented(
    router.put,
    "/datasets/{name}/min-epsilon",
    models.Accounting,
    403,
    404,
    operation_id="set_min_epsilon",
)
def set_min_epsilon(
    name: Name, body: models.FloorRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Set the smallest ε one query on this dataset may spend (above the gateway's own floor)."""
    return gateway.set_min_epsilon(caller, name, body.epsilon)


@documented(
    router.delete,
    "/datasets/{name}/min-epsilon",
    models.Accounting,
    403,
    404,
    operation_id="remove_min_epsilon",
)
def remove_min_epsilon(name: Name, caller: CuratorDep, gateway: GatewayDep) -> dict[str, object]:
    """Lift a dataset's own ε floor (the gateway's min_epsilon still applies)."""
    return gateway.set_min_epsilon(caller, name, None)


@documented(router.get, "/principals", models.PrincipalList, 403, operation_id="list_principals")
def list_principals(caller: CuratorDep, gateway: GatewayDep) -> dict[str, object]:
    """Every analyst and curator, with grants and tokens (never a token's secret)."""
    return {"principals": gateway.principals()}


@documented(
    router.post,
    "/principals",
    models.CreatedPrincipal,
    403,
    409,
    operation_id="create_principal",
    status_code=201,
)
def create_principal(
    body: models.PrincipalRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Create an analyst or curator and, unless told not to, issue a first token (shown once)."""
    return gateway.create_principal(
        caller, body.name, body.role, body.issue_token, body.label, body.expires_in_days
    )


@documented(
    router.get, "/principals/{name}", models.PrincipalInfo, 403, 404, operation_id="get_principal"
)
def get_principal(name: Name, caller: CuratorDep, gateway: GatewayDep) -> dict[str, object]:
    """One analyst or curator, with grants and tokens."""
    return gateway.principal(name)


@documented(
    router.post,
    "/principals/{name}/tokens",
    models.IssuedToken,
    403,
    404,
    operation_id="issue_token",
    status_code=201,
)
def issue_token(
    name: Name, body: models.TokenRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Issue a new token; its text is in this answer only, the gateway keeps a hash."""
    return gateway.issue_token(caller, name, body.label, body.expires_in_days)


@router.delete(
    "/principals/{name}/tokens/{token_id}",
    status_code=204,
    response_class=Response,
    responses=errors(403, 404),
    operation_id="revoke_token",
)
def revoke_token(
    name: Name,
    token_id: Name,
    caller: CuratorDep,
    gateway: GatewayDep,
) -> Response:
    """Revoke a token: it stops working at once, in every gateway process."""
    gateway.revoke_token(name, token_id)
    return Response(status_code=204)


@documented(
    router.put,
    "/principals/{name}/grants/{dataset}",
    models.PrincipalInfo,
    403,
    404,
    operation_id="grant_dataset",
)
def grant(name: Name, dataset: Name, caller: CuratorDep, gateway: GatewayDep) -> dict[str, object]:
    """Let a principal see and query a dataset (a budget must still be set to spend)."""
    return gateway.grant(caller, name, dataset)


@documented(
    router.delete,
    "/principals/{name}/grants/{dataset}",
    models.PrincipalInfo,
    403,
    404,
    operation_id="revoke_grant",
)
def revoke_grant(
    name: Name, dataset: Name, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Withdraw a grant; the principal's ledger records stay."""
    return gateway.revoke_grant(name, dataset)


@documented(router.get, "/budgets", models.BudgetList, 403, operation_id="list_budgets")
def list_budgets(
    caller: CuratorDep,
    gateway: GatewayDep,
    analyst: Filter = None,
    dataset: Filter = None,
) -> dict[str, object]:
    """Every budget, with spent and remaining, optionally of one analyst or dataset."""
    return {"budgets": gateway.budgets(analyst, dataset)}


@documented(
    router.put, "/budgets/{analyst}/{dataset}", models.Budget, 403, 404, operation_id="set_budget"
)
def set_budget(
    analyst: Name,
    dataset: Name,
    body: models.BudgetRequest,
    caller: CuratorDep,
    gateway: GatewayDep,
) -> dict[str, object]:
    """Set an analyst's budget on a dataset (ε, (ε, δ) or ρ; optionally renewed every N days)."""
    return gateway.set_budget(analyst, dataset, _spec(body), body.refresh_days)


@documented(router.get, "/ledger", models.LedgerList, 403, operation_id="list_ledger")
def ledger(
    caller: CuratorDep,
    gateway: GatewayDep,
    limit: Limit = 200,
    analyst: Filter = None,
    dataset: Filter = None,
) -> dict[str, object]:
    """Every charge in the ledger, newest first."""
    return {"entries": gateway.entries(analyst, dataset, limit)}


@documented(router.get, "/audit", models.AuditList, 403, operation_id="list_audit")
def audit(
    caller: CuratorDep,
    gateway: GatewayDep,
    limit: Limit = 200,
    analyst: Filter = None,
    dataset: Filter = None,
) -> dict[str, object]:
    """The ledger's audit trail (answered, cached, refused, failed …), newest first."""
    return {"audit": gateway.audit(analyst, dataset, limit)}


@documented(router.get, "/requests", models.RequestList, 403, operation_id="list_requests")
def requests(
    caller: CuratorDep,
    gateway: GatewayDep,
    limit: Limit = 200,
    principal: Filter = None,
) -> dict[str, object]:
    """The gateway's request log: every request, its caller, status and time, newest first."""
    return {"requests": gateway.request_log(principal, limit)}


@router.post(
    "/datasets/{name}/anonymity/check",
    responses=errors(400, 403, 404, 503),
    operation_id="anonymity_check",
)
def anonymity_check(
    name: Name, body: models.AnonymityCheckRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Syntactic anonymity of a table as it is (k, ℓ, t, β, δ) and its re-identification risks.

    Curators only: it reads the records themselves, with no differential privacy.
    """
    return anonymity.check_table(gateway, caller, name, body)


@router.post(
    "/datasets/{name}/anonymize",
    responses=errors(400, 403, 404, 503),
    operation_id="anonymize",
)
def anonymize(
    name: Name, body: models.AnonymizeRequest, caller: CuratorDep, gateway: GatewayDep
) -> dict[str, object]:
    """Release a table's records anonymised (k-anonymity, ℓ-diversity, t-closeness, …).

    Curators only: the custodian's publication of microdata, which spends no privacy budget
    because it has no differential-privacy guarantee. The body is ``dalenius anonymize``'s
    config as JSON without ``data``; every released class is re-checked before the answer.
    """
    return anonymity.anonymize_table(gateway, caller, name, body)


@router.post(
    "/datasets/{name}/anonymize/progress",
    responses=errors(400, 403, 404, 503),
    operation_id="anonymize_progress",
    response_class=StreamingResponse,
)
def anonymize_progress(
    name: Name,
    body: models.AnonymizeRequest,
    caller: CuratorDep,
    gateway: GatewayDep,
    request: Request,
) -> StreamingResponse:
    """The same release as ``/anonymize``, streamed as NDJSON with the search's progress.

    Lines ``{"progress": [settled, total]}`` (lattice nodes) as the search advances, then the
    answer of ``/anonymize``, or ``{"error": {...}}`` if the models cannot be met. A bad config or
    table is refused with 400/404 before the stream starts.
    """
    lines = anonymity.anonymize_stream(
        gateway, caller, name, body, str(getattr(request.state, "request_id", ""))
    )
    return StreamingResponse(lines, media_type="application/x-ndjson")
