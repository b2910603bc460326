"""The data gate: no engine call on a private table without a durable charge before it, and every
outcome after it charged, with one fixed failure outcome.

Faults are injected at every stage of :meth:`Session.query` — parse, plan, reserve, the gate, the
engine call, noise, commit, post-processing, a time limit, a cancellation — and the ledger's change
is checked: 0 before the gate, exactly the reservation from the gate on. (SIGKILL at random points
is in ``test_session_crash.py``; the gateway's surfaces in ``tests/server/test_failure_outcome.py``.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dalenius.core.catalog import Catalog, Table, parse_catalog
from dalenius.core.errors import (
    BudgetExceededError,
    EvaluationFailed,
    ExecutionError,
    InternalError,
    PostGateOutcome,
    PrivacyRefusal,
    QueryError,
)
from dalenius.core.loss import PureDP
from dalenius.engine import query_release as query_module
from dalenius.engine.session import Session
from dalenius.executors.base import Row
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import ChargeRequest, Reservation, open_ledger
from dalenius.ledger.sqlite import SqliteLedger

EPS = Fraction(1, 10)
COUNT = "SELECT COUNT(*) FROM t WHERE x >= 3"
JOIN = "SELECT COUNT(*) FROM t JOIN pub ON t.k = pub.k"


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    (tmp_path / "t.csv").write_text("x,k\n" + "".join(f"{i % 10},{i % 4}\n" for i in range(200)))
    (tmp_path / "pub.csv").write_text("k,label\n0,a\n1,b\n2,c\n3,d\n")
    return parse_catalog(
        '[dataset]\nname = "gated"\n'
        '[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\n'
        'columns = { x = { type = "int", bounds = [0, 9] }, k = { type = "int" } }\n'
        '[tables.pub]\nsource = { csv = "pub.csv" }\npublic = true\n'
        'columns = { k = { type = "int" }, label = { type = "str" } }\n',
        base_dir=tmp_path,
    )


class SpyExecutor(DuckDBExecutor):
    """DuckDB, checking before every call on a private table that the gate's charge is on disk.

    The check reads the ledger's file through a connection of its own, so it sees only what was
    committed durably — not what the session's connection holds in a transaction.
    """

    def __init__(self, catalog: Catalog, ledger_path: str) -> None:
        super().__init__(catalog)
        self.ledger_path = ledger_path
        self.private_calls = 0
        self.fail_with: BaseException | None = None
        self.private = {t.name for t in catalog.tables if not t.public}

    def _durable_gate_record(self) -> None:
        with sqlite3.connect(self.ledger_path) as con:
            live = con.execute(
                "SELECT id FROM dalenius_charges WHERE status = 'charged'"
            ).fetchall()
            gated = {
                row[0]
                for row in con.execute(
                    "SELECT entry_id FROM dalenius_audit WHERE outcome = 'charged'"
                )
            }
        assert len(live) == 1, "an engine call on a private table without a durable charge"
        assert live[0][0] in gated
        self.private_calls += 1

    def prepare(self, table: Table) -> None:
        if table.name in self.private:
            self._durable_gate_record()
        super().prepare(table)

    def fetch(self, sql: str) -> list[Row]:
        if any(f'"{name}"' in sql for name in self.private):
            self._durable_gate_record()
            if self.fail_with is not None:
                raise self.fail_with
        return super().fetch(sql)


@pytest.fixture
def spied(catalog: Catalog, tmp_path: Path) -> Iterator[tuple[Session, SpyExecutor]]:
    path = str(tmp_path / "ledger.sqlite")
    ledger = SqliteLedger(path)
    ledger.set_budget("analyst", "gated", PureDP(Fraction(10)))
    executor = SpyExecutor(catalog, path)
    with Session(catalog, ledger=ledger, executor=executor) as session:
        yield session, executor


def spent(session: Session) -> Fraction:
    loss = session.ledger.spent(session.analyst, session.dataset)
    assert isinstance(loss, PureDP)
    return loss.epsilon


def test_no_engine_call_on_private_data_without_a_durable_gate_record(
    spied: tuple[Session, SpyExecutor],
) -> None:
    session, executor = spied
    session.query(COUNT, epsilon=EPS)
    session.query(JOIN, epsilon=EPS)  # the public table is read before the gate, the private after
    executor.fail_with = ExecutionError("Overflow in multiplication of INT64 (5426 * 1e15)")
    with pytest.raises(EvaluationFailed):
        session.query("SELECT SUM(x) FROM t", epsilon=EPS)
    assert executor.private_calls >= 5
    statuses = [e.status for e in session.ledger.entries()]
    assert statuses == ["committed", "committed", "failed"]
    assert spent(session) == 3 * EPS


def test_explain_never_touches_a_private_table(spied: tuple[Session, SpyExecutor]) -> None:
    session, executor = spied
    session.explain(COUNT, epsilon=EPS)
    session.explain(JOIN, epsilon=EPS)
    assert executor.private_calls == 0
    assert session.ledger.entries() == []


# -- faults before the gate: the ledger does not change -------------------------------------------


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELEC COUNT(*) FROM t", QueryError),  # parse
        ("SELECT COUNT(*) FROM nowhere", QueryError),  # catalog
        ("SELECT x FROM t", PrivacyRefusal),  # plan: not an aggregate
    ],
)
def test_refusals_before_the_gate_cost_nothing(
    spied: tuple[Session, SpyExecutor], sql: str, error: type[Exception]
) -> None:
    session, executor = spied
    with pytest.raises(error):
        session.query(sql, epsilon=EPS)
    assert spent(session) == 0 and session.ledger.entries() == []
    assert executor.private_calls == 0


def test_budget_refusal_and_failing_reserve_cost_nothing(
    spied: tuple[Session, SpyExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, executor = spied
    with pytest.raises(BudgetExceededError):
        session.query(COUNT, epsilon=11)
    monkeypatch.setattr(session.ledger, "reserve", _raiser(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        session.query(COUNT, epsilon=EPS)
    assert spent(session) == 0 and executor.private_calls == 0


def _block_gate_records(ledger_path: str) -> None:
    """Make the ledger's file refuse the data gate's audit line (as a full disk would)."""
    with sqlite3.connect(ledger_path) as con:
        con.execute(
            "CREATE TRIGGER no_gate BEFORE INSERT ON dalenius_audit WHEN NEW.outcome = 'charged' "
            "BEGIN SELECT RAISE(ABORT, 'ledger unreachable'); END"
        )


def test_a_gate_that_cannot_record_leaves_nothing_reserved(
    spied: tuple[Session, SpyExecutor],
) -> None:
    # A query reserves and passes the gate in one transaction: if the gate's record cannot be
    # written, the reservation is not written either, and the engine is never called.
    session, executor = spied
    _block_gate_records(executor.ledger_path)
    with pytest.raises(sqlite3.IntegrityError, match="ledger unreachable"):
        session.query(COUNT, epsilon=EPS)
    assert session.ledger.entries() == []
    assert spent(session) == 0 and executor.private_calls == 0


def test_a_gate_record_that_landed_before_an_error_stays_charged(
    spied: tuple[Session, SpyExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, executor = spied
    reserve = session.ledger.reserve

    def reserve_then_fail(request: Any, **options: Any) -> Any:
        reserve(request, **options)
        raise OSError("connection lost after the commit")

    monkeypatch.setattr(session.ledger, "reserve", reserve_then_fail)
    with pytest.raises(OSError, match="connection lost"):
        session.query(COUNT, epsilon=EPS)
    assert [e.status for e in session.ledger.entries()] == ["charged"]
    assert spent(session) == EPS and executor.private_calls == 0
    # Its process never learnt of it: recover keeps it charged (lost), never returns it.
    recovery = session.ledger.recover(older_than=timedelta(0))
    assert recovery.returned == () and len(recovery.lost) == 1
    assert spent(session) == EPS


def _pending(session: Session) -> Reservation:
    """A reservation that has not passed the gate (as a reserved release holds one)."""
    request = ChargeRequest(
        principal=session.analyst,
        dataset=session.dataset,
        loss=PureDP(EPS),
        request_key="release-1",
        sql="DENSITY(x) FROM t",
        plan_hash="h",
    )
    outcome = session.ledger.reserve(request)
    assert isinstance(outcome, Reservation) and not outcome.charged
    return outcome


def test_a_gate_that_cannot_charge_a_pending_reservation_returns_it(
    spied: tuple[Session, SpyExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, executor = spied
    reservation = _pending(session)
    monkeypatch.setattr(session.ledger, "charge", _raiser(OSError("ledger unreachable")))
    with pytest.raises(OSError, match="ledger unreachable"):
        session.through_gate(reservation, session.catalog.tables, lambda fetch: fetch(COUNT))
    assert [e.status for e in session.ledger.entries()] == ["rolled_back"]
    assert spent(session) == 0 and executor.private_calls == 0


def test_a_pending_charge_that_landed_before_an_error_is_charged(
    spied: tuple[Session, SpyExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, executor = spied
    reservation = _pending(session)
    charge = session.ledger.charge

    def charge_then_fail(reservation: Any) -> None:
        charge(reservation)
        raise OSError("connection lost after the commit")

    monkeypatch.setattr(session.ledger, "charge", charge_then_fail)
    with pytest.raises(EvaluationFailed):
        session.through_gate(reservation, session.catalog.tables, lambda fetch: fetch(COUNT))
    assert [e.status for e in session.ledger.entries()] == ["failed"]
    assert spent(session) == EPS and executor.private_calls == 0


# -- the ledger's work per query: counted, not timed ----------------------------------------------


def _transactions(statements: list[str]) -> list[list[str]]:
    """The traced statements' kinds, grouped by transaction (each from its BEGIN to its COMMIT)."""
    groups: list[list[str]] = []
    relaxing: list[str] = []
    # SQLite reports each statement a trigger runs (the running counts of what was spent) with
    # the text of the statement that fired it: one statement, counted once.
    statements = [t for i, t in enumerate(statements) if i == 0 or t != statements[i - 1]]
    for text in statements:
        # A durability switch is kept whole, with its transaction: relaxed before it begins,
        # restored after it ends.
        if text == "PRAGMA synchronous = NORMAL":
            relaxing.append(text)
            continue
        if text.startswith("PRAGMA"):
            groups[-1].append(text)
            continue
        kind = "BEGIN IMMEDIATE" if text.startswith("BEGIN IMMEDIATE") else text.split()[0]
        if kind.startswith("BEGIN"):
            groups.append(relaxing)
            relaxing = []
        groups[-1].append(kind)
    return groups


