"""Request size and rate limits: per token, with bounded memory, in the one error shape."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from tests.server.helpers import Site

from dalenius.server.ratelimit import RateLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_token_over_its_rate_gets_429_with_retry_after(site_factory: Callable[..., Site]) -> None:
    site = site_factory(requests_per_minute=60, burst=3)
    answers = [site.client.get("/v1/me", headers=site.as_(site.analyst)) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    error = answers[-1].json()["error"]
    assert error["code"] == "rate_limited" and "60 requests a minute" in error["message"]
    assert int(answers[-1].headers["retry-after"]) >= 1
    # Another token is not slowed down by alice's requests.
    assert site.client.get("/v1/me", headers=site.as_(site.stranger)).status_code == 200


def test_failed_sign_ins_are_limited_per_address(site_factory: Callable[..., Site]) -> None:
    site = site_factory(requests_per_minute=60, burst=2)
    codes = [site.client.get("/v1/me", headers=site.as_("dlt_guess")).status_code for _ in range(3)]
    assert codes == [401, 401, 429]
    # A valid token keeps its own bucket.
    assert site.client.get("/v1/me", headers=site.as_(site.analyst)).status_code == 200


def test_large_bodies_are_refused_with_413(site_factory: Callable[..., Site]) -> None:
    site = site_factory(max_request_bytes=1000)
    headers = site.as_(site.analyst)
    big = {
        "sql": "SELECT COUNT(*) FROM people WHERE " + " OR ".join(["age > 1"] * 200),
        "epsilon": 0.1,
    }
    response = site.client.post("/v1/datasets/census/query", headers=headers, json=big)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"

    def chunks():  # no Content-Length: the limit must hold while the body streams
        for _ in range(50):
            yield b" " * 100

    streamed = site.client.post(
        "/v1/datasets/census/query",
        headers={**headers, "Content-Type": "application/json"},
        content=chunks(),
    )
    assert streamed.status_code == 413
    assert streamed.json()["error"]["code"] == "request_too_large"
    small = {"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1}
    assert (
        site.client.post("/v1/datasets/census/explain", headers=headers, json=small).status_code
        == 200
    )
    assert site.gateway.ledger.entries() == []


def test_the_limiter_refills_and_forgets_the_least_recent_client() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rate=2.0, burst=2, capacity=3, clock=clock)
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, pytest.approx(0.5)]
    clock.now = 0.5
    assert limiter.acquire("a") == 0.0
    for name in ("b", "c", "d", "e"):
        limiter.acquire(name)
    assert len(limiter) == 3  # bounded memory whatever the number of clients
    # "a" was forgotten and comes back with a full bucket: never stricter than configured.
    assert [limiter.acquire("a") for _ in range(2)] == [0.0, 0.0]


def test_many_clients_stay_within_the_bound() -> None:
    limiter = RateLimiter(rate=1.0, burst=1, capacity=100)
    for i in range(10_000):
        limiter.acquire(f"client-{i}")
    assert len(limiter) == 100


def _rappor_batch(candidates: list[str]) -> list[dict]:
    from dalenius.ldp.collection import CollectionSpec
    from dalenius.ldp.rappor import RapporClient

    params = CollectionSpec({"protocol": "rappor", "epsilon": 8, "candidates": candidates}).rappor
    batch = []
    for i in range(1000):
        r = RapporClient(params).report(candidates[i % len(candidates)])
        report = {"cohort": r.cohort, "bits": r.bits.tolist()}
        batch.append({"client": f"device-{i:06d}", "report_id": "1", "memo": "t", "report": report})
    return batch


def test_a_batch_of_1000_reports_fits_the_default_size_limit(site: Site) -> None:
    """docs/ldp promise batches of 1,000 reports: 1,000 real RAPPOR reports at the default
    parameters, and 1,000 count-mean-sketch reports (the largest default encoding) with ids at
    their longest, are accepted at the default max_request_bytes; other routes keep that limit."""
    from dalenius.ldp.collection import CollectionSpec
    from dalenius.server.ldpstore import submission_bytes

    assert site.gateway.config.limits.max_request_bytes < submission_bytes()
    candidates = [f"https://example.org/{i}" for i in range(20)]
    curator = site.as_(site.curator)
    made = site.client.post(
        "/v1/ldp/collections",
        json={"name": "urls", "protocol": "rappor", "epsilon": 8, "candidates": candidates},
        headers=curator,
    )
    assert made.status_code == 201, made.text
    body = {"reports": _rappor_batch(candidates)}
    assert len(json.dumps(body)) > site.gateway.config.limits.max_request_bytes
    answer = site.client.post(
        "/v1/ldp/collections/urls/reports",
        json=body,
        headers={"X-Collection-Key": made.json()["submission_key"]},
    )
    assert answer.status_code == 200, answer.text[:300]

    spec = {"protocol": "cms", "epsilon": 1, "candidates": candidates}
    made = site.client.post("/v1/ldp/collections", json={"name": "sketch", **spec}, headers=curator)
    assert made.status_code == 201, made.text
    sketch = CollectionSpec({**spec, "salt": made.json()["parameters"]["salt"]}).sketch
    longest = "x" * 128
    reports = [
        {"client": f"{i:06d}{longest}"[:128], "report_id": longest}
        | {"report": sketch.encode(candidates[i % 20])}
        for i in range(1000)
    ]
    raw = json.dumps({"reports": reports}).encode()
    assert len(raw) <= submission_bytes()
    answer = site.client.post(
        "/v1/ldp/collections/sketch/reports",
        content=raw,
        headers={
            "X-Collection-Key": made.json()["submission_key"],
            "Content-Type": "application/json",
        },
    )
    assert answer.status_code == 200, answer.text[:300]
    # Beyond the batch route's own limit, and on any other route beyond the default: 413.
    over = b'{"reports": [' + b" " * submission_bytes() + b"]}"
    refused = site.client.post(
        "/v1/ldp/collections/sketch/reports",
        content=over,
        headers={
            "X-Collection-Key": made.json()["submission_key"],
            "Content-Type": "application/json",
        },
    )
    assert refused.status_code == 413 and str(submission_bytes()) in refused.text
    big = {"sql": "SELECT COUNT(*) FROM people WHERE " + " OR ".join(["age > 1"] * 9000)}
    query = site.client.post(
        "/v1/datasets/census/explain", json=big, headers=site.as_(site.analyst)
    )
    assert query.status_code == 413


def test_every_429_says_when_to_retry(site_factory: Callable[..., Site]) -> None:
    """A token over its rate, an address over its failed sign-ins and an analyst over their
    running queries all get 429 with Retry-After (whole seconds, at least 1)."""
    site = site_factory(requests_per_minute=60, burst=2)
    answers = [site.client.get("/v1/me", headers=site.as_(site.analyst)) for _ in range(3)]
    guesses = [site.client.get("/v1/me", headers=site.as_("dlt_guess")) for _ in range(3)]
    other = site_factory()
    gateway = other.gateway
    releases = [gateway.slots.take("alice") for _ in range(gateway.slots.limit)]
    try:
        busy = other.client.post(
            "/v1/datasets/census/query",
            json={"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1},
            headers=other.as_(other.analyst),
        )
    finally:
        for release in releases:
            release()
    assert busy.json()["error"]["code"] == "too_many_running"
    for answer in (answers[-1], guesses[-1], busy):
        assert answer.status_code == 429
        assert int(answer.headers["retry-after"]) >= 1
