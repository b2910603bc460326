"""Text becomes numbers, booleans and dates the same way in every engine (``executors/convert.py``).

The same strings are read as declared types by DuckDB (``TRY_CAST``), by PostgreSQL from a
``text`` column and by Spark from a CSV file; every string of the shared grammar must give the same
value everywhere. The forms DuckDB reads beyond the grammar are pinned as documented differences.
"""

from __future__ import annotations

import csv
import math
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import pytest
from tests.conformance.engines import POSTGRES_ADMIN_URL

from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.executors import convert
from dalenius.executors.base import Executor
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.executors.postgres import PostgresExecutor
from dalenius.executors.spark import SparkExecutor

GRAMMAR = [
    "5", " 5", "5 ", "\t5\t", "\v5\f", "\r5\n", "+5", "-5", "05", "5.0", "5.5", "2.5", "-2.5",
    "3.5", "1e3", "1E3", "1e+3", "1e-3", ".5", "5.", "0.", "-0", "1.e3", "1e-400", "4.9e-324",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "0.4999999999999999999999", "1.5e308", "1.7976931348623157e308", "1.7976931348623159e308",
    "1e309", "-1e309", "nan", "NaN", "-nan", "+nan", "inf", "+inf", "-inf", "Infinity", "INFINITY",
    "-Infinity", "nan ", " inf", "", " ", "n/a", "1,5", "5e", "e5", ".e3", "١", "５", "5d",
    "5\u2028", "\u00a05", "1 000", "true", "false", "t", "F", "yes", "No", "Y", "n", "1", "0",
    "on", " true", "2021-02-03", "2021-2-3", "2020-02-29", "2021-02-29", "2021-13-01",
    "2021-00-10", "2021-01-32", " 2021-02-03 ", "0999-12-31", "9999-12-31", "20210203", "x",
]  # fmt: skip
"""Strings every engine reads alike (NULL or the same value), for int, float, bool and date."""

DUCKDB_ONLY = [
    ("n", "0x10", 16),
    ("n", "1_000", 1000),
    ("x", "1_000", 1000.0),
    ("x", "+-5", -5.0),
    ("x", "1e0400", math.inf),
    ("d", "2021/02/03", "2021-02-03"),
    ("d", "2021-02-03 10:00:00", "2021-02-03"),
    ("d", "epoch", "1970-01-01"),
    ("d", "infinity", "9999-12-31"),
    ("d", "inf", "9999-12-31"),
    ("d", " inf", "9999-12-31"),
    ("d", "Infinity", "9999-12-31"),
    ("d", "INFINITY", "9999-12-31"),
    ("d", "-inf", "0001-01-01"),
    ("d", "-Infinity", "0001-01-01"),
]
"""Forms DuckDB's TRY_CAST reads that the grammar does not (PostgreSQL and Spark read NULL)."""

COLUMNS = 'n = "int"\nx = "float"\nb = "bool"\nd = "date"\ns = "str"\n'
"""The text column ``s`` also keeps DuckDB from a bug: when every column of a CSV scan is cast,
DuckDB 2.0 moves the casts into ``read_csv``, which raises on a malformed value instead of giving
NULL (``test_duckdb_csv.py`` pins it)."""


def write_csv(folder: Path, values: list[str]) -> Path:
    path = folder / "grammar.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["i", "n", "x", "b", "d", "s"])
        for i, text in enumerate(values):
            writer.writerow([i, text, text, text, text, text])
    return path


def csv_catalog(folder: Path, engine: str) -> Catalog:
    text = (
        f'[dataset]\nname = "grammar"\nengine = "{engine}"\n\n[tables.g]\n'
        f'source = {{ csv = "grammar.csv" }}\nprivacy_unit = "row"\n\n[tables.g.columns]\n'
        f'i = "int"\n{COLUMNS}'
    )
    return parse_catalog(text, base_dir=folder)


def read_all(executor: Executor, catalog: Catalog) -> list[tuple[Any, ...]]:
    executor.prepare(catalog.tables[0])
    rows = executor.fetch('SELECT "i", "n", "x", "b", "d", "s" FROM "g" ORDER BY "i"')
    return [tuple(_comparable(v) for v in row[1:]) for row in rows]


def _comparable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def reference(folder: Path) -> list[tuple[Any, ...]]:
    catalog = csv_catalog(folder, "duckdb")
    with DuckDBExecutor(catalog) as executor:
        return read_all(executor, catalog)


