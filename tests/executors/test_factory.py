"""Choosing an engine: the catalog's ``engine`` key, its validation, and missing extras."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dalenius.core.catalog import ENGINE_SOURCES, ENGINES, parse_catalog
from dalenius.core.errors import CatalogError, MissingExtraError
from dalenius.executors import spark as spark_module
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.executors.factory import executor_for
from dalenius.executors.postgres import PostgresExecutor

TABLE = """
[tables.t]
source = {source}
privacy_unit = "row"
columns = {{ x = "int" }}
"""


def catalog_text(source: str, engine: str | None = None, name: str = "t") -> str:
    head = f'[dataset]\nname = "d"\nengine = "{engine}"\n' if engine else ""
    return head + TABLE.format(source=source).replace("[tables.t]", f"[tables.{name}]")


@pytest.fixture
def csv_dir(tmp_path: Path) -> Path:
    (tmp_path / "t.csv").write_text("x\n1\n2\n")
    return tmp_path


def test_the_engine_defaults_to_what_the_sources_need(csv_dir: Path) -> None:
    assert parse_catalog(catalog_text('{ csv = "t.csv" }'), base_dir=csv_dir).engine == "duckdb"
    pg = '{ postgres = "postgresql://h/db", table = "t" }'
    assert parse_catalog(catalog_text(pg)).engine == "postgres"
    assert parse_catalog(catalog_text('{ spark = "db.t" }')).engine == "spark"


def test_the_same_files_can_run_on_spark(csv_dir: Path) -> None:
    catalog = parse_catalog(catalog_text('{ csv = "t.csv" }', "spark"), base_dir=csv_dir)
    assert catalog.engine == "spark"
    assert catalog.tables[0].source.kind == "csv"


def test_an_unknown_engine_is_refused_with_the_choices() -> None:
    with pytest.raises(CatalogError) as info:
        parse_catalog(catalog_text('{ spark = "db.t" }', "oracle"))
    assert "'oracle'" in str(info.value)
    assert all(engine in str(info.value) for engine in ENGINES)
    assert info.value.fix


@pytest.mark.parametrize(
    ("engine", "source"),
    [
        ("duckdb", '{ postgres = "postgresql://h/db", table = "t" }'),
        ("postgres", '{ spark = "db.t" }'),
        ("spark", '{ postgres = "postgresql://h/db", table = "t" }'),
    ],
)
def test_an_engine_that_cannot_read_a_source_is_refused(engine: str, source: str) -> None:
    with pytest.raises(CatalogError) as info:
        parse_catalog(catalog_text(source, engine))
    message = str(info.value)
    assert f"the {engine} engine cannot read" in message
    assert "table 't'" in message
    assert all(kind in message for kind in ENGINE_SOURCES[engine])


def test_mixing_postgres_and_spark_sources_is_refused() -> None:
    text = catalog_text('{ spark = "db.t" }') + TABLE.format(
        source='{ postgres = "postgresql://h/db", table = "u" }'
    ).replace("[tables.t]", "[tables.u]")
    with pytest.raises(CatalogError) as info:
        parse_catalog(text)
    assert "mix postgres and spark" in str(info.value)
    assert info.value.fix


def test_the_factory_builds_duckdb_for_files(csv_dir: Path) -> None:
    catalog = parse_catalog(catalog_text('{ csv = "t.csv" }'), base_dir=csv_dir)
    executor = executor_for(catalog)
    assert isinstance(executor, DuckDBExecutor)
    executor.prepare(catalog.tables[0])
    assert executor.fetch('SELECT SUM("x") FROM "t"') == [(3,)]


def test_a_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # makes `import psycopg` fail
    catalog = parse_catalog(catalog_text('{ postgres = "postgresql://h/db", table = "t" }'))
    with pytest.raises(MissingExtraError) as info:
        executor_for(catalog)
    assert "pip install 'dalenius[postgres]'" in str(info.value)
    assert "psycopg" in str(info.value)
    with pytest.raises(ImportError):  # it is also an ImportError, for code that expects one
        PostgresExecutor(catalog)


def test_a_missing_pyspark_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    monkeypatch.setattr(spark_module, "_base", {})  # as if no Spark session was started yet
    catalog = parse_catalog(catalog_text('{ spark = "db.t" }'))
    with pytest.raises(MissingExtraError) as info:
        executor_for(catalog)
    assert "pip install 'dalenius[spark]'" in str(info.value)
    assert "pyspark" in str(info.value)
