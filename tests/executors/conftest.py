"""Fixtures of the executor tests: the PostgreSQL test server, one fresh schema per test module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.conformance.engines import connect_admin, fresh_schema


@pytest.fixture(scope="module")
def pg_admin() -> Iterator[Any]:
    """An autocommit connection to database ``test`` (the test fails loudly if it is down)."""
    conn = connect_admin()
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def pg_schema(pg_admin: Any) -> Iterator[str]:
    """A schema of ``test`` of this module's own, dropped afterwards."""
    schema = fresh_schema()
    pg_admin.execute(f'CREATE SCHEMA "{schema}"')
    yield schema
    pg_admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
