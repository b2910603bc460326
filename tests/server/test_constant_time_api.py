"""A constant-time dataset through the gateway: answers at the deadline, a miss is one fixed body."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.engine.test_constant_time import with_deadlines, write_catalog

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import DeadlineError
from dalenius.core.loss import PureDP
from dalenius.engine import timing
from dalenius.server.app import create_app
from dalenius.server.config import GatewayConfig
from dalenius.server.gateway import Gateway
from dalenius.server.store import CURATOR, Caller

SQL = 'SELECT COUNT(*) FROM "t"'


def client_for(tmp_path: Path, millis: float) -> tuple[Gateway, TestClient, str]:
    path = write_catalog(tmp_path)
    with_deadlines(load_catalog(path), scan=millis)
    gateway = Gateway(GatewayConfig())
    gateway.register(Caller(name="root", role=CURATOR, token_id=""), str(path), None, None)
    token = gateway.bootstrap("alice").token
    gateway.store.grant("alice", "ct", by="root")
    gateway.ledger.set_budget("alice", "ct", PureDP(Fraction(10)))
    return gateway, TestClient(create_app(gateway=gateway), raise_server_exceptions=False), token


def test_an_answer_waits_for_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[float] = []
    monkeypatch.setattr(timing, "wait_until", waited.append)
    _, client, token = client_for(tmp_path, 60_000.0)
    with client:
        response = client.post(
            "/v1/datasets/ct/query",
            headers={"Authorization": f"Bearer {token}"},
            json={"sql": SQL, "epsilon": 1},
        )
    assert response.status_code == 200, response.text
    assert len(waited) == 1


def test_a_miss_is_one_fixed_charged_outcome(tmp_path: Path) -> None:
    gateway, client, token = client_for(tmp_path, 0.001)
    bodies: list[bytes] = []
    with client:
        for key in ("a", "b", "b"):
            response = client.post(
                "/v1/datasets/ct/query",
                headers={"Authorization": f"Bearer {token}"},
                json={"sql": SQL, "epsilon": 1, "idempotency_key": key},
            )
            assert response.status_code == 502
            bodies.append(response.content)
        # Two fresh requests were charged; the repeated key cost nothing more.
        assert gateway.ledger.spent("alice", "ct") == PureDP(Fraction(2))
    assert bodies[0] == bodies[1] == bodies[2] == DeadlineError().body()
