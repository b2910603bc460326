"""The conformance suite: every ledger store (memory, SQLite, PostgreSQL) behaves the same."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from fractions import Fraction

import pytest

from dalenius.accounting import approx_to_zcdp_cap
from dalenius.core.errors import (
    BudgetExceededError,
    ConfigurationError,
    EvaluationFailed,
    InternalError,
)
from dalenius.core.loss import ZCDP, ApproxDP, PureDP
from dalenius.ledger import (
    CachedAnswer,
    ChargeRequest,
    Ledger,
    RequestInProgressError,
    Reservation,
)

Charge = Callable[..., ChargeRequest]
F = Fraction


def reserve(ledger: Ledger, request: ChargeRequest) -> Reservation:
    outcome = ledger.reserve(request)
    assert isinstance(outcome, Reservation), outcome
    return outcome


def gated(ledger: Ledger, request: ChargeRequest) -> Reservation:
    """A reservation that has passed the data gate (the engine may read the data)."""
    reservation = reserve(ledger, request)
    ledger.charge(reservation)
    return reservation


def answer(value: int) -> str:
    return json.dumps({"count": value})


# -- budgets ---------------------------------------------------------------------------------


def test_unknown_budget_is_none_and_nothing_remains(ledger: Ledger) -> None:
    assert ledger.get_budget("alice", "adult") is None
    assert ledger.remaining("alice", "adult") == PureDP(F(0))
    assert ledger.spent("alice", "adult") == PureDP(F(0))


def test_set_budget_registers_the_dataset_with_the_cap_type(ledger: Ledger) -> None:
    ledger.set_budget("alice", "adult", ZCDP(F(1, 2)), refresh_days=7)
    assert ledger.get_budget("alice", "adult") == ZCDP(F(1, 2))
    [info] = ledger.datasets()
    assert (info.name, info.definition, info.total_cap) == ("adult", "zcdp", None)
    [budget] = ledger.budgets()
    assert (budget.principal, budget.refresh_days) == ("alice", 7)


def test_budget_can_be_changed_and_keeps_its_period_anchor(ledger: Ledger, clock) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)), refresh_days=30)
    anchor = ledger.budgets()[0].anchor
    clock.advance(days=3)
    ledger.set_budget("alice", "adult", PureDP(F(2)), refresh_days=30)
    [budget] = ledger.budgets()
    assert budget.cap == PureDP(F(2))
    assert budget.anchor == anchor


@pytest.mark.parametrize(
    "bad",
    [
        {"principal": ""},
        {"dataset": "  "},
        {"refresh_days": 0},
        {"refresh_days": True},
        {"cap": 1.0},
    ],
)
def test_bad_budget_arguments_are_refused(ledger: Ledger, bad: dict[str, object]) -> None:
    args: dict[str, object] = {"principal": "alice", "dataset": "adult", "cap": PureDP(F(1))}
    args.update(bad)
    refresh = args.pop("refresh_days", None)
    with pytest.raises(ConfigurationError):
        ledger.set_budget(
            args["principal"],
            args["dataset"],
            args["cap"],
            refresh_days=refresh,  # type: ignore[arg-type]
        )
    assert ledger.budgets() == []


# -- reserve / gate / commit / fail --------------------------------------------------------------


def test_reserve_commit_charges_exactly_and_records_the_answer(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    request = charge(epsilon=F(1, 3))
    reservation = reserve(ledger, request)
    assert ledger.spent("alice", "adult") == PureDP(F(1, 3))  # pending counts as spent
    ledger.charge(reservation)
    assert ledger.spent("alice", "adult") == PureDP(F(1, 3))
    entry_id = ledger.commit(reservation, answer(42))
    assert entry_id == reservation.id
    assert ledger.spent("alice", "adult") == PureDP(F(1, 3))
    assert ledger.remaining("alice", "adult") == PureDP(F(2, 3))
    [entry] = ledger.entries()
    assert entry.status == "committed"
    assert entry.answer == answer(42)
    assert (entry.principal, entry.dataset, entry.sql, entry.plan_hash) == (
        "alice",
        "adult",
        request.sql,
        request.plan_hash,
    )
    assert entry.finished_at is not None
    outcomes = [a.outcome for a in ledger.audit()]
    assert outcomes == ["budget_set", "reserved", "charged", "answered"]
    assert ledger.verify() == []


def test_over_budget_is_refused_with_the_numbers_and_costs_nothing(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.commit(gated(ledger, charge(epsilon=F(3, 4))), answer(1))
    request = charge(epsilon=F(1, 2))
    with pytest.raises(BudgetExceededError) as caught:
        ledger.reserve(request)
    error = caught.value
    assert (error.requested, error.remaining, error.difference) == (F(1, 2), F(1, 4), F(1, 4))
    assert error.measure == "epsilon"
    assert "alice" in str(error) and "adult" in str(error)
    assert "epsilon <= 0.25" in str(error)
    assert ledger.spent("alice", "adult") == PureDP(F(3, 4))
    refused = ledger.audit()[-1]
    assert (refused.outcome, refused.sql, refused.plan_hash) == (
        "refused",
        request.sql,
        request.plan_hash,
    )
    assert refused.loss == PureDP(F(1, 2))


def test_exactly_the_remaining_budget_fits(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    for _ in range(10):
        ledger.commit(gated(ledger, charge(epsilon=F(1, 10))), answer(0))
    assert ledger.remaining("alice", "adult") == PureDP(F(0))
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge(epsilon=F(1, 10**9)))


def test_a_cap_lowered_below_what_was_spent_refuses_everything(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.commit(gated(ledger, charge(epsilon=F(1, 2))), answer(1))
    ledger.set_budget("alice", "adult", PureDP(F(1, 4)))
    assert ledger.remaining("alice", "adult") == PureDP(F(0))
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge(epsilon=F(0)))


def test_no_budget_means_nothing_may_be_spent(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    with pytest.raises(BudgetExceededError) as caught:
        ledger.reserve(charge("bob", epsilon=F(1, 10)))
    assert caught.value.remaining == 0
    assert "dalenius budget set --analyst bob" in str(caught.value)
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge("alice", "census", epsilon=F(1, 10)))
    assert [a.outcome for a in ledger.audit()][-2:] == ["refused", "refused"]


def test_pending_reservations_count_as_spent(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    reserve(ledger, charge(epsilon=F(3, 5)))
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge(epsilon=F(3, 5)))


def test_release_before_the_gate_returns_and_is_audited(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    reservation = reserve(ledger, charge(epsilon=F(3, 5)))
    assert ledger.release(reservation, "refused before reading: table missing")
    assert ledger.spent("alice", "adult") == PureDP(F(0))
    assert ledger.release(reservation, "again")  # idempotent
    [entry] = ledger.entries()
    assert (entry.status, entry.answer) == ("rolled_back", None)
    assert "table missing" in entry.detail
    returned = [a for a in ledger.audit() if a.outcome == "returned"]
    assert len(returned) == 1 and returned[0].entry_id == reservation.id
    with pytest.raises(InternalError):  # a returned reservation can never reach the engine
        ledger.charge(reservation)
    with pytest.raises(InternalError):
        ledger.commit(reservation, answer(1))
    reserve(ledger, charge(epsilon=F(1)))  # the whole budget is back


def test_nothing_moves_from_charged_back_to_returned(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    reservation = gated(ledger, charge(epsilon=F(3, 5)))
    [gate] = [a for a in ledger.audit() if a.outcome == "charged"]
    assert (gate.entry_id, gate.loss) == (reservation.id, PureDP(F(3, 5)))
    assert ledger.release(reservation, "too late") is False
    with pytest.raises(InternalError):
        ledger.charge(reservation)  # the gate is passed once
    ledger.fail(reservation, "ExecutionError: overflow with count 5426")
    ledger.fail(reservation, "again")  # idempotent
    assert ledger.release(reservation, "still too late") is False
    [entry] = ledger.entries()
    assert (entry.status, entry.detail) == ("failed", "evaluation_failed")
    assert "5426" not in entry.detail  # analysts may read their entries; the audit has the text
    [failed] = [a for a in ledger.audit() if a.outcome == "failed"]
    assert "count 5426" in failed.detail and failed.entry_id == reservation.id
    assert ledger.spent("alice", "adult") == PureDP(F(3, 5))
    assert ledger.failure_counts() == {"adult": 1}
    with pytest.raises(InternalError):
        ledger.commit(reservation, answer(1))
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge(epsilon=F(3, 5)))
    assert ledger.verify() == []


def test_reserve_and_gate_in_one_transaction(ledger: Ledger, charge: Charge, clock) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)), refresh_days=None)
    ledger.set_dataset("adult", total_cap=PureDP(F(3, 2)))
    outcome = ledger.reserve(charge(epsilon=F(1, 4)), charge=True)
    assert isinstance(outcome, Reservation) and outcome.charged
    # What is left with this charge counted, as the reservation's transaction saw it.
    assert outcome.remaining == PureDP(F(3, 4)) == ledger.remaining("alice", "adult")
    [entry] = ledger.entries()
    assert entry.status == "charged"  # past the gate: never pending, never returned
    lines = [(a.outcome, a.entry_id, a.loss) for a in ledger.audit()][-2:]
    assert lines == [
        ("reserved", entry.id, PureDP(F(1, 4))),
        ("charged", entry.id, PureDP(F(1, 4))),
    ]
    assert ledger.release(outcome, "too late") is False
    with pytest.raises(InternalError):
        ledger.charge(outcome)  # the gate is passed once
    ledger.commit(outcome, answer(7))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 4))
    # A refusal writes nothing but its audit line; a crash after the gate leaves a lost charge.
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge(epsilon=F(4, 5)), charge=True)
    crashed = ledger.reserve(charge(epsilon=F(1, 4)), charge=True)
    assert isinstance(crashed, Reservation)
    clock.advance(hours=1)
    recovery = ledger.recover(older_than=timedelta(minutes=10))
    assert (recovery.returned, recovery.lost) == ((), (crashed.id,))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 2))
    # The total cap bounds what remains once the other analysts' charges count.
    ledger.set_budget("bob", "adult", PureDP(F(2)))
    bob = ledger.reserve(charge(principal="bob", epsilon=F(1, 2)), charge=True)
    assert isinstance(bob, Reservation) and bob.remaining == PureDP(F(1, 2))
    assert sorted(e.status for e in ledger.entries()) == ["charged", "committed", "lost"]
    assert ledger.verify() == []


def test_a_pending_reservation_cannot_commit_or_fail(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    reservation = reserve(ledger, charge())
    with pytest.raises(InternalError, match="data gate"):
        ledger.commit(reservation, answer(1))
    with pytest.raises(InternalError, match="data gate"):
        ledger.fail(reservation, "no")
    assert [e.status for e in ledger.entries()] == ["pending"]


def test_retried_failure_returns_the_recorded_outcome_at_no_cost(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    request = charge(epsilon=F(1, 4), idempotency_key="retry-f")
    ledger.fail(gated(ledger, request), "engine text")
    for _ in range(3):
        with pytest.raises(EvaluationFailed) as caught:
            ledger.reserve(request)
        assert caught.value.body() == EvaluationFailed().body()
    assert ledger.spent("alice", "adult") == PureDP(F(1, 4))
    assert len(ledger.entries()) == 1
    # Without the key (or with a fresh one) the request is new and pays again.
    reserve(ledger, charge(epsilon=F(1, 4)))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 2))


def test_fail_closed_exhausts_the_analysts_budget(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "adult", PureDP(F(1)))
    ledger.set_dataset("adult", fail_closed=True)
    assert ledger.datasets()[0].fail_closed
    ledger.fail(gated(ledger, charge(epsilon=F(1, 10))), "engine text")
    assert ledger.remaining("alice", "adult") == PureDP(F(0))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 10))  # what was really spent
    with pytest.raises(BudgetExceededError, match="fails closed"):
        ledger.reserve(charge(epsilon=F(1, 100)))
    assert ledger.remaining("bob", "adult") == PureDP(F(1))  # other analysts keep theirs
    [budget] = ledger.budgets("alice", "adult")
    assert budget.exhausted_at is not None
    assert [a.outcome for a in ledger.audit()][-3:] == ["failed", "exhausted", "refused"]
    ledger.set_budget("alice", "adult", PureDP(F(1)))  # the custodian re-opens it
    assert ledger.remaining("alice", "adult") == PureDP(F(9, 10))
    ledger.set_dataset("adult", fail_closed=False)
    ledger.fail(gated(ledger, charge(epsilon=F(1, 10))), "engine text")
    assert ledger.remaining("alice", "adult") == PureDP(F(4, 5))


def test_committed_entries_are_never_returned_nor_committed_twice(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    reservation = gated(ledger, charge())
    ledger.commit(reservation, answer(1))
    assert ledger.release(reservation, "too late") is False
    ledger.fail(reservation, "a failure after the commit leaves the answer recorded")
    with pytest.raises(InternalError):
        ledger.commit(reservation, answer(2))
    assert ledger.entries()[0].answer == answer(1)
    assert ledger.entries()[0].status == "committed"
    with pytest.raises(InternalError):
        ledger.commit(Reservation("no-such-id", charge()), answer(3))


# -- the answer cache and idempotency -----------------------------------------------------------


def test_identical_request_is_answered_from_the_record_at_no_cost(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    first = charge(epsilon=F(1, 2), key="same-plan-same-data")
    entry_id = ledger.commit(gated(ledger, first), answer(7))
    again = ledger.reserve(charge(epsilon=F(1, 2), key="same-plan-same-data"))
    assert isinstance(again, CachedAnswer)
    assert (again.entry_id, again.answer, again.loss) == (entry_id, answer(7), PureDP(F(1, 2)))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 2))
    # What is left comes with the answer, read in the same transaction: no second read.
    assert again.remaining == ledger.remaining("alice", "adult")
    cached = ledger.audit()[-1]
    assert (cached.outcome, cached.entry_id, cached.loss) == ("cached", entry_id, None)


def test_changed_data_or_another_analyst_pays_again(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "adult", PureDP(F(1)))
    ledger.commit(gated(ledger, charge(epsilon=F(1, 2), key="plan|v1")), answer(1))
    reserve(ledger, charge(epsilon=F(1, 2), key="plan|v2"))  # new data version: fresh cost
    reserve(ledger, charge("bob", epsilon=F(1, 2), key="plan|v1"))  # bob has not seen it
    assert ledger.spent("alice", "adult") == PureDP(F(1))
    assert ledger.spent("bob", "adult") == PureDP(F(1, 2))


def test_identical_request_in_flight_is_charged_again(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    reserve(ledger, charge(epsilon=F(1, 4), key="k"))
    reserve(ledger, charge(epsilon=F(1, 4), key="k"))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 2))


def test_idempotency_key_gives_the_same_outcome_charged_once(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    first = charge(epsilon=F(1, 2), key="k1", idempotency_key="retry-1")
    reservation = reserve(ledger, first)
    with pytest.raises(RequestInProgressError):
        ledger.reserve(first)
    ledger.charge(reservation)
    with pytest.raises(RequestInProgressError):
        ledger.reserve(first)
    ledger.commit(reservation, answer(5))
    replay = ledger.reserve(first)
    assert isinstance(replay, CachedAnswer) and replay.answer == answer(5)
    with pytest.raises(ConfigurationError, match="already used for a different request"):
        ledger.reserve(charge(epsilon=F(1, 2), key="k2", idempotency_key="retry-1"))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 2))


def test_idempotency_key_of_a_returned_request_can_be_retried(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    request = charge(epsilon=F(1, 2), idempotency_key="retry-2")
    ledger.release(reserve(ledger, request), "connection reset")
    ledger.commit(gated(ledger, request), answer(3))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 2))


# -- the dataset's total cap -----------------------------------------------------------------


def test_total_cap_bounds_colluding_analysts(ledger: Ledger, charge: Charge) -> None:
    ledger.set_dataset("adult", definition="pure", total_cap=PureDP(F(3, 2)))
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "adult", PureDP(F(1)))
    ledger.commit(gated(ledger, charge("alice", epsilon=F(1))), answer(1))
    assert ledger.remaining("bob", "adult") == PureDP(F(1, 2))
    with pytest.raises(BudgetExceededError) as caught:
        ledger.reserve(charge("bob", epsilon=F(3, 4)))
    assert "total cap" in str(caught.value)
    assert (caught.value.requested, caught.value.remaining) == (F(3, 4), F(1, 2))
    reserve(ledger, charge("bob", epsilon=F(1, 2)))
    assert ledger.total_spent("adult") == PureDP(F(3, 2))


def test_set_dataset_keeps_the_cap_unless_removed(ledger: Ledger) -> None:
    ledger.set_dataset("adult", total_cap=PureDP(F(2)))
    ledger.set_dataset("adult")
    assert ledger.datasets()[0].total_cap == PureDP(F(2))
    ledger.remove_total_cap("adult")
    assert ledger.datasets()[0].total_cap is None
    with pytest.raises(ConfigurationError):
        ledger.remove_total_cap("census")


def test_definition_switch_refuses_what_has_no_sound_conversion(ledger: Ledger) -> None:
    ledger.set_dataset("adult", definition="pure")
    ledger.set_dataset("adult", definition="zcdp", total_cap=ZCDP(F(1)))  # still unused: allowed
    ledger.set_budget("alice", "adult", ZCDP(F(1, 2)))
    # A zCDP budget can become a pure cap (ε = √(2ρ) = 1), so the switch to 'pure' works...
    ledger.set_dataset("adult", definition="pure")
    assert ledger.get_budget("alice", "adult") == PureDP(F(1))
    with pytest.raises(ConfigurationError, match="Unknown accounting definition"):
        ledger.set_dataset("census", definition="renyi")
    # ...but a pure cap bounds no zCDP total, so going back is refused and changes nothing.
    with pytest.raises(ConfigurationError, match="cannot switch from 'pure' to 'zcdp'") as caught:
        ledger.set_dataset("adult", definition="zcdp")
    assert "switch to 'approx'" in str(caught.value)
    assert ledger.datasets()[0].definition == "pure"
    assert ledger.get_budget("alice", "adult") == PureDP(F(1))


def test_pure_spending_carries_over_into_approx(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_dataset("adult", total_cap=PureDP(F(3)))
    ledger.commit(gated(ledger, charge(epsilon=F(1, 4))), answer(1))
    lost = gated(ledger, charge(epsilon=F(1, 8)))  # in flight: still counted after the switch
    ledger.set_dataset("adult", definition="approx")
    assert ledger.datasets()[0].definition == "approx"
    assert ledger.datasets()[0].total_cap == ApproxDP(F(3), F(0))
    assert ledger.get_budget("alice", "adult") == ApproxDP(F(1), F(0))
    assert ledger.spent("alice", "adult") == ApproxDP(F(3, 8), F(0))
    # δ can now be given and spent; the pure spending still counts.
    ledger.set_budget("alice", "adult", ApproxDP(F(1), F(1, 10**5)))
    with pytest.raises(BudgetExceededError):  # the total cap converted to (3, 0): no δ yet
        ledger.reserve(charge(loss=ApproxDP(F(1, 8), F(1, 10**6))))
    ledger.set_dataset("adult", definition="approx", total_cap=ApproxDP(F(3), F(1, 10**5)))
    ledger.commit(gated(ledger, charge(loss=ApproxDP(F(1, 8), F(1, 10**6)))), answer(2))
    ledger.commit(lost, answer(3))
    assert ledger.spent("alice", "adult") == ApproxDP(F(1, 2), F(1, 10**6))
    assert ledger.total_spent("adult") == ApproxDP(F(1, 2), F(1, 10**6))
    assert ledger.verify() == []
    assert any("switched from pure to approx" in r.detail for r in ledger.audit())


def test_pure_spending_converts_exactly_into_zcdp(ledger: Ledger, charge: Charge) -> None:
    ledger.set_dataset("adult", definition="approx")
    ledger.set_budget("alice", "adult", ApproxDP(F(1), F(1, 10**6)))
    ledger.commit(gated(ledger, charge(epsilon=F(1, 3))), answer(1))
    ledger.set_dataset("adult", definition="zcdp")
    assert ledger.spent("alice", "adult") == ZCDP(F(1, 18))  # ρ = ε²/2, exactly
    assert ledger.get_budget("alice", "adult") == approx_to_zcdp_cap(F(1), F(1, 10**6))
    # An (ε, δ) charge with δ > 0 has no ρ: that dataset cannot switch to zCDP.
    ledger.set_dataset("census", definition="approx")
    ledger.set_budget("bob", "census", ApproxDP(F(1), F(1, 10**5)))
    ledger.commit(gated(ledger, charge("bob", "census", ApproxDP(F(1, 4), F(1, 10**6)))), "{}")
    with pytest.raises(ConfigurationError, match="cannot switch"):
        ledger.set_dataset("census", definition="zcdp")
    assert ledger.spent("bob", "census") == ApproxDP(F(1, 4), F(1, 10**6))


def test_a_delta_cap_on_a_pure_dataset_is_refused_not_dropped(ledger: Ledger) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    with pytest.raises(ConfigurationError, match="drop δ") as caught:
        ledger.set_budget("alice", "adult", ApproxDP(F(10), F(1, 10**5)))
    assert "--definition approx" in str(caught.value)
    assert ledger.get_budget("alice", "adult") == PureDP(F(1))


def test_a_delta_request_on_a_pure_dataset_names_the_command(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(2)))
    with pytest.raises(ConfigurationError) as caught:
        ledger.reserve(charge(loss=ApproxDP(F(1, 2), F(1, 10**6))))
    assert (
        "`dalenius budget set --dataset adult --analyst alice --epsilon 2 --delta 1e-5 "
        "--definition approx`" in str(caught.value)
    )
    assert ledger.spent("alice", "adult") == PureDP(F(0))


# -- accounting definitions -----------------------------------------------------------------


def test_approx_dataset_adds_epsilon_and_delta(ledger: Ledger, charge: Charge) -> None:
    ledger.set_dataset("adult", definition="approx")
    ledger.set_budget("alice", "adult", ApproxDP(F(1), F(1, 10**5)))
    ledger.commit(gated(ledger, charge(loss=ApproxDP(F(1, 4), F(1, 10**6)))), answer(1))
    ledger.commit(gated(ledger, charge(loss=PureDP(F(1, 4)))), answer(2))  # as (ε, 0)
    assert ledger.spent("alice", "adult") == ApproxDP(F(1, 2), F(1, 10**6))
    assert ledger.remaining("alice", "adult") == ApproxDP(F(1, 2), F(9, 10**6))
    with pytest.raises(BudgetExceededError) as caught:
        ledger.reserve(charge(loss=ApproxDP(F(1, 10), F(1, 10**5))))
    assert caught.value.measure == "delta"


def test_zcdp_dataset_converts_pure_losses_and_refuses_approx(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_budget("alice", "adult", ZCDP(F(1, 2)))
    ledger.commit(gated(ledger, charge(loss=PureDP(F(1, 2)))), answer(1))
    assert ledger.spent("alice", "adult") == ZCDP(F(1, 8))
    [entry] = ledger.entries()
    assert (entry.loss, entry.charged) == (PureDP(F(1, 2)), ZCDP(F(1, 8)))
    with pytest.raises(ConfigurationError, match="cannot be charged"):
        ledger.reserve(charge(loss=ApproxDP(F(1, 10), F(1, 10**6))))
    assert ledger.audit()[-1].outcome == "refused"
    assert ledger.spent("alice", "adult") == ZCDP(F(1, 8))


def test_approx_cap_on_a_zcdp_dataset_is_converted_down(ledger: Ledger) -> None:
    ledger.set_dataset("pums", definition="zcdp")
    ledger.set_budget("alice", "pums", ApproxDP(F(1), F(1, 10**6)))
    cap = ledger.get_budget("alice", "pums")
    assert isinstance(cap, ZCDP)
    assert F(17468, 10**6) < cap.rho < F(17469, 10**6)  # (√(L+1) − √L)², L = ln 10⁶


# -- budget periods ---------------------------------------------------------------------------


def test_refreshing_budget_counts_only_the_current_period(
    ledger: Ledger, charge: Charge, clock
) -> None:
    ledger.set_dataset("adult", total_cap=PureDP(F(5, 2)))
    ledger.set_budget("alice", "adult", PureDP(F(1)), refresh_days=30)
    ledger.commit(gated(ledger, charge(epsilon=F(1))), answer(1))
    clock.advance(days=29, hours=23)
    with pytest.raises(BudgetExceededError, match="refreshes at 2024-01-31"):
        ledger.reserve(charge(epsilon=F(1, 10)))
    clock.advance(hours=1)
    assert ledger.spent("alice", "adult") == PureDP(F(0))
    assert ledger.remaining("alice", "adult") == PureDP(F(1))
    ledger.commit(gated(ledger, charge(epsilon=F(1))), answer(2))
    clock.advance(days=30)
    # The total cap never refreshes: 2 of 5/2 are gone for good.
    assert ledger.remaining("alice", "adult") == PureDP(F(1, 2))
    assert ledger.total_spent("adult") == PureDP(F(2))


# -- crashes and recovery --------------------------------------------------------------------


def test_recover_returns_ungated_and_keeps_gated_charged(
    ledger: Ledger, charge: Charge, clock
) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    stale = gated(ledger, charge(epsilon=F(1, 2), idempotency_key="crashed"))
    never = reserve(ledger, charge(epsilon=F(1, 8), key="never-gated"))
    clock.advance(minutes=30)
    fresh = reserve(ledger, charge(epsilon=F(1, 4)))
    recovery = ledger.recover(timedelta(minutes=10))
    assert (recovery.lost, recovery.returned) == ((stale.id,), (never.id,))
    statuses = {e.id: e.status for e in ledger.entries()}
    assert statuses == {stale.id: "lost", never.id: "rolled_back", fresh.id: "pending"}
    assert ledger.spent("alice", "adult") == PureDP(F(3, 4))
    assert [a.entry_id for a in ledger.audit() if a.outcome == "lost"] == [stale.id]
    assert [a.entry_id for a in ledger.audit() if a.outcome == "returned"] == [never.id]
    with pytest.raises(RequestInProgressError, match="lost"):
        ledger.reserve(stale.request)
    # A process that was only slow may still commit a lost charge ...
    ledger.commit(stale, answer(9))
    # ... but one that had not reached the gate can no longer pass it: nothing is read.
    with pytest.raises(InternalError):
        ledger.charge(never)
    assert ledger.failure_counts() == {}
    assert ledger.verify() == []
    with pytest.raises(ConfigurationError):
        ledger.recover(timedelta(minutes=-1))


# -- audit and reading -------------------------------------------------------------------------


def test_record_and_filters(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "census", PureDP(F(1)))
    reserve(ledger, charge("alice", "adult"))
    reserve(ledger, charge("bob", "census"))
    ledger.record(
        principal="carol",
        dataset="adult",
        sql="SELECT name FROM adult",
        outcome="refused",
        detail="SELECT: raw rows cannot be released",
        loss=PureDP(F(1, 10)),
    )
    assert [e.principal for e in ledger.entries(dataset="census")] == ["bob"]
    assert [e.dataset for e in ledger.entries(principal="alice")] == ["adult"]
    carol = ledger.audit(principal="carol")
    assert [(a.outcome, a.sql, a.loss) for a in carol] == [
        ("refused", "SELECT name FROM adult", PureDP(F(1, 10)))
    ]
    seqs = [a.seq for a in ledger.audit()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [b.principal for b in ledger.budgets(dataset="census")] == ["bob"]
    with pytest.raises(ConfigurationError):
        ledger.record(principal="x", dataset="adult", sql="", outcome="", detail="")


def test_request_validation() -> None:
    with pytest.raises(ConfigurationError):
        ChargeRequest("", "adult", PureDP(F(1)), "k", "SELECT 1", "h")
    with pytest.raises(ConfigurationError):
        ChargeRequest("alice", "adult", 0.1, "k", "SELECT 1", "h")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        ChargeRequest("alice", "adult", PureDP(F(1)), "k", "SELECT 1", "h", idempotency_key="")


def test_clock_must_be_timezone_aware(store, charge: Charge) -> None:
    from datetime import datetime

    ledger = store.open(lambda: datetime(2024, 1, 1))
    with pytest.raises(InternalError, match="naive"):
        ledger.set_budget("alice", "adult", PureDP(F(1)))


# -- restarts ------------------------------------------------------------------------------------


def test_budgets_audit_and_cache_survive_a_restart(store, charge: Charge) -> None:
    if not store.persistent:
        assert store.kind == "memory"
        first = store.open()
        first.set_budget("alice", "adult", PureDP(F(1)))
        first.close()
        assert store.open().get_budget("alice", "adult") is None  # by design: memory only
        return
    first = store.open()
    first.set_dataset("adult", total_cap=PureDP(F(3)))
    first.set_budget("alice", "adult", PureDP(F(1)), refresh_days=7)
    request = charge(epsilon=F(1, 4), key="cached-plan")
    entry_id = first.commit(gated(first, request), answer(11))
    pending = reserve(first, charge(epsilon=F(1, 4)))
    audit_before = first.audit()
    first.close()

    second = store.open()
    assert second.get_budget("alice", "adult") == PureDP(F(1))
    assert second.budgets()[0].refresh_days == 7
    assert second.datasets()[0].total_cap == PureDP(F(3))
    assert second.spent("alice", "adult") == PureDP(F(1, 2))  # the pending one stays charged
    assert second.audit() == audit_before
    again = second.reserve(charge(epsilon=F(1, 4), key="cached-plan"))
    assert isinstance(again, CachedAnswer) and (again.entry_id, again.answer) == (
        entry_id,
        answer(11),
    )
    assert {e.id: e.status for e in second.entries()}[pending.id] == "pending"
    assert second.verify() == []
    with pytest.raises(InternalError, match="closed"):
        first.spent("alice", "adult")


# -- the shared answer cache ---------------------------------------------------------------------


def test_two_analysts_get_one_shared_release_counted_once(ledger: Ledger, charge: Charge) -> None:
    ledger.set_dataset("adult", total_cap=PureDP(F(2)))
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "adult", PureDP(F(1)))
    first = gated(ledger, charge("alice", epsilon=F(1, 2), key="same-query"))
    ledger.commit(first, answer(1234))
    second = ledger.reserve(charge("bob", epsilon=F(1, 2), key="same-query"))
    assert isinstance(second, CachedAnswer)
    assert second.shared_from == first.id and second.answer == answer(1234)
    # The release is counted once against the total, and against each analyst's own budget.
    assert ledger.total_spent("adult") == PureDP(F(1, 2))
    assert ledger.spent("alice", "adult") == PureDP(F(1, 2))
    assert ledger.spent("bob", "adult") == PureDP(F(1, 2))
    # What bob has left comes with the shared answer, his own charge for it counted.
    assert second.remaining == ledger.remaining("bob", "adult")
    # Bob asking again is his own repeat: free, same value.
    third = ledger.reserve(charge("bob", epsilon=F(1, 2), key="same-query"))
    assert isinstance(third, CachedAnswer) and third.answer == answer(1234)
    assert third.remaining == ledger.remaining("bob", "adult")
    assert third.shared_from is None and third.entry_id == second.entry_id
    assert ledger.spent("bob", "adult") == PureDP(F(1, 2))
    assert ledger.verify() == []
    entries = {e.id: e for e in ledger.entries(principal="bob")}
    assert entries[second.entry_id].status == "committed"
    assert f"shared answer of entry {first.id}" == entries[second.entry_id].detail


def test_a_shared_answer_still_needs_the_analysts_own_budget(
    ledger: Ledger, charge: Charge
) -> None:
    ledger.set_dataset("adult", total_cap=PureDP(F(2)))
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "adult", PureDP(F(1, 4)))
    ledger.commit(gated(ledger, charge("alice", epsilon=F(1, 2), key="q")), answer(7))
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge("bob", epsilon=F(1, 2), key="q"))
    with pytest.raises(BudgetExceededError):
        ledger.reserve(charge("carol", epsilon=F(1, 2), key="q"))  # no budget at all
    assert ledger.total_spent("adult") == PureDP(F(1, 2))


def test_a_shared_answer_fits_even_when_the_total_is_spent(ledger: Ledger, charge: Charge) -> None:
    ledger.set_dataset("adult", total_cap=PureDP(F(1, 2)))
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "adult", PureDP(F(1)))
    ledger.commit(gated(ledger, charge("alice", epsilon=F(1, 2), key="q")), answer(7))
    with pytest.raises(BudgetExceededError, match="total cap"):
        ledger.reserve(charge("bob", epsilon=F(1, 2), key="other"))
    shared = ledger.reserve(charge("bob", epsilon=F(1, 2), key="q"))  # no new release
    assert isinstance(shared, CachedAnswer) and shared.answer == answer(7)


def test_without_a_total_cap_answers_are_not_shared(ledger: Ledger, charge: Charge) -> None:
    ledger.set_budget("alice", "adult", PureDP(F(1)))
    ledger.set_budget("bob", "adult", PureDP(F(1)))
    ledger.commit(gated(ledger, charge("alice", epsilon=F(1, 2), key="q")), answer(7))
    assert isinstance(ledger.reserve(charge("bob", epsilon=F(1, 2), key="q")), Reservation)
