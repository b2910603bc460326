"""The release endpoints: density curves, hierarchical tables, synthetic and perturbed rows
through the gateway."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.server.helpers import Site

from dalenius.core.loss import ApproxDP, PureDP
from dalenius.server.app import create_app
from dalenius.server.config import GatewayConfig
from dalenius.server.gateway import Gateway
from dalenius.server.store import CURATOR, Caller


def test_a_hierarchy_is_released_consistent_and_charged(site: Site) -> None:
    body = {"table": "people", "levels": ["sex", "education"], "epsilon": "0.5"}
    answer = site.client.post(
        "/v1/datasets/census/hierarchy", json=body, headers=site.as_(site.analyst)
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    nodes = doc["nodes"]
    assert len(nodes) == 1 + 2 + 32
    root = nodes[0]["final"]
    assert root == sum(n["final"] for n in nodes if n["level"] == 1)
    assert all(n["final_low"] <= n["final"] <= n["final_high"] for n in nodes)
    assert doc["loss"]["epsilon"] == 0.5
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1, 2))


def test_a_continual_series_is_charged_once_and_published_on_for_free(site: Site) -> None:
    body = {
        "table": "visits",
        "time": "visit_date",
        "period": "month",
        "start": "2023-01-01",
        "horizon": 12,
        "value": "duration_minutes",
        "epsilon": "0.5",
        "as_of": "2023-07-01",
    }
    headers = site.as_(site.analyst)
    first = site.client.post("/v1/datasets/census/continual", json=body, headers=headers)
    assert first.status_code == 200, first.text
    doc = first.json()
    assert doc["closed"] == 6 and doc["levels"] == 5 and doc["loss"]["epsilon"] == 0.5
    later = site.client.post(
        "/v1/datasets/census/continual", json={**body, "as_of": "2023-10-01"}, headers=headers
    )
    assert later.status_code == 200, later.text
    again = later.json()
    assert again["closed"] == 9 and again["loss"]["epsilon"] == 0
    for period in again["periods"]:
        assert period["count_low"] <= period["count"] <= period["count_high"]
        assert period["running_sum_low"] <= period["running_sum"] <= period["running_sum_high"]
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1, 2))
    fetched = site.client.get(f"/v1/datasets/census/releases/{doc['entry_id']}", headers=headers)
    assert fetched.status_code == 200 and fetched.json()["periods"] == doc["periods"]
    future = site.client.post(
        "/v1/datasets/census/continual", json={**body, "as_of": "2999-01-01"}, headers=headers
    )
    assert future.status_code == 400 and "after today" in future.text


def test_a_density_on_a_pure_budget_is_refused_at_no_cost(site: Site) -> None:
    body = {"table": "people", "columns": ["age"], "bandwidth": 2, "epsilon": "0.5"}
    answer = site.client.post(
        "/v1/datasets/census/density", json=body, headers=site.as_(site.analyst)
    )
    assert 400 <= answer.status_code < 500
    assert "delta" in answer.text
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1))


def approx_gateway(demo_catalog: Path, budget: ApproxDP) -> tuple[Gateway, TestClient, str]:
    """A gateway with the demo census registered as an (ε, δ) dataset and alice's budget on it."""
    gateway = Gateway(GatewayConfig())
    root = Caller(name="root", role=CURATOR, token_id="")
    gateway.bootstrap("root", CURATOR)
    gateway.register(root, str(demo_catalog), "approx", None)
    token = gateway.bootstrap("alice").token
    gateway.store.grant("alice", "census", by="root")
    gateway.ledger.set_budget("alice", "census", budget)
    return gateway, TestClient(create_app(gateway=gateway), raise_server_exceptions=False), token


def test_a_density_is_released_with_its_bands(demo_catalog: Path) -> None:
    budget = ApproxDP(Fraction(1), Fraction(1, 10**5))
    gateway, client, token = approx_gateway(demo_catalog, budget)
    try:
        body = {
            "table": "people",
            "columns": ["age"],
            "bandwidth": 2,
            "epsilon": "0.5",
            "delta": "1e-6",
            "points": 50,
        }
        answer = client.post(
            "/v1/datasets/census/density", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 200, answer.text
        doc = answer.json()
        assert len(doc["density"]) == 50 and len(doc["grid"][0]) == 50
        assert all(
            lo <= v <= hi for lo, v, hi in zip(doc["low"], doc["density"], doc["high"], strict=True)
        )
        again = client.post(
            "/v1/datasets/census/density", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert again.json()["cached"] is True
        assert gateway.ledger.remaining("alice", "census") == ApproxDP(
            Fraction(1, 2), Fraction(9, 10**6)
        )
        client.close()
    finally:
        gateway.close()


def test_synthetic_origin_destination_rows_are_released_and_charged(site: Site) -> None:
    body = {
        "table": "people",
        "origin": "education",
        "destination": "sex",
        "epsilon": "0.5",
        "prior": 5,
    }
    answer = site.client.post(
        "/v1/datasets/census/onthemap", json=body, headers=site.as_(site.analyst)
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["per_destination"] >= 1 and doc["rows"] == sum(f[2] for f in doc["flows"])
    assert {f[1] for f in doc["flows"]} <= {"Female", "Male"}
    assert doc["loss"]["epsilon"] == 0.5
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1, 2))
    refused = site.client.post(
        "/v1/datasets/census/onthemap",
        json={**body, "per_destination": 10_000},
        headers=site.as_(site.analyst),
    )
    assert 400 <= refused.status_code < 500 and "prior" in refused.text
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1, 2))


