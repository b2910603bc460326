"""``POST /v1/datasets/{name}/bounds``: private bounds through the gateway, on the caller's budget."""

from __future__ import annotations

from fractions import Fraction

from tests.server.helpers import Site

from dalenius.core.loss import PureDP


def test_bounds_are_chosen_charged_once_and_given_again_free(site: Site) -> None:
    body = {"table": "people", "column": "age", "epsilon": "0.25"}
    answer = site.client.post(
        "/v1/datasets/census/bounds", json=body, headers=site.as_(site.analyst)
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    low, high = doc["bounds"]
    assert low <= 30 and high >= 64
    assert doc["threshold"] >= 1 and doc["bins"]
    assert doc["loss"]["epsilon"] == 0.25 and doc["cached"] is False
    again = site.client.post(
        "/v1/datasets/census/bounds", json=body, headers=site.as_(site.analyst)
    )
    assert again.json()["cached"] is True and again.json()["bounds"] == [low, high]
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(3, 4))


def test_a_column_without_private_bounds_needs_an_epsilon_and_costs_nothing(site: Site) -> None:
    body = {"table": "people", "column": "age"}
    answer = site.client.post(
        "/v1/datasets/census/bounds", json=body, headers=site.as_(site.analyst)
    )
    assert 400 <= answer.status_code < 500
    assert "bounds" in answer.text and "epsilon" in answer.text
    wrong = {"table": "people", "column": "sex", "epsilon": "0.1"}
    answer = site.client.post(
        "/v1/datasets/census/bounds", json=wrong, headers=site.as_(site.analyst)
    )
    assert 400 <= answer.status_code < 500 and "numeric" in answer.text
    assert site.gateway.ledger.remaining("alice", "census") == PureDP(Fraction(1))
