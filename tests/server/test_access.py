"""Who may call what: every endpoint needs a valid token; curator endpoints refuse analysts;
analysts see only the datasets granted to them. Routes are enumerated from the application, so an
endpoint added later is covered without editing this file."""

from __future__ import annotations

import re

import pytest
from tests.server.helpers import Site

from dalenius.server.app import create_app
from dalenius.server.config import GatewayConfig
from dalenius.server.gateway import Gateway


def api_routes() -> list[tuple[str, str, str, frozenset[str]]]:
    """Every operation of the OpenAPI document: method, path, operation id, tags."""
    gateway = Gateway(GatewayConfig())
    try:
        document = create_app(gateway=gateway).openapi()
    finally:
        gateway.close()
    return [
        (method.upper(), path, operation["operationId"], frozenset(operation.get("tags", ())))
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


ROUTES = api_routes()
CURATOR_ROUTES = [r for r in ROUTES if "curator" in r[3]]
ANALYST_ROUTES = [r for r in ROUTES if "analyst" in r[3]]
DEVICE_ROUTES = [r for r in ROUTES if "device" in r[3]]  # local-DP devices: a collection's key


def concrete(path: str) -> str:
    values = {
        "name": "census",
        "dataset": "census",
        "analyst": "alice",
        "token_id": "0" * 16,
        "entry_id": "0" * 32,
        "attack": "differencing",
    }
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def test_routes_are_all_tagged_with_a_role() -> None:
    assert len(ROUTES) >= 25
    assert set(ROUTES) == set(CURATOR_ROUTES) | set(ANALYST_ROUTES) | set(DEVICE_ROUTES)


@pytest.mark.parametrize(("method", "path", "name", "tags"), ROUTES, ids=[r[2] for r in ROUTES])
def test_no_endpoint_answers_without_a_valid_token(
    shared_site: Site, method: str, path: str, name: str, tags: frozenset[str]
) -> None:
    site = shared_site
    revoked = site.gateway.store.issue_token("alice", by="root")
    site.gateway.store.revoke_token("alice", revoked.token_id)
    forged = site.analyst[:-4] + "AAAA"  # the right id, the wrong secret
    for headers in (
        {},
        site.as_("not-a-token"),
        site.as_(forged),
        site.as_(revoked.token),
        {"Authorization": f"Basic {site.analyst}"},
    ):
        response = site.client.request(method, concrete(path), headers=headers, json={})
        assert response.status_code == 401, (name, headers, response.text)
        error = response.json()["error"]
        assert error["code"] == "unauthenticated"
        assert error["message"] and error["fix"] and error["request_id"]
        assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("method", "path", "name", "tags"), CURATOR_ROUTES, ids=[r[2] for r in CURATOR_ROUTES]
)
def test_analysts_cannot_reach_curator_endpoints(
    shared_site: Site, method: str, path: str, name: str, tags: frozenset[str]
) -> None:
    site = shared_site
    before = site.client.get("/v1/principals", headers=site.as_(site.curator)).json()
    response = site.client.request(
        method, concrete(path), headers=site.as_(site.analyst), json={"epsilon": 5}
    )
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "forbidden"
    after = site.client.get("/v1/principals", headers=site.as_(site.curator)).json()
    assert after == before  # nothing changed
    assert site.gateway.ledger.get_budget("alice", "census") is not None


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/datasets/census", None),
        ("GET", "/v1/datasets/census/budget", None),
        (
            "POST",
            "/v1/datasets/census/explain",
            {"sql": "SELECT COUNT(*) FROM people", "epsilon": 1},
        ),
        ("POST", "/v1/datasets/census/query", {"sql": "SELECT COUNT(*) FROM people", "epsilon": 1}),
    ],
)
def test_ungranted_datasets_look_like_missing_ones(
    site: Site, method: str, path: str, body: dict[str, object] | None
) -> None:
    ungranted = site.client.request(method, path, headers=site.as_(site.stranger), json=body)
    missing = site.client.request(
        method, path.replace("census", "nowhere"), headers=site.as_(site.stranger), json=body
    )
    assert ungranted.status_code == missing.status_code == 404
    assert ungranted.json()["error"]["code"] == "not_found"
    assert ungranted.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        "nowhere", "census"
    )
    assert site.gateway.ledger.entries(principal="mallory") == []


def test_an_analyst_lists_only_granted_datasets(site: Site, demo_catalog) -> None:
    assert site.client.get("/v1/datasets", headers=site.as_(site.stranger)).json() == {
        "datasets": []
    }
    mine = site.client.get("/v1/datasets", headers=site.as_(site.analyst)).json()["datasets"]
    assert [d["name"] for d in mine] == ["census"]
    assert "catalog" not in mine[0]  # server paths are for curators
    theirs = site.client.get("/v1/datasets", headers=site.as_(site.curator)).json()["datasets"]
    assert theirs[0]["catalog"] == str(demo_catalog.resolve())
    me = site.client.get("/v1/me", headers=site.as_(site.stranger)).json()
    assert me == {
        "name": "mallory",
        "role": "analyst",
        "token_id": site.stranger.split("_")[1],
        "datasets": [],
        "postgres": None,  # no PostgreSQL listener on this gateway
    }


def test_a_revoked_grant_closes_the_dataset_at_once(site: Site) -> None:
    body = {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1}
    headers = site.as_(site.analyst)
    assert (
        site.client.post("/v1/datasets/census/explain", headers=headers, json=body).status_code
        == 200
    )
    site.client.delete("/v1/principals/alice/grants/census", headers=site.as_(site.curator))
    assert (
        site.client.post("/v1/datasets/census/explain", headers=headers, json=body).status_code
        == 404
    )


def test_a_revoked_token_stops_working_at_once(site: Site) -> None:
    token_id = site.analyst.split("_")[1]
    assert site.client.get("/v1/me", headers=site.as_(site.analyst)).status_code == 200
    response = site.client.delete(
        f"/v1/principals/alice/tokens/{token_id}", headers=site.as_(site.curator)
    )
    assert response.status_code == 204
    assert site.client.get("/v1/me", headers=site.as_(site.analyst)).status_code == 401


def test_tokens_are_stored_only_as_hashes(site: Site) -> None:
    issued = site.client.post(
        "/v1/principals/alice/tokens", headers=site.as_(site.curator), json={"label": "laptop"}
    ).json()
    store = site.gateway.store
    with store._db.transaction(write=False) as tx:
        rows = tx.run("SELECT id, hash, label FROM dalenius_gateway_tokens")
    dump = repr(rows)
    assert issued["token"] not in dump
    secret = issued["token"].split("_", 2)[2]  # dlt_<id>_<secret>; the secret may contain "_"
    assert secret not in dump
    listed = site.client.get("/v1/principals/alice", headers=site.as_(site.curator)).json()
    assert issued["token"] not in repr(listed)
    assert issued["token_id"] in [t["id"] for t in listed["tokens"]]
