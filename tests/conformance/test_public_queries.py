"""A query over public tables alone gives the same exact answer on DuckDB and PostgreSQL: the
statement the allow-list checked is written in each engine's dialect (quoted catalog names, date
arithmetic, NOT IN, correlated subqueries) and values come back as the same plain Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.conformance.engines import (
    connect_admin,
    fresh_schema,
    load_into_postgres,
    postgres_variant,
    session_for,
)
from tests.support import public_tables as shop

from dalenius.core.catalog import load_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.executors.postgres import PostgresExecutor

QUERIES = {
    "Q2": shop.Q2,
    "Q11": shop.Q11,
    "Q16": shop.Q16,
    "dates": "SELECT COUNT(*), MIN(n_name) FROM nation WHERE DATE '1995-01-31' + INTERVAL '1' "
    "MONTH < DATE '1995-03-01' AND EXTRACT(YEAR FROM DATE '1995-01-31') = 1995",
    "sums": "SELECT s_nationkey, SUM(ps_availqty), AVG(ps_supplycost), COUNT(DISTINCT ps_partkey) "
    "FROM supplier JOIN partsupp ON s_suppkey = ps_suppkey GROUP BY s_nationkey ORDER BY 1",
    "with": "WITH cheap AS (SELECT ps_partkey AS k FROM partsupp WHERE ps_supplycost < 4) "
    "SELECT p_brand, COUNT(*) FROM part LEFT JOIN cheap ON k = p_partkey "
    "GROUP BY p_brand ORDER BY p_brand",
}


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Session]]:
    catalog = load_catalog(shop.write(tmp_path_factory.mktemp("shop")))
    admin = connect_admin()
    schema = fresh_schema()
    admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        load_into_postgres(catalog, schema, connection=admin)
        postgres = postgres_variant(catalog, schema)
        out = {
            "duckdb": session_for(catalog, DuckDBExecutor(catalog)),
            "postgres": session_for(postgres, PostgresExecutor(postgres)),
        }
        yield out
        for session in out.values():
            session.close()
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.close()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and a == pytest.approx(b, rel=1e-12)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", list(QUERIES))
def test_duckdb_and_postgresql_give_the_same_exact_answer(
    engines: dict[str, Session], name: str
) -> None:
    duck, pg = (engines[e].query(QUERIES[name]) for e in ("duckdb", "postgres"))
    assert duck.columns == pg.columns and duck.kinds == pg.kinds
    assert len(duck.rows) == len(pg.rows) > 0
    for a, b in zip(duck.rows, pg.rows, strict=True):
        assert all(_same(x, y) for x, y in zip(a, b, strict=True)), (name, a, b)
    if name in ("Q2", "Q11", "Q16"):
        assert duck.rows == getattr(shop, f"{name}_ROWS")
