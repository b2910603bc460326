"""Endpoints for every signed-in caller: who am I, datasets, explain, query, own budget and ledger.

An analyst sees only the datasets granted to them (others answer 404, exactly as if they did not
exist); a curator sees every dataset. Explain reads no data and spends nothing; query spends from
the caller's own budget and is recorded in the ledger before its answer leaves.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from dalenius.server import models
from dalenius.server.gateway import MAX_LIST
from dalenius.server.routes.deps import (
    CallerDep,
    GatewayDep,
    PathName,
    QueryFilter,
    documented,
    errors,
    run_query_work,
    single_query_values,
)

router = APIRouter(prefix="/v1", tags=["analyst"], dependencies=[Depends(single_query_values)])

Limit = Annotated[int, Query(ge=1, le=MAX_LIST, description="The most records to return.")]


@router.get("/me", response_model=models.Me, responses=errors(), operation_id="me")
def me(request: Request, caller: CallerDep, gateway: GatewayDep) -> models.Me:
    """Who the token belongs to, the datasets the caller may use, and where PostgreSQL clients
    reach the gateway (when its listener runs).
    """
    names = [d["name"] for d in gateway.list_datasets(caller)]
    config = gateway.config
    postgres = None
    if config.pg_port is not None:
        # An all-interfaces listener is reached at the host name this client used.
        host = config.pg_host
        if host in ("0.0.0.0", "::", ""):
            host = request.url.hostname or "localhost"
        postgres = models.PostgresListener(
            host=host, port=config.pg_port, tls=config.tls_cert is not None
        )
    return models.Me(
        name=caller.name,
        role=caller.role,
        token_id=caller.token_id,
        datasets=names,
        postgres=postgres,
    )


@documented(router.get, "/datasets", models.DatasetList, operation_id="list_datasets")
def list_datasets(caller: CallerDep, gateway: GatewayDep) -> dict[str, object]:
    """The datasets the caller may use (all of them for a curator)."""
    return {"datasets": gateway.list_datasets(caller)}


@documented(
    router.get, "/datasets/{name}", models.DatasetDetail, 404, 503, operation_id="get_dataset"
)
def get_dataset(name: PathName, caller: CallerDep, gateway: GatewayDep) -> dict[str, object]:
    """A dataset's public metadata: tables, columns, types, bounds, keys, privacy units."""
    return gateway.describe_dataset(caller, name)


@documented(
    router.post, "/datasets/{name}/explain", models.Explanation, 404, 503, operation_id="explain"
)
async def explain(
    name: PathName, body: models.ExplainRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """The plan, its cost and the expected error of each measurement; spends nothing."""
    work = partial(
        gateway.explain,
        caller,
        name,
        body.sql,
        body.epsilon,
        body.delta,
        body.confidence,
        **body.targets(),
    )
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@documented(
    router.post, "/datasets/{name}/query", models.QueryResult, 404, 409, 503, operation_id="query"
)
async def query(
    name: PathName, body: models.QueryRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Answer a query with noise and error bars, spending ``epsilon`` from the caller's budget."""
    work = partial(
        gateway.query,
        caller,
        name,
        body.sql,
        body.epsilon,
        body.delta,
        body.confidence,
        body.idempotency_key,
        **body.targets(),
    )
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@documented(
    router.post, "/datasets/{name}/batch", models.BatchResult, 404, 409, 503, operation_id="batch"
)
async def batch(
    name: PathName, body: models.BatchRequest, caller: CallerDep, gateway: GatewayDep
) -> dict[str, object]:
    """Split ε optimally over queries with error targets; with ``run``, answer them (spends)."""
    work = partial(
        gateway.batch,
        caller,
        name,
        [q.model_dump(exclude_none=True) for q in body.queries],
        body.epsilon,
        body.delta,
        body.confidence,
        body.run,
    )
    found: dict[str, object] = await run_query_work(gateway, caller, work)
    return found


@documented(router.get, "/datasets/{name}/budget", models.Budget, 404, operation_id="get_my_budget")
def budget(name: PathName, caller: CallerDep, gateway: GatewayDep) -> dict[str, object]:
    """The caller's budget on a dataset: the cap, what was spent, what remains."""
    return gateway.caller_budget(caller, name)


@documented(router.get, "/me/budgets", models.BudgetList, operation_id="list_my_budgets")
def my_budgets(caller: CallerDep, gateway: GatewayDep) -> dict[str, object]:
    """The caller's budget on every dataset they may use."""
    return {"budgets": gateway.caller_budgets(caller)}


@documented(router.get, "/me/ledger", models.LedgerList, operation_id="list_my_ledger")
def my_ledger(
    caller: CallerDep,
    gateway: GatewayDep,
    limit: Limit = 200,
    dataset: QueryFilter = None,
) -> dict[str, object]:
    """The caller's own charges, newest first."""
    return {"entries": gateway.entries(caller.name, dataset, limit)}
