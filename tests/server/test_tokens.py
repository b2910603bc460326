"""Token expiry set by a curator, and refusals in the gateway's own words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.server.helpers import Site


def test_a_token_with_an_expiry_stops_working_when_it_passes(site: Site) -> None:
    curator = site.as_(site.curator)
    issued = site.client.post(
        "/v1/principals/alice/tokens", headers=curator, json={"label": "trip", "expires_in_days": 2}
    ).json()
    expires = datetime.fromisoformat(issued["expires_at"])
    assert timedelta(days=1.99) < expires - datetime.now(UTC) <= timedelta(days=2)
    assert site.client.get("/v1/me", headers=site.as_(issued["token"])).status_code == 200
    listed = site.client.get("/v1/principals/alice", headers=curator).json()["tokens"]
    mine = next(t for t in listed if t["id"] == issued["token_id"])
    assert mine["expires_at"] == issued["expires_at"] and mine["expired"] is False
    # Let it expire (the store compares with the clock; move its expiry into the past).
    with site.gateway.store._db.transaction(write=True) as tx:
        past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat(timespec="microseconds")
        tx.run("UPDATE dalenius_gateway_tokens SET expires_at = ? WHERE id = ?", (past, mine["id"]))
    refused = site.client.get("/v1/me", headers=site.as_(issued["token"]))
    assert refused.status_code == 401 and "expired" in refused.json()["error"]["message"]
    listed = site.client.get("/v1/principals/alice", headers=curator).json()["tokens"]
    assert next(t for t in listed if t["id"] == mine["id"])["expired"] is True
    # Tokens without an expiry keep working; bad expiries are refused.
    assert site.client.get("/v1/me", headers=site.as_(site.analyst)).status_code == 200
    for days in (0, -1, 10_000, "soon"):
        bad = site.client.post(
            "/v1/principals/alice/tokens", headers=curator, json={"expires_in_days": days}
        )
        assert bad.status_code == 400, days


def test_a_new_principal_can_get_an_expiring_first_token(site: Site) -> None:
    created = site.client.post(
        "/v1/principals",
        headers=site.as_(site.curator),
        json={"name": "bob", "expires_in_days": 30},
    ).json()
    assert created["token"]["expires_at"] is not None
    assert created["tokens"][0]["expires_at"] == created["token"]["expires_at"]


def test_refusals_speak_of_the_curator(site: Site) -> None:
    site.gateway.store.grant("mallory", "census", by="root")  # granted, no budget
    refused = site.client.post(
        "/v1/datasets/census/query",
        headers=site.as_(site.stranger),
        json={"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1},
    ).json()["error"]
    text = " ".join(str(refused.get(k)) for k in ("message", "why", "fix"))
    assert "custodian" not in text.lower() and "curator" in text.lower(), refused
