"""Run one catalog on every engine: DuckDB as written, Spark over the same files, PostgreSQL after
loading those files with COPY into a fresh schema of the ``test`` database.

A test catalog names CSV files (the shared data and small fixtures); the variants for the other
engines are the same catalog with another engine and, for PostgreSQL, ``postgres`` sources.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dalenius.core.catalog import Catalog, Source
from dalenius.engine.session import Session
from dalenius.executors.base import Executor
from dalenius.ledger import open_ledger

ENGINES = ("duckdb", "postgres", "spark")
POSTGRES_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
"""The test server: trust authentication, database ``test``."""

PG_TYPES = {
    "int": "bigint",
    "float": "double precision",
    "str": "text",
    "bool": "boolean",
    "date": "date",
}


OTHER_ENGINES = [
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("spark", marks=pytest.mark.spark),
]
"""The engines whose answers are compared with DuckDB's (the reference), each behind its mark."""


def session_for(catalog: Catalog, executor: Executor) -> Session:
    """A session with an in-memory ledger (the conformance tests draw no noise)."""
    return Session(catalog, ledger=open_ledger(None), executor=executor)


def spark_variant(catalog: Catalog) -> Catalog:
    """The same catalog, computed by Spark over the same files."""
    return replace(catalog, engine="spark")


def postgres_variant(catalog: Catalog, schema: str) -> Catalog:
    """The same catalog over the tables :func:`load_into_postgres` made in ``schema``."""
    tables = tuple(
        replace(t, source=Source("postgres", POSTGRES_ADMIN_URL, table=f"{schema}.{t.name}"))
        for t in catalog.tables
    )
    return replace(catalog, engine="postgres", tables=tables)


def load_into_postgres(
    catalog: Catalog, schema: str, *, as_text: Iterable[str] = (), connection: object
) -> None:
    """COPY every table's CSV file into ``schema.<table>``.

    Declared columns get the PostgreSQL type of their catalog type, except the tables named in
    ``as_text``, whose columns are all ``text`` (the executor then converts them with the guarded
    grammar, as DuckDB converts CSV text). Undeclared CSV columns are loaded as ``text``.
    """
    import psycopg

    assert isinstance(connection, psycopg.Connection)
    text_tables = set(as_text)
    for table in catalog.tables:
        path = Path(table.source.location)
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle))
        columns = []
        for name in header:
            declared = table.column(name)
            pg_type = "text"
            if declared is not None and table.name not in text_tables:
                pg_type = PG_TYPES[declared.type]
            columns.append(f'"{name}" {pg_type}')
        qualified = f'"{schema}"."{table.name}"'
        connection.execute(f"CREATE TABLE {qualified} ({', '.join(columns)})")
        with (
            connection.cursor() as cur,
            cur.copy(f"COPY {qualified} FROM STDIN (FORMAT csv, HEADER true)") as copy,
            path.open("rb") as data,
        ):
            while chunk := data.read(1 << 20):
                copy.write(chunk)
        connection.execute(f"ANALYZE {qualified}")


def connect_admin() -> Any:
    """An autocommit connection to the test server; fails the test loudly (never skips) if down."""
    import psycopg

    try:
        return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL}: {exc}\n"
            "Start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
        )


EVERY_ENGINE = ["duckdb", *OTHER_ENGINES]
"""The three engines as test parameters, PostgreSQL and Spark carrying their markers."""


@contextmanager
def statement_runner(engine: str) -> Iterator[Callable[[str], list[tuple[Any, ...]]]]:
    """A function running one SQL statement on ``engine`` (no catalog) and returning its rows."""
    if engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        try:
            yield lambda sql: con.execute(sql).fetchall()
        finally:
            con.close()
    elif engine == "postgres":
        pg = connect_admin()
        try:
            yield lambda sql: pg.execute(sql).fetchall()
        finally:
            pg.close()
    else:
        from dalenius.executors.spark import shared_session

        spark = shared_session()
        yield lambda sql: [tuple(r) for r in spark.sql(sql).collect()]


def fresh_schema() -> str:
    """A schema name no other test run uses."""
    return f"{SCHEMA_PREFIX}{os.getpid()}_{os.urandom(4).hex()}"


SCHEMA_PREFIX = "dalenius_conformance_"


def drop_stale_schemas(connection: Any) -> None:
    """Drop the schemas of earlier test runs on this machine whose process is gone (killed runs)."""
    rows = connection.execute(
        "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (SCHEMA_PREFIX,)
    ).fetchall()
    for (name,) in rows:
        pid = int(name.removeprefix(SCHEMA_PREFIX).split("_")[0])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        except PermissionError:
            continue  # another user's live process
