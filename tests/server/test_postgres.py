"""Two gateway processes share one PostgreSQL database (ledger and gateway records alike).

Each test gets a fresh schema (dropped afterwards). A token issued through one process works in
the other, a revocation in one is seen by the other at once, and concurrent queries sent to both
processes never spend more than the analyst's budget. When the server is down the tests fail with
the command that starts it; they are never skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql
from tests.server.live import LiveGateway, write_config

from dalenius.core.loss import PureDP
from dalenius.ledger.postgres import PostgresLedger

PG_URL = os.environ.get("DALENIUS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PG_START = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
EPSILON = Fraction(1, 10)
ANSWERS = 7  # the budget allows this many answers
REQUESTS = 40

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema_url() -> Iterator[tuple[str, str]]:
    """A URL whose connections use a fresh schema of their own."""
    try:
        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        pytest.fail(f"PostgreSQL is unreachable at {PG_URL} ({error}); start it with: {PG_START}")
    name = f"dalenius_gw_{uuid4().hex[:12]}"
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{name}", name
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        admin.close()


def roomy_config(folder: Path, url: str, running: int) -> Path:
    """A configuration on ``url`` whose rate limits never bind, ``running`` queries at once."""
    return write_config(
        folder / "gateway.toml",
        url,
        requests_per_minute=100_000,
        burst=10_000,
        concurrent_queries=running,
    )


@pytest.fixture
def pair(tmp_path: Path, schema_url: tuple[str, str]) -> Iterator[tuple[LiveGateway, LiveGateway]]:
    url, _ = schema_url
    config = roomy_config(tmp_path, url, REQUESTS)
    first = LiveGateway(config, issue=("curator:root",))
    try:
        second = LiveGateway(config)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def test_two_processes_share_principals_tokens_and_budgets(
    pair: tuple[LiveGateway, LiveGateway], demo_catalog: Path, schema_url: tuple[str, str]
) -> None:
    first, second = pair
    root = first.tokens["root"]
    with first.client(root) as a, second.client(root) as b:
        assert a.post("/v1/datasets", json={"catalog": str(demo_catalog)}).status_code == 201
        alice = b.post("/v1/principals", json={"name": "alice"}).json()["token"]
        assert a.put("/v1/principals/alice/grants/census").status_code == 200
        budget = b.put("/v1/budgets/alice/census", json={"epsilon": str(ANSWERS * EPSILON)})
        assert budget.status_code == 200

        # Distinct queries (no answer can come from the cache), half to each process, at once.
        def ask(i: int) -> int:
            gateway = first if i % 2 else second
            with gateway.client(alice["token"]) as client:
                return client.post(
                    "/v1/datasets/census/query",
                    json={"sql": f"SELECT COUNT(*) FROM people WHERE age >= {i}", "epsilon": "0.1"},
                ).status_code

        with ThreadPoolExecutor(max_workers=REQUESTS) as pool:
            codes = list(pool.map(ask, range(REQUESTS)))
        assert sorted(set(codes)) == [200, 409]
        assert codes.count(200) == ANSWERS

        # A revocation through one process is seen by the other at once.
        assert b.delete(f"/v1/principals/alice/tokens/{alice['token_id']}").status_code == 204
        with first.client(alice["token"]) as gone:
            assert gone.get("/v1/me").status_code == 401

    _, schema = schema_url
    ledger = PostgresLedger(PG_URL, schema=schema)
    try:
        assert ledger.total_spent("census") == PureDP(ANSWERS * EPSILON)
        committed = [e for e in ledger.entries() if e.status == "committed"]
        assert len(committed) == ANSWERS
        assert ledger.verify() == []
    finally:
        ledger.close()


def test_a_postgresql_catalog_is_served_on_postgresql(
    tmp_path: Path, schema_url: tuple[str, str]
) -> None:
    """The gateway opens each dataset on the engine its catalog names, not always DuckDB."""
    from tests.server.helpers import build_site

    from dalenius.executors.postgres import PostgresExecutor
    from dalenius.server.config import GatewayConfig, Limits

    _, schema = schema_url
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE TABLE {}.people (age int, sex text)").format(sql.Identifier(schema))
        )
        admin.execute(
            sql.SQL(
                "INSERT INTO {}.people SELECT g % 90, CASE WHEN g % 2 = 0 THEN 'F' ELSE 'M' END "
                "FROM generate_series(1, 2000) g"
            ).format(sql.Identifier(schema))
        )
    catalog = tmp_path / "pg.toml"
    catalog.write_text(
        f'[dataset]\nname = "census"\nengine = "postgres"\n[tables.people]\n'
        f'source = {{ postgres = "{PG_URL}", table = "{schema}.people" }}\nprivacy_unit = "row"\n'
        '[tables.people.columns]\nage = { type = "int", bounds = [0, 100] }\n'
        'sex = { type = "str", keys = ["F", "M"] }\n'
    )
    site = build_site(GatewayConfig(limits=Limits(query_seconds=5)), catalog)
    try:
        opened = site.gateway.open(site.gateway.store.authenticate(site.analyst), "census")
        assert isinstance(opened.executor, PostgresExecutor)
        assert opened.executor.time_limit == 5
        answer = site.client.post(
            "/v1/datasets/census/query",
            headers=site.as_(site.analyst),
            json={"sql": "SELECT sex, COUNT(*) FROM people GROUP BY sex", "epsilon": 1},
        )
        assert answer.status_code == 200, answer.text
        counts = [row[1]["value"] for row in answer.json()["rows"]]
        assert all(abs(c - 1000) < 100 for c in counts), counts
    finally:
        site.client.close()
        site.gateway.close()


def test_postgresql_stops_a_query_at_its_time_limit(
    tmp_path: Path, schema_url: tuple[str, str]
) -> None:
    from dalenius.core.catalog import parse_catalog
    from dalenius.core.errors import ExecutionError
    from dalenius.executors.postgres import PostgresExecutor

    _, schema = schema_url
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE TABLE {}.t (x int)").format(sql.Identifier(schema)))
    catalog = parse_catalog(
        f'[tables.t]\nsource = {{ postgres = "{PG_URL}", table = "{schema}.t" }}\n'
        'privacy_unit = "row"\ncolumns = { x = { type = "int", bounds = [0, 9] } }'
    )
    executor = PostgresExecutor(catalog)
    executor.time_limit = 0.3
    try:
        with pytest.raises(ExecutionError, match="time limit"):
            executor.fetch("SELECT pg_sleep(5)")
        assert executor.fetch("SELECT 1 + 1") == [(2,)]
    finally:
        executor.close()


def test_two_processes_share_the_rate_limits(tmp_path: Path, schema_url: tuple[str, str]) -> None:
    url, _ = schema_url
    config = write_config(tmp_path / "gateway.toml", url, requests_per_minute=60, burst=4)
    first = LiveGateway(config, issue=("analyst:alice",))
    try:
        second = LiveGateway(config)
        try:
            token = first.tokens["alice"]
            with first.client(token) as a, second.client(token) as b:
                codes = [(a if i % 2 else b).get("/v1/me").status_code for i in range(6)]
            assert codes == [200, 200, 200, 200, 429, 429]
            # The failed-sign-in throttle, per address, is shared the same way.
            with first.client("dlt_bad_guess") as a, second.client("dlt_bad_guess") as b:
                codes = [(a if i % 2 else b).get("/v1/me").status_code for i in range(6)]
            assert codes == [401, 401, 401, 401, 429, 429]
        finally:
            second.stop()
    finally:
        first.stop()
