"""A gateway with its PostgreSQL listener on a background event loop, for the wire tests."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.server.helpers import Site, build_site

from dalenius.server.config import GatewayConfig, Limits
from dalenius.server.pgwire.listener import PgListener, WireSettings


@dataclass
class Wire:
    """A site (gateway, curator, analyst ``alice``) and its listener's port."""

    site: Site
    listener: PgListener
    port: int
    loop: asyncio.AbstractEventLoop

    def dsn(self, password: str | None = None, **extra: Any) -> dict[str, Any]:
        """psycopg connection keywords for ``alice`` on the census."""
        base: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": "alice",
            "password": self.site.analyst if password is None else password,
            "dbname": "census",
            "sslmode": "disable",
            "connect_timeout": 20,
        }
        return base | extra

    def remaining(self) -> Any:
        return self.site.gateway.ledger.remaining("alice", "census")


@contextmanager
def running_wire(
    catalog: Path, settings: WireSettings | None = None, **limits: Any
) -> Iterator[Wire]:
    """A fresh in-memory gateway and its listener, stopped at the end."""
    config = GatewayConfig(
        limits=Limits(**({"requests_per_minute": 100_000, "burst": 10_000} | limits))
    )
    site = build_site(config, catalog)
    loop = asyncio.new_event_loop()
    listener = PgListener(site.gateway, settings)
    port = loop.run_until_complete(listener.start("127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield Wire(site, listener, port, loop)
    finally:
        asyncio.run_coroutine_threadsafe(listener.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        site.client.close()
        site.gateway.close()


def require_client(found: bool, what: str) -> None:
    """Skip a test whose client is missing, except under ``make test``.

    ``make clients`` (part of ``make test``) installs psql, the JDBC driver and node-postgres, and
    ``make test`` sets ``DALENIUS_REQUIRE_ORACLES``: there a missing client fails the test, so CI
    can never pass by skipping the clients it is meant to run. Elsewhere (``make check-fast`` on a
    laptop without them) the test is skipped, saying how to install them.
    """
    if found:
        return
    if os.environ.get("DALENIUS_REQUIRE_ORACLES"):
        pytest.fail(f"{what} is missing; `make clients` installs it")
    pytest.skip(f"{what} is not installed (`make clients`)")
