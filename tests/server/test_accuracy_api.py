"""Accuracy first over HTTP: explain, query and batch with error targets."""

from __future__ import annotations

from fractions import Fraction

from tests.server.helpers import Site

SQL = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


def test_explain_and_query_with_a_target_spend_exactly_the_chosen_epsilon(site: Site) -> None:
    headers = site.as_(site.analyst)
    body = {"sql": SQL, "target_error": {"n": 60}}
    explained = site.client.post("/v1/datasets/census/explain", headers=headers, json=body)
    assert explained.status_code == 200, explained.text
    plan = explained.json()
    [target] = plan["accuracy"]["targets"]
    assert target["error"] <= 60 < target["error_at_99_percent_of_epsilon"]
    assert plan["loss"]["epsilon_exact"] == plan["accuracy"]["epsilon_exact"]
    answered = site.client.post("/v1/datasets/census/query", headers=headers, json=body)
    assert answered.status_code == 200, answered.text
    result = answered.json()
    assert result["spent"]["epsilon_exact"] == plan["accuracy"]["epsilon_exact"]
    for row in result["rows"]:
        assert row[1]["high"] - row[1]["value"] <= 60
    budget = site.client.get("/v1/datasets/census/budget", headers=headers).json()
    spent = Fraction(budget["spent"]["epsilon_exact"])
    assert spent == Fraction(plan["accuracy"]["epsilon_exact"])


def test_bad_targets_are_refused_with_a_fix(site: Site) -> None:
    headers = site.as_(site.analyst)
    for body, code in [
        ({"sql": "SELECT AVG(age) FROM people", "target_error": 1}, "privacy_refusal"),
        ({"sql": SQL, "target_error": 5, "epsilon": 0.1}, None),
        ({"sql": SQL, "target_relative": 0.05}, None),
    ]:
        response = site.client.post("/v1/datasets/census/query", headers=headers, json=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["fix"]
        if code:
            assert error["code"] == code
    budget = site.client.get("/v1/datasets/census/budget", headers=headers).json()
    assert budget["spent"]["epsilon"] == 0


def test_batch_plans_then_runs(site: Site) -> None:
    headers = site.as_(site.analyst)
    queries = [
        {
            "sql": "SELECT COUNT(*) AS n FROM people WHERE age > 40",
            "target_relative": 0.05,
            "expected": 20000,
        },
        {"sql": SQL, "target_error": 100},
    ]
    planned = site.client.post(
        "/v1/datasets/census/batch", headers=headers, json={"queries": queries, "epsilon": 0.3}
    )
    assert planned.status_code == 200, planned.text
    plan = planned.json()
    assert Fraction(plan["epsilon_exact"]) <= Fraction(3, 10) and plan["results"] == []
    assert len(plan["queries"]) == 2
    ran = site.client.post(
        "/v1/datasets/census/batch",
        headers=headers,
        json={"queries": queries, "epsilon": 0.3, "run": True},
    )
    assert ran.status_code == 200, ran.text
    results = ran.json()["results"]
    assert len(results) == 2
    total = sum(Fraction(r["spent"]["epsilon_exact"]) for r in results)
    assert total == Fraction(plan["epsilon_exact"])