def test_a_query_is_one_ledger_transaction_before_the_engine_and_one_after(
    spied: tuple[Session, SpyExecutor],
) -> None:
    session, executor = spied
    ledger = session.ledger
    assert isinstance(ledger, SqliteLedger)
    session.query(COUNT, epsilon=EPS)  # plans cached, as for any repeated query shape
    traced: list[str] = []
    order: list[str] = []
    fetch = executor.fetch

    def fetch_after_counting(sql: str) -> list[Row]:
        order.append(f"engine after {sum(t.startswith('COMMIT') for t in traced)} commits")
        return fetch(sql)

    executor.fetch = fetch_after_counting  # type: ignore[method-assign]
    ledger.trace(traced.append)
    try:
        result = session.query("SELECT COUNT(*) FROM t WHERE x >= 5", epsilon=EPS)
    finally:
        ledger.trace(None)
    # Reserve and gate: one synced write; commit: another, not synced (the next synced commit
    # flushes it; the charge it settles is on disk already); no read transaction besides.
    reserve, commit = _transactions(traced)
    # The dataset, the budget, an earlier answer, what was spent; the charge (whose running
    # counts its triggers write), the audit lines.
    assert reserve == [
        "BEGIN IMMEDIATE",
        "SELECT",
        "SELECT",
        "SELECT",
        "SELECT",
        "INSERT",
        "INSERT",
        "COMMIT",
    ]
    assert commit == [
        "PRAGMA synchronous = NORMAL",
        "BEGIN IMMEDIATE",
        "SELECT",
        "UPDATE",
        "INSERT",
        "COMMIT",
        "PRAGMA synchronous = FULL",
    ]
    assert order == ["engine after 1 commits"]  # the engine ran between the two
    assert result.remaining == session.remaining() == PureDP(Fraction(10) - 2 * EPS)
    assert [a.outcome for a in ledger.audit()][-3:] == ["reserved", "charged", "answered"]
    # An identical request is answered from the record: one transaction (which also reads what
    # the analyst has left), no engine call.
    traced.clear()
    ledger.trace(traced.append)
    try:
        repeat = session.query("SELECT COUNT(*) FROM t WHERE x >= 5", epsilon=EPS)
    finally:
        ledger.trace(None)
    assert repeat.cached and repeat.remaining == session.remaining()
    assert [t[0] for t in _transactions(traced)] == ["BEGIN IMMEDIATE"]
    assert order == ["engine after 1 commits"]


