"""Totality on PostgreSQL and Spark: the special rows of ``test_totality`` change no outcome there.

To stay within a minute per engine, each engine runs the compact query set on three tables: D,
D plus every special row at once, and the empty table (against a one-row table). PostgreSQL reads
the same CSV files loaded as text columns (so its own guarded conversion reads every value, as
DuckDB does); rows that cannot be stored as PostgreSQL text (bytes that are not UTF-8, broken
CSV lines) are left out there, since no PostgreSQL table can hold them. Spark reads the files
themselves, through one shared Spark session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conformance.engines import (
    connect_admin,
    fresh_schema,
    load_into_postgres,
    postgres_variant,
    session_for,
    spark_variant,
)
from tests.engine.totality import (
    COMPACT,
    RAW_ROWS,
    SPECIAL,
    Outcome,
    base_rows,
    differences,
    line,
    ordinary,
    outcomes,
    special_row,
    write_table,
)

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.engine.session import Session

POSTGRES_UNSTORABLE = ("invalid_utf8", "too_many_fields", "too_few_fields", "unclosed_quote")
"""Rows PostgreSQL cannot hold in a text table (DuckDB and Spark read them from the file)."""

TABLES = {
    "d": base_rows(),
    "all": [*base_rows(), *(special_row(n) for n in [*SPECIAL, *RAW_ROWS])],
    "empty": [],
    "one": [line(ordinary(1))],
}


def catalogs(folder: Path, *, drop: tuple[str, ...] = ()) -> dict[str, Catalog]:
    out = {}
    kept = [special_row(n) for n in [*SPECIAL, *RAW_ROWS] if n not in drop]
    for name, rows in TABLES.items():
        written = [*base_rows(), *kept] if name == "all" else rows
        out[name] = load_catalog(write_table(folder / name, written))
    return out


EMPTY_QUERIES = COMPACT[:4]
"""Empty versus one row: the aggregates (the expressions add nothing on a single ordinary row)."""


def check(sessions: dict[str, Session]) -> None:
    found: dict[str, dict[str, Outcome]] = {
        n: outcomes(s, COMPACT if n in ("d", "all") else EMPTY_QUERIES) for n, s in sessions.items()
    }
    assert not [o for o in found["d"].values() if o.kind != "value"], found["d"]
    assert differences(found["d"], found["all"], "all") == []
    assert differences(found["empty"], found["one"], "empty vs one") == []


@pytest.fixture
def postgres_sessions(tmp_path: Path) -> Iterator[dict[str, Session]]:
    from dalenius.executors.postgres import PostgresExecutor

    admin: Any = connect_admin()
    schema = fresh_schema()
    admin.execute(f'CREATE SCHEMA "{schema}"')
    sessions: dict[str, Session] = {}
    try:
        for name, catalog in catalogs(tmp_path, drop=POSTGRES_UNSTORABLE).items():
            sub = f"{schema}_{name}"
            admin.execute(f'CREATE SCHEMA "{sub}"')
            load_into_postgres(catalog, sub, as_text=("t",), connection=admin)
            variant = postgres_variant(catalog, sub)
            sessions[name] = session_for(variant, PostgresExecutor(variant))
        yield sessions
    finally:
        for s in sessions.values():
            s.close()
        for name in [*TABLES, None]:
            target = schema if name is None else f"{schema}_{name}"
            admin.execute(f'DROP SCHEMA IF EXISTS "{target}" CASCADE')
        admin.close()


@pytest.mark.postgres
def test_postgres_outcomes_do_not_depend_on_one_row(postgres_sessions: dict[str, Session]) -> None:
    check(postgres_sessions)


@pytest.mark.spark
def test_spark_outcomes_do_not_depend_on_one_row(tmp_path: Path) -> None:
    from dalenius.executors.spark import SparkExecutor

    sessions = {}
    try:
        for name, catalog in catalogs(tmp_path).items():
            variant = spark_variant(catalog)
            conf = {"spark.sql.adaptive.enabled": "false"}
            sessions[name] = session_for(variant, SparkExecutor(variant, partitions=1, conf=conf))
        check(sessions)
    finally:
        for s in sessions.values():
            s.close()
