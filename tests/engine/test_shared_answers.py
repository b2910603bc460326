"""Colluding analysts cannot average: one shared release per query on a dataset with a total cap.

Two analysts on one ledger ask the same query; on a dataset with a total cap they get the same
released value, counted once against the total and charged to each analyst's own budget. Run on
every ledger store (in memory, SQLite, PostgreSQL).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql as pgsql

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session, connect
from dalenius.ledger import Ledger, open_ledger
from dalenius.ledger.postgres import PostgresLedger

PG_URL = os.environ.get("DALENIUS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
SQL = "SELECT sex, COUNT(*) AS n, SUM(capital_gain) AS g FROM adult GROUP BY sex"


@pytest.fixture(scope="module")
def catalog(adult_catalog_path: Path) -> Catalog:
    return load_catalog(adult_catalog_path)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "memory":
        book: Ledger = open_ledger("memory:")
    elif request.param == "sqlite":
        book = open_ledger(str(tmp_path / "ledger.sqlite"))
    else:
        schema = f"dalenius_test_{uuid4().hex[:16]}"
        book = PostgresLedger(PG_URL, schema=schema)
    try:
        yield book
    finally:
        book.close()
        if request.param == "postgres":
            with psycopg.connect(PG_URL, autocommit=True) as connection:
                connection.execute(
                    pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema))
                )


def _session(catalog: Catalog, ledger: Ledger, analyst: str) -> Session:
    # Both sessions share the ledger; each closes only its own executor.
    return connect(catalog, ledger=ledger, analyst=analyst)


def test_two_analysts_get_the_same_release_charged_once_to_the_total(
    catalog: Catalog, ledger: Ledger
) -> None:
    ledger.set_dataset(catalog.name, total_cap=PureDP(Fraction(3)))
    for who in ("alice", "bob"):
        ledger.set_budget(who, catalog.name, PureDP(Fraction(1)))
    alice = _session(catalog, ledger, "alice")
    bob = _session(catalog, ledger, "bob")
    first = alice.query(SQL, epsilon="0.5")
    second = bob.query(SQL, epsilon="0.5")
    assert second.rows == first.rows and second.lows == first.lows
    assert second.shared and second.cached and not first.cached
    assert second.spent == PureDP(Fraction(1, 2))
    assert "shared answer" in str(second) and second.to_dict()["shared"] is True
    assert ledger.total_spent(catalog.name) == PureDP(Fraction(1, 2))
    assert bob.remaining() == PureDP(Fraction(1, 2))
    # A different question is a new release: independent noise, charged to the total.
    other = bob.query(SQL.replace("GROUP BY sex", "WHERE age > 30 GROUP BY sex"), epsilon="0.5")
    assert not other.cached
    assert ledger.total_spent(catalog.name) == PureDP(Fraction(1))
    assert ledger.verify() == []
    alice.executor.close()
    bob.executor.close()


def test_without_a_total_cap_each_analyst_gets_an_own_release(
    catalog: Catalog, ledger: Ledger
) -> None:
    for who in ("alice", "bob"):
        ledger.set_budget(who, catalog.name, PureDP(Fraction(1)))
    alice = _session(catalog, ledger, "alice")
    bob = _session(catalog, ledger, "bob")
    alice.query(SQL, epsilon="0.5")
    second = bob.query(SQL, epsilon="0.5")
    assert not second.cached and not second.shared
    assert ledger.total_spent(catalog.name) == PureDP(Fraction(1))
    alice.executor.close()
    bob.executor.close()
