"""Joins of two private tables off their unit through the gateway: elastic sensitivity's count,
its explain, and the refusal on a dataset accounted in pure ε (whose fix names the ways out)."""

from __future__ import annotations

from fractions import Fraction

from tests.server.helpers import Site

from dalenius.core.loss import ApproxDP

SQL = "SELECT COUNT(*) FROM people p JOIN visits v ON p.zip = v.zip WHERE p.state = 'CA'"


def test_a_count_over_a_join_on_zip_is_answered_with_elastic_sensitivity(site: Site) -> None:
    site.gateway.ledger.set_dataset("census", definition="approx")
    site.gateway.ledger.set_budget("alice", "census", ApproxDP(Fraction(10), Fraction(1, 10**4)))
    body = {"sql": SQL, "epsilon": 0.5, "delta": 1e-6}
    explained = site.client.post(
        "/v1/datasets/census/explain", json=body, headers=site.as_(site.analyst)
    )
    assert explained.status_code == 200
    assert explained.json()["bounding"].startswith("Elastic(")
    answer = site.client.post(
        "/v1/datasets/census/query", json=body, headers=site.as_(site.analyst)
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    cell = doc["rows"][0][0]
    assert cell["low"] <= cell["value"] <= cell["high"]
    assert doc["spent"]["epsilon_exact"] == "1/2" and doc["spent"]["delta_exact"] == "1/1000000"


def test_on_a_pure_dataset_the_refusal_names_the_ways_out(site: Site) -> None:
    body = {"sql": SQL, "epsilon": 0.5, "delta": 1e-6}
    answer = site.client.post(
        "/v1/datasets/census/query", json=body, headers=site.as_(site.analyst)
    )
    assert answer.status_code == 400
    fix = answer.json()["error"]["fix"]
    assert "--definition approx" in fix and "join_rows_per_key" in fix
