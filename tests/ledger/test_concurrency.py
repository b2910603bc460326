"""Concurrency: ≥ 200 simultaneous requests never release more answers than the budget allows.

Runs on SQLite and PostgreSQL, with threads in this process (several connections each shared by
several threads) and with separate worker processes (``concurrency_worker.py``). Each check: at
most k answers are released for a budget that allows k, and the ledger's total equals the sum of
the released costs exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.errors import BudgetExceededError
from dalenius.core.loss import PureDP
from dalenius.ledger import ChargeRequest, Ledger, RequestInProgressError, Reservation

WORKER = Path(__file__).with_name("concurrency_worker.py")
EPSILON = Fraction(1, 10)
K = 37  # answers the budget allows
BUDGET = PureDP(K * EPSILON)
REQUESTS = 200
PROCESSES = 4


def open_many(store, n: int) -> list[Ledger]:
    return [store.open() for _ in range(n)]


def check_record(ledger: Ledger, released: list[str], k: int) -> None:
    assert len(released) <= k
    assert len(set(released)) == len(released)
    committed = [e for e in ledger.entries() if e.status == "committed"]
    assert sorted(e.id for e in committed) == sorted(released)
    assert ledger.total_spent("adult") == PureDP(
        sum((e.charged.epsilon for e in committed), Fraction(0))
    )  # type: ignore[union-attr]
    assert ledger.total_spent("adult") == PureDP(len(released) * EPSILON)
    assert all(e.status in {"committed", "rolled_back"} for e in ledger.entries())
    assert ledger.verify() == []


@pytest.mark.parametrize("rollback_every", [0, 7])
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_threads_never_overspend(kind: str, rollback_every: int, request) -> None:
    store = request.getfixturevalue("store_factory")(kind)
    ledgers = open_many(store, 10)
    ledgers[0].set_budget("alice", "adult", BUDGET)
    barrier = threading.Barrier(REQUESTS)
    lock = threading.Lock()
    released: list[str] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        ledger = ledgers[i % len(ledgers)]
        request = ChargeRequest("alice", "adult", PureDP(EPSILON), f"t-{i}", f"SELECT {i}", f"p{i}")
        barrier.wait()
        try:
            outcome = ledger.reserve(request)
            assert isinstance(outcome, Reservation)
            if rollback_every and i % rollback_every == 0:
                ledger.release(outcome, "simulated refusal before the data gate")
                return
            ledger.charge(outcome)
            ledger.commit(outcome, json.dumps({"i": i}))
            with lock:
                released.append(outcome.id)
        except BudgetExceededError:
            pass
        except BaseException as error:
            with lock:
                errors.append(error)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(REQUESTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    check_record(ledgers[0], released, K)
    if not rollback_every:
        assert len(released) == K  # enough demand: every unit of budget was used
    refused = [a for a in ledgers[0].audit() if a.outcome == "refused"]
    rolled = [a for a in ledgers[0].audit() if a.outcome == "returned"]
    assert len(refused) + len(rolled) + len(released) == REQUESTS


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_processes_never_overspend_a_shared_total_cap(kind: str, request, pg_url: str) -> None:
    """4 processes × 50 threads; two analysts with ample budgets share a total cap of k answers."""
    store = request.getfixturevalue("store_factory")(kind)
    ledger = store.open()
    ledger.set_dataset("adult", total_cap=BUDGET)
    ledger.set_budget("alice", "adult", PureDP(Fraction(100)))
    ledger.set_budget("bob", "adult", PureDP(Fraction(100)))
    target = store.url if kind == "sqlite" else pg_url
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                kind,
                target,
                store.schema or "-",
                "alice,bob",
                str(REQUESTS // PROCESSES),
                str(EPSILON),
                "5",
                f"w{n}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    released: list[str] = []
    rolled_back = refused = 0
    for process in processes:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
        result = json.loads(out)
        assert result["errors"] == []
        released += result["released"]
        rolled_back += result["rolled_back"]
        refused += result["refused"]
    assert len(released) + rolled_back + refused == REQUESTS
    assert len(released) >= 1
    check_record(ledger, released, K)
    by_analyst = {e.principal for e in ledger.entries() if e.status == "committed"}
    assert by_analyst <= {"alice", "bob"}


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_one_idempotency_key_is_charged_once_under_a_race(kind: str, request) -> None:
    store = request.getfixturevalue("store_factory")(kind)
    ledgers = open_many(store, 5)
    ledgers[0].set_budget("alice", "adult", BUDGET)
    barrier = threading.Barrier(50)
    outcomes: list[object] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        retry = ChargeRequest("alice", "adult", PureDP(EPSILON), "same", "SELECT 1", "p", "key-1")
        barrier.wait()
        try:
            outcome: object = ledgers[i % 5].reserve(retry)
        except RequestInProgressError as error:
            outcome = error
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reservations = [o for o in outcomes if isinstance(o, Reservation)]
    assert len(reservations) == 1
    assert all(isinstance(o, RequestInProgressError) for o in outcomes if o not in reservations)
    assert ledgers[0].spent("alice", "adult") == PureDP(EPSILON)
