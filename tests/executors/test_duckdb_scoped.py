"""The DuckDB executor scans only the columns a statement reads, with the view's conversions.

A table read in place (Parquet, a DuckDB file, an in-memory frame) is a view converting every
declared column, bound on every query. ``Executor.scoped`` shadows the view, in one statement,
with a relation of just the columns read. These check that it changes no answer — on values the
conversions exist for (malformed numbers, NaN, empty strings), on statements that open with their
own ``WITH`` (a person-level query's bounding) — and that whatever it cannot scope is left to the
view.
"""

from __future__ import annotations

import tomllib
from fractions import Fraction
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session, connect
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger.memory import MemoryLedger
from dalenius.sql.emit import exact_queries

COLUMNS = (
    'pid = "int"\n'
    'n = { type = "int", bounds = [0, 10] }\n'
    'x = { type = "float", bounds = [-5, 5] }\n'
    's = { type = "str", keys = ["a", "b"] }\n'
    'd = "date"\n'
)
QUERIES = (
    "SELECT COUNT(*) FROM t",
    "SELECT COUNT(*) FROM t WHERE s IS NULL",
    "SELECT s, COUNT(*), SUM(n) FROM t GROUP BY s",
    "SELECT AVG(x) FROM t WHERE n >= 2",
    "SELECT s, AVG(x) FROM t WHERE d >= '2024-01-03' GROUP BY s",
)
PERSON_QUERIES = (
    "SELECT COUNT(*) FROM t",
    "SELECT s, SUM(n) FROM t GROUP BY s",
    "SELECT s, AVG(x) FROM t WHERE n >= 2 GROUP BY s",
)