def postgres_catalog(pg_admin: Any, schema: str, values: list[str], name: str) -> Catalog:
    pg_admin.execute(
        f'CREATE TABLE "{schema}"."{name}" (i bigint, n text, x text, b text, d text, s text)'
    )
    with pg_admin.cursor().copy(f'COPY "{schema}"."{name}" FROM STDIN') as copy:
        for i, text in enumerate(values):
            copy.write_row((i, text, text, text, text, text))
    text = (
        f'[tables.g]\nsource = {{ postgres = "{POSTGRES_ADMIN_URL}", table = "{schema}.{name}" }}\n'
        f'privacy_unit = "row"\n\n[tables.g.columns]\ni = "int"\n{COLUMNS}'
    )
    return parse_catalog(text)


def test_the_patterns_are_literal_safe_and_the_thresholds_exact() -> None:
    patterns = [convert.INT_TEXT, convert.NAN_TEXT, convert.POS_INF_TEXT, convert.NEG_INF_TEXT]
    assert all("\\" not in p and "'" not in p for p in [*patterns, convert.DATE_TEXT])
    over, under = Decimal(convert.DOUBLE_OVERFLOW), Decimal(convert.DOUBLE_UNDERFLOW)
    with localcontext() as ctx:
        ctx.prec = 2000
        tiny = Decimal(10) ** -1200
        assert float(over) == math.inf and float(over - tiny) == 1.7976931348623157e308
        assert float(under) == 0.0 and float(under + tiny) == 5e-324


@pytest.mark.postgres
def test_postgres_reads_the_grammar_like_duckdb(
    tmp_path: Path, pg_admin: Any, pg_schema: str
) -> None:
    expected = reference_rows(tmp_path, GRAMMAR)
    catalog = postgres_catalog(pg_admin, pg_schema, GRAMMAR, "grammar")
    with PostgresExecutor(catalog) as executor:
        got = read_all(executor, catalog)
    assert_same(got, expected)


@pytest.mark.spark
def test_spark_reads_the_grammar_like_duckdb(tmp_path: Path) -> None:
    expected = reference_rows(tmp_path, GRAMMAR)
    catalog = csv_catalog(tmp_path, "spark")
    with SparkExecutor(catalog, partitions=1) as executor:
        got = read_all(executor, catalog)
    assert_same(got, expected)


def reference_rows(folder: Path, values: list[str]) -> list[tuple[Any, ...]]:
    write_csv(folder, values)
    rows = reference(folder)
    assert len(rows) == len(values)
    assert sum(v is not None for row in rows for v in row) > len(values), "the grammar reads values"
    return rows


def assert_same(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> None:
    known = {(name, text) for name, text, _ in DUCKDB_ONLY}
    names = ("n", "x", "b", "d", "s")
    differences = [
        (GRAMMAR[i], name, g, e)
        for i, (got_row, expected_row) in enumerate(zip(got, expected, strict=True))
        for name, g, e in zip(names, got_row, expected_row, strict=True)
        if g != e and (name, GRAMMAR[i]) not in known
    ]
    assert not differences, differences


COLUMN = {"n": 0, "x": 1, "d": 2}


def extras_are_null(rows: list[tuple[Any, ...]]) -> None:
    read = [
        (name, text, row[COLUMN[name]])
        for (name, text, _), row in zip(DUCKDB_ONLY, rows, strict=True)
        if row[COLUMN[name]] is not None
    ]
    assert not read, read


@pytest.mark.postgres
def test_postgres_reads_duckdbs_extra_forms_as_null(pg_admin: Any, pg_schema: str) -> None:
    values = [text for _, text, _ in DUCKDB_ONLY]
    catalog = postgres_catalog(pg_admin, pg_schema, values, "extras")
    with PostgresExecutor(catalog) as executor:
        extras_are_null(executor.fetch('SELECT "n", "x", "d" FROM "g" ORDER BY "i"'))


@pytest.mark.spark
def test_spark_reads_duckdbs_extra_forms_as_null(tmp_path: Path) -> None:
    write_csv(tmp_path, [text for _, text, _ in DUCKDB_ONLY])
    catalog = csv_catalog(tmp_path, "spark")
    with SparkExecutor(catalog, partitions=1) as executor:
        executor.prepare(catalog.tables[0])
        extras_are_null(executor.fetch('SELECT "n", "x", "d" FROM "g" ORDER BY "i"'))


def test_duckdb_reads_the_extra_forms_documented_in_engines_md(tmp_path: Path) -> None:
    write_csv(tmp_path, [text for _, text, _ in DUCKDB_ONLY])
    rows = reference(tmp_path)
    column = {"n": 0, "x": 1, "d": 3}
    for (name, text, value), row in zip(DUCKDB_ONLY, rows, strict=True):
        assert row[column[name]] == value, (name, text)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "engines.md").read_text()
    for _, text, _ in DUCKDB_ONLY:
        assert f"`{text}`" in docs, f"{text!r} is not listed in docs/engines.md"
