"""Request size and rate limits: per token, with bounded memory, in the one error shape."""

from __future__ import annotations

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