def test_a_release_is_fetched_again_by_id_for_free(site: Site) -> None:
    body = {"table": "people", "levels": ["sex"], "epsilon": "0.5"}
    first = site.client.post(
        "/v1/datasets/census/hierarchy", json=body, headers=site.as_(site.analyst)
    ).json()
    again = site.client.get(
        f"/v1/datasets/census/releases/{first['entry_id']}", headers=site.as_(site.analyst)
    )
    assert again.status_code == 200, again.text
    doc = again.json()
    assert doc["cached"] and doc["nodes"] == first["nodes"]
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1, 2))
    missing = site.client.get(
        "/v1/datasets/census/releases/0123456789abcdef", headers=site.as_(site.analyst)
    )
    assert 400 <= missing.status_code < 500 and "no released entry" in missing.text


SYNTHESIZE = {
    "table": "people",
    "columns": ["sex", "education", "age"],
    "bins": 5,
    "rows": 500,
    "epsilon": "1",
    "delta": "1e-6",
}


@pytest.mark.parametrize("method", [{}, {"method": "aim", "degree": 3}])
def test_synthetic_rows_are_released_through_the_gateway_and_fetched_again(
    demo_catalog: Path, method: dict[str, object]
) -> None:
    budget = ApproxDP(Fraction(2), Fraction(1, 10**5))
    gateway, client, token = approx_gateway(demo_catalog, budget)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        body = {**SYNTHESIZE, **method}
        first = client.post("/v1/datasets/census/synthesize", json=body, headers=headers)
        assert first.status_code == 200, first.text
        doc = first.json()
        assert doc["method"] == method.get("method", "mst")
        assert doc["rows"] == 500 and len(doc["data"]["age"]) == 500
        assert set(doc["data"]["sex"]) <= {"Female", "Male"}
        assert all(1 <= len(kept) <= 3 for kept in doc["edges"])
        again = client.get(f"/v1/datasets/census/releases/{doc['entry_id']}", headers=headers)
        assert again.status_code == 200 and again.json()["data"] == doc["data"]
        assert again.json()["method"] == doc["method"]
        assert gateway.ledger.remaining("alice", "census") == ApproxDP(
            Fraction(1), Fraction(1, 10**5) - Fraction(1, 10**6)
        )
    finally:
        gateway.close()


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_the_synthesis_stream_shows_each_round_then_the_answer(
    demo_catalog: Path, method: str
) -> None:
    budget = ApproxDP(Fraction(2), Fraction(1, 10**5))
    gateway, client, token = approx_gateway(demo_catalog, budget)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        body = {**SYNTHESIZE, "method": method}
        path = "/v1/datasets/census/synthesize/progress"
        answer = client.post(path, json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in answer.text.splitlines()]
        rounds = [line["progress"] for line in lines[:-1]]
        assert [r["round"] for r in rounds] == list(range(1, len(rounds) + 1))
        assert all(r["method"] == method and r["round"] <= r["rounds"] for r in rounds)
        spent = [Fraction(r["rho_spent_exact"]) for r in rounds]
        assert spent == sorted(spent) and spent[-1] <= Fraction(rounds[0]["rho_exact"])
        assert all(set(r["marginal"]) <= {"sex", "education", "age"} for r in rounds)
        last = lines[-1]
        assert last["method"] == method and len(last["data"]["age"]) == 500
        if method == "mst":
            assert [tuple(r["marginal"]) for r in rounds] == [tuple(e) for e in last["edges"]]
        # The same request again is its answer alone, at no cost; a refusal is a plain 400.
        again = client.post(path, json=body, headers=headers)
        [only] = [json.loads(line) for line in again.text.splitlines()]
        assert only["cached"] and only["data"] == last["data"]
        refused = client.post(path, json={**body, "degree": 3, "method": "mst"}, headers=headers)
        assert refused.status_code == 400 and "degree is AIM's workload" in refused.text
        assert gateway.ledger.remaining("alice", "census") == ApproxDP(
            Fraction(1), Fraction(1, 10**5) - Fraction(1, 10**6)
        )
    finally:
        gateway.close()


