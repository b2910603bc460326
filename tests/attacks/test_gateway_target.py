"""The Dalenius target over HTTP: a real gateway (uvicorn in a thread) and an analyst's token."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from fractions import Fraction

import httpx
import pytest
import uvicorn
from tests.server.live import free_port

from dalenius.attacks import membership
from dalenius.attacks.population import make_people, write_population
from dalenius.attacks.targets import Database, GatewayTarget, TargetSpec
from dalenius.core.errors import UserError
from dalenius.core.loss import PureDP
from dalenius.server.app import create_app
from dalenius.server.config import GatewayConfig
from dalenius.server.gateway import Gateway
from dalenius.server.store import CURATOR, Caller


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Database]]:
    written = write_population(make_people(60, seed=5), tmp_path_factory.mktemp("gw"))
    gateway = Gateway(GatewayConfig())
    gateway.bootstrap("root", CURATOR)
    root = Caller(name="root", role=CURATOR, token_id="")
    gateway.register(root, str(written.catalog_path), None, None)
    token = gateway.bootstrap("eve").token
    gateway.store.grant("eve", "attack_lab", by="root")
    gateway.ledger.set_budget("eve", "attack_lab", PureDP(Fraction(1)))
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(gateway=gateway), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/openapi.json", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.05)
    try:
        with Database(written.catalog) as local:
            yield url, token, local
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        gateway.close()


def test_gateway_target_is_charged_cached_and_refused_like_a_session(
    gateway_url: tuple[str, str, Database],
) -> None:
    url, token, local = gateway_url
    spec = TargetSpec("dalenius", epsilon="1/2", budget=1, url=url, token=token)
    target = spec.open(local)  # the same catalog, registered on the gateway
    assert isinstance(target, GatewayTarget) and target.dataset == "attack_lab"
    sql = membership.count_question({"zip": "00000", "date_of_birth": "1970-01-01", "sex": "Male"})
    first = target.ask(sql)
    again = target.ask(sql)
    assert again.cached and again.value == first.value and again.epsilon == 0
    target.ask("SELECT COUNT(*) FROM people")
    with pytest.raises(UserError, match="HTTP 409"):
        target.ask("SELECT COUNT(*) FROM people WHERE age > 30")
    assert target.queries_asked == 3 and target.epsilon_spent == 1


def test_a_wrong_token_is_a_clear_refusal(gateway_url: tuple[str, str, Database]) -> None:
    url, _, _ = gateway_url
    target = GatewayTarget(url, "dlt_wrong", "attack_lab", epsilon=1)
    with pytest.raises(UserError, match="gateway refused"):
        target.ask("SELECT COUNT(*) FROM people")