# -- faults after the gate: exactly the reservation is charged, one fixed outcome ----------------


def _raiser(error: BaseException) -> Callable[..., Any]:
    def raise_it(*args: object, **kwargs: object) -> Any:
        raise error

    return raise_it


@pytest.mark.parametrize(
    "stage",
    ["prepare", "engine", "time_limit", "exact_values", "noise", "commit", "post_process"],
)
def test_every_failure_after_the_gate_is_charged_and_the_same(
    spied: tuple[Session, SpyExecutor], monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    session, executor = spied
    secret = "row 4711: value 123456789 (count 5426)"
    if stage == "prepare":
        monkeypatch.setattr(DuckDBExecutor, "prepare", _raiser(ExecutionError(secret)))
    elif stage == "engine":
        executor.fail_with = ExecutionError(secret)
    elif stage == "time_limit":
        executor.fail_with = TimeoutError(secret)
    elif stage in {"exact_values", "noise", "post_process"}:
        target = {"noise": "add_noise"}.get(stage, stage)
        monkeypatch.setattr(query_module, target, _raiser(OverflowError(secret)))
    else:
        monkeypatch.setattr(session.ledger, "commit", _raiser(sqlite3.OperationalError(secret)))
    with pytest.raises(EvaluationFailed) as caught:
        session.query(COUNT, epsilon=EPS, idempotency_key=f"k-{stage}")
    failure = caught.value
    assert type(failure) is EvaluationFailed and failure.outcome is PostGateOutcome.FAILED
    assert str(failure) == "the engine failed after reading the data; the reserved loss was charged"
    assert failure.body() == EvaluationFailed().body()
    assert failure.__cause__ is None and failure.__suppress_context__
    assert spent(session) == EPS
    [entry] = session.ledger.entries()
    assert entry.status == ("committed" if stage == "post_process" else "failed")
    assert secret not in entry.detail
    audit = [a for a in session.ledger.audit() if a.outcome == "failed"]
    if stage != "post_process":
        assert len(audit) == 1 and secret in audit[0].detail  # the custodian's record only
    # A retry with the same key costs nothing more.
    monkeypatch.undo()
    executor.fail_with = None
    if stage == "post_process":
        assert session.query(COUNT, epsilon=EPS, idempotency_key=f"k-{stage}").cached
    else:
        with pytest.raises(EvaluationFailed) as again:
            session.query(COUNT, epsilon=EPS, idempotency_key=f"k-{stage}")
        assert again.value.body() == failure.body()
    assert spent(session) == EPS


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit])
def test_a_cancellation_after_the_gate_is_charged(
    spied: tuple[Session, SpyExecutor], interruption: type[BaseException]
) -> None:
    session, executor = spied
    executor.fail_with = interruption()
    with pytest.raises(interruption):
        session.query(COUNT, epsilon=EPS)
    assert [e.status for e in session.ledger.entries()] == ["failed"]
    assert spent(session) == EPS


