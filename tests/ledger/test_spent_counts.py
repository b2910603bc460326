"""The running counts of what was spent stay equal to a count of the charges, on every store.

A reserve reads what an analyst (and a dataset, for its total cap) has spent from
``dalenius_spent`` instead of counting every charge. An under-count there would let an analyst
overspend, so every write that adds, returns or converts a charge must move the counts with it.
Here random sequences of every such operation run on each store; after each step the ledger's
own check (``verify``, which recounts) finds nothing, and what the ledger says was spent equals
the composition of the entries it lists, computed here from scratch.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Iterator
from datetime import timedelta
from fractions import Fraction

import psycopg
import pytest

from dalenius.accounting.compose import compose
from dalenius.core.loss import ApproxDP, Loss, PureDP
from dalenius.ledger import CachedAnswer, ChargeRequest, Ledger, Reservation
from dalenius.ledger.base import CHARGED_STATUSES

from .conftest import FakeClock, Store

DATASET = "census"
ANALYSTS = ("ann", "bob", "cyd")


def expected(ledger: Ledger, definition: str, principal: str | None) -> Loss:
    """Spent recomputed from the entries: all of the analyst's that hold budget, or (``None``)
    the dataset's, each shared answer left out."""
    shared = {e.id for e in ledger.entries() if (e.detail or "").startswith("shared answer")}
    losses = [
        e.charged
        for e in ledger.entries()
        if e.dataset == DATASET
        and e.status in CHARGED_STATUSES
        and (e.principal == principal if principal else e.id not in shared)
    ]
    return compose(losses, definition)  # type: ignore[arg-type]


def step(ledger: Ledger, clock: FakeClock, rng: random.Random, live: list[Reservation]) -> str:
    """One random operation on the ledger; its name."""
    kind = rng.choice(("reserve", "reserve", "gate", "commit", "release", "fail", "recover"))
    if kind == "reserve" or not live:
        who = rng.choice(ANALYSTS)
        key = f"k{rng.randrange(6)}"  # few keys: repeats and shared answers happen
        loss = PureDP(Fraction(rng.choice((1, 2, 3)), 100))
        outcome = ledger.reserve(
            ChargeRequest(who, DATASET, loss, key, f"SELECT {key}", "plan"),
            charge=rng.random() < 0.5,
        )
        if isinstance(outcome, Reservation):
            live.append(outcome)
        return "reserve" if not isinstance(outcome, CachedAnswer) else "cached"
    held = live.pop(rng.randrange(len(live)))
    status = next(e.status for e in ledger.entries() if e.id == held.id)
    if kind == "gate" and status == "pending":
        ledger.charge(held)
        live.append(held)
    elif kind == "commit" and status in ("charged", "lost"):
        ledger.commit(held, '{"values": [1]}')
    elif kind == "release" and status == "pending":
        assert ledger.release(held, "the engine refused the plan")
    elif kind == "fail" and status in ("charged", "lost"):
        ledger.fail(held, "engine error")
    elif kind == "recover":
        clock.advance(minutes=11)
        ledger.recover(timedelta(minutes=10))
    else:
        live.append(held)
    return kind


@pytest.mark.parametrize("seed", range(3))
def test_the_counts_follow_every_write(store: Store, clock: FakeClock, seed: int) -> None:
    ledger = store.open(clock)
    ledger.set_dataset(DATASET, total_cap=PureDP(Fraction(1000)))
    for who in ANALYSTS:
        ledger.set_budget(who, DATASET, PureDP(Fraction(100)))
    rng = random.Random(seed)
    live: list[Reservation] = []
    done = set()
    for i in range(80):
        done.add(step(ledger, clock, rng, live))
        if i == 50:
            # Every charge converted (pure ε carries over as (ε, 0)): the counts are rebuilt.
            ledger.set_dataset(DATASET, definition="approx")
        definition = "approx" if i >= 50 else "pure"
        assert ledger.verify() == [], (i, done)
        for who in ANALYSTS:
            assert ledger.spent(who, DATASET) == expected(ledger, definition, who), (i, who)
        assert ledger.total_spent(DATASET) == expected(ledger, definition, None), i
    # The sequence went through every kind of write (and repeats, and shared answers).
    assert {"reserve", "cached", "gate", "commit", "release", "fail", "recover"} <= done
    assert isinstance(ledger.total_spent(DATASET), ApproxDP)
    if store.persistent:
        ledger.close()
        reopened = store.open(clock)
        assert reopened.verify() == []
        assert reopened.total_spent(DATASET) == expected(reopened, "approx", None)


Writer = Callable[[str, tuple[object, ...]], None]


