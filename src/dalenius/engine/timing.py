"""Constant-time release: every outcome after the data gate leaves at ``start + T``.

``start`` is the moment the query's plan is ready, just before its loss is reserved: everything
before it reads only the query text, the catalog and the ledger, never the data.

``T`` is the dataset's calibrated deadline for the query's plan class (:func:`plan_class`), fixed
before the data gate from public facts only (:mod:`dalenius.core.deadlines`). The work after the
gate — engine, noise, ledger commit, post-processing — runs in a worker thread while the caller's
thread waits for the deadline, so the caller's slot (a gateway worker) stays taken until ``T``
whatever happens:

* finished early, with an answer or a failure: the outcome is held until ``T`` (sleep until
  ``T − 200 µs``, then spin on the monotonic clock, because sleeping alone overshoots by a
  scheduler tick);
* not finished at ``T``: the fixed ``deadline`` outcome leaves at ``T``, the engine is interrupted,
  and the loss stays charged.

A miss releases one data-dependent bit, so the guarantee becomes (ε, δ + (1+e^ε)·δ_t) where δ_t
bounds the probability of a miss; calibration makes δ_t small empirically, it does not prove it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from dalenius.plan.nodes import DPQuery, Filter, Join, Project, Relation, SemiJoin, UnitAggregate

T = TypeVar("T")

SPIN_SECONDS = 200e-6
"""The last stretch before a deadline is spun, not slept: sleep overshoots by up to a tick."""


def plan_class(plan: DPQuery) -> str:
    """The plan class a query's deadline is calibrated for (public: read from the plan only).

    The most expensive feature decides: a quantile (or MIN/MAX, also a private selection over
    histogram bins), then a join, then a GROUP BY; otherwise a scan.
    """
    if any(m.kind == "histogram" for m in plan.measurements):
        return "quantile"
    if _has_join(plan.query.relation):
        return "join"
    if plan.query.group_by:
        return "group_by"
    return "scan"


def _has_join(relation: Relation) -> bool:
    match relation:
        case Join() | SemiJoin():
            return True
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c):
            return _has_join(c)
    return False


def wait_until(at: float) -> None:
    """Return when the monotonic clock reaches ``at``: sleep, then spin the last 200 µs."""
    while True:
        left = at - time.monotonic()
        if left <= SPIN_SECONDS:
            break
        time.sleep(left - SPIN_SECONDS)
    while time.monotonic() < at:
        pass


class DeadlineMissed(Exception):
    """Raised by :meth:`Deadline.run` when the work was not finished at the deadline."""


@dataclass
class _State(Generic[T]):
    done: bool = False
    claimed: bool = False
    missed: bool = False
    value: T | None = None
    error: BaseException | None = None


class Deadline:
    """The release deadline of one query.

    Args:
        arrival: the monotonic time the query arrived.
        seconds: ``T``, the dataset's deadline for the query's plan class.
        plan_class: that class (for the audit trail).
    """

    def __init__(self, arrival: float, seconds: float, plan_class: str) -> None:
        self.arrival = arrival
        self.seconds = seconds
        self.plan_class = plan_class
        self._lock = threading.Lock()

    @property
    def at(self) -> float:
        """The monotonic time every outcome leaves."""
        return self.arrival + self.seconds

    def run(
        self,
        work: Callable[[Callable[[], bool]], T],
        *,
        on_miss: Callable[[], None],
        interrupt: Callable[[int], None],
    ) -> T:
        """Run ``work`` in a worker thread; return its value, or raise its error, at the deadline.

        ``work`` receives ``claim``: it calls ``claim()`` just before it makes its outcome durable
        (the ledger commit). ``claim()`` returns ``False`` once the deadline was declared missed —
        the work must then stop without recording anything — and otherwise guarantees that the
        outcome is awaited even if the commit itself crosses the deadline.

        On a miss, ``on_miss`` runs first (it charges the loss durably, so that nothing the
        interrupted work does afterwards can return it), then ``interrupt`` is called with the
        worker thread's id (the engine stops that thread's query, and no other).

        Raises:
            DeadlineMissed: at the deadline, if ``work`` had not finished (nor claimed).
        """
        if time.monotonic() >= self.at:
            # Late before the work starts (the ledger's synced write took the time): a miss,
            # decided without starting the work, so the outcome does not depend on how soon a
            # worker thread would have reached its claim.
            on_miss()
            raise DeadlineMissed(self.plan_class)
        state: _State[T] = _State()
        finished = threading.Event()

        def claim() -> bool:
            with self._lock:
                if state.missed:
                    return False
                state.claimed = True
                return True

        def worker() -> None:
            try:
                value = work(claim)
                with self._lock:
                    state.value = value
                    state.done = True
            except BaseException as exc:  # every outcome, held until the deadline
                with self._lock:
                    state.error = exc
                    state.done = True
            finally:
                finished.set()

        thread = threading.Thread(target=worker, name="dalenius-release")
        thread.start()
        finished.wait(max(0.0, self.at - time.monotonic() - SPIN_SECONDS))
        with self._lock:
            if not state.done and not state.claimed:
                state.missed = True
        if state.missed:
            try:
                on_miss()
            finally:
                interrupt(thread.ident or 0)
                wait_until(self.at)
            raise DeadlineMissed(self.plan_class)
        finished.wait()
        wait_until(self.at)
        if state.error is not None:
            raise state.error
        return state.value  # type: ignore[return-value]
