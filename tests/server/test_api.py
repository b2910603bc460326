"""Every endpoint does what docs/server.md says, with the library's own answers and errors."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

from tests.server.helpers import Site, build_site

from dalenius.core.loss import PureDP
from dalenius.server.config import GatewayConfig, Limits

COUNT = "SELECT COUNT(*) FROM people WHERE age >= 40"
GROUPED = "SELECT sex, COUNT(*), AVG(income) FROM people GROUP BY sex"


def test_me_and_dataset_metadata(site: Site) -> None:
    me = site.client.get("/v1/me", headers=site.as_(site.analyst)).json()
    assert (me["name"], me["role"], me["datasets"]) == ("alice", "analyst", ["census"])
    detail = site.client.get("/v1/datasets/census", headers=site.as_(site.analyst)).json()
    people = next(t for t in detail["tables"] if t["name"] == "people")
    columns = {c["name"]: c for c in people["columns"]}
    assert columns["age"]["bounds"] == {"low": 0, "high": 100}
    assert columns["sex"]["keys"] == ["Female", "Male"]
    assert columns["married"]["keys"] == [False, True]
    assert columns["name"]["keys"] is None and columns["name"]["bounds"] is None
    assert columns["income"]["description"]
    assert people["privacy_unit"] | {"description": ""} == {
        "kind": "id",
        "column": "person_id",
        "max_rows": 1,
        "max_groups": 1,
        "description": "",
    }
    visits = next(t for t in detail["tables"] if t["name"] == "visits")
    assert visits["privacy_unit"] | {"description": ""} == {
        "kind": "id",
        "column": "person_id",
        "max_rows": 5,
        "max_groups": 1,
        "description": "",
    }
    # A visit repeats its person's attributes, and the catalog says so.
    visit_columns = {c["name"]: c for c in visits["columns"]}
    assert visit_columns["state"]["per_unit"] and not visit_columns["visit_date"]["per_unit"]
    assert not columns["age"]["per_unit"]
    text = repr(detail)
    assert "parquet" not in text and str(site.catalog.parent) not in text  # no server paths


def test_explain_spends_nothing_and_query_spends_what_explain_said(site: Site) -> None:
    headers = site.as_(site.analyst)
    body = {"sql": GROUPED, "epsilon": "0.2"}
    explained = site.client.post("/v1/datasets/census/explain", headers=headers, json=body)
    assert explained.status_code == 200, explained.text
    plan = explained.json()
    assert plan["loss"]["epsilon_exact"] == "1/5"
    assert len(plan["measurements"]) >= 2 and all(m["error"] > 0 for m in plan["measurements"])
    assert plan["bounding"].startswith("BoundContributions(")
    assert plan["clips"] and all(c.startswith("Clip(") for c in plan["clips"])
    # Beside each error, the floor no (ε, δ)-DP mechanism beats (course document 004, Thm 4).
    for m in plan["measurements"]:
        assert 0 < m["lower_bound"] <= m["sensitivity"] / (2 * (1 + math.exp(m["epsilon"])))
    assert "Theorem 4" in plan["lower_bound_basis"]
    assert site.gateway.ledger.spent("alice", "census") == PureDP(Fraction(0))

    answered = site.client.post("/v1/datasets/census/query", headers=headers, json=body)
    assert answered.status_code == 200, answered.text
    result = answered.json()
    assert result["columns"][0] == "sex" and result["kinds"][0] == "key"
    assert [row[0]["value"] for row in result["rows"]] == ["Female", "Male"]
    for row in result["rows"]:
        for cell, kind in zip(row, result["kinds"], strict=True):
            if kind != "key":
                assert cell["low"] <= cell["value"] <= cell["high"]
    assert result["spent"]["epsilon_exact"] == "1/5" and result["cached"] is False
    assert result["remaining"]["epsilon_exact"] == "4/5"
    assert site.gateway.ledger.spent("alice", "census") == PureDP(Fraction(1, 5))

    again = site.client.post("/v1/datasets/census/query", headers=headers, json=body).json()
    assert again["cached"] is True and again["rows"] == result["rows"]
    assert again["spent"]["epsilon"] == 0
    assert site.gateway.ledger.spent("alice", "census") == PureDP(Fraction(1, 5))


def test_budget_exceeded_is_409_and_costs_nothing(site: Site) -> None:
    headers = site.as_(site.analyst)
    response = site.client.post(
        "/v1/datasets/census/query", headers=headers, json={"sql": COUNT, "epsilon": 2}
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert (error["requested"], error["remaining"]) == (2.0, 1.0)
    assert error["why"] and error["fix"]
    assert site.gateway.ledger.spent("alice", "census") == PureDP(Fraction(0))


def test_sql_errors_carry_clause_line_column_why_and_fix(site: Site) -> None:
    response = site.client.post(
        "/v1/datasets/census/query",
        headers=site.as_(site.analyst),
        json={"sql": "SELECT COUNT(*)\nFROM people\nWHERE nosuch > 3", "epsilon": 0.1},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] in {"query_error", "privacy_refusal"}
    assert error["line"] == 3 and error["column"] >= 1
    assert error["why"] or error["fix"]
    refused = site.client.post(
        "/v1/datasets/census/query",
        headers=site.as_(site.analyst),
        json={"sql": "SELECT name FROM people", "epsilon": 0.1},
    ).json()["error"]
    assert refused["code"] == "privacy_refusal" and refused["clause"] == "SELECT"
    assert (refused["line"], refused["column"], refused["span"]) == (1, 8, "name")
    assert site.gateway.ledger.spent("alice", "census") == PureDP(Fraction(0))
    outcomes = [a.outcome for a in site.gateway.ledger.audit(principal="alice")]
    assert outcomes.count("refused") == 2  # the session audits refusals in the ledger


def test_bad_bodies_get_one_error_shape(site: Site) -> None:
    headers = site.as_(site.analyst)
    for body in (
        {"sql": COUNT, "epsilon": True},
        {"sql": COUNT, "epsilon": 0.1, "epsilom": 2},
        {"epsilon": 0.1},
        {"sql": "", "epsilon": 0.1},
        {"sql": COUNT, "epsilon": 0.1, "confidence": 1.5},
    ):
        response = site.client.post("/v1/datasets/census/query", headers=headers, json=body)
        assert response.status_code == 400, body
        error = response.json()["error"]
        assert error["code"] == "invalid_request" and error["details"], body
    for epsilon in (-1, 0, "nan", "abc"):
        response = site.client.post(
            "/v1/datasets/census/query", headers=headers, json={"sql": COUNT, "epsilon": epsilon}
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_loss", epsilon
    response = site.client.post(
        "/v1/datasets/census/query",
        headers={**headers, "Content-Type": "application/json"},
        content=b"{not json",
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"
    assert site.client.get("/v1/nowhere", headers=headers).json()["error"]["code"] == "not_found"
    wrong = site.client.delete("/v1/me", headers=headers)
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


def test_own_budget_and_ledger(site: Site) -> None:
    headers = site.as_(site.analyst)
    site.client.post(
        "/v1/datasets/census/query", headers=headers, json={"sql": COUNT, "epsilon": 0.25}
    )
    budget = site.client.get("/v1/datasets/census/budget", headers=headers).json()
    assert budget["budget"]["epsilon_exact"] == "1/1"
    assert budget["spent"]["epsilon_exact"] == "1/4"
    assert budget["remaining"]["epsilon_exact"] == "3/4"
    assert site.client.get("/v1/me/budgets", headers=headers).json()["budgets"] == [budget]
    entries = site.client.get("/v1/me/ledger", headers=headers).json()["entries"]
    assert [(e["sql"], e["status"], e["charged"]["epsilon_exact"]) for e in entries] == [
        (COUNT, "committed", "1/4")
    ]
    assert "answer" not in entries[0]
    stranger = site.client.get("/v1/me/ledger", headers=site.as_(site.stranger)).json()
    assert stranger == {"entries": []}
    limited = site.client.get("/v1/me/ledger?limit=0", headers=headers)
    assert limited.status_code == 400


def test_curator_manages_principals_tokens_and_grants(site: Site) -> None:
    curator = site.as_(site.curator)
    created = site.client.post("/v1/principals", headers=curator, json={"name": "bob"})
    assert created.status_code == 201
    bob = created.json()
    assert bob["role"] == "analyst" and bob["token"]["token"].startswith("dlt_")
    assert (
        site.client.post("/v1/principals", headers=curator, json={"name": "bob"}).status_code == 409
    )
    bad = site.client.post("/v1/principals", headers=curator, json={"name": "bad name!"})
    assert bad.status_code == 400
    token = bob["token"]["token"]
    assert site.client.get("/v1/datasets", headers=site.as_(token)).json() == {"datasets": []}
    granted = site.client.put("/v1/principals/bob/grants/census", headers=curator)
    assert granted.status_code == 200 and granted.json()["grants"] == ["census"]
    assert site.client.put("/v1/principals/bob/grants/nowhere", headers=curator).status_code == 404
    assert (
        site.client.put("/v1/principals/nobody/grants/census", headers=curator).status_code == 404
    )
    assert [
        d["name"]
        for d in site.client.get("/v1/datasets", headers=site.as_(token)).json()["datasets"]
    ] == ["census"]
    # Granted but no budget: explain works, query spends nothing and is refused.
    body = {"sql": COUNT, "epsilon": 0.1}
    assert (
        site.client.post(
            "/v1/datasets/census/explain", headers=site.as_(token), json=body
        ).status_code
        == 200
    )
    assert (
        site.client.post(
            "/v1/datasets/census/query", headers=site.as_(token), json=body
        ).status_code
        == 409
    )
    second = site.client.post("/v1/principals/bob/tokens", headers=curator, json={"label": "ci"})
    assert second.status_code == 201 and second.json()["token"] != token
    listed = site.client.get("/v1/principals", headers=curator).json()["principals"]
    assert {p["name"] for p in listed} == {"root", "alice", "mallory", "bob"}
    assert [t["label"] for t in next(p for p in listed if p["name"] == "bob")["tokens"]] == [
        "issued by root",
        "ci",
    ]
    revoked = site.client.delete("/v1/principals/bob/grants/census", headers=curator)
    assert revoked.json()["grants"] == []
    missing = site.client.delete("/v1/principals/bob/tokens/0123456789abcdef", headers=curator)
    assert missing.status_code == 404
    assert site.client.get("/v1/principals/nobody", headers=curator).status_code == 404
    curator2 = site.client.post(
        "/v1/principals",
        headers=curator,
        json={"name": "carol", "role": "curator", "issue_token": False},
    ).json()
    assert curator2["token"] is None and curator2["role"] == "curator"


def test_curator_sets_budgets_and_total_caps(site: Site) -> None:
    curator = site.as_(site.curator)
    response = site.client.put(
        "/v1/budgets/alice/census", headers=curator, json={"epsilon": "0.5", "refresh_days": 30}
    )
    assert response.status_code == 200
    assert response.json()["budget"]["epsilon_exact"] == "1/2"
    assert response.json()["refresh_days"] == 30
    assert site.gateway.ledger.get_budget("alice", "census") == PureDP(Fraction(1, 2))
    for body in (
        {},
        {"epsilon": 1, "rho": 1},
        {"delta": 0.1},
        {"epsilon": -1},
        {"epsilon": 1, "refresh_days": 0},
    ):
        assert (
            site.client.put("/v1/budgets/alice/census", headers=curator, json=body).status_code
            == 400
        ), body
    assert (
        site.client.put(
            "/v1/budgets/nobody/census", headers=curator, json={"epsilon": 1}
        ).status_code
        == 404
    )
    assert (
        site.client.put(
            "/v1/budgets/alice/nowhere", headers=curator, json={"epsilon": 1}
        ).status_code
        == 404
    )
    everyone = site.client.get("/v1/budgets", headers=curator).json()["budgets"]
    assert [(b["analyst"], b["dataset"]) for b in everyone] == [("alice", "census")]
    assert site.client.get("/v1/budgets?analyst=mallory", headers=curator).json() == {"budgets": []}

    capped = site.client.put(
        "/v1/datasets/census/total-cap", headers=curator, json={"epsilon": 0.3}
    )
    assert capped.status_code == 200 and capped.json()["total_cap"]["epsilon_exact"] == "3/10"
    # The total cap now bounds alice's remaining budget too.
    mine = site.client.get("/v1/datasets/census/budget", headers=site.as_(site.analyst)).json()
    assert mine["remaining"]["epsilon_exact"] == "3/10"
    lifted = site.client.delete("/v1/datasets/census/total-cap", headers=curator)
    assert lifted.json()["total_cap"] is None
    accounting = site.client.get("/v1/datasets/census/accounting", headers=curator).json()
    assert accounting["definition"] == "pure" and accounting["total_spent"]["epsilon"] == 0
    assert site.client.get("/v1/datasets/nowhere/accounting", headers=curator).status_code == 404


def test_curator_registers_and_removes_datasets(site: Site, tmp_path: Path) -> None:
    curator = site.as_(site.curator)
    removed = site.client.delete("/v1/datasets/census", headers=curator)
    assert removed.status_code == 204
    assert site.client.get("/v1/datasets", headers=site.as_(site.analyst)).json() == {
        "datasets": []
    }
    assert site.client.delete("/v1/datasets/census", headers=curator).status_code == 404
    # The ledger keeps the budget: registering again restores access with the same budget.
    again = site.client.post("/v1/datasets", headers=curator, json={"catalog": str(site.catalog)})
    assert again.status_code == 201 and again.json()["name"] == "census"
    assert site.gateway.ledger.get_budget("alice", "census") == PureDP(Fraction(1))
    same = site.client.post("/v1/datasets", headers=curator, json={"catalog": str(site.catalog)})
    assert same.status_code == 201  # registering the same catalog twice is harmless

    broken = tmp_path / "broken.toml"
    broken.write_text('[dataset]\nname = "broken"\n[tables.t]\nsource = { csv = "missing.csv" }\n')
    response = site.client.post("/v1/datasets", headers=curator, json={"catalog": str(broken)})
    assert response.status_code == 400 and response.json()["error"]["code"] == "catalog_error"
    missing = site.client.post(
        "/v1/datasets", headers=curator, json={"catalog": str(tmp_path / "no.toml")}
    )
    assert missing.status_code == 400
    renamed = tmp_path / "census2.toml"
    renamed.write_text(
        site.catalog.read_text()
        .replace("[dataset]", "[dataset]\n", 1)
        .replace("people.parquet", str(site.catalog.parent / "people.parquet"))
        .replace("visits.parquet", str(site.catalog.parent / "visits.parquet"))
    )
    clash = site.client.post("/v1/datasets", headers=curator, json={"catalog": str(renamed)})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "conflict"
    assert site.gateway.store.registration("census").catalog == str(site.catalog.resolve())


def test_curator_reads_the_whole_record(site: Site) -> None:
    site.client.post(
        "/v1/datasets/census/query",
        headers=site.as_(site.analyst),
        json={"sql": COUNT, "epsilon": 0.1},
    )
    curator = site.as_(site.curator)
    entries = site.client.get("/v1/ledger", headers=curator).json()["entries"]
    assert [(e["analyst"], e["status"]) for e in entries] == [("alice", "committed")]
    assert site.client.get("/v1/ledger?analyst=mallory", headers=curator).json() == {"entries": []}
    audit = site.client.get("/v1/audit?analyst=alice", headers=curator).json()["audit"]
    assert [a["outcome"] for a in audit][:3] == ["answered", "charged", "reserved"]  # newest first
    log = site.client.get("/v1/requests?limit=1000", headers=curator).json()["requests"]
    assert log[0]["path"] == "/v1/audit" and log[0]["principal"] == "root"
    query = next(r for r in log if r["path"] == "/v1/datasets/census/query")
    assert (query["principal"], query["status"], query["method"]) == ("alice", 200, "POST")
    assert query["token_id"] == site.analyst.split("_")[1]
    assert site.analyst not in repr(log)
    mine = site.client.get("/v1/requests?principal=alice", headers=curator).json()["requests"]
    assert {r["principal"] for r in mine} == {"alice"}


def test_every_request_is_logged_even_refusals(site: Site) -> None:
    site.client.get("/v1/me")
    site.client.get("/v1/principals", headers=site.as_(site.analyst))
    log = site.client.get("/v1/requests", headers=site.as_(site.curator)).json()["requests"]
    codes = {(r["path"], r["status"], r["code"]) for r in log}
    assert ("/v1/me", 401, "unauthenticated") in codes
    assert ("/v1/principals", 403, "forbidden") in codes


def test_console_and_openapi_are_served(site: Site) -> None:
    page = site.client.get("/console/")
    assert page.status_code == 200 and "Dalenius console" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert site.client.get("/", follow_redirects=False).headers["location"] == "/console/"
    for asset in ("console.css", "js/app.js", "js/chart.js", "favicon.svg"):
        assert site.client.get(f"/console/{asset}").status_code == 200, asset
    document = site.client.get("/v1/openapi.json").json()
    assert document["info"]["title"] == "Dalenius gateway"
    assert "token" in document["components"]["securitySchemes"]
    assert "http" not in "".join(page.text.split("http://www.w3.org"))  # no external resources


def test_the_catalogs_min_people_rule_reaches_explain_and_query_over_http(
    demo_catalog: Path, tmp_path: Path
) -> None:
    # The same census, with the rule set so high that no cell passes it.
    ruled = demo_catalog.parent / "census_min_people.toml"
    text = demo_catalog.read_text(encoding="utf-8")
    ruled.write_text(text.replace("[dataset]\n", "[dataset]\nmin_people = 1000000\n", 1))
    site = build_site(GatewayConfig(limits=Limits(requests_per_minute=100_000)), ruled)
    try:
        headers = site.as_(site.analyst)
        body = {"sql": GROUPED, "epsilon": "0.2"}
        plan = site.client.post("/v1/datasets/census/explain", headers=headers, json=body).json()
        assert plan["min_people"]["people"] == 1_000_000
        assert plan["min_people"]["threshold"] > 1_000_000
        assert any("min_people = 1000000" in note for note in plan["notes"])
        answered = site.client.post("/v1/datasets/census/query", headers=headers, json=body)
        assert answered.status_code == 200, answered.text
        assert answered.json()["rows"] == []
        assert site.gateway.ledger.spent("alice", "census") == PureDP(Fraction(1, 5))
    finally:
        site.client.close()
        site.gateway.close()