def test_a_bad_choice_of_synthesizer_is_refused_for_free(demo_catalog: Path) -> None:
    budget = ApproxDP(Fraction(2), Fraction(1, 10**5))
    gateway, client, token = approx_gateway(demo_catalog, budget)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        for bad in ({"method": "aim", "degree": 4}, {"method": "privbayes"}):
            body = {**SYNTHESIZE, **bad}
            refused = client.post("/v1/datasets/census/synthesize", json=body, headers=headers)
            assert refused.status_code == 400, refused.text
            assert f"body.{list(bad)[-1]}" in refused.text
        body = {**SYNTHESIZE, "method": "mst", "degree": 3}
        refused = client.post("/v1/datasets/census/synthesize", json=body, headers=headers)
        assert refused.status_code == 400 and "degree is AIM's workload" in refused.text
        assert gateway.ledger.remaining("alice", "census") == budget
        assert not gateway.ledger.entries()
    finally:
        gateway.close()


def test_the_floor_refuses_every_release_below_it_at_no_cost(site: Site) -> None:
    root = Caller(name="root", role=CURATOR, token_id="")
    site.gateway.set_min_epsilon(root, "census", "0.5")
    requests = {
        "hierarchy": {"table": "people", "levels": ["sex"], "epsilon": "0.25"},
        "onthemap": {
            "table": "people",
            "origin": "sex",
            "destination": "education",
            "epsilon": "0.25",
            "per_destination": 5,
        },
        "perturb": {"table": "people", "columns": ["age"], "epsilon": "0.25"},
        "query": {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.25},
        "continual": {
            "table": "visits",
            "time": "visit_date",
            "period": "week",
            "start": "2023-01-02",
            "horizon": 52,
            "epsilon": "0.25",
        },
    }
    for path, body in requests.items():
        answer = site.client.post(
            f"/v1/datasets/census/{path}", json=body, headers=site.as_(site.analyst)
        )
        assert answer.status_code == 400, (path, answer.text)
        assert "floor of 0.5" in answer.text, path
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1))
    assert not site.gateway.ledger.entries()
    body = {"table": "people", "levels": ["sex"], "epsilon": "0.5"}
    answer = site.client.post(
        "/v1/datasets/census/hierarchy", json=body, headers=site.as_(site.analyst)
    )
    assert answer.status_code == 200, answer.text


def test_perturbed_rows_come_with_their_error_table_charged_once(site: Site) -> None:
    body = {"table": "people", "columns": ["age", "sex"], "epsilon": "0.5"}
    headers = site.as_(site.analyst)
    answer = site.client.post("/v1/datasets/census/perturb", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["columns"] == ["age", "sex"] and len(doc["rows"]) == doc["rows_released"]
    # The number of rows is noisy (ε 0.025): within its 95% bar of the 3000 people, mostly.
    assert abs(doc["rows_released"] - 3000) <= 3 * doc["rows_error"]
    assert {row[1] for row in doc["rows"]} <= {"Female", "Male"}
    assert all(isinstance(row[0], float) for row in doc["rows"])
    age, sex = doc["errors"]
    assert (age["column"], age["domain"], age["categorical"]) == ("age", "[0, 100]", False)
    assert 0 < age["lower_bound"] < age["mean_abs_error"] < age["error"]
    assert sex["categorical"] and sex["error"] is None and sex["domain"] == "2 keys"
    assert doc["loss"]["epsilon"] == 0.5 and doc["cached"] is False
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1, 2))
    again = site.client.post("/v1/datasets/census/perturb", json=body, headers=headers).json()
    fetched = site.client.get(
        f"/v1/datasets/census/releases/{doc['entry_id']}", headers=headers
    ).json()
    for repeat in (again, fetched):
        assert repeat["cached"] and repeat["rows"] == doc["rows"]
        assert repeat["errors"] == doc["errors"] and repeat["entry_id"] == doc["entry_id"]
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1, 2))


def test_perturbation_refusals_name_the_problem_and_cost_nothing(site: Site) -> None:
    headers = site.as_(site.analyst)
    refusals = [
        ({"table": "visits", "columns": ["duration_minutes"], "epsilon": 1}, "group privacy"),
        ({"table": "people", "columns": ["person_id"], "epsilon": 1}, "public bounds"),
        ({"table": "people", "columns": ["age"]}, "epsilon"),
        ({"table": "people", "columns": ["age"], "epsilon": 1, "rho": 1}, "rho"),
        ({"table": "people", "columns": [], "epsilon": 1}, "columns"),
    ]
    for body, reason in refusals:
        answer = site.client.post("/v1/datasets/census/perturb", json=body, headers=headers)
        assert answer.status_code == 400, (body, answer.text)
        assert reason in answer.text, (body, answer.text)
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1))
    assert not site.gateway.ledger.entries()