@pytest.fixture
def raw_writer() -> Iterator[Callable[[Store], Writer]]:
    """Run SQL on a store directly, as a process of an earlier release would write; the
    connections are closed after the test."""
    opened: list[sqlite3.Connection | psycopg.Connection[tuple[object, ...]]] = []

    def open_on(store: Store) -> Writer:
        if store.kind == "sqlite":
            con = sqlite3.connect(store.url, isolation_level=None)
            opened.append(con)
            return lambda sql, params=(): con.execute(sql, params) and None
        pg = psycopg.connect(store.url, autocommit=True)
        opened.append(pg)
        return lambda sql, params=(): pg.execute(sql.replace("?", "%s"), params) and None  # type: ignore[arg-type]

    yield open_on
    for connection in opened:
        connection.close()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_writer_that_knows_nothing_of_the_counts_keeps_them_right(
    store_factory: Callable[[str], Store],
    clock: FakeClock,
    kind: str,
    raw_writer: Callable[[Store], Writer],
) -> None:
    """A gateway worker of an earlier release, still running on a store another has upgraded,
    writes charges as it always did; the database's triggers count them all the same."""
    store = store_factory(kind)
    ledger = store.open(clock)
    ledger.set_dataset(DATASET, total_cap=PureDP(Fraction(10)))
    ledger.set_budget("ann", DATASET, PureDP(Fraction(10)))
    ledger.set_budget("bob", DATASET, PureDP(Fraction(10)))
    run = raw_writer(store)
    columns = (
        "id, principal, dataset, sql_text, plan_hash, request_key, idempotency_key, loss, "
        "charged, status, answer, created_at, finished_at, detail"
    )
    now = "2024-01-01T00:00:00.000000+00:00"

    def insert(ident: str, who: str, loss: str, status: str, answer: str | None) -> None:
        run(
            f"INSERT INTO dalenius_charges ({columns}) "
            "VALUES (?, ?, ?, 'S', 'h', ?, NULL, ?, ?, ?, ?, ?, NULL, '')",
            (ident, who, DATASET, f"key-{ident}", loss, loss, status, answer, now),
        )

    insert("e1", "ann", "pure:1/10", "pending", None)
    insert("e2", "ann", "pure:1/5", "committed", "{}")
    insert("e3", "bob", "pure:1/5", "committed", "{}")  # a shared answer of e2:
    run("INSERT INTO dalenius_shared (entry_id, source_id) VALUES ('e3', 'e2')", ())
    assert ledger.spent("ann", DATASET) == PureDP(Fraction(3, 10))
    assert ledger.spent("bob", DATASET) == PureDP(Fraction(1, 5))
    assert ledger.total_spent(DATASET) == PureDP(Fraction(3, 10))  # e3 not again
    run("UPDATE dalenius_charges SET status = 'rolled_back' WHERE id = 'e1'", ())
    run("UPDATE dalenius_charges SET status = 'failed' WHERE id = 'e2'", ())  # still held
    assert ledger.spent("ann", DATASET) == PureDP(Fraction(1, 5))
    assert ledger.total_spent(DATASET) == PureDP(Fraction(1, 5))
    run("UPDATE dalenius_charges SET charged = 'pure:1/2' WHERE id = 'e2'", ())
    assert ledger.spent("ann", DATASET) == PureDP(Fraction(1, 2))
    run("DELETE FROM dalenius_shared WHERE entry_id = 'e3'", ())
    assert ledger.total_spent(DATASET) == PureDP(Fraction(7, 10))
    run("DELETE FROM dalenius_charges WHERE id = 'e3'", ())
    assert ledger.spent("bob", DATASET) == PureDP(Fraction(0))
    assert ledger.total_spent(DATASET) == PureDP(Fraction(1, 2))
    # (These raw rows lack the audit lines the protocol writes; the counts are what is checked.)
    assert not [problem for problem in ledger.verify() if "running count" in problem]
    # A count cannot go below zero: a second return of the same charge fails loudly.
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.CheckViolation)):
        run("UPDATE dalenius_spent SET releases = releases - 5 WHERE principal = 'ann'", ())


def test_recount_rebuilds_counts_that_were_damaged(
    store: Store, clock: FakeClock, raw_writer: Callable[[Store], Writer]
) -> None:
    ledger = store.open(clock)
    ledger.set_dataset(DATASET, total_cap=PureDP(Fraction(100)))
    for who in ANALYSTS:
        ledger.set_budget(who, DATASET, PureDP(Fraction(10)))
    rng = random.Random(7)
    live: list[Reservation] = []
    for _ in range(30):
        step(ledger, clock, rng, live)
    right = (ledger.spent("ann", DATASET), ledger.total_spent(DATASET))
    assert ledger.recount() == []  # nothing to repair
    if store.kind == "memory":
        return  # no second connection reaches an in-memory store to damage it
    raw_writer(store)("UPDATE dalenius_spent SET releases = releases + 3", ())
    assert ledger.verify() != []
    wrong = ledger.recount()
    assert wrong and all("running count" in problem for problem in wrong)
    assert ledger.verify() == []
    assert (ledger.spent("ann", DATASET), ledger.total_spent(DATASET)) == right