def test_failure_alerts_the_custodian(
    spied: tuple[Session, SpyExecutor], caplog: pytest.LogCaptureFixture
) -> None:
    session, executor = spied
    executor.fail_with = ExecutionError("value 987654321 overflowed")
    with caplog.at_level("WARNING", logger="dalenius.engine.gate"), pytest.raises(EvaluationFailed):
        session.query(COUNT, epsilon=EPS)
    [alert] = [r for r in caplog.records if r.name == "dalenius.engine.gate"]
    assert alert.levelname == "WARNING" and "failed after the data gate" in alert.getMessage()
    assert "987654321" not in alert.getMessage()
    assert session.ledger.failure_counts() == {"gated": 1}


def test_fail_closed_exhausts_the_budget_after_one_failure(
    spied: tuple[Session, SpyExecutor],
) -> None:
    session, executor = spied
    session.ledger.set_dataset("gated", fail_closed=True)
    executor.fail_with = ExecutionError("boom")
    with pytest.raises(EvaluationFailed):
        session.query(COUNT, epsilon=EPS)
    executor.fail_with = None
    assert session.remaining() == PureDP(Fraction(0))
    with pytest.raises(BudgetExceededError, match="fails closed"):
        session.query("SELECT SUM(x) FROM t", epsilon=EPS)
    assert spent(session) == EPS


def test_a_returned_reservation_can_never_pass_the_gate(catalog: Catalog) -> None:
    ledger = open_ledger(None)
    ledger.set_budget("analyst", "gated", PureDP(Fraction(1)))
    with Session(catalog, ledger=ledger, executor=DuckDBExecutor(catalog)) as session:
        prepared = session.prepare(COUNT, EPS)
        outcome = ledger.reserve(
            ChargeRequest("analyst", "gated", prepared.plan.loss, "k", COUNT, "h")
        )
        assert isinstance(outcome, Reservation)
        ledger.release(outcome, "recovered: its process looked dead")
        with pytest.raises(InternalError), session.gate.passage(outcome):
            pytest.fail("the engine was reached")  # pragma: no cover
        assert ledger.spent("analyst", "gated") == PureDP(Fraction(0))
