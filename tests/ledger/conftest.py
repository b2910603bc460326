"""Fixtures for the ledger conformance suite: every store, a fake clock, request factories.

PostgreSQL tests get a fresh schema each and drop it afterwards; when the server is unreachable
they fail with the command that starts it (they are never skipped).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql

from dalenius.core.loss import Loss, PureDP
from dalenius.ledger import ChargeRequest, Ledger
from dalenius.ledger.memory import MemoryLedger
from dalenius.ledger.postgres import PostgresLedger
from dalenius.ledger.sqlite import SqliteLedger

PG_URL = os.environ.get("DALENIUS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PG_START = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"


class FakeClock:
    """A clock the test moves by hand (to cross budget periods without waiting)."""

    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **amount: float) -> None:
        self.now += timedelta(**amount)


@dataclass
class Store:
    """One kind of store; ``open`` opens (or reopens) the same store."""

    kind: str
    opener: Callable[[Callable[[], datetime] | None], Ledger]
    persistent: bool
    url: str
    schema: str | None = None
    opened: list[Ledger] = field(default_factory=list)

    def open(self, clock: Callable[[], datetime] | None = None) -> Ledger:
        ledger = self.opener(clock)
        self.opened.append(ledger)
        return ledger


def pg_connect() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(PG_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        pytest.fail(f"PostgreSQL is unreachable at {PG_URL} ({error}); start it with: {PG_START}")


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh, empty schema name; dropped with everything in it after the test."""
    connection = pg_connect()
    name = f"dalenius_test_{uuid4().hex[:16]}"
    try:
        yield name
    finally:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        connection.close()


@pytest.fixture
def store_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], Store]]:
    """Make a fresh store of a kind (``memory``, ``sqlite`` or ``postgres``); closed afterwards."""
    made: list[Store] = []

    def make(kind: str) -> Store:
        if kind == "memory":
            store = Store(kind, lambda clock: MemoryLedger(clock=clock), False, "memory:")
        elif kind == "sqlite":
            path = tmp_path / f"ledger-{len(made)}.sqlite"
            store = Store(kind, lambda clock: SqliteLedger(path, clock=clock), True, str(path))
        else:
            schema = request.getfixturevalue("pg_schema")
            store = Store(
                kind,
                lambda clock: PostgresLedger(PG_URL, schema=schema, clock=clock),
                True,
                f"{PG_URL}?options=-csearch_path%3D{schema}",
                schema=schema,
            )
        made.append(store)
        return store

    yield make
    for store in made:
        for ledger in store.opened:
            ledger.close()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, store_factory: Callable[[str], Store]) -> Store:
    """Each kind of store in turn: the conformance suite runs once per store."""
    return store_factory(request.param)


@pytest.fixture
def pg_url() -> str:
    return PG_URL


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(store: Store, clock: FakeClock) -> Ledger:
    return store.open(clock)


_counter = itertools.count()


@pytest.fixture
def charge() -> Callable[..., ChargeRequest]:
    """Build a request; each call gets a fresh request key unless one is given."""

    def make(
        principal: str = "alice",
        dataset: str = "adult",
        loss: Loss | None = None,
        *,
        epsilon: Fraction | None = None,
        key: str | None = None,
        idempotency_key: str | None = None,
    ) -> ChargeRequest:
        if loss is None:
            loss = PureDP(epsilon if epsilon is not None else Fraction(1, 10))
        number = next(_counter)
        return ChargeRequest(
            principal=principal,
            dataset=dataset,
            loss=loss,
            request_key=key or f"request-{number}",
            sql=f"SELECT COUNT(*) FROM {dataset} -- {number}",
            plan_hash=f"plan-{number}",
            idempotency_key=idempotency_key,
        )

    return make