def _write_parquet(path: Path) -> None:
    """Rows the conversions matter for: a malformed and a missing number stored as text, a NaN,
    an empty string, and one person with more rows than the cap."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES "
        "(1, '3', 1.5, 'a', DATE '2024-01-01'), "
        "(1, '4', 2.5, 'a', DATE '2024-01-02'), "
        "(1, '9', -9.0, 'b', DATE '2024-01-03'), "
        "(1, '2', 0.5, 'b', DATE '2024-01-04'), "
        "(2, 'x', 'NaN'::DOUBLE, '', DATE '2024-01-05'), "
        "(3, NULL, 4.0, 'b', DATE '2024-01-06'), "
        "(4, '12', -1.0, 'a', NULL), "
        "(5, '7', 3.0, NULL, DATE '2024-01-08')"
        ") AS v(pid, n, x, s, d)"
    )
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    con.close()


def _catalog_text(unit: str, source: str) -> str:
    return f"[tables.t]\nsource = {source}\nprivacy_unit = {unit}\n[tables.t.columns]\n{COLUMNS}"


def _catalog(folder: Path, unit: str, source: str = '{ parquet = "t.parquet" }') -> Catalog:
    return parse_catalog(_catalog_text(unit, source), base_dir=folder)


def _session(catalog: Catalog, executor: DuckDBExecutor) -> Session:
    ledger = MemoryLedger()
    ledger.set_dataset(catalog.name)
    ledger.set_budget("a", catalog.name, PureDP(Fraction(100)))
    return connect(catalog, ledger=ledger, analyst="a", executor=executor)


def _both_ways(catalog: Catalog, queries: tuple[str, ...]) -> None:
    """Every statement of every query gives the same rows scoped and through the view."""
    with DuckDBExecutor(catalog) as executor:
        session = _session(catalog, executor)
        for table in catalog.tables:
            executor.prepare(table)
        for sql in queries:
            exact = exact_queries(session.plan(sql, epsilon=1), executor.dialect, salt=12345)
            assert exact.reads, sql
            for statement in [exact.main, *(s for _, s in exact.histograms)]:
                scoped = executor.scoped(statement, exact.reads)
                assert scoped != statement and scoped.startswith('WITH "t" AS NOT MATERIALIZED')
                assert sorted(executor.fetch(scoped), key=repr) == sorted(
                    executor.fetch(statement), key=repr
                ), sql


def test_scoped_statements_give_the_views_answers_on_parquet(tmp_path: Path) -> None:
    _write_parquet(tmp_path / "t.parquet")
    _both_ways(_catalog(tmp_path, '"row"'), QUERIES)


def test_a_bounding_statement_keeps_its_own_with_list(tmp_path: Path) -> None:
    _write_parquet(tmp_path / "t.parquet")
    catalog = _catalog(tmp_path, '{ column = "pid", max_rows = 2, max_groups = 1 }')
    with DuckDBExecutor(catalog) as executor:
        session = _session(catalog, executor)
        executor.prepare(catalog.tables[0])
        exact = exact_queries(session.plan(PERSON_QUERIES[1], epsilon=1), executor.dialect)
        assert exact.main.startswith("WITH ")
        scoped = executor.scoped(exact.main, exact.reads)
        assert scoped.startswith('WITH "t" AS NOT MATERIALIZED (SELECT ')
        assert scoped.endswith(exact.main[len("WITH ") :])
    _both_ways(catalog, PERSON_QUERIES)


def test_only_the_columns_read_are_converted(tmp_path: Path) -> None:
    _write_parquet(tmp_path / "t.parquet")
    catalog = _catalog(tmp_path, '"row"')
    with DuckDBExecutor(catalog) as executor:
        executor.prepare(catalog.tables[0])
        scoped = executor.scoped('SELECT COUNT(*) FROM "t"', [("t", ["s"])])
        assert "NULLIF(CAST(\"s\" AS VARCHAR), '')" in scoped
        assert '"n"' not in scoped and '"x"' not in scoped
        assert executor.fetch(scoped) == [(8,)]


def test_a_frame_source_is_scoped_too(tmp_path: Path) -> None:
    _write_parquet(tmp_path / "t.parquet")
    frame = duckdb.connect().execute(f"SELECT * FROM '{tmp_path / 't.parquet'}'").df()
    assert isinstance(frame, pd.DataFrame)
    doc = tomllib.loads(_catalog_text('"row"', '"frame"'))
    doc["tables"]["t"]["source"] = frame
    _both_ways(Catalog.from_dict(doc), QUERIES)


def test_what_cannot_be_scoped_is_read_through_the_view(tmp_path: Path) -> None:
    _write_parquet(tmp_path / "t.parquet")
    duckdb.connect().execute(
        f"COPY (SELECT * FROM '{tmp_path / 't.parquet'}') TO '{tmp_path / 't.csv'}' (HEADER)"
    )
    statement = 'SELECT COUNT(*) FROM "t"'
    parquet = _catalog(tmp_path, '"row"')
    with DuckDBExecutor(parquet) as executor:
        # Not loaded yet: nothing about the table is known to the engine.
        assert executor.scoped(statement, [("t", ["n"])]) == statement
        executor.prepare(parquet.tables[0])
        assert executor.scoped(statement, [("nope", ["n"])]) == statement
        assert executor.scoped(statement, [("t", ["undeclared"])]) == statement
        assert executor.scoped(statement, []) == statement
    # CSV (converted once, into memory) and constant-time mode (materialised): no view to skip.
    csv = _catalog(tmp_path, '"row"', '{ csv = "t.csv" }')
    with DuckDBExecutor(csv) as executor:
        executor.prepare(csv.tables[0])
        assert executor.scoped(statement, [("t", ["n"])]) == statement


def test_a_sessions_query_runs_its_statements_scoped(tmp_path: Path) -> None:
    _write_parquet(tmp_path / "t.parquet")
    catalog = _catalog(tmp_path, '{ column = "pid", max_rows = 2, max_groups = 1 }')
    with DuckDBExecutor(catalog) as executor:
        ran: list[str] = []
        fetch = executor.fetch

        def spy(sql: str) -> list[tuple[object, ...]]:
            ran.append(sql)
            return fetch(sql)

        executor.fetch = spy  # type: ignore[method-assign]
        _session(catalog, executor).query("SELECT s, SUM(n) FROM t GROUP BY s", epsilon=1)
        assert ran and all(s.startswith('WITH "t" AS NOT MATERIALIZED (SELECT ') for s in ran)


@pytest.mark.parametrize("name", ["__input", "__units", "__split", "__over"])
def test_a_table_named_like_the_exact_sqls_own_expressions_is_read_through_its_view(
    tmp_path: Path, name: str
) -> None:
    """A statement that bounds persons opens its own WITH list (__input, __units, …): a table of
    one of those names is left to the view, so the statement still binds."""
    _write_parquet(tmp_path / "t.parquet")
    text = _catalog_text('{ column = "pid", max_rows = 2, max_groups = 1 }', "{}")
    text = text.replace("[tables.t]", f"[tables.{name}]").replace("[tables.t.", f"[tables.{name}.")
    text = text.replace("source = {}", 'source = { parquet = "t.parquet" }')
    catalog = parse_catalog(text, base_dir=tmp_path)
    with DuckDBExecutor(catalog) as executor:
        session = _session(catalog, executor)
        sql = f"SELECT s, SUM(n) FROM {name} GROUP BY s"
        exact = exact_queries(session.plan(sql, epsilon=1), executor.dialect, salt=7)
        executor.prepare(catalog.tables[0])
        assert executor.scoped(exact.main, exact.reads) == exact.main
        assert len(session.query(sql, epsilon=1).rows) == 2
