"""Bounded compute and shared limits: the engine's time limit, rate limits shared by processes,
the Host check and the Permissions-Policy header."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.server.helpers import Site, build_site

from dalenius.core.catalog import parse_catalog
from dalenius.core.errors import ExecutionError
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.server.config import GatewayConfig, Limits
from dalenius.server.gateway import Gateway
from dalenius.server.store import StateStore

SLOW = "SELECT SUM(a.range * b.range) FROM range(200000) a, range(200000) b"


def _one_row_executor(folder: Path, time_limit: float) -> DuckDBExecutor:
    """A DuckDB executor over a one-row CSV table, with ``time_limit``."""
    (folder / "t.csv").write_text("x\n1\n")
    catalog = parse_catalog(
        '[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\n'
        'columns = { x = { type = "int", bounds = [0, 9] } }',
        base_dir=folder,
    )
    executor = DuckDBExecutor(catalog)
    executor.time_limit = time_limit
    return executor


def test_duckdb_stops_a_query_at_its_time_limit(tmp_path: Path) -> None:
    executor = _one_row_executor(tmp_path, 0.2)
    try:
        started = time.monotonic()
        with pytest.raises(ExecutionError, match=r"time limit of 0\.2 s"):
            executor.fetch(SLOW)
        # Stopped long before the query could finish (it takes minutes), and still usable.
        assert time.monotonic() - started < 30
        assert executor.fetch("SELECT 1 + 1") == [(2,)]
    finally:
        executor.close()


def test_duckdb_stops_a_query_whose_limit_passed_before_it_started(tmp_path: Path) -> None:
    """A limit that passes while DuckDB is still parsing and planning interrupts nothing running
    yet: the watchdog interrupts again until the fetch ends, and an answer that arrives past the
    limit is withheld. (Without that, this query, seconds long, ran to its end and answered.)"""
    executor = _one_row_executor(tmp_path, 1e-6)
    medium = "SELECT COUNT(DISTINCT a.range + b.range) FROM range(20000) a, range(20000) b"
    try:
        for _ in range(3):
            with pytest.raises(ExecutionError, match="time limit of 1e-06 s"):
                executor.fetch(medium)
        executor.time_limit = None
        assert executor.fetch("SELECT 1 + 1") == [(2,)]
    finally:
        executor.close()


def test_duckdb_watches_its_time_limit_with_one_thread(tmp_path: Path) -> None:
    """Not a thread per fetch: one watchdog, started once, stopped with the executor."""
    executor = _one_row_executor(tmp_path, 60.0)
    before = set(threading.enumerate())
    try:
        for _ in range(20):
            assert executor.fetch("SELECT 1 + 1") == [(2,)]
        started = [t for t in threading.enumerate() if t not in before]
        watchdogs = [t for t in started if t.name == "dalenius-duckdb-time-limit"]
        assert len(watchdogs) == 1 and len(started) == 1
    finally:
        executor.close()
    watchdogs[0].join(timeout=30)
    assert not watchdogs[0].is_alive()


def test_the_gateway_gives_every_engine_its_time_limit(site_factory: Callable[..., Site]) -> None:
    site = site_factory(query_seconds=7.5)
    opened = site.gateway.open(site.gateway.store.authenticate(site.analyst), "census")
    assert opened.executor.time_limit == 7.5


def test_rate_limits_are_shared_by_gateways_on_one_database(
    tmp_path: Path, demo_catalog: Path
) -> None:
    config = GatewayConfig(
        ledger=str(tmp_path / "gateway.sqlite"), limits=Limits(requests_per_minute=1, burst=4)
    )
    first = build_site(config, demo_catalog)
    second = Gateway(config)  # another process's gateway on the same database
    try:
        from fastapi.testclient import TestClient

        from dalenius.server.app import create_app

        other = TestClient(create_app(gateway=second), raise_server_exceptions=False)
        headers = first.as_(first.analyst)
        codes = []
        for i in range(6):
            client = first.client if i % 2 == 0 else other
            codes.append(client.get("/v1/me", headers=headers).status_code)
        assert codes == [200, 200, 200, 200, 429, 429]
        # Failed sign-ins share one throttle too.
        bad = {"Authorization": "Bearer dlt_guess_guess"}
        codes = [
            (first.client if i % 2 else other).get("/v1/me", headers=bad).status_code
            for i in range(6)
        ]
        assert codes == [401, 401, 401, 401, 429, 429]
        other.close()
    finally:
        first.client.close()
        first.gateway.close()
        second.close()


def test_the_bucket_table_stays_bounded(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "s.sqlite"))
    try:
        for i in range(50):
            store.take(f"address:{i}", rate=1.0, burst=5, now=1000.0 + i)
        store.forget_full_buckets(rate=1.0, burst=5, now=1049.0, keep=100)
        assert store.bucket_count() == 7  # the rest had refilled
        store.forget_full_buckets(rate=1.0, burst=5, now=1049.0, keep=3)
        assert store.bucket_count() <= 4
    finally:
        store.close()


def test_unknown_hosts_are_refused_when_configured(demo_catalog: Path) -> None:
    site = build_site(GatewayConfig(allowed_hosts=("testserver", "localhost")), demo_catalog)
    try:
        ok = site.client.get("/v1/me", headers=site.as_(site.analyst))
        assert ok.status_code == 200
        for host in ("evil.example", "localhost.evil.example", "127.0.0.2:8000"):
            answer = site.client.get("/v1/me", headers={**site.as_(site.analyst), "Host": host})
            assert answer.status_code == 421 and answer.json()["error"]["code"] == "unknown_host"
        console = site.client.get("/console/", headers={"Host": "evil.example"})
        assert console.status_code == 421
        assert site.client.get("/console/", headers={"Host": "localhost:8000"}).status_code == 200
    finally:
        site.client.close()
        site.gateway.close()


def test_every_answer_carries_a_permissions_policy(site: Site) -> None:
    for path in ("/console/", "/v1/openapi.json", "/v1/me"):
        policy = site.client.get(path).headers["permissions-policy"]
        assert "camera=()" in policy and "geolocation=()" in policy
