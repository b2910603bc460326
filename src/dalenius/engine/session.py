"""A session: one analyst, one catalog, one ledger — SQL in, budgeted private answers out.

The flow of :meth:`Session.query`, in order:

1. parse and validate the SQL against the catalog (refusals cost nothing; an audit line is kept);
2. compile the DP plan: measurements, sensitivities, the ε split — the loss is now known;
3. recompute the loss bottom-up from the mechanisms the release will use
   (:func:`dalenius.engine.noise.check_reserved`): a plan that would spend more than it asks to
   reserve is a defect, refused with an audit line before anything is reserved;
4. reserve the loss and pass the data gate (:mod:`dalenius.engine.gate`) in one durable ledger
   transaction (``reserve(request, charge=True)``): refused if any budget would be exceeded (an
   identical earlier request is answered from the ledger's record at no cost); otherwise the
   charge is synced before any engine call touches a private table — from here on every
   outcome is charged. Everything that can refuse the query comes before this step;
5. compute the exact, clipped aggregates inside the engine;
6. draw noise from the OS generator with those mechanisms (:mod:`dalenius.engine.noise`);
7. commit the ledger entry (it survives a crash; the next synced charge flushes it to disk) —
   only then does the answer leave;
8. post-process: AVG from SUM and COUNT, error bars, formatting.

Steps 1–4 read only the query, the catalog, the ledger and public tables. Any failure in steps
5–8 is the one fixed :class:`~dalenius.core.errors.EvaluationFailed` outcome, charged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, partial
from pathlib import Path
from typing import Any, TypeVar

from dalenius.core.catalog import Catalog, Table, load_catalog
from dalenius.core.deadlines import current_deadlines
from dalenius.core.errors import (
    ConfigurationError,
    DaleniusError,
    DeadlineError,
    InternalError,
    InvalidLossError,
    PostGateOutcome,
    PrivacyRefusal,
    QueryError,
    UserError,
)
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP, as_fraction
from dalenius.core.rng import system_random
from dalenius.engine import collector
from dalenius.engine.gate import DataGate, GatedEngine
from dalenius.engine.noise import (
    LossDefect,
    Mechanisms,
    Noisy,
    add_noise,
    build_mechanisms,
    check_reserved,
)
from dalenius.engine.plans import PLANS, SALT_LIMIT, SaltedTemplate, learn
from dalenius.engine.release import exact_values, post_process
from dalenius.engine.releases import (
    audit_refusal,
    fetch_release,
    run_density,
    run_hierarchy,
    run_onthemap,
    run_synthetic,
)
from dalenius.engine.result import (
    DensityResult,
    HierarchyResult,
    OnTheMapResult,
    Result,
    SyntheticResult,
)
from dalenius.engine.timing import Deadline, DeadlineMissed, plan_class
from dalenius.executors.base import Executor
from dalenius.executors.factory import executor_for
from dalenius.ledger import CachedAnswer, ChargeRequest, Ledger, Reservation, open_ledger
from dalenius.plan.accuracy import (
    Allocation,
    BatchPlan,
    Targets,
    allocate,
    allocate_batch,
    parse_targets,
)
from dalenius.plan.compile import to_dp
from dalenius.plan.explain import Explanation, explain
from dalenius.plan.nodes import DPQuery, Query
from dalenius.plan.rewrite import Context, rewrite, unmeasured
from dalenius.releases.density import DensityRelease, DensityRequest, plan_density
from dalenius.releases.hierarchy import HierarchyRelease, HierarchyRequest, plan_hierarchy
from dalenius.releases.onthemap import OnTheMapRequest, plan_onthemap
from dalenius.releases.synthetic import SyntheticRelease, SynthRequest, plan_synthetic
from dalenius.sql.to_plan import Resolved, to_query
from dalenius.sql.to_sql import ExactSQL, exact_queries
from dalenius.sql.validate import located

T = TypeVar("T")

DEFAULT_CONFIDENCE = 0.95
DEFAULT_ANALYST = "analyst"
ANSWER_FORMAT = 2
MAX_JOIN_MULTIPLICITY = 1000
"""A public table may repeat a join key at most this often (each repeat multiplies the noise)."""

_alerts = logging.getLogger("dalenius.alerts")


@dataclass(frozen=True)
class Prepared:
    """A query ready to release: its DP plan, its exact SQL for this executor, the tables it
    reads and (accuracy first) the ε split chosen. Built by :meth:`Session.prepare`; reads no
    private data and spends nothing.

    The exact SQL is written when first read (and then kept): a caller that needs only the plan,
    such as the gateway checking a query's loss before answering it, does not pay for writing it.
    """

    plan: DPQuery
    write: Callable[[], ExactSQL] = field(repr=False, compare=False)
    tables: tuple[Table, ...]
    allocation: Allocation | None = None

    @cached_property
    def exact(self) -> ExactSQL:
        """The exact SQL of :attr:`plan` for this executor (with a fresh hash key if it bounds
        a privacy unit).
        """
        return self.write()


class Session:
    """An analyst's connection to one catalog under a budget kept in a ledger.

    Create one with :func:`dalenius.connect`. Thread-safe: the ledger serialises budget updates
    and the executor serialises engine access.
    """

    def __init__(
        self,
        catalog: Catalog,
        *,
        ledger: Ledger,
        executor: Executor,
        analyst: str = DEFAULT_ANALYST,
        confidence: float = DEFAULT_CONFIDENCE,
    ) -> None:
        self.catalog = catalog
        self.ledger = ledger
        self.executor = executor
        self.analyst = analyst
        self.confidence = _confidence(confidence)
        self.gate = DataGate(ledger, executor)
        """The only path from this session to the engine for private tables."""

    @property
    def dataset(self) -> str:
        """The dataset name budgets are kept under (the catalog's name)."""
        return self.catalog.name

    # -- public API -----------------------------------------------------------------------------

    def explain(
        self,
        sql: str,
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
        target_error: Any = None,
        target_relative: Any = None,
        expected: Any = None,
    ) -> Explanation:
        """Show the plan, sensitivities, ε split and expected error; reads no data, spends nothing.

        (Reading no data: a join with a public table measures how many rows of the public table
        share a key — public data — to know the sensitivity.)

        Instead of ``epsilon``, a target may be given (accuracy first, see ``docs/accuracy.md``):
        ``target_error`` (a half-width for every COUNT and SUM, or a mapping by output column),
        or ``target_relative`` with the ``expected`` magnitude; the smallest ε meeting it at
        ``confidence`` is computed and shown.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        targets = parse_targets(target_error, target_relative, expected)
        prepared = self.prepare(sql, epsilon, delta, targets=targets, confidence=conf)
        return explain(prepared.plan, conf, prepared.exact.all(), accuracy=prepared.allocation)

    def plan(
        self,
        sql: str,
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
        target_error: Any = None,
        target_relative: Any = None,
        expected: Any = None,
    ) -> DPQuery:
        """The DP plan :meth:`explain` shows (its loss, measurements), refused as it would be.

        Takes :meth:`explain`'s arguments. Neither the exact SQL nor the expected errors are
        worked out: for a caller that checks a query's loss before answering it (the gateway),
        at a small part of explain's cost.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        targets = parse_targets(target_error, target_relative, expected)
        return self.prepare(sql, epsilon, delta, targets=targets, confidence=conf).plan

    def query(
        self,
        sql: str,
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
        idempotency_key: str | None = None,
        target_error: Any = None,
        target_relative: Any = None,
        expected: Any = None,
    ) -> Result:
        """Answer ``sql`` privately, spending ``epsilon`` (and ``delta``) from this analyst's budget.

        ``epsilon`` and ``delta`` may instead be given in the SQL, with BigQuery's
        ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = .., delta = ..)``. ``delta`` is needed
        only for GROUP BY keys without a public list. Instead of ``epsilon``, give a target
        (``target_error``, or ``target_relative`` with ``expected``; see :meth:`explain`): the
        smallest ε meeting it is spent, exactly.

        Raises:
            QueryError: the SQL cannot be answered (nothing spent).
            BudgetExceededError: the loss exceeds what remains (nothing spent).
            EvaluationFailed: the request failed after the data gate; the loss was charged. Its
                text never changes; the engine's message is in the custodian's audit trail.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        target = (target_error, target_relative, expected)
        if not self.catalog.constant_time:
            return self._query(sql, epsilon, delta, conf, idempotency_key, target)
        # From arrival, not only in the release window: where an automatic collection lands
        # depends on what earlier answers allocated, so it would put their data into the
        # planning time before the clock starts (engine/collector.py).
        collector.pause()
        try:
            return self._query(sql, epsilon, delta, conf, idempotency_key, target)
        finally:
            collector.resume()

    def _query(
        self,
        sql: str,
        epsilon: Any,
        delta: Any,
        conf: float,
        idempotency_key: str | None,
        target: tuple[Any, Any, Any],
    ) -> Result:
        """Plan ``sql`` (a refusal is audited and raised), then reserve and release it."""
        try:
            targets = parse_targets(*target)
            prepared = self.prepare(sql, epsilon, delta, targets=targets, confidence=conf)
            _write_now(prepared, sql)
            # The release clock starts once the plan is ready: parsing and planning read only
            # the query text and the catalog, and take as long as a new text needs.
            deadline = self._deadline(prepared.plan, time.monotonic())
        except UserError as exc:
            self._audit(sql, "refused", exc)
            raise
        return self._answer(sql, prepared, conf, idempotency_key, deadline)

    def _answer(
        self,
        sql: str,
        prepared: Prepared,
        conf: float,
        idempotency_key: str | None,
        deadline: Deadline | None,
    ) -> Result:
        """Reserve the plan's loss, then release (within ``deadline`` in constant-time mode)."""
        plan = prepared.plan
        request = ChargeRequest(
            principal=self.analyst,
            dataset=self.dataset,
            loss=plan.loss,
            request_key=self._request_key(prepared),
            sql=sql,
            plan_hash=plan.fingerprint(),
            idempotency_key=idempotency_key,
        )
        mechanisms = self._audited(request, plan)
        # reserve() writes the audit lines itself, also when it refuses for lack of budget. With
        # charge=True the reservation passes the data gate in the same synced transaction: the
        # only refusals left (budget, idempotency) are decided inside it.
        outcome = self.ledger.reserve(request, charge=True)
        if isinstance(outcome, CachedAnswer):
            shared = outcome.shared_from is not None
            return self._result(prepared, _decode(outcome.answer), conf, outcome.entry_id, shared)
        reservation = outcome
        if deadline is None:
            return self._release(reservation, prepared, mechanisms, conf, lambda: True)
        try:
            return deadline.run(
                lambda claim: self._release(reservation, prepared, mechanisms, conf, claim),
                on_miss=lambda: self._missed(reservation, deadline),
                interrupt=self.executor.interrupt,
            )
        except DeadlineMissed:
            raise DeadlineError() from None

    def _audited(self, request: ChargeRequest, plan: DPQuery) -> Mechanisms:
        """The mechanisms of the release, once their loss, recomputed bottom-up, fits what the
        request will reserve; otherwise the defect is audited and raised, and nothing is
        reserved. Decided before the ledger is asked, from the plan alone.
        """
        try:
            mechanisms = build_mechanisms(plan)
            check_reserved(plan, mechanisms, request.loss)
        except LossDefect as exc:
            self.ledger.record(
                principal=request.principal,
                dataset=request.dataset,
                sql=request.sql,
                outcome="refused",
                detail=f"defect: {exc}",
                plan_hash=request.plan_hash,
                loss=request.loss,
            )
            _alerts.error("dataset %r: %s", self.dataset, exc)
            raise
        return mechanisms

    def _release(
        self,
        reservation: Reservation,
        prepared: Prepared,
        mechanisms: Mechanisms,
        conf: float,
        claim: Callable[[], bool],
    ) -> Result:
        """Everything after the reservation: the data gate, engine, noise, commit, post-processing.

        ``claim`` (constant-time mode) says whether the outcome may still be made durable; once
        the deadline was declared missed, the miss path has recorded the outcome.
        """
        plan = prepared.plan
        try:
            with self.gate.passage(reservation) as engine:
                noisy = self._evaluate(engine, prepared, mechanisms)
                if not claim():
                    raise DeadlineMissed(plan_class(plan))
                entry_id = self.ledger.commit(reservation, _encode(noisy))
                return self._result(prepared, noisy, conf, entry_id, left=reservation.remaining)
        finally:
            if self.catalog.constant_time:
                # Inside the release window, whatever the outcome: see engine/collector.py.
                collector.sweep()

    def _result(
        self,
        prepared: Prepared,
        noisy: Noisy,
        conf: float,
        entry_id: str,
        shared: bool | None = None,
        *,
        left: Loss | None = None,
    ) -> Result:
        """The analyst's result from the released values (post-processing, free).

        ``shared`` is given for an answer from the ledger's record (``cached``): whether another
        analyst's release was shared. ``left`` is the remaining budget the reservation's
        transaction saw with this charge counted (read from the ledger when not given).
        """
        return Result.from_answer(
            post_process(prepared.plan, noisy, conf),
            loss=prepared.plan.loss,
            remaining=self.remaining() if left is None else left,
            confidence=conf,
            cached=shared is not None,
            entry_id=entry_id,
            shared=bool(shared),
            accuracy=_accuracy(prepared),
        )

    def _deadline(self, plan: DPQuery, arrival: float) -> Deadline | None:
        """The release deadline of ``plan`` in constant-time mode (``None`` otherwise).

        Decided before the data gate from the catalog and the plan only.
        """
        if not self.catalog.constant_time:
            return None
        deadlines = current_deadlines(self.catalog, self.executor.engine_version)
        kind = plan_class(plan)
        seconds = deadlines.seconds(kind)
        if seconds is None:
            raise ConfigurationError(
                f"the dataset {self.dataset!r} has no calibrated deadline for {kind} queries.",
                why="in constant-time mode every answer leaves at a deadline fixed in advance.",
                fix="the custodian runs `dalenius calibrate` on a catalog whose tables allow "
                f"{kind} queries.",
            )
        return Deadline(arrival, seconds, kind)

    def _missed(self, reservation: Reservation, deadline: Deadline) -> None:
        """A missed deadline: the loss stays charged, the miss is audited and alerted."""
        detail = (
            f"release deadline of {deadline.seconds * 1000:.1f} ms missed "
            f"(plan class {deadline.plan_class})"
        )
        # A miss is a post-gate outcome even if the worker has not reached the gate yet: the
        # charge is made here, and the worker's own gate then refuses to call the engine.
        self.gate.close_with(reservation, detail, PostGateOutcome.DEADLINE)
        _alerts.warning("dataset %r: %s", self.dataset, detail)

    def plan_batch(
        self,
        queries: Sequence[Mapping[str, Any]],
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
    ) -> BatchPlan:
        """Split ε optimally over several queries with error targets; reads no data.

        Each query is a mapping with ``sql`` and its target (``target_error``, or
        ``target_relative`` with ``expected``). Without ``epsilon``, every query gets the smallest
        ε meeting its targets (the smallest total). With ``epsilon``, the batch spends at most
        that, and every target is scaled by the smallest common factor that fits: the worst
        error relative to its target is minimised. Run it with :meth:`query_batch`.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        budget = None if epsilon is None else as_fraction(epsilon, "epsilon")
        plans = []
        for i, item in enumerate(queries):
            sql = str(item.get("sql", ""))
            targets = parse_targets(
                item.get("target_error"), item.get("target_relative"), item.get("expected")
            )
            if targets is None:
                raise ConfigurationError(
                    f"query {i + 1} of the batch has no target.",
                    fix="give each query target_error (or target_relative with expected).",
                )
            plans.append((sql, self._reference(sql, delta), targets))
        return allocate_batch(plans, conf, budget)

    def query_batch(
        self, batch: BatchPlan, *, delta: Any = None, confidence: float | None = None
    ) -> list[Result]:
        """Answer every query of a :meth:`plan_batch` with its share of ε (each charged as usual)."""
        conf = _confidence(confidence if confidence is not None else self.confidence)
        if batch.items and conf != batch.items[0].allocation.confidence:
            raise ConfigurationError(
                "the batch was planned at another confidence.",
                fix="plan and run the batch at the same confidence.",
            )
        return [
            self.query(
                item.sql,
                delta=delta,
                confidence=conf,
                target_error=dict(item.targets.by_output) or item.targets.everywhere,
            )
            for item in batch.items
        ]

    def density(
        self,
        table: str,
        columns: str | Sequence[str],
        *,
        bandwidth: float,
        epsilon: Any = None,
        delta: Any = None,
        rho: Any = None,
        points: int | None = None,
        grid: Sequence[Sequence[float]] | None = None,
        where: str | None = None,
        confidence: float | None = None,
        idempotency_key: str | None = None,
    ) -> DensityResult:
        """Release the kernel density curve of one column (or the surface of two), privately.

        The curve is the Gaussian kernel density estimate with ``bandwidth`` (the column's units)
        on a public grid (``points`` per axis over the column's bounds, or an explicit ``grid``),
        released whole by the Gaussian-process mechanism, with pointwise and simultaneous bands.
        It needs ``epsilon`` and ``delta`` on an (ε, δ) dataset, or ``rho`` on a zCDP one: the
        noise is Gaussian, which no pure-ε budget can pay for. See ``docs/releases/density.md``.

        Raises:
            QueryError: the table, columns, filter or grid cannot be used (nothing spent).
            BudgetExceededError: the loss exceeds what remains (nothing spent).
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        cols = (columns,) if isinstance(columns, str) else tuple(columns)
        request = DensityRequest(
            table=table,
            columns=cols,
            bandwidth=bandwidth,
            points=points,
            grid=tuple(tuple(float(v) for v in axis) for axis in grid)
            if grid is not None
            else None,
            where=where,
        )
        text = f"DENSITY({', '.join(cols)}) FROM {table}"
        try:
            eps = as_fraction(epsilon, "epsilon") if epsilon is not None else None
            dlt = as_fraction(delta, "delta", allow_zero=True) if delta is not None else None
            rh = as_fraction(rho, "rho") if rho is not None else None
            plan = plan_density(self.catalog, request, epsilon=eps, delta=dlt, rho=rh)
        except UserError as exc:
            audit_refusal(self, text, exc)
            raise
        release, cached, entry_id = run_density(
            self, plan, confidence=conf, idempotency_key=idempotency_key
        )
        return DensityResult(
            release=release,
            loss=plan.loss,
            remaining=self.remaining(),
            cached=cached,
            entry_id=entry_id,
        )

    def hierarchy(
        self,
        table: str,
        levels: Sequence[str],
        *,
        epsilon: Any = None,
        delta: Any = None,
        rho: Any = None,
        where: str | None = None,
        split: Sequence[float] | None = None,
        confidence: float | None = None,
        idempotency_key: str | None = None,
    ) -> HierarchyResult:
        """Release noisy counts at every level of a hierarchy of key columns, made consistent.

        ``levels`` are columns with public key lists, coarsest first (``["state", "education"]``).
        Every node (the total, each state, each state × education) is measured; the result holds
        the noisy counts, the least-squares consistent estimates and non-negative integers that
        add up exactly, each with its interval. Pure ε (``epsilon`` alone) uses discrete Laplace
        noise; ``epsilon`` and ``delta``, or ``rho``, discrete Gaussian. ``split`` weights the
        levels (root first). See ``docs/releases/hierarchy.md``.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        request = HierarchyRequest(
            table=table,
            levels=tuple(levels),
            where=where,
            split=tuple(float(w) for w in split) if split is not None else None,
        )
        text = f"HIERARCHY({' > '.join(levels)}) FROM {table}"
        try:
            eps = as_fraction(epsilon, "epsilon") if epsilon is not None else None
            dlt = as_fraction(delta, "delta", allow_zero=True) if delta is not None else None
            rh = as_fraction(rho, "rho") if rho is not None else None
            plan = plan_hierarchy(self.catalog, request, epsilon=eps, delta=dlt, rho=rh)
        except UserError as exc:
            audit_refusal(self, text, exc)
            raise
        release, cached, entry_id = run_hierarchy(
            self, plan, confidence=conf, idempotency_key=idempotency_key
        )
        return HierarchyResult(
            release=release,
            loss=plan.loss,
            remaining=self.remaining(),
            cached=cached,
            entry_id=entry_id,
        )

    def synthesize(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        *,
        epsilon: Any = None,
        delta: Any = None,
        rho: Any = None,
        bins: int = 10,
        rows: int | None = None,
        where: str | None = None,
        idempotency_key: str | None = None,
    ) -> SyntheticResult:
        """Release synthetic rows of ``table`` with MST (every column with public keys or bounds
        by default; numeric columns in ``bins`` bins). Needs ``epsilon`` and ``delta``, or
        ``rho``. The same request gives back the same rows at no cost. See
        ``docs/releases/synthetic.md``.
        """
        request = SynthRequest(
            table=table,
            columns=tuple(columns) if columns is not None else None,
            bins=bins,
            rows=rows,
            where=where,
        )
        text = f"SYNTHETIC({', '.join(columns or ['*'])}) FROM {table}"
        try:
            eps = as_fraction(epsilon, "epsilon") if epsilon is not None else None
            dlt = as_fraction(delta, "delta", allow_zero=True) if delta is not None else None
            rh = as_fraction(rho, "rho") if rho is not None else None
            plan = plan_synthetic(self.catalog, request, epsilon=eps, delta=dlt, rho=rh)
        except UserError as exc:
            audit_refusal(self, text, exc)
            raise
        release, cached, entry_id = run_synthetic(self, plan, idempotency_key=idempotency_key)
        return SyntheticResult(
            release=release,
            loss=plan.loss,
            remaining=self.remaining(),
            cached=cached,
            entry_id=entry_id,
        )

    def onthemap(
        self,
        table: str,
        *,
        origin: str,
        destination: str,
        epsilon: Any = None,
        delta: Any = None,
        prior: Any = None,
        per_destination: int | None = None,
        count_epsilon: Any = None,
        where: str | None = None,
        idempotency_key: str | None = None,
    ) -> OnTheMapResult:
        """Release synthetic origin–destination rows with OnTheMap's Multinomial–Dirichlet
        synthesizer (pure ε).

        ``origin`` and ``destination`` are columns with public key lists. Each destination gets
        its noisy row count (``count_epsilon``, a tenth of ε by default), at most
        ``per_destination``, of synthetic origins drawn from the posterior under ``prior``
        pseudo-counts per origin; give ``per_destination`` (the prior follows from ε), ``prior``
        (the rows per destination follow), or both (checked). The same request gives back the
        same rows at no cost. See ``docs/releases/onthemap.md``.
        """
        text = f"ONTHEMAP({origin} -> {destination}) FROM {table}"
        try:
            eps = as_fraction(epsilon, "epsilon") if epsilon is not None else None
            dlt = as_fraction(delta, "delta", allow_zero=True) if delta is not None else None
            request = OnTheMapRequest(
                table=table,
                origin=origin,
                destination=destination,
                prior=as_fraction(prior, "prior") if prior is not None else None,
                per_destination=_whole(per_destination, "per_destination"),
                count_epsilon=as_fraction(count_epsilon, "count_epsilon")
                if count_epsilon is not None
                else None,
                where=where,
            )
            plan = plan_onthemap(self.catalog, request, epsilon=eps, delta=dlt)
        except UserError as exc:
            audit_refusal(self, text, exc)
            raise
        release, cached, entry_id = run_onthemap(self, plan, idempotency_key=idempotency_key)
        return OnTheMapResult(
            release=release,
            loss=plan.loss,
            remaining=self.remaining(),
            cached=cached,
            entry_id=entry_id,
        )

    def release(
        self, entry_id: str, *, confidence: float | None = None
    ) -> DensityResult | HierarchyResult | SyntheticResult | OnTheMapResult:
        """A release this analyst already received (density, hierarchy or synthetic rows), again,
        by its ledger entry id (``result.entry_id``, or the first 8 or more characters of it) —
        the same values, at no cost.

        Raises:
            QueryError: no committed release of this analyst has that id on this dataset, or the
                catalog changed so that it cannot be rebuilt exactly (nothing spent either way).
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        release, loss, found = fetch_release(self, entry_id, confidence=conf)
        kind: type[DensityResult | HierarchyResult | SyntheticResult | OnTheMapResult]
        if isinstance(release, DensityRelease):
            kind = DensityResult
        elif isinstance(release, HierarchyRelease):
            kind = HierarchyResult
        elif isinstance(release, SyntheticRelease):
            kind = SyntheticResult
        else:
            kind = OnTheMapResult
        return kind(
            release=release,  # type: ignore[arg-type]
            loss=loss,
            remaining=self.remaining(),
            cached=True,
            entry_id=found,
        )

    def through_gate(
        self,
        reservation: Reservation,
        tables: Sequence[Table],
        work: Callable[[Callable[[str], list[Any]]], T],
    ) -> T:
        """Run ``work`` behind the data gate for a reserved release: the one data path of releases.

        The reservation is charged durably first; ``work`` then receives a ``fetch(sql)`` function
        and computes the exact values, draws the noise and commits. Any failure in it is charged
        and becomes the one fixed :class:`~dalenius.core.errors.EvaluationFailed` outcome.
        """
        with self.gate.passage(reservation) as engine:
            for table in tables:
                engine.prepare(table)
            return work(engine.fetch)

    def remaining(self) -> Loss:
        """The budget this analyst has left on this dataset (rounded down)."""
        return self.ledger.remaining(self.analyst, self.dataset)

    def close(self) -> None:
        """Close the executor and the ledger."""
        self.executor.close()
        self.ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- steps ----------------------------------------------------------------------------------

    def prepare(
        self,
        sql: str,
        epsilon: Any = None,
        delta: Any = None,
        *,
        salt: int | None = None,
        targets: Targets | None = None,
        confidence: float = DEFAULT_CONFIDENCE,
    ) -> Prepared:
        """Parse, validate and plan ``sql``: the first step of :meth:`query` and :meth:`explain`.

        The public seam for tests and tools that inspect a plan or its exact SQL: it reads only
        the query, the catalog and public tables, and spends nothing. ``salt`` fixes the key of
        contribution bounding's hash ranking (drawn from the OS generator when omitted); with
        ``targets`` the ε split is the smallest meeting them at ``confidence``.

        Raises:
            QueryError: the SQL cannot be answered (located at its clause).
            ConfigurationError: a missing or inconsistent ε or δ.
        """
        catalog = self.catalog
        resolved = PLANS.get(catalog, ("query", sql), lambda: to_query(sql, catalog))
        if targets is not None:
            return self._prepare_for_accuracy(sql, resolved, epsilon, delta, targets, confidence)
        eps = _merge("epsilon", epsilon, resolved.options.epsilon, allow_zero=False)
        if eps is None:
            raise ConfigurationError(
                "no epsilon was given.",
                fix="pass epsilon=0.1 (for example), or write SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) ...",
            )
        dlt = _merge("delta", delta, resolved.options.delta, allow_zero=True)
        if dlt is not None and not dlt < 1:
            raise InvalidLossError(
                f"delta must be below 1, got {float(dlt):g}.", fix="use a small delta such as 1e-6."
            )
        # Plans are cached (engine/plans.py), except where they hold what was read from a public
        # table, and the exact SQL too, except where it holds a fresh hash key.
        key = ("plan", sql, eps, dlt)
        try:
            query, measured = self._measure_joins(resolved)
            plan = (
                to_dp(query, eps, dlt)
                if measured
                else PLANS.get(catalog, key, lambda: to_dp(query, eps, dlt))
            )
        except QueryError as exc:  # a refusal while planning: point at its clause
            raise located(exc, sql) from None
        write = partial(self._exact_sql, plan, None if measured else key, salt)
        return Prepared(plan=plan, write=write, tables=resolved.tables)

    def _prepare_for_accuracy(
        self,
        sql: str,
        resolved: Resolved,
        epsilon: Any,
        delta: Any,
        targets: Targets,
        confidence: float,
    ) -> Prepared:
        """Prepare with the smallest ε split meeting ``targets`` (see dalenius.plan.accuracy)."""
        if epsilon is not None or resolved.options.epsilon is not None:
            raise ConfigurationError(
                "both epsilon and an error target are given.",
                why="with a target, Dalenius computes the smallest ε that meets it.",
                fix="give epsilon, or a target (target_error / target_relative), not both.",
            )
        dlt = _merge("delta", delta, resolved.options.delta, allow_zero=True)
        if dlt is not None and not dlt < 1:
            raise InvalidLossError(
                f"delta must be below 1, got {float(dlt):g}.", fix="use a small delta such as 1e-6."
            )
        query, measured = self._measure_joins(resolved)
        # The measurements, sensitivities and grids do not depend on ε: compile once at ε = 1
        # to read them, then again with the chosen split.
        reference = to_dp(query, Fraction(1), dlt)
        allocation = allocate(reference, targets, confidence)
        return self._with_split(sql, resolved, query, measured, dlt, allocation)

    def _reference(self, sql: str, delta: Any) -> DPQuery:
        """``sql`` compiled at ε = 1: its measurements, sensitivities and grids (none depends
        on ε), to choose a split from; no mechanism is built for the final shares.
        """
        resolved = PLANS.get(self.catalog, ("query", sql), lambda: to_query(sql, self.catalog))
        if resolved.options.epsilon is not None:
            raise ConfigurationError(
                "both epsilon (in the SQL) and an error target are given.",
                fix="drop epsilon from the SQL's OPTIONS, or give no target.",
            )
        dlt = _merge("delta", delta, resolved.options.delta, allow_zero=True)
        if dlt is not None and not dlt < 1:
            raise InvalidLossError(
                f"delta must be below 1, got {float(dlt):g}.", fix="use a small delta such as 1e-6."
            )
        query, _ = self._measure_joins(resolved)
        return to_dp(query, Fraction(1), dlt)

    def _with_split(
        self,
        sql: str,
        resolved: Resolved,
        query: Query,
        measured: bool,
        dlt: Fraction | None,
        allocation: Allocation,
    ) -> Prepared:
        """The plan and exact SQL of ``query`` with the ε split of ``allocation``."""
        eps, shares = allocation.epsilon, allocation.shares
        key = ("plan", sql, eps, dlt, tuple(sorted(shares.items())))
        plan = (
            to_dp(query, eps, dlt, shares)
            if measured
            else PLANS.get(self.catalog, key, lambda: to_dp(query, eps, dlt, shares))
        )
        write = partial(self._exact_sql, plan, None if measured else key, None)
        return Prepared(plan=plan, write=write, tables=resolved.tables, allocation=allocation)

    def _exact_sql(self, plan: DPQuery, key: tuple[Any, ...] | None, salt: int | None) -> ExactSQL:
        """The exact SQL of ``plan`` for this executor, from the plan cache under ``key`` if given."""
        dialect = self.executor.dialect
        if plan.query.unit.kind != "id":
            if key is None:
                return exact_queries(plan, dialect)
            return PLANS.get(self.catalog, (*key, dialect), lambda: exact_queries(plan, dialect))
        # A fresh key for contribution bounding's hash ranking: which rows of a unit are kept
        # must not be predictable from, or favour, any data value.
        if salt is None:
            salt = int(system_random().uint64(1)[0]) % SALT_LIMIT
        if key is None or not 0 <= salt < SALT_LIMIT:
            return exact_queries(plan, dialect, salt=salt)
        # A proved template gives the SQL for this key; else the SQL is written once, with this
        # key, and teaches the cache a template (engine/plans.py, Candidate).
        slot = (*key, dialect, "salted")
        known = PLANS.peek(self.catalog, slot)
        if isinstance(known, SaltedTemplate):
            return known.with_salt(salt)
        exact = exact_queries(plan, dialect, salt=salt)
        PLANS.put(self.catalog, slot, learn(known, exact, salt))
        return exact

    def _measure_joins(self, resolved: Resolved) -> tuple[Query, bool]:
        """The query after the plan rules that read public tables (each public join's
        multiplicity, :mod:`dalenius.plan.rewrite.measure_joins`).

        Also says whether any public table was read (the plan then depends on its contents).
        """
        if not unmeasured(resolved.query):
            return resolved.query, False
        return rewrite(resolved.query, Context(multiplicity=self._multiplicity)), True

    def _multiplicity(self, table_name: str, column: str) -> int:
        table = self.catalog.table(table_name)
        if table is None or not table.public:
            # Before the data gate only public tables may reach the engine.
            raise InternalError(
                f"the join multiplicity of {table_name!r} would read a private table"
            )
        self.executor.prepare(table)
        quote = self.executor.dialect.quote
        name, col = quote(table.name), quote(column)
        rows = self.executor.fetch(
            f"SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {name} WHERE {col} IS NOT NULL GROUP BY {col}) AS m"
        )
        value = rows[0][0] if rows and rows[0][0] is not None else 0
        if value > MAX_JOIN_MULTIPLICITY:
            raise PrivacyRefusal(
                f"up to {value} rows of the public table {table.name!r} share one {column} value.",
                clause="JOIN",
                why="each private row would count that many times, so the noise would have to be that much larger.",
                fix=f"join on a column that is (nearly) unique in {table.name!r}.",
            )
        return int(value)

    @staticmethod
    def _evaluate(engine: GatedEngine, prepared: Prepared, mechanisms: Mechanisms) -> Noisy:
        """Exact aggregates from the engine, then noise: behind the data gate only."""
        plan = prepared.plan
        for table in prepared.tables:
            engine.prepare(table)
        exact = prepared.exact
        main = engine.fetch(exact.main, exact.reads)
        histograms = {name: engine.fetch(sql, exact.reads) for name, sql in exact.histograms}
        return add_noise(plan, exact_values(plan, main, histograms), mechanisms)

    def _request_key(self, prepared: Prepared) -> str:
        versions = "|".join(self.executor.data_version(t) for t in prepared.tables)
        payload = f"{prepared.plan.fingerprint()}|{versions}|{ANSWER_FORMAT}"
        return hashlib.sha256(payload.encode()).hexdigest()

    def _audit(
        self, sql: str, outcome: str, exc: DaleniusError, plan: DPQuery | None = None
    ) -> None:
        self.ledger.record(
            principal=self.analyst,
            dataset=self.dataset,
            sql=sql,
            outcome=outcome,
            detail=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            plan_hash=plan.fingerprint() if plan else None,
            loss=plan.loss if plan else None,
        )


def connect(
    catalog: str | Path | Catalog | Mapping[str, Any],
    budget: Any = None,
    *,
    ledger: str | Ledger | None = None,
    analyst: str = DEFAULT_ANALYST,
    confidence: float = DEFAULT_CONFIDENCE,
    executor: Executor | None = None,
) -> Session:
    """Open a session on a catalog.

    Args:
        catalog: path of the custodian's catalog TOML file, a :class:`Catalog`, or the same
            document as a Python mapping (:meth:`Catalog.from_dict`), whose tables may be pandas,
            Polars or Arrow tables or DuckDB relations already in memory.
        budget: the analyst's total loss on this dataset: a number (ε, pure DP) or a loss such as
            ``ApproxDP(1, 1e-5)`` (needed for GROUP BY keys without public lists, which spend δ).
            Required with a new ledger; with a ledger that already holds a budget for this
            analyst it must be omitted or equal.
        ledger: where budgets and releases are recorded: ``None`` (in memory, forgotten on exit),
            a SQLite file path, a ``postgresql://`` URL, or a :class:`Ledger`.
        analyst: whose budget is spent.
        confidence: default confidence of the error bars (0.95).
        executor: the engine computing exact aggregates (DuckDB, in process, by default).

    Example (after ``dalenius demo`` has written ``dalenius-demo/census.toml``)::

        session = dalenius.connect("dalenius-demo/census.toml", budget=1.0)
        print(session.query("SELECT COUNT(*) FROM people WHERE age >= 40", epsilon=0.1))

    Or over a DataFrame in memory, declared as a file would be::

        session = dalenius.connect({"tables": {"people": {
            "source": df, "privacy_unit": "row",
            "columns": {"age": {"type": "int", "bounds": [0, 100]}}}}}, budget=1.0)
    """
    if isinstance(catalog, Catalog):
        cat = catalog
    elif isinstance(catalog, Mapping):
        cat = Catalog.from_dict(catalog)
    else:
        cat = load_catalog(catalog)
    book = ledger if isinstance(ledger, Ledger) else open_ledger(ledger)
    existing = book.get_budget(analyst, cat.name)
    if budget is not None:
        cap = (
            budget
            if isinstance(budget, PureDP | ApproxDP | ZCDP)
            else PureDP(as_fraction(budget, "budget"))
        )
        if existing is None:
            book.set_budget(analyst, cat.name, cap)
        elif existing != cap:
            raise ConfigurationError(
                f"the ledger already holds a budget of {existing} for analyst {analyst!r} on "
                f"dataset {cat.name!r}; connect(budget={budget!r}) would change it.",
                why="an analyst cannot raise their own budget; the custodian sets budgets.",
                fix="omit budget= to use the recorded one, or have the custodian run `dalenius budget set`.",
            )
    elif existing is None:
        raise ConfigurationError(
            f"no budget is recorded for analyst {analyst!r} on dataset {cat.name!r}.",
            fix="pass budget=1.0 (for example) when connecting, or have the custodian set one.",
        )
    engine = executor if executor is not None else executor_for(cat)
    return Session(cat, ledger=book, executor=engine, analyst=analyst, confidence=confidence)


def _write_now(prepared: Prepared, sql: str) -> None:
    """Write ``prepared``'s exact SQL now: before the release clock starts, before anything is
    reserved, so that a query whose SQL cannot be written is refused and costs nothing.

    The planner refuses deeper nesting than writing the SQL can handle; should a query pass it
    and still be too deep to write, this is a refusal too, never an error after the charge.
    """
    try:
        prepared.exact  # noqa: B018 (cached on the object)
    except RecursionError:
        raise QueryError(
            "the query is too deeply nested to be written as SQL.",
            sql=sql,
            why="writing its exact SQL for the engine failed; nothing was read or spent.",
            fix="use simpler expressions.",
        ) from None


def _confidence(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < float(value) < 1:
        raise ConfigurationError(
            f"confidence must be a number strictly between 0 and 1, got {value!r}.",
            fix="use 0.95 for 95% intervals.",
        )
    return float(value)


def _whole(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(
            f"{name} must be a whole number, got {value!r}.", fix=f"pass {name}=100, for example."
        )
    return value


def _merge(name: str, given: Any, in_sql: Fraction | None, *, allow_zero: bool) -> Fraction | None:
    """One privacy parameter from the call and from the SQL; they must agree if both are given."""
    value = as_fraction(given, name, allow_zero=allow_zero) if given is not None else None
    if value is not None and in_sql is not None and value != in_sql:
        raise ConfigurationError(
            f"{name} is given twice with different values: {float(value):g} in the call, "
            f"{float(in_sql):g} in the SQL.",
            fix=f"give {name} once.",
        )
    return value if value is not None else in_sql


def _accuracy(prepared: Prepared) -> dict[str, Any] | None:
    return None if prepared.allocation is None else prepared.allocation.to_dict()


def _encode(noisy: Noisy) -> str:
    return json.dumps({"format": ANSWER_FORMAT, **noisy.to_json()}, sort_keys=True, default=str)


def _decode(answer: str) -> Noisy:
    doc = json.loads(answer)
    if doc.get("format") != ANSWER_FORMAT:
        raise InternalError("the ledger's record has an unknown format")
    return Noisy.from_json(doc)
