"""Fixtures for the gateway: a small demo dataset, gateways with a curator and analysts, clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.server.helpers import Site, build_site

from dalenius.datasets.census import write_demo
from dalenius.server.config import GatewayConfig, Limits

PEOPLE = 3000


@pytest.fixture(scope="session")
def demo_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic census (catalog ``census.toml``) shared by the gateway tests."""
    return write_demo(tmp_path_factory.mktemp("census"), n=PEOPLE)


@pytest.fixture
def site_factory(demo_catalog: Path) -> Iterator[Callable[..., Site]]:
    made: list[Site] = []

    def make(**limits: float) -> Site:
        config = GatewayConfig(limits=Limits(**limits)) if limits else GatewayConfig()
        site = build_site(config, demo_catalog)
        made.append(site)
        return site

    yield make
    for site in made:
        site.client.close()
        site.gateway.close()


@pytest.fixture
def site(site_factory: Callable[..., Site]) -> Site:
    """A fresh in-memory gateway (ledger and state in memory) with generous limits."""
    return site_factory(requests_per_minute=100_000, burst=10_000)


@pytest.fixture(scope="module")
def shared_site(demo_catalog: Path) -> Iterator[Site]:
    """One gateway for a whole module of tests that must not change anything (refusals only)."""
    config = GatewayConfig(limits=Limits(requests_per_minute=100_000, burst=10_000))
    made = build_site(config, demo_catalog)
    yield made
    made.client.close()
    made.gateway.close()
