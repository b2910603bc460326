"""The data gate: the only path from a session to an engine for private tables.

Everything before the gate is decided from the query text, the catalog's declared (public)
metadata and the ledger: parsing, validation, planning, the budget check. A refusal there returns
the reservation. At the gate the reservation becomes a durable charge (:meth:`Ledger.charge`,
synced) *before* the first engine call that binds, plans or reads a private relation — DuckDB
already reads Parquet statistics and samples CSV rows when it binds a view, so even creating the
relation is behind the gate. After the gate every outcome is charged: an answer, an engine error,
a time limit, a cancellation, a client that went away, a crash. Nothing moves back.

A failure after the gate is reported as one fixed outcome, :class:`~dalenius.core.errors.
EvaluationFailed`, whose text, code and HTTP status never change: the engine's own message — which
may quote a row count or a value — goes to the custodian's audit trail only, with a ``WARNING`` log
line as the alert. Were failures refunded, or told apart, an analyst could ask "does this query
fail on the data?" again and again for free.

Typical use (what :class:`~dalenius.engine.session.Session` does; a query's reservation is
charged by the reserve's own transaction, ``reserve(request, charge=True)``, so its passage only
opens; a reserved release is charged here)::

    with gate.passage(reservation) as engine:   # durable charge first
        rows = engine.fetch(sql)                # then, and only then, the engine
        ...                                     # noise, commit: still inside
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

from dalenius.core.catalog import Table
from dalenius.core.errors import (
    InternalError,
    PostGateOutcome,
    post_gate_error,
)
from dalenius.executors.base import Executor, Row
from dalenius.ledger.base import Ledger, Reservation

_log = logging.getLogger("dalenius.engine.gate")

ALERT: Final = "request failed after the data gate"
"""The start of the custodian's alert (a ``WARNING`` on the ``dalenius.engine.gate`` logger)."""


class GatedEngine:
    """The engine as seen through an open passage; unusable once the passage closes.

    Only :meth:`DataGate.passage` creates one, after the reservation's charge is durable.
    """

    def __init__(self, executor: Executor, reservation: Reservation) -> None:
        self._executor: Executor | None = executor
        self.reservation = reservation

    def _engine(self) -> Executor:
        if self._executor is None:
            raise InternalError("the data gate's passage is closed; no engine call may follow.")
        return self._executor

    def prepare(self, table: Table) -> None:
        """Make a private table queryable (may read its data: behind the gate)."""
        self._engine().prepare(table)

    def fetch(self, sql: str, reads: Sequence[tuple[str, Sequence[str]]] = ()) -> list[Row]:
        """Run exact SQL over private tables (``reads``: see :meth:`Executor.scoped`)."""
        engine = self._engine()
        return engine.fetch(engine.scoped(sql, reads) if reads else sql)

    def close(self) -> None:
        """End the passage: any further call is a bug."""
        self._executor = None


class DataGate:
    """Charges a reservation durably, then lets the engine run; every later outcome is charged.

    Args:
        ledger: where the charge is made durable before any engine call.
        executor: the engine holding the private tables.
    """

    def __init__(self, ledger: Ledger, executor: Executor) -> None:
        self.ledger = ledger
        self._executor = executor

    @contextmanager
    def passage(self, reservation: Reservation) -> Iterator[GatedEngine]:
        """Charge ``reservation`` at the gate, then yield the engine.

        A reservation made with ``reserve(request, charge=True)`` is already charged, durably, by
        the reserve's own transaction. Otherwise, if the charge cannot be made, the reservation
        is returned (no engine call happened) and the error propagates. Any exception inside the block is recorded as a failure after the
        gate — the charge stays — and re-raised as :class:`EvaluationFailed`; an interruption
        (``KeyboardInterrupt``, a cancelled task) is charged too, then propagates as it is.
        """
        if not reservation.charged:  # else the reserve's own transaction passed the gate
            self._charge(reservation)
        engine = GatedEngine(self._executor, reservation)
        try:
            yield engine
        except Exception as exc:
            outcome = self.failed(reservation, exc)
            raise post_gate_error(outcome) from None
        except BaseException as exc:
            self.failed(reservation, exc)
            raise
        finally:
            engine.close()

    def _charge(self, reservation: Reservation) -> None:
        try:
            self.ledger.charge(reservation)
        except BaseException as exc:
            reason = f"the data gate could not record the charge: {type(exc).__name__}: {exc}"
            try:
                returned = self.ledger.release(reservation, reason)
            except BaseException:
                # The ledger is unreachable: the reservation stays held (pending, or charged if
                # the gate's write did land); `ledger recover` settles it later. No engine call.
                _log.warning(
                    "reservation %s: the data gate could not record: %s", reservation.id, exc
                )
                raise exc from None
            if returned:
                raise
            # The charge did become durable (here, or by a deadline's miss) before the error: the
            # request is past the gate.
            outcome = self.failed(reservation, exc)
            raise post_gate_error(outcome) from None

    def close_with(self, reservation: Reservation, detail: str, outcome: PostGateOutcome) -> None:
        """End a request with a post-gate ``outcome`` from outside its passage (a missed deadline).

        The reservation is charged here if its passage has not reached the gate yet (that
        passage's own charge then fails, and it never calls the engine).
        """
        if not reservation.charged:
            with contextlib.suppress(InternalError):  # already past the gate
                self.ledger.charge(reservation)
        self._record(reservation, detail, outcome)

    def failed(self, reservation: Reservation, exc: BaseException) -> PostGateOutcome:
        """Record a failure after the gate (charged), alert the custodian, never raise.

        Returns the outcome on record: ``FAILED``, or the one recorded first (a missed deadline).
        """
        return self._record(reservation, f"{type(exc).__name__}: {exc}", PostGateOutcome.FAILED)

    def _record(
        self, reservation: Reservation, detail: str, outcome: PostGateOutcome
    ) -> PostGateOutcome:
        request = reservation.request
        try:
            recorded = self.ledger.fail(reservation, detail, outcome)
        except BaseException as error:  # the outcome must stay the fixed one, whatever happens
            _log.warning(
                "%s: entry %s could not be marked failed (%s); it stays charged",
                ALERT,
                reservation.id,
                type(error).__name__,
            )
            return outcome
        if recorded is not outcome:
            return recorded  # recorded before (a missed deadline): already alerted
        _log.warning(
            "%s: dataset %r, analyst %r, entry %s (%s); the engine's message is in the audit trail",
            ALERT,
            request.dataset,
            request.principal,
            reservation.id,
            outcome.code,
        )
        return outcome
