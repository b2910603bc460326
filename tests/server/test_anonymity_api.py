"""Syntactic anonymity through the gateway: curators only, the CLI's config as JSON, re-checked."""

from __future__ import annotations

import json

import pandas as pd
from tests.server.helpers import Site

from dalenius.anonymity import check

BODY = {
    "table": "people",
    "attributes": {
        "quasi_identifiers": ["age", "sex"],
        "identifiers": ["name", "person_id", "date_of_birth", "zip"],
        "sensitive": ["education"],
    },
    "privacy": {"k": 5, "l": 2, "suppression_limit": 0.02},
    "hierarchies": {"age": {"type": "intervals", "widths": [5, 10, 20]}},
}


def test_an_analyst_may_neither_check_nor_anonymize(site: Site) -> None:
    for path, body in (
        ("/v1/datasets/census/anonymize", BODY),
        ("/v1/datasets/census/anonymity/check", {"table": "people", "quasi_identifiers": ["age"]}),
    ):
        answer = site.client.post(path, json=body, headers=site.as_(site.analyst))
        assert answer.status_code == 403, answer.text
        assert site.client.post(path, json=body).status_code == 401


def test_a_curator_gets_a_release_that_satisfies_the_models(site: Site) -> None:
    answer = site.client.post(
        "/v1/datasets/census/anonymize", json=BODY, headers=site.as_(site.curator)
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    report = doc["report"]
    assert report["rows_out"] == doc["rows"] > 0
    assert report["rows_in"] - report["rows_out"] == report["suppressed"]
    data = pd.DataFrame(doc["data"])
    for identifier in BODY["attributes"]["identifiers"]:
        assert identifier not in data.columns
    assert data["age"].str.startswith("[").all()  # generalised to intervals
    released = check(data, ["age", "sex"], ["education"])
    assert released.k >= 5
    assert released.sensitive[0].distinct_l >= 2
    # The risks of what is published, by the released quasi-identifiers: 1/k at most.
    risks = doc["risk"]
    assert risks["rows"] == report["rows_out"]
    assert risks["classes"] == released.classes
    assert risks["prosecutor_max"] == 1 / released.k <= 1 / 5
    assert risks["sample_uniques"] == 0


def test_rows_caps_the_records_returned_not_the_report(site: Site) -> None:
    body = {**BODY, "rows": 3}
    doc = site.client.post(
        "/v1/datasets/census/anonymize", json=body, headers=site.as_(site.curator)
    ).json()
    assert doc["rows"] == 3 and len(doc["data"]["age"]) == 3
    assert doc["report"]["rows_out"] > 3
    assert doc["risk"]["rows"] == doc["report"]["rows_out"]


def test_a_curator_checks_a_table_as_it_is(site: Site) -> None:
    body = {"table": "people", "quasi_identifiers": ["age", "sex"], "sensitive": ["education"]}
    answer = site.client.post(
        "/v1/datasets/census/anonymity/check", json=body, headers=site.as_(site.curator)
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["check"]["k"] >= 1
    assert 0 < doc["risk"]["prosecutor_max"] <= 1


def test_bad_configs_are_refused_naming_the_request(site: Site) -> None:
    cases = [
        ({**BODY, "privacy": {"k": 5, "suppression_limit": 2}}, "suppression_limit"),
        ({**BODY, "anonymize": {"speed": "fast"}}, "speed"),
        (
            {**BODY, "attributes": {"quasi_identifiers": ["age", "nope"], "sensitive": ["sex"]}},
            "nope",
        ),
        ({**BODY, "hierarchies": {"age": {"type": "tree", "values": {"1": ["x"]}}}}, "age"),
    ]
    for body, named in cases:
        answer = site.client.post(
            "/v1/datasets/census/anonymize", json=body, headers=site.as_(site.curator)
        )
        assert 400 <= answer.status_code < 500, answer.text
        assert named in answer.text
    missing = site.client.post(
        "/v1/datasets/census/anonymize",
        json={**BODY, "table": "planets"},
        headers=site.as_(site.curator),
    )
    assert missing.status_code == 404 and "people" in missing.text


def test_the_progress_stream_ends_with_the_same_release(site: Site) -> None:
    answer = site.client.post(
        "/v1/datasets/census/anonymize/progress", json=BODY, headers=site.as_(site.curator)
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in answer.text.splitlines()]
    steps = [line["progress"] for line in lines[:-1]]
    assert steps and all(0 <= done <= total for done, total in steps)
    assert steps == sorted(steps) and steps[-1][0] == steps[-1][1]
    plain = site.client.post(
        "/v1/datasets/census/anonymize", json=BODY, headers=site.as_(site.curator)
    ).json()
    last = lines[-1]
    assert last["report"]["levels"] == plain["report"]["levels"]
    assert last["data"] == plain["data"] and last["risk"] == plain["risk"]


def test_the_progress_stream_refuses_before_it_starts_and_reports_late_errors(site: Site) -> None:
    curator = site.as_(site.curator)
    path = "/v1/datasets/census/anonymize/progress"
    assert site.client.post(path, json=BODY, headers=site.as_(site.analyst)).status_code == 403
    bad = site.client.post(path, json={**BODY, "privacy": {"k": 0}}, headers=curator)
    assert bad.status_code == 400 and "the request" in bad.json()["error"]["message"]
    missing = site.client.post(path, json={**BODY, "table": "nope"}, headers=curator)
    assert missing.status_code == 404
    # k above the table's size is known only once the table is read: the last line says so.
    impossible = {**BODY, "privacy": {"k": 100_000, "suppression_limit": 0}}
    answer = site.client.post(path, json=impossible, headers=curator)
    assert answer.status_code == 200
    last = json.loads(answer.text.splitlines()[-1])
    assert last["error"]["code"] and last["error"]["fix"]
