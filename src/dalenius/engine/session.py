"""A session: one analyst, one catalog, one ledger — SQL in, budgeted private answers out.

Everything a session releases — a query, each query of a batch, every release product — is a
:class:`~dalenius.plan.protocol.ReleasePlan` run through one sequence, :meth:`Session._spend`:
validate → audit the loss → policy → deadline → reserve → gate → measure → commit → publish.
The flow of :meth:`Session.query`, in order:

1. parse and validate the SQL against the catalog (refusals cost nothing; an audit line is kept);
2. compile the DP plan: measurements, sensitivities, the ε split — the loss is now known;
3. recompute the loss bottom-up from the mechanisms the release will use (the plan's privacy
   map): a plan that would spend more than it asks to reserve is a defect, refused with an audit
   line before anything is reserved; then the dataset's policy (ε floor, largest loss, running
   releases, :mod:`dalenius.engine.policy`) and, in constant-time mode, the deadline;
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
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import date
from fractions import Fraction
from functools import cached_property, partial, reduce
from pathlib import Path
from typing import Any, TypeVar, cast

from dalenius.core.catalog import Catalog, Table, load_catalog
from dalenius.core.deadlines import current_deadlines
from dalenius.core.errors import (
    BoundsNotChosen,
    ConfigurationError,
    DaleniusError,
    DeadlineError,
    InternalError,
    InvalidLossError,
    PostGateOutcome,
    PrivacyRefusal,
    PublicAnswer,
    PublicQuery,
    QueryError,
    UserError,
)
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP, as_fraction
from dalenius.core.rng import system_random
from dalenius.engine import collector
from dalenius.engine.gate import DataGate
from dalenius.engine.plans import PLANS, SALT_LIMIT, SaltedTemplate, learn
from dalenius.engine.policy import BusyRefusal, Policy
from dalenius.engine.private_bounds import (
    bounds_plan,
    chosen_notes,
    find_recorded,
    known_catalog,
    provisional_catalog,
    remember,
    settle,
)
from dalenius.engine.public import public_rows
from dalenius.engine.query_release import QueryRelease
from dalenius.engine.result import (
    BoundsResult,
    ContinualResult,
    ContributionsResult,
    DensityResult,
    HierarchyResult,
    OnTheMapResult,
    PerturbationResult,
    ReleaseResult,
    Result,
    SyntheticResult,
)
from dalenius.engine.staged_release import StagedRelease, build, explain_staged, subqueries_of
from dalenius.engine.timing import Deadline, DeadlineMissed
from dalenius.executors.base import Executor
from dalenius.executors.factory import executor_for
from dalenius.frames.frame import PrivateFrame
from dalenius.ledger import CachedAnswer, ChargeRequest, Ledger, Reservation, open_ledger
from dalenius.ledger.base import ANSWERED, CACHED, COMMITTED, LedgerEntry
from dalenius.plan.accuracy import (
    Allocation,
    BatchPlan,
    Targets,
    allocate,
    allocate_batch,
    parse_targets,
)
from dalenius.plan.compile import to_dp
from dalenius.plan.derive import FieldInfo, GroupKeys
from dalenius.plan.explain import Explanation, explain
from dalenius.plan.expr import BinOp, Expr
from dalenius.plan.nodes import DPQuery, Filter, Query, Scan, truncates
from dalenius.plan.protocol import (
    PRODUCTS,
    Fetch,
    LossDefect,
    Measure,
    ReleasePlan,
    within,
)
from dalenius.plan.rewrite import Context, rewrite, unmeasured
from dalenius.plan.rewrite.public_table_keys import TooManyKeys
from dalenius.releases.aim import AimPlan, AimRequest, plan_aim
from dalenius.releases.bounds import BoundsPlan
from dalenius.releases.continual import SeriesRequest
from dalenius.releases.continual_series import plan_series_step
from dalenius.releases.contributions import (
    DEFAULT_COVERAGE,
    ContributionsPlan,
    ContributionsRequest,
    plan_contributions,
)
from dalenius.releases.density import DensityPlan, DensityRequest, plan_density
from dalenius.releases.hierarchy import HierarchyPlan, HierarchyRequest, plan_hierarchy
from dalenius.releases.onthemap import OnTheMapPlan, OnTheMapRequest, plan_onthemap
from dalenius.releases.perturbation import PerturbationRequest, plan_perturbation
from dalenius.releases.synth_table import Progress, SynthesisRound
from dalenius.releases.synthetic import SynthPlan, SynthRequest, plan_synthetic
from dalenius.sql.bind import Resolved, to_query
from dalenius.sql.emit import ExactSQL, exact_queries
from dalenius.sql.emit.expressions import Compiler
from dalenius.sql.validate import located

T = TypeVar("T")

DEFAULT_CONFIDENCE = 0.95
DEFAULT_ANALYST = "analyst"
QUERY_CLASSES = ("scan", "group_by", "join", "quantile")
"""The plan classes of SQL queries (products have a class each)."""

RESULTS: dict[str, type[ReleaseResult[Any]]] = {
    "bounds": BoundsResult,
    "contributions": ContributionsResult,
    "continual": ContinualResult,
    "density": DensityResult,
    "hierarchy": HierarchyResult,
    "synthetic": SyntheticResult,
    "onthemap": OnTheMapResult,
    "perturbation": PerturbationResult,
}
"""The result class of each product kind (others get :class:`ReleaseResult`)."""
MAX_JOIN_MULTIPLICITY = 1000
"""A public table may repeat a join key at most this often (each repeat multiplies the noise)."""

MAX_PUBLIC_TABLE_KEYS = 100_000
"""The most values a public table's column may hold to serve as a GROUP BY key list: each is a
released cell, answered even when empty."""

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
    chosen: tuple[str, ...] = ()
    """Notes on bounds chosen privately for this query (each a release of its own)."""
    epsilon: Fraction | None = None
    """The ε the query was asked with (from the call or its SQL), before any share of it."""

    @cached_property
    def exact(self) -> ExactSQL:
        """The exact SQL of :attr:`plan` for this executor (with a fresh hash key if it bounds
        a privacy unit).
        """
        return self.write()


@dataclass(frozen=True)
class Receipt:
    """How a release was paid: what is left, whether it came from the record, its entry."""

    remaining: Loss
    cached: bool
    entry_id: str
    shared: bool = False


class InMemoryLedgerWarning(UserWarning):
    """:func:`connect` was given no ledger: budgets live in memory and end with the program."""


_DEFINITIONS: weakref.WeakKeyDictionary[Ledger, dict[str, bool]] = weakref.WeakKeyDictionary()
"""Per ledger, which datasets it accounts in zCDP (see :meth:`Session._zcdp`)."""


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
        policy: Policy | None = None,
    ) -> None:
        self.catalog = catalog
        self.policy = policy if policy is not None else Policy.of(catalog)
        """The dataset's policy (ε floor, largest loss, running releases), checked per release."""
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

    def _zcdp(self) -> bool:
        """Whether the ledger accounts this dataset in ρ-zCDP (then SQL aggregates may use the
        discrete Gaussian). A dataset's definition never changes once recorded, so the answer is
        remembered per ledger; an unrecorded dataset is accounted in pure ε when first charged.
        """
        known = _DEFINITIONS.setdefault(self.ledger, {})
        if self.dataset not in known:
            info = next((d for d in self.ledger.datasets() if d.name == self.dataset), None)
            if info is None:
                return False
            known[self.dataset] = info.definition == "zcdp"
        return known[self.dataset]

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
        staged = self._staged(sql, epsilon, delta, targets)
        if isinstance(staged, StagedRelease):
            self.policy.check(staged.loss)
            return explain_staged(staged, conf)
        prepared = self.prepare(staged, epsilon, delta, targets=targets, confidence=conf)
        self.policy.check(prepared.plan.loss)
        shown = explain(prepared.plan, conf, prepared.exact.all(), accuracy=prepared.allocation)
        chosen = chosen_notes(self._known_catalog(), shown.clips)
        written = (_written_in(staged),) if staged != sql else ()
        return replace(shown, notes=written + shown.notes + chosen)

    def table(self, name: str) -> PrivateFrame:
        """A lazy private frame over the catalog's table ``name`` (``docs/frames.md``): its
        aggregates are released through :meth:`query`, as the SQL they compile to.
        """
        return PrivateFrame.scan(self, name)

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
        shape_only: bool = False,
    ) -> DPQuery:
        """The DP plan :meth:`explain` shows (its loss, measurements), refused as it would be.

        Takes :meth:`explain`'s arguments. Neither the exact SQL nor the expected errors are
        worked out: for a caller that checks a query's loss before answering it (the gateway),
        at a small part of explain's cost. With ``shape_only`` (a client describing a statement
        before running it), bounds still to be chosen privately stand in as ``[0, 1]``: the
        plan's outputs and their types are right, its noise is not.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        targets = parse_targets(target_error, target_relative, expected)
        staged = self._staged(sql, epsilon, delta, targets, provisional=shape_only)
        if isinstance(staged, StagedRelease):
            # The outer plan gives the answer's shape; the loss checked is the whole query's.
            self.policy.check(staged.loss)
            return staged.shape()
        plan = self.prepare(
            staged, epsilon, delta, targets=targets, confidence=conf, provisional=shape_only
        ).plan
        self.policy.check(plan.loss)
        return plan

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
            PolicyRefusal: the loss is below the dataset's ε floor or too large (nothing spent).
            BudgetExceededError: the loss exceeds what remains (nothing spent).
            EvaluationFailed: the request failed after the data gate; the loss was charged. Its
                text never changes; the engine's message is in the custodian's audit trail.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        target = (target_error, target_relative, expected)
        with self._arrival():
            return self._query(sql, epsilon, delta, conf, idempotency_key, target)

    @contextmanager
    def _arrival(self) -> Iterator[None]:
        """From a request's arrival to its outcome: in constant-time mode, automatic garbage
        collection is paused — from arrival, not only in the release window: where a collection
        lands depends on what earlier answers allocated, so it would put their data into the
        planning time before the clock starts (engine/collector.py).
        """
        if not self.catalog.constant_time:
            yield
            return
        collector.pause()
        try:
            yield
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
        """Plan ``sql`` (a refusal is audited and raised), then spend on it."""
        prepared: Prepared | None = None
        plan: QueryRelease | StagedRelease
        try:
            targets = parse_targets(*target)
            staged = self._staged(sql, epsilon, delta, targets, choose=True)
            if isinstance(staged, StagedRelease):
                plan = staged
            else:
                prepared = self.prepare(
                    staged, epsilon, delta, targets=targets, confidence=conf, choose=True
                )
                _write_now(prepared, sql)
                plan = QueryRelease(prepared, sql)
        except PublicAnswer as public:
            return self._public(sql, public, conf)
        except UserError as exc:
            self._audit(sql, "refused", exc)
            raise
        # The release clock starts once the plan is ready: parsing and planning read only the
        # query text and the catalog, and take as long as a new text needs.
        answer, receipt = self._spend(plan, conf, idempotency_key, time.monotonic())
        if prepared is not None and prepared.chosen:
            answer = replace(answer, notes=(*prepared.chosen, *answer.notes))
        if isinstance(staged, str) and staged != sql:
            answer = replace(answer, notes=(_written_in(staged), *answer.notes))
        return Result.from_answer(
            answer,
            loss=plan.loss,
            remaining=receipt.remaining,
            confidence=conf,
            cached=receipt.cached,
            entry_id=receipt.entry_id,
            shared=receipt.shared,
            accuracy=None if prepared is None else _accuracy(prepared),
        )

    def _staged(
        self,
        sql: str,
        epsilon: Any,
        delta: Any,
        targets: Targets | None,
        *,
        choose: bool = False,
        provisional: bool = False,
    ) -> StagedRelease | str:
        """``sql`` as a staged release when it uses subqueries as values (each released first,
        :mod:`dalenius.engine.staged_release`); else the text to plan as any query (with the
        exact values of subqueries over public tables written in).
        """
        subqueries = subqueries_of(sql)
        if not subqueries:
            return sql
        if targets is not None:
            raise ConfigurationError(
                "an error target is not supported for a query with a subquery used as a value.",
                why="the subquery is released first, with its own share of ε.",
                fix="give epsilon instead of a target.",
            )
        return build(self, sql, subqueries, epsilon, delta, choose=choose, provisional=provisional)

    def _public(self, sql: str, public: PublicAnswer, conf: float) -> Result:
        """Answer a query whose answer is public: read off the catalog (public keys), or run
        over public tables alone (:mod:`dalenius.engine.public`). Exact, nothing spent, no
        ledger entry, one audit line.
        """
        if isinstance(public, PublicQuery):
            try:
                rows, lows, highs = public_rows(self.executor, public)
            except DaleniusError as exc:  # nothing was reserved: a refusal, or the engine's failure
                self._audit(sql, "refused", exc)
                raise
            names = ", ".join(t.name for t in public.tables)
            detail = f"answered from public tables ({names}): exact, nothing spent"
            note = (
                f"Answered exactly from public tables ({names}): they belong to no privacy unit, "
                "so nothing is spent."
            )
        else:
            rows = public.rows
            lows = highs = tuple((None,) * len(public.columns) for _ in public.rows)
            detail = "answered from the catalog's public keys: no data read, nothing spent"
            note = "Answered from the catalog's public keys: no data read, nothing spent."
        self.ledger.record(
            principal=self.analyst,
            dataset=self.dataset,
            sql=sql,
            outcome=ANSWERED,
            detail=detail,
        )
        return Result(
            columns=public.columns,
            rows=rows,
            lows=lows,
            highs=highs,
            kinds=public.kinds,
            loss=PureDP(Fraction(0)),
            remaining=self.remaining(),
            confidence=conf,
            cached=False,
            entry_id=None,
            notes=(note,),
        )

    # -- the one spending sequence ------------------------------------------------------------

    def spend(
        self,
        build: Callable[[Catalog], ReleasePlan[Any]],
        *,
        text: str,
        confidence: float | None = None,
        idempotency_key: str | None = None,
    ) -> ReleaseResult[Any]:
        """Release what ``build`` plans, through the one spending sequence; the general form of
        :meth:`density`, :meth:`hierarchy`, :meth:`synthesize` and :meth:`onthemap`.

        ``build`` receives the catalog and returns a :class:`~dalenius.plan.protocol.ReleasePlan`
        (reading no data); a refusal it raises is audited under ``text`` and costs nothing.
        The plan's loss is then audited, checked against the policy, reserved (an identical
        earlier request is answered from the ledger at no cost), and the release runs behind the
        data gate, at its deadline in constant-time mode. See ``docs/architecture.md``.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        with self._arrival():
            try:
                plan = build(self.catalog)
            except UserError as exc:
                self._audit(text, "refused", exc)
                raise
            value, receipt = self._spend(plan, conf, idempotency_key, time.monotonic())
            kind = RESULTS.get(plan.kind, ReleaseResult)
            return kind(
                release=value,
                loss=plan.loss,
                remaining=receipt.remaining,
                cached=receipt.cached,
                entry_id=receipt.entry_id,
            )

    def _spend(
        self, plan: ReleasePlan[Any], conf: float, idempotency_key: str | None, ready: float
    ) -> tuple[Any, Receipt]:
        """Validate → audit the loss → policy → deadline → reserve → gate → measure → commit →
        publish, for any release plan.

        Everything before the reserve reads only the request, the catalog, the ledger and public
        tables, and a refusal there costs nothing and leaves an audit line; from the gate on
        every outcome is charged. ``ready`` is when the plan was ready (the release clock's start
        in constant-time mode).
        """
        request = self._charge_request(plan, idempotency_key)
        self._audited(request, plan)
        try:
            self.policy.check(plan.loss)
            for table in plan.tables:  # from metadata only: a missing file costs nothing
                self.executor.check_source(table)
            measure = plan.prepare(self.executor.dialect, _salt())
            deadline = self._deadline(plan.plan_class, ready)
        except UserError as exc:
            self._audit(plan.text, "refused", exc)
            raise
        try:
            with self.policy.running(self.analyst, self.dataset):
                return self._reserve(request, plan, measure, deadline, conf)
        except BusyRefusal as exc:  # only taking the slot raises it: before the reserve
            self._audit(plan.text, "refused", exc)
            raise

    def _charge_request(self, plan: ReleasePlan[Any], idempotency_key: str | None) -> ChargeRequest:
        """What the ledger reserves for ``plan``: its loss, keyed by plan and data version."""
        return ChargeRequest(
            principal=self.analyst,
            dataset=self.dataset,
            loss=plan.loss,
            request_key=self._request_key(plan),
            sql=plan.text,
            plan_hash=plan.fingerprint(),
            idempotency_key=idempotency_key,
        )

    def _reserve(
        self,
        request: ChargeRequest,
        plan: ReleasePlan[Any],
        measure: Measure[Any],
        deadline: Deadline | None,
        conf: float,
    ) -> tuple[Any, Receipt]:
        """Reserve the loss, then release (within ``deadline`` in constant-time mode).

        reserve() writes the audit lines itself, also when it refuses for lack of budget. With
        charge=True the reservation passes the data gate in the same synced transaction: the
        only refusals left (budget, idempotency) are decided inside it.
        """
        outcome = self.ledger.reserve(request, charge=True)
        if isinstance(outcome, CachedAnswer):
            value = plan.publish(plan.decode(outcome.answer), conf)
            shared = outcome.shared_from is not None
            left = outcome.remaining if outcome.remaining is not None else self.remaining()
            return value, Receipt(left, True, outcome.entry_id, shared)
        reservation = outcome

        def release(claim: Callable[[], bool]) -> tuple[Any, Receipt]:
            return self._release(reservation, plan, measure, conf, claim)

        if deadline is None:
            return release(lambda: True)
        try:
            return deadline.run(
                release,
                on_miss=lambda: self._missed(reservation, deadline),
                interrupt=self.executor.interrupt,
            )
        except DeadlineMissed:
            raise DeadlineError() from None

    def _audited(self, request: ChargeRequest, plan: ReleasePlan[Any]) -> None:
        """Refuse, as a defect, a plan whose privacy map exceeds the loss it would reserve.

        The map recomputes the loss from the mechanisms the release will draw with, each at the
        sensitivity the catalog requires; a defect is audited and alerted, and nothing is
        reserved. Decided before the ledger is asked, from the plan alone.
        """
        try:
            actual = plan.privacy_map()
            if not within(actual, request.loss):
                raise LossDefect(
                    f"the loss recomputed from the mechanisms ({actual}) exceeds the loss "
                    f"reserved ({request.loss}); nothing was released."
                )
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

    def _release(
        self,
        reservation: Reservation,
        plan: ReleasePlan[Any],
        measure: Measure[Any],
        conf: float,
        claim: Callable[[], bool],
    ) -> tuple[Any, Receipt]:
        """Everything after the reservation: the data gate, measure, commit, publish.

        ``claim`` (constant-time mode) says whether the outcome may still be made durable; once
        the deadline was declared missed, the miss path has recorded the outcome.
        """
        try:
            with self.gate.passage(reservation) as engine:
                for table in plan.tables:
                    engine.prepare(table)
                measured = measure(engine.fetch)
                if not claim():
                    raise DeadlineMissed(plan.plan_class)
                entry_id = self.ledger.commit(reservation, measured.record)
                value = plan.publish(measured.value, conf)
                left = reservation.remaining
                return value, Receipt(
                    left if left is not None else self.remaining(), False, entry_id
                )
        finally:
            if self.catalog.constant_time:
                # Inside the release window, whatever the outcome: see engine/collector.py.
                collector.sweep()

    def _deadline(self, kind: str, arrival: float) -> Deadline | None:
        """The release deadline of plan class ``kind`` in constant-time mode (``None`` otherwise).

        Decided before the data gate from the catalog and the plan only.
        """
        if not self.catalog.constant_time:
            return None
        deadlines = current_deadlines(self.catalog, self.executor.engine_version)
        seconds = deadlines.seconds(kind)
        if seconds is None:
            what = f"{kind} queries" if kind in QUERY_CLASSES else f"{kind} releases"
            raise ConfigurationError(
                f"the dataset {self.dataset!r} has no calibrated deadline for {what}.",
                why="in constant-time mode every answer leaves at a deadline fixed in advance.",
                fix="the custodian runs `dalenius calibrate` on a catalog whose tables allow "
                f"{what}.",
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

    # -- batches ------------------------------------------------------------------------------

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
        batch = allocate_batch(plans, conf, budget)
        for allocated in batch.items:
            self.policy.check(PureDP(allocated.allocation.epsilon))
        return batch

    def query_batch(
        self, batch: BatchPlan, *, delta: Any = None, confidence: float | None = None
    ) -> list[Result]:
        """Answer every query of a :meth:`plan_batch` with its share of ε (each charged as usual).

        Every query is planned, its loss audited and checked against the policy before the
        first is spent on, so a batch that would be refused part-way is refused whole, free.
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        if batch.items and conf != batch.items[0].allocation.confidence:
            raise ConfigurationError(
                "the batch was planned at another confidence.",
                fix="plan and run the batch at the same confidence.",
            )
        targets = [dict(item.targets.by_output) or item.targets.everywhere for item in batch.items]
        for entry, target in zip(batch.items, targets, strict=True):
            try:
                parsed = parse_targets(target, None, None)
                prepared = self.prepare(entry.sql, None, delta, targets=parsed, confidence=conf)
                _write_now(prepared, entry.sql)
                plan = QueryRelease(prepared, entry.sql)
                self.policy.check(plan.loss)
            except UserError as exc:
                self._audit(entry.sql, "refused", exc)
                raise
            self._audited(self._charge_request(plan, None), plan)
        return [
            self.query(entry.sql, delta=delta, confidence=conf, target_error=target)
            for entry, target in zip(batch.items, targets, strict=True)
        ]

    # -- release products ---------------------------------------------------------------------

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
        cols = (columns,) if isinstance(columns, str) else tuple(columns)

        def build(catalog: Catalog) -> DensityPlan:
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
            eps, dlt, rh = _loss_arguments(epsilon, delta, rho)
            return plan_density(catalog, request, epsilon=eps, delta=dlt, rho=rh)

        text = f"DENSITY({', '.join(cols)}) FROM {table}"
        result = self.spend(
            build, text=text, confidence=confidence, idempotency_key=idempotency_key
        )
        return cast(DensityResult, result)

    def choose_bounds(
        self,
        table: str,
        column: str,
        *,
        epsilon: Any = None,
        confidence: float | None = None,
        idempotency_key: str | None = None,
    ) -> BoundsResult:
        """Choose clipping bounds for a numeric column privately (a noisy log-scale histogram
        read off at a threshold; ``docs/mechanisms/private_bounds.md``).

        For a column the catalog declares ``bounds = "private"`` it spends the catalog's
        ``bounds_epsilon`` (leave ``epsilon`` out), and queries then clip the column to the
        result; :meth:`query` does this itself the first time a query needs the bounds. Once per
        data version: a repeat is answered from the ledger at no cost. With ``epsilon``, any
        numeric column's bounds may be chosen, to see what they would be.

        Raises:
            QueryError: the table or column cannot be bounded (nothing spent).
            ConfigurationError: no ``epsilon`` for a column without ``bounds = "private"``.
            BudgetExceededError: the loss exceeds what remains (nothing spent).
        """
        eps = None if epsilon is None else as_fraction(epsilon, "epsilon")

        def build(catalog: Catalog) -> BoundsPlan:
            return bounds_plan(catalog, table, column, eps)

        result = self.spend(
            build,
            text=f"BOUNDS({column}) FROM {table}",
            confidence=confidence,
            idempotency_key=idempotency_key,
        )
        plan = bounds_plan(self.catalog, table, column, eps)
        settled = settle(result.release, result.entry_id)
        remember(self.ledger, self.analyst, self.dataset, self._request_key(plan), settled)
        return cast(BoundsResult, result)

    def suggest_caps(
        self,
        table: str,
        *,
        epsilon: Any,
        groups: Sequence[str] = (),
        coverage: Any = None,
        idempotency_key: str | None = None,
    ) -> ContributionsResult:
        """Suggest the per-unit caps of ``table``'s privacy unit (``max_rows``, and
        ``max_groups`` for the ``groups`` columns) from noisy histograms of what each unit
        contributes, spending ``epsilon`` (``docs/mechanisms/private_bounds.md``).

        The cap covers ``coverage`` (0.95 by default) of the units fully; asking again with
        another coverage reads the same histograms, free.
        """
        request = ContributionsRequest(
            table,
            tuple(groups),
            as_fraction(epsilon, "epsilon"),
            DEFAULT_COVERAGE if coverage is None else as_fraction(coverage, "coverage"),
        )

        def build(catalog: Catalog) -> ContributionsPlan:
            return plan_contributions(catalog, request)

        measured = ", ".join(("rows", *request.groups))
        result = self.spend(
            build,
            text=f"CONTRIBUTIONS({measured}) FROM {table}",
            idempotency_key=idempotency_key,
        )
        return cast(ContributionsResult, result)

    def perturb(
        self,
        table: str,
        columns: str | Sequence[str],
        *,
        epsilon: Any,
        delta: Any = None,
        tight: bool = False,
        confidence: float | None = None,
        idempotency_key: str | None = None,
    ) -> PerturbationResult:
        """Release every row of ``table`` with each value of ``columns`` perturbed (course
        document 004's record perturbation), with its error table; the number of rows released
        is private. Pure ε, or (ε, δ) on an (ε, δ) dataset. See
        ``docs/releases/perturbation.md``.
        """
        request = PerturbationRequest(
            table, (columns,) if isinstance(columns, str) else tuple(columns), tight=tight
        )

        def build(catalog: Catalog) -> ReleasePlan[Any]:
            eps, dlt, _ = _loss_arguments(epsilon, delta, None)
            return plan_perturbation(catalog, request, epsilon=eps, delta=dlt)

        text = f"PERTURB({', '.join(request.columns)}) FROM {table}"
        result = self.spend(
            build, text=text, confidence=confidence, idempotency_key=idempotency_key
        )
        return cast(PerturbationResult, result)

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

        def build(catalog: Catalog) -> HierarchyPlan:
            request = HierarchyRequest(
                table=table,
                levels=tuple(levels),
                where=where,
                split=tuple(float(w) for w in split) if split is not None else None,
            )
            eps, dlt, rh = _loss_arguments(epsilon, delta, rho)
            return plan_hierarchy(catalog, request, epsilon=eps, delta=dlt, rho=rh)

        text = f"HIERARCHY({' > '.join(levels)}) FROM {table}"
        result = self.spend(
            build, text=text, confidence=confidence, idempotency_key=idempotency_key
        )
        return cast(HierarchyResult, result)

    def continual(
        self,
        table: str,
        *,
        time: str,
        period: str,
        start: str | date,
        horizon: int,
        epsilon: Any,
        max_rows: int | None = None,
        value: str | None = None,
        levels: int | None = None,
        as_of: str | date | None = None,
        confidence: float | None = None,
    ) -> ContinualResult:
        """Publish a continual series: counts of ``table``'s rows per ``period`` of its date
        column ``time`` (and, with ``value``, sums of an int column clipped to its bounds), for
        every period closed by ``as_of`` (today, UTC, by default; never a later day).

        The series is ``horizon`` periods from ``start``, each unit counted for its first
        ``max_rows`` rows in time. Its first publication charges ``epsilon`` once for the whole
        horizon (the binary-tree mechanism); calling again as periods close publishes them at no
        further cost, reusing every node measured before. ``levels`` cuts the tree (1: one node
        per period). See ``docs/releases/continual.md``.

        Raises:
            QueryError: the series cannot be published as declared, or a publication of it is
                in progress (nothing spent).
            BudgetExceededError: its first publication's ε exceeds what remains.
        """
        request = SeriesRequest(
            table=table,
            time=time,
            period=period,
            start=start.isoformat() if isinstance(start, date) else str(start),
            horizon=horizon,
            max_rows=max_rows,
            value=value,
            levels=levels,
        )
        text = f"CONTINUAL({period} of {time}) FROM {table}"
        try:
            eps, _, _ = _loss_arguments(epsilon, None, None)
            entries = self.ledger.entries(principal=self.analyst, dataset=self.dataset)
            plan, latest = plan_series_step(
                self.catalog, request, self.analyst, eps, entries, as_of=as_of
            )
        except UserError as exc:
            self._audit(text, "refused", exc)
            raise
        if plan is None:
            assert latest is not None  # nothing closed since the last publication: shown again
            return cast(ContinualResult, self.release(latest, confidence=confidence))
        result = self.spend(
            lambda _catalog: plan, text=plan.text, confidence=confidence, idempotency_key=plan.slot
        )
        return cast(ContinualResult, result)

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
        method: str = "mst",
        degree: int | None = None,
        idempotency_key: str | None = None,
        progress: Progress | None = None,
    ) -> SyntheticResult:
        """Release synthetic rows of ``table`` (every column with public keys or bounds by
        default; numeric columns in ``bins`` bins). Needs ``epsilon`` and ``delta``, or ``rho``.

        ``method="mst"`` (the default) measures the 1-way marginals and a private tree of 2-way
        marginals; ``method="aim"`` chooses, round after round, the marginals its model fits
        worst among the workload's — every ``degree``-way marginal (2 by default, or 3). The
        same request gives back the same rows at no cost. See ``docs/releases/synthetic.md``.

        ``progress``, if given, is called after each round with a
        :class:`~dalenius.releases.synth_table.SynthesisRound`: the round, the most rounds
        there can be, the ρ drawn so far and the marginal just measured (never an exact count).
        An answer repeated from the ledger runs no rounds; in constant-time mode the rounds are
        reported only once the answer is out, since their timing is what the deadline hides.
        """

        def build(catalog: Catalog) -> SynthPlan | AimPlan:
            eps, dlt, rh = _loss_arguments(epsilon, delta, rho)
            chosen = tuple(columns) if columns is not None else None
            if method == "aim":
                request = AimRequest(
                    table, chosen, bins, rows, where, 2 if degree is None else degree
                )
                return plan_aim(catalog, request, epsilon=eps, delta=dlt, rho=rh)
            if method != "mst":
                raise QueryError(
                    f"method must be 'mst' or 'aim', got {method!r}.",
                    fix="pass method='mst' (a private tree of pairs) or method='aim' (workload-"
                    "adaptive).",
                )
            if degree is not None:
                raise QueryError(
                    "degree is AIM's workload; MST has none.",
                    fix="pass method='aim' with degree, or leave degree out.",
                )
            plain = SynthRequest(table, chosen, bins, rows, where)
            return plan_synthetic(catalog, plain, epsilon=eps, delta=dlt, rho=rh)

        using = f" WITH AIM({2 if degree is None else degree})" if method == "aim" else ""
        text = f"SYNTHETIC({', '.join(columns or ['*'])}) FROM {table}{using}"
        held: list[SynthesisRound] = []
        report = held.append if progress is not None and self.catalog.constant_time else progress
        result = self.spend(
            lambda catalog: replace(build(catalog), progress=report),
            text=text,
            idempotency_key=idempotency_key,
        )
        for done in held:  # constant-time mode: only now that the answer has left
            assert progress is not None
            progress(done)
        return cast(SyntheticResult, result)

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

        def build(catalog: Catalog) -> OnTheMapPlan:
            eps, dlt, _ = _loss_arguments(epsilon, delta, None)
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
            return plan_onthemap(catalog, request, epsilon=eps, delta=dlt)

        text = f"ONTHEMAP({origin} -> {destination}) FROM {table}"
        result = self.spend(build, text=text, idempotency_key=idempotency_key)
        return cast(OnTheMapResult, result)

    def release(self, entry_id: str, *, confidence: float | None = None) -> ReleaseResult[Any]:
        """A release this analyst already received (a density, hierarchy, synthetic rows, flows
        or any registered product), again, by its ledger entry id (``result.entry_id``, or the
        first 8 or more characters of it) — the same values, at no cost.

        The entry's record holds the request and the noisy values (or the synthetic counts, or
        the measurements and sampling seed): the request is planned again from the catalog,
        checked against the plan hash the entry was charged under, and published again.

        Raises:
            QueryError: no committed release of this analyst has that id on this dataset, or the
                catalog changed so that it cannot be rebuilt exactly (nothing spent either way).
        """
        conf = _confidence(confidence if confidence is not None else self.confidence)
        entry, doc = self._released_entry(entry_id)
        plan = PRODUCTS[doc["format"]].plan_again(self.catalog, doc["request"], entry.loss)
        if plan.fingerprint() != entry.plan_hash:
            raise QueryError(
                f"the catalog has changed since entry {entry_id!r} was released, so it cannot be "
                "rebuilt exactly.",
                fix="ask for the release again under the current catalog (it is charged as new).",
            )
        value = plan.publish(plan.decode(entry.answer or ""), conf)
        self.ledger.record(
            principal=self.analyst,
            dataset=self.dataset,
            sql=f"FETCH RELEASE {entry_id}: {entry.sql}",
            outcome=CACHED,
            detail="fetched again by id, at no cost",
            plan_hash=entry.plan_hash,
            loss=None,
        )
        kind = RESULTS.get(plan.kind, ReleaseResult)
        return kind(
            release=value,
            loss=entry.loss,
            remaining=self.remaining(),
            cached=True,
            entry_id=entry.id,
        )

    def _released_entry(self, entry_id: str) -> tuple[LedgerEntry, dict[str, Any]]:
        """The analyst's committed release ``entry_id`` (or its short prefix) and its record."""
        own = self.ledger.entries(principal=self.analyst, dataset=self.dataset)
        # The whole id, or the short prefix `dalenius ledger list` shows (at least 8 characters).
        found = [e for e in own if e.id == entry_id] or [
            e for e in own if len(entry_id) >= 8 and e.id.startswith(entry_id)
        ]
        entry = found[0] if len(found) == 1 else None
        if entry is None or entry.status != COMMITTED or entry.answer is None:
            raise QueryError(
                f"analyst {self.analyst!r} has no released entry {entry_id!r} on dataset "
                f"{self.dataset!r}.",
                fix="list your entries with `dalenius ledger list` (or GET /v1/me/ledger) and use "
                "the id of a committed release.",
            )
        doc = json.loads(entry.answer)
        if not isinstance(doc, dict) or doc.get("format") not in PRODUCTS:
            raise QueryError(
                f"entry {entry_id!r} is a query answer, not a release.",
                fix="fetch density, hierarchy, synthetic or flows releases by id; ask a query "
                "again to get its answer from the ledger at no cost.",
            )
        if "request" not in doc:
            raise QueryError(
                f"entry {entry_id!r} was recorded before releases kept their request.",
                fix="ask for the same release again: an identical request is answered from the "
                "ledger's record at no cost.",
            )
        return entry, doc

    def through_gate(
        self,
        reservation: Reservation,
        tables: Sequence[Table],
        work: Callable[[Fetch], T],
    ) -> T:
        """Run ``work`` behind the data gate for a reserved request (the gate's own seam).

        The reservation is charged durably first; ``work`` then receives a ``fetch(sql)``
        function. Any failure in it is charged and becomes the one fixed
        :class:`~dalenius.core.errors.EvaluationFailed` outcome. Releases reach the engine
        through :meth:`spend`, which uses the same passage.
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
        choose: bool = False,
        provisional: bool = False,
        _catalog: Catalog | None = None,
        _round: int = 0,
        _share: Fraction = Fraction(1),
    ) -> Prepared:
        """Parse, validate and plan ``sql``: the first step of :meth:`query` and :meth:`explain`.

        The public seam for tests and tools that inspect a plan or its exact SQL: it reads only
        the query, the catalog and public tables, and spends nothing. ``salt`` fixes the key of
        contribution bounding's hash ranking (drawn from the OS generator when omitted); with
        ``targets`` the ε split is the smallest meeting them at ``confidence``.

        Bounds the catalog has chosen privately (``bounds = "private"``) are used once this
        analyst has them for the current data version; with ``choose`` (answering, not
        explaining) missing ones are chosen first, each a release of its own
        (:meth:`choose_bounds`); with ``provisional`` they stand in as ``[0, 1]``, for a caller
        that needs only the answer's shape (its columns and their types), never its noise.

        Raises:
            QueryError: the SQL cannot be answered (located at its clause).
            ConfigurationError: a missing or inconsistent ε or δ.
        """
        catalog = _catalog or self._known_catalog()
        try:
            resolved = PLANS.get(catalog, ("query", sql), lambda: to_query(sql, catalog))
        except BoundsNotChosen as missing:
            if _round > len(self.catalog.private_bounds):
                raise
            stand_in = None
            chosen = self._settle(missing, choose)
            if chosen is None:
                if not provisional:
                    raise
                stand_in = provisional_catalog(catalog, missing.columns)
            inner = self.prepare(
                sql,
                epsilon,
                delta,
                salt=salt,
                targets=targets,
                confidence=confidence,
                choose=choose,
                provisional=provisional,
                _catalog=stand_in,
                _round=_round + 1,
                _share=_share,
            )
            return replace(inner, chosen=(*(chosen or ()), *inner.chosen))
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
        asked, eps = eps, eps * _share  # a query released in stages gets its share of ε
        # Plans are cached (engine/plans.py), except where they hold what was read from a public
        # table, and the exact SQL too, except where it holds a fresh hash key.
        zcdp = self._zcdp()
        key = ("plan", sql, eps, dlt, "zcdp") if zcdp else ("plan", sql, eps, dlt)
        try:
            query, measured = self._measure_joins(resolved)
            plan = (
                to_dp(query, eps, dlt, zcdp=zcdp, min_people=catalog.min_people)
                if measured
                else PLANS.get(
                    catalog,
                    key,
                    lambda: to_dp(query, eps, dlt, zcdp=zcdp, min_people=catalog.min_people),
                )
            )
            _timed_alike(plan, catalog)
        except QueryError as exc:  # a refusal while planning: point at its clause
            raise located(exc, sql) from None
        write = partial(self._exact_sql, plan, None if measured else key, salt)
        return Prepared(plan=plan, write=write, tables=resolved.tables, epsilon=asked)

    def _known_catalog(self) -> Catalog:
        """The catalog with the privately chosen bounds this analyst has (engine/private_bounds.py)."""
        return known_catalog(
            self.catalog, self.ledger, self.analyst, self.dataset, self._request_key
        )

    def _settle(self, missing: BoundsNotChosen, choose: bool) -> list[str] | None:
        """Find in the ledger, or (with ``choose``) choose, the bounds ``missing`` names: a note
        for each choice made now, or ``None`` when some are still unknown.
        """
        notes = []
        for pair in missing.columns:
            if find_recorded(
                self.catalog, self.ledger, self.analyst, self.dataset, self._request_key, pair
            ):
                continue
            if not choose:
                return None
            result = self.choose_bounds(*pair)
            bounds = result.release.bounds
            shown = (
                "none (empty)" if bounds is None else f"[{_plain(bounds[0])}, {_plain(bounds[1])}]"
            )
            cost = "from the ledger's record, free" if result.cached else f"{result.loss} more"
            notes.append(
                f"The bounds of {pair[0]}.{pair[1]} were chosen privately first: {shown}, "
                f"spending {cost} (ledger entry {result.entry_id})."
            )
        return notes

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
        reference = to_dp(query, Fraction(1), dlt, min_people=self.catalog.min_people)
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
        return to_dp(query, Fraction(1), dlt, min_people=self.catalog.min_people)

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
            to_dp(query, eps, dlt, shares, min_people=self.catalog.min_people)
            if measured
            else PLANS.get(
                self.catalog,
                key,
                lambda: to_dp(query, eps, dlt, shares, min_people=self.catalog.min_people),
            )
        )
        write = partial(self._exact_sql, plan, None if measured else key, None)
        return Prepared(plan=plan, write=write, tables=resolved.tables, allocation=allocation)

    def _exact_sql(self, plan: DPQuery, key: tuple[Any, ...] | None, salt: int | None) -> ExactSQL:
        """The exact SQL of ``plan`` for this executor, from the plan cache under ``key`` if given."""
        dialect = self.executor.dialect
        if plan.query.unit.kind != "id" and not truncates(plan.query.relation):
            if key is None:
                return exact_queries(plan, dialect)
            return PLANS.get(self.catalog, (*key, dialect), lambda: exact_queries(plan, dialect))
        # A fresh key for contribution bounding's (and join truncation's) hash ranking: which
        # rows are kept must not be predictable from, or favour, any data value.
        if salt is None:
            salt = _salt()
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
        context = Context(multiplicity=self._multiplicity, public_keys=self._public_keys)
        return rewrite(resolved.query, context), True

    def _public_keys(
        self, scan: Scan, column: str, conditions: tuple[Expr, ...]
    ) -> GroupKeys | None:
        """The distinct values of a public table's int or text column among its rows that pass
        ``conditions`` (the query's conditions on that table alone), as a key list (NULL last),
        or ``None``: not a public table, or another type.

        Raises:
            TooManyKeys: more than :data:`MAX_PUBLIC_TABLE_KEYS` values (the groups are then
                selected privately).
        """
        table = self.catalog.table(scan.table)
        declared = table.column(column) if table is not None and table.public else None
        if table is None or declared is None or declared.type not in ("int", "str"):
            return None
        quote = self.executor.dialect.quote
        limit = f"ORDER BY 1 NULLS LAST LIMIT {MAX_PUBLIC_TABLE_KEYS + 1}"
        if conditions:
            # The conditions compiled as the query's own (total, typed alike on every engine).
            field = next(f for f in scan.fields if f.name == column)
            infos = {f.id: FieldInfo(f.type, f.bounds, f.keys, f.nullable) for f in scan.fields}
            compiler = Compiler(infos, self.executor.dialect)
            where = Filter(scan, reduce(lambda a, b: BinOp("AND", a, b), conditions))
            relation = compiler.relation(where).sql(self.executor.dialect.name)
            sql = f"SELECT DISTINCT {quote(field.id)} FROM ({relation}) AS __p {limit}"
        else:
            sql = f"SELECT DISTINCT {quote(column)} FROM {quote(table.name)} {limit}"
        rows = self._public_read(table, sql)
        if len(rows) > MAX_PUBLIC_TABLE_KEYS:
            raise TooManyKeys
        return tuple(
            None if r[0] is None else int(r[0]) if declared.type == "int" else str(r[0])
            for r in rows
        )

    def rows_per_value(self, table_name: str, column: str) -> int:
        """The most rows of the public table ``table_name`` that share one non-NULL value of
        ``column`` (0 for an empty table): read from the public table, kept per data version.

        Raises:
            InternalError: the table is not public (before the data gate only public tables
                may reach the engine).
        """
        table = self.catalog.table(table_name)
        if table is None or not table.public:
            raise InternalError(
                f"the join multiplicity of {table_name!r} would read a private table"
            )
        quote = self.executor.dialect.quote
        name, col = quote(table.name), quote(column)
        rows = self._public_read(
            table,
            f"SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {name} WHERE {col} IS NOT NULL GROUP BY {col}) AS m",
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def _multiplicity(self, table_name: str, column: str) -> int:
        value = self.rows_per_value(table_name, column)
        table = self.catalog.table(table_name)
        assert table is not None  # rows_per_value read it
        if value > MAX_JOIN_MULTIPLICITY:
            raise PrivacyRefusal(
                f"up to {value} rows of the public table {table.name!r} share one {column} value.",
                clause="JOIN",
                why="each private row would count that many times, so the noise would have to be that much larger.",
                fix=f"join on a column that is (nearly) unique in {table.name!r}.",
            )
        return int(value)

    def _public_read(self, table: Table, sql: str) -> list[tuple[Any, ...]]:
        """The rows of ``sql``, a read of the public ``table`` made while planning (a join's
        multiplicity, a column's values as keys), cached per SQL and data version of the
        table: every query joining a large dimension table read it again (TPC-H's part at
        SF 10, 0.1 s per query and per stage), and its content changes only with its version.
        """
        self.executor.prepare(table)
        version = self.executor.data_version(table)
        key = ("public read", table.name, sql, version)
        rows: list[tuple[Any, ...]] = PLANS.get(
            self.catalog, key, lambda: [tuple(r) for r in self.executor.fetch(sql)]
        )
        return rows

    def _request_key(self, plan: ReleasePlan[Any]) -> str:
        """The ledger's key for an identical request: the plan, its tables' data versions and
        its record's format (an identical earlier request is answered from its record).
        """
        versions = "|".join(self._data_version(t) for t in plan.tables)
        payload = f"{plan.fingerprint()}|{versions}|{plan.answer_format}"
        return hashlib.sha256(payload.encode()).hexdigest()

    def _data_version(self, table: Table) -> str:
        """The table's data version; a unit reached through another table's key also takes
        that table's version (its rows decide which unit each row belongs to).
        """
        version = self.executor.data_version(table)
        reach = table.reach
        referenced = self.catalog.table(reach.table) if reach else None
        if referenced is None:
            return version
        return f"{version}+{self.executor.data_version(referenced)}"

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
        ledger: where budgets and releases are recorded: ``None`` (in memory, forgotten on exit,
            with an :class:`InMemoryLedgerWarning`; ``"memory:"`` asks for that without one),
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
    if ledger is None:
        warnings.warn(
            InMemoryLedgerWarning(
                "the budget is kept in memory: it is forgotten when this program ends, and a new "
                "connect() starts afresh. Pass ledger='ledger.sqlite' to keep budgets and "
                "answers, or ledger='memory:' to keep them in memory without this warning."
            ),
            stacklevel=2,
        )
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


def _written_in(sql: str) -> str:
    """The note of a query whose subqueries over public tables were answered before it."""
    return (
        "Each subquery used as a value reads public tables alone: it was answered exactly, free, "
        f"and its value written in: {' '.join(sql.split())}"
    )


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


def _timed_alike(plan: DPQuery, catalog: Catalog) -> None:
    """Refuse, on a constant-time dataset, a plan whose noise is calibrated on the data."""
    if plan.elastic is not None and catalog.constant_time:
        raise PrivacyRefusal(
            "a join without join_rows_per_key is not answered on a constant-time dataset.",
            clause="JOIN",
            why="elastic sensitivity calibrates its noise to the data's key frequencies after "
            "reading them, so the time a release takes would depend on the data",
            fix="ask the custodian to declare join_rows_per_key on both join keys.",
        )


def _salt() -> int:
    """A fresh key for contribution bounding's hash ranking, from the OS generator: which rows
    of a unit are kept must not be predictable from, or favour, any data value. One range for
    queries and products alike.
    """
    return int(system_random().uint64(1)[0]) % SALT_LIMIT


def _loss_arguments(
    epsilon: Any, delta: Any, rho: Any
) -> tuple[Fraction | None, Fraction | None, Fraction | None]:
    """A product's ε, δ and ρ as exact fractions (each optional), refused if malformed."""
    eps = as_fraction(epsilon, "epsilon") if epsilon is not None else None
    dlt = as_fraction(delta, "delta", allow_zero=True) if delta is not None else None
    rh = as_fraction(rho, "rho") if rho is not None else None
    return eps, dlt, rh


def _plain(value: Fraction) -> str:
    """A bound as a note shows it (``16384``, ``0.5``)."""
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"
