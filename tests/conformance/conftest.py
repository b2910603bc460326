"""Sessions on every engine for every conformance dataset, built once per test run.

PostgreSQL and Spark are started only by the tests that need them; when the PostgreSQL server is
down the tests fail (never skip) with the command that starts it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conformance import datasets
from tests.conformance.engines import (
    connect_admin,
    drop_stale_schemas,
    fresh_schema,
    load_into_postgres,
    postgres_variant,
    session_for,
    spark_variant,
)

from dalenius.core.catalog import Catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.executors.postgres import PostgresExecutor
from dalenius.executors.spark import SparkExecutor

SPARK_TEST_CONF = {"spark.sql.adaptive.enabled": "false"}
"""Adaptive execution re-plans after every stage: pure overhead on tables of a few thousand rows."""


@pytest.fixture(scope="session")
def catalogs(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Catalog]:
    """Every conformance dataset's DuckDB catalog, by name."""
    folder = tmp_path_factory.mktemp("conformance")
    heavy, light = datasets.visits_frames()
    clinics, clinics_light, clinics_open = datasets.write_clinics(folder)
    return {
        "clinics": clinics,
        "clinics_light": clinics_light,
        "clinics_open": clinics_open,
        "adult": datasets.fixture_catalog("adult"),
        "pums": datasets.fixture_catalog("pums"),
        "visits": datasets.write_visits(folder, "visits", light),
        "heavy": datasets.write_visits(folder, "heavy", heavy),
        "messy": datasets.write_messy(folder),
        "odd": datasets.write_odd(folder),
        "mixed": datasets.write_mixed(folder),
        "many": datasets.write_mixed(folder, "many"),
        "adult_shuffled": datasets.shuffled_adult(folder),
        "shop": datasets.write_shop(folder),
        "sales": datasets.write_sales(folder),
        "sales_keyed": datasets.write_sales(folder, order_key=True),
    }


@pytest.fixture(scope="session")
def duckdb_sessions(catalogs: dict[str, Catalog]) -> Iterator[dict[str, Session]]:
    """The reference: every dataset on DuckDB."""
    out = {name: session_for(c, DuckDBExecutor(c)) for name, c in catalogs.items()}
    yield out
    for s in out.values():
        s.close()


@pytest.fixture(scope="session")
def postgres_connection() -> Iterator[Any]:
    """An administrative connection to the test server, or a loud failure naming the fix."""
    conn = connect_admin()
    drop_stale_schemas(conn)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def postgres_sessions(
    catalogs: dict[str, Catalog],
    postgres_connection: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Session]]:
    """Every dataset loaded with COPY into one fresh schema of ``test``, on PostgreSQL."""
    schema = fresh_schema()
    postgres_connection.execute(f'CREATE SCHEMA "{schema}"')
    out: dict[str, Session] = {}
    try:
        for name, catalog in catalogs.items():
            # Each dataset gets its own sub-schema: table names repeat across datasets.
            sub = f"{schema}_{name}"
            postgres_connection.execute(f'CREATE SCHEMA "{sub}"')
            as_text = ("t",) if name == "messy" else ()
            loaded = catalog
            if name == "odd":
                loaded = datasets.readable_rows(catalog, tmp_path_factory.mktemp("readable"))
            load_into_postgres(loaded, sub, as_text=as_text, connection=postgres_connection)
            variant = postgres_variant(loaded, sub)
            out[name] = session_for(variant, PostgresExecutor(variant))
        yield out
    finally:
        for s in out.values():
            s.close()
        for name in [*catalogs, None]:
            target = schema if name is None else f"{schema}_{name}"
            postgres_connection.execute(f'DROP SCHEMA IF EXISTS "{target}" CASCADE')


@pytest.fixture(scope="session")
def spark_sessions(catalogs: dict[str, Catalog]) -> Iterator[dict[str, Session]]:
    """Every dataset on Spark (one shared Spark context for the whole run)."""
    out = {}
    for name, catalog in catalogs.items():
        variant = spark_variant(catalog)
        out[name] = session_for(variant, SparkExecutor(variant, partitions=1, conf=SPARK_TEST_CONF))
    yield out
    for s in out.values():
        s.close()


@pytest.fixture
def sessions_on(request: pytest.FixtureRequest) -> Callable[[str], dict[str, Session]]:
    """``sessions_on(engine)``: the sessions of one engine, started on first use."""

    def get(engine: str) -> dict[str, Session]:
        sessions: dict[str, Session] = request.getfixturevalue(f"{engine}_sessions")
        return sessions

    return get
