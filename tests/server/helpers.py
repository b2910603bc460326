"""Helpers for the gateway tests: a gateway with people in it, and a real server in a subprocess."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

# Starlette 1.x asks for a successor of httpx in its test client; httpx is what the extra installs.
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")

from fastapi.testclient import TestClient  # noqa: E402

from dalenius.core.loss import PureDP  # noqa: E402
from dalenius.server.app import create_app  # noqa: E402
from dalenius.server.config import GatewayConfig  # noqa: E402
from dalenius.server.gateway import Gateway  # noqa: E402
from dalenius.server.store import CURATOR, Caller  # noqa: E402

BUDGET = Fraction(1)


@dataclass
class Site:
    """A gateway with a registered census, a curator and two analysts (one granted)."""

    gateway: Gateway
    client: TestClient
    curator: str
    analyst: str
    stranger: str
    catalog: Path

    def as_(self, token: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}


def build_site(config: GatewayConfig, catalog: Path) -> Site:
    gateway = Gateway(config)
    curator = gateway.bootstrap("root", CURATOR).token
    root = Caller(name="root", role=CURATOR, token_id="")
    gateway.register(root, str(catalog), None, None)
    analyst = gateway.bootstrap("alice").token
    stranger = gateway.bootstrap("mallory").token
    gateway.store.grant("alice", "census", by="root")
    gateway.ledger.set_budget("alice", "census", PureDP(BUDGET))
    client = TestClient(create_app(gateway=gateway), raise_server_exceptions=False)
    return Site(gateway, client, curator, analyst, stranger, catalog)
