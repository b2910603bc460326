"""What the HTTP gateway does, without HTTP: authenticate, check access, call the library.

The routes in :mod:`dalenius.server.routes` only translate between HTTP and this class, and this
class only decides *who may do what* and then calls the library — :class:`~dalenius.engine.session.
Session` for explain and query, the :class:`~dalenius.ledger.Ledger` for budgets and records, the
:class:`~dalenius.server.store.StateStore` for analysts, tokens, grants and datasets. It adds no
privacy logic of its own: whatever the console does, a script could do through the same calls.

An analyst sees only the datasets granted to them; to an analyst, a dataset that exists but is not
granted is indistinguishable from one that does not exist. A curator sees every dataset.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

from dalenius.accounting import Definition, definition_of, parse_definition, zero_loss
from dalenius.core.errors import (
    CatalogError,
    ConfigurationError,
    EvaluationFailed,
    PublicAnswer,
    QueryError,
    UserError,
)
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP, as_fraction
from dalenius.engine.policy import Policy
from dalenius.engine.postprocess import key_types, output_kinds
from dalenius.engine.result import SyntheticResult
from dalenius.engine.session import Session
from dalenius.ledger import Ledger, open_ledger
from dalenius.releases.synth_table import Progress
from dalenius.server import describe
from dalenius.server.config import GatewayConfig
from dalenius.server.errors import AuthenticationError, DatasetUnavailableError, RateLimitedError
from dalenius.server.guard import (
    NumberRefusal,
    ShapeRefusal,
    check_sql_shape,
    checked_number,
)
from dalenius.server.priority import lower_priority
from dalenius.server.ratelimit import SharedRateLimiter
from dalenius.server.registry import DatasetCache, OpenDataset, open_catalog
from dalenius.server.requestlog import RequestLog
from dalenius.server.slots import Slots
from dalenius.server.store import (
    ANALYST,
    Caller,
    NotFoundError,
    Registration,
    StateStore,
    check_name,
)
from dalenius.server.tokens import IssuedToken

_log = logging.getLogger("dalenius.server")

MAX_LIST = 1000
"""The most records one listing returns."""

R = TypeVar("R")


@dataclass(frozen=True)
class LossSpec:
    """A loss as a client sends it: ``epsilon`` alone, ``epsilon`` with ``delta``, or ``rho``."""

    epsilon: Any = None
    delta: Any = None
    rho: Any = None

    def to_loss(self, what: str) -> Loss:
        """The exact loss, or a clear error naming the accepted combinations.

        Example:
            >>> LossSpec(epsilon="0.5").to_loss("budget")
            PureDP(epsilon=Fraction(1, 2))
        """
        given = {k for k in ("epsilon", "delta", "rho") if getattr(self, k) is not None}
        for part in given:
            checked_number(part, getattr(self, part), per_release=False)
        if given == {"epsilon"}:
            return PureDP(as_fraction(self.epsilon, "epsilon", allow_zero=True))
        if given == {"epsilon", "delta"}:
            return ApproxDP(
                as_fraction(self.epsilon, "epsilon", allow_zero=True),
                as_fraction(self.delta, "delta", allow_zero=True),
            )
        if given == {"rho"}:
            return ZCDP(as_fraction(self.rho, "rho", allow_zero=True))
        raise ConfigurationError(
            f"A {what} needs epsilon, epsilon with delta, or rho; got {sorted(given) or 'none'}.",
            fix='send {"epsilon": 1} for pure DP, {"epsilon": 1, "delta": 1e-6} for (ε, δ), '
            'or {"rho": 0.5} for zCDP.',
        )


def _session_refuses(refusal: UserError) -> bool:
    """Whether the session itself refuses (and audits) this: anything but the gateway's checks."""
    return not isinstance(refusal, _PlanningRefusal | NumberRefusal | ShapeRefusal)


class _PlanningRefusal(QueryError):
    """The planner could not handle the query (too deep, or a number too extreme)."""


@contextmanager
def _planning(sql: str) -> Iterator[None]:
    """Turn the planner's failures on extreme input into a refusal, never a 500.

    The shape check before it bounds nesting; this catches what it cannot see (a number in the
    SQL too large for a float, a product that overflows) before any data is read.
    """
    try:
        yield
    except (RecursionError, OverflowError, ZeroDivisionError, MemoryError) as error:
        _log.info("planning refused: %s: %s", type(error).__name__, error)
        raise _PlanningRefusal(
            "the query is too complex, or holds a number too extreme, to be planned.",
            sql=sql,
            why=f"planning it failed ({type(error).__name__}); nothing was read or spent.",
            fix="use numbers of ordinary size, and simpler expressions.",
        ) from None


class Gateway:
    """The gateway's state and operations for one process.

    Args:
        config: the gateway's settings.
        ledger: an open ledger to use instead of opening ``config.ledger``.
        store: an open state store to use instead of opening ``config.state_url``.
        shared_slots: the lock file through which the worker processes of one ``dalenius serve
            --workers N`` share each principal's running-query limit (``None``: this process
            alone; see :mod:`dalenius.server.slots`).
    """

    def __init__(
        self,
        config: GatewayConfig,
        *,
        ledger: Ledger | None = None,
        store: StateStore | None = None,
        shared_slots: str | None = None,
    ) -> None:
        self.config = config
        self.ledger = ledger if ledger is not None else open_ledger(config.ledger)
        self.store = store if store is not None else StateStore(config.state_url)
        limits = config.limits
        self.datasets = DatasetCache(config.data_root, limits.query_seconds)
        self.requests = RequestLog(self.store)
        self.limiter = SharedRateLimiter(
            self.store,
            rate=limits.requests_per_minute / 60,
            burst=limits.burst,
            capacity=limits.tracked_clients,
        )
        self.slots = Slots(limits.concurrent_queries, shared_slots)
        # Explain and query run on their own threads, sign-in on others: a principal's slow
        # queries can fill only the query pool, never the threads that admit other requests.
        self.query_pool = ThreadPoolExecutor(
            limits.query_workers, "dalenius-query", initializer=lower_priority
        )
        self.sign_in_pool = ThreadPoolExecutor(4, "dalenius-sign-in")

    # -- authentication ----------------------------------------------------------------------

    def authenticate(self, token: str | None, client: str) -> Caller:
        """The caller a bearer token belongs to, after its rate limit.

        Failed sign-ins are rate-limited by client address (so guessing costs time); signed-in
        requests by token (so one analyst cannot starve another).

        Raises:
            AuthenticationError: no token, or not a valid one.
            RateLimitedError: the client is over its rate.
        """
        caller = self.store.authenticate(token) if token else None
        key = f"token:{caller.token_id}" if caller else f"address:{client}"
        wait = self.limiter.acquire(key)
        if wait > 0:
            raise RateLimitedError(wait, self.config.limits.requests_per_minute)
        if caller is not None:
            return caller
        if not token:
            raise AuthenticationError(
                "This endpoint needs an API token.",
                fix="send the header 'Authorization: Bearer <token>'; a curator issues tokens.",
            )
        raise AuthenticationError(
            "The API token is not valid (unknown, mistyped, revoked or expired).",
            fix="check the token you copied, or ask a curator for a new one.",
        )

    def submit_query_work(self, caller: Caller, work: Callable[[], Any]) -> Future[Any]:
        """Run ``work`` (an explain or a query) on the query pool, in one of the caller's slots.

        The slot is taken now — so a caller over their limit is refused at once, at no cost —
        and given back when the work ends, or when it is cancelled before it started.

        Raises:
            BusyError: the caller already has as many requests running as allowed.
        """
        release = self.slots.take(caller.name)
        try:
            future = self.query_pool.submit(work)
        except BaseException:
            release()
            raise
        future.add_done_callback(lambda _: release())
        return future

    # -- datasets ----------------------------------------------------------------------------

    def _registration(self, caller: Caller, name: str) -> Registration:
        return self._access(caller, name)[0]

    def _access(self, caller: Caller, name: str) -> tuple[Registration, Fraction]:
        """The registration of a dataset the caller may see, and its ε floor (one read)."""
        found, granted, own_floor = self.store.access(caller.name, name)
        if found is None or not (caller.is_curator or granted):
            raise NotFoundError(
                f"No dataset named {name!r} is available to you.",
                fix="list the datasets you may use with GET /v1/datasets, or ask a curator "
                "for a grant.",
            )
        return found, self._floor(own_floor)

    def open(self, caller: Caller, name: str) -> OpenDataset:
        """The dataset ``name`` if the caller may see it.

        Raises:
            NotFoundError: no such dataset, or not granted to the caller.
            DatasetUnavailableError: registered, but its catalog cannot be opened now.
        """
        return self._open(caller, name)[0]

    def _open(self, caller: Caller, name: str) -> tuple[OpenDataset, Fraction]:
        """:meth:`open`, with the dataset's ε floor per query."""
        registration, floor = self._access(caller, name)
        try:
            return self.datasets.get(registration), floor
        except (CatalogError, ConfigurationError) as error:
            _log.warning("dataset %r cannot be opened: %s", name, error)
            raise DatasetUnavailableError(
                f"The dataset {name!r} is registered but cannot be opened on the server.",
                why="its catalog or data files are missing or changed on the server.",
                fix="ask a curator to check the dataset (its problem is shown in their list).",
            ) from None

    def visible_names(self, caller: Caller) -> list[str]:
        """Names of the datasets the caller may see (without opening them)."""
        registered = [r.name for r in self.store.registrations()]
        if caller.is_curator:
            return registered
        granted = {dataset for _, dataset in self.store.grants(caller.name)}
        return [name for name in registered if name in granted]

    def list_datasets(self, caller: Caller) -> list[dict[str, Any]]:
        """The datasets the caller may see, each with its tables (or why it cannot be opened)."""
        if caller.is_curator:
            registrations = self.store.registrations()
        else:
            granted = {dataset for _, dataset in self.store.grants(caller.name)}
            registrations = [r for r in self.store.registrations() if r.name in granted]
        out = []
        for registration in registrations:
            opened, problem = None, None
            try:
                opened = self.datasets.get(registration)
            except (CatalogError, ConfigurationError) as error:
                problem = str(error) if caller.is_curator else "cannot be opened on the server"
            out.append(
                describe.dataset_summary(registration, opened, problem, curator=caller.is_curator)
            )
        return out

    def describe_dataset(self, caller: Caller, name: str) -> dict[str, Any]:
        """A dataset's public metadata: tables, columns, bounds, keys, privacy units."""
        return describe.dataset_detail(self.open(caller, name), curator=caller.is_curator)

    def _session(self, caller: Caller, opened: OpenDataset, floor: Fraction) -> Session:
        """A session for ``caller`` whose policy has the dataset's ε ``floor`` (the catalog's,
        raised to this gateway's and the curator's): the session checks it for every release.
        """
        # A session is a light view: the ledger and the engine are shared, and never closed here.
        return Session(
            opened.catalog,
            ledger=self.ledger,
            executor=opened.executor,
            analyst=caller.name,
            confidence=self.config.confidence,
            policy=Policy.of(opened.catalog).raised(floor),
        )

    def _checked_session(
        self, caller: Caller, name: str, sql: str, epsilon: Any, delta: Any
    ) -> Session:
        """The caller's session on a dataset, after the gateway's bounded checks of the loss's
        numbers and the SQL's shape (before anything is planned or read).
        """
        checked_number("epsilon", epsilon)
        checked_number("delta", delta)
        check_sql_shape(sql)
        opened, floor = self._open(caller, name)
        return self._session(caller, opened, floor)

    def explain(
        self,
        caller: Caller,
        name: str,
        sql: str,
        epsilon: Any,
        delta: Any,
        confidence: float | None,
        **targets: Any,
    ) -> dict[str, Any]:
        """The plan, its cost and expected errors; reads no data and spends nothing.

        ``targets`` are the accuracy-first arguments (``target_error``, ``target_relative``,
        ``expected``): the smallest ε meeting them is computed instead of taking ``epsilon``.
        """
        session = self._checked_session(caller, name, sql, epsilon, delta)
        with _planning(sql):
            explanation = session.explain(
                sql, epsilon, delta=delta, confidence=confidence, **targets
            )
        return {"dataset": name, **explanation.to_dict()}

    def outputs(
        self,
        caller: Caller,
        name: str,
        sql: str,
        epsilon: Any,
        delta: Any,
        confidence: float | None,
        **targets: Any,
    ) -> list[tuple[str, str, str | None]]:
        """The query's output columns, their kinds (``key``, ``count`` …) and, for group keys,
        their catalog types, as its answer will have them; like :meth:`explain`, it reads no
        data and spends nothing.
        """
        session = self._checked_session(caller, name, sql, epsilon, delta)
        try:
            with _planning(sql):
                plan = session.plan(
                    sql, epsilon, delta=delta, confidence=confidence, shape_only=True, **targets
                )
        except PublicAnswer as public:  # exact and free: the catalog's keys, or public tables
            return [
                (c, k, t if k == "key" else None)
                for c, k, t in zip(public.columns, public.kinds, public.types, strict=True)
            ]
        names = [out.name for out in plan.query.outputs]
        return list(zip(names, output_kinds(plan), key_types(plan), strict=True))

    def query(
        self,
        caller: Caller,
        name: str,
        sql: str,
        epsilon: Any,
        delta: Any,
        confidence: float | None,
        idempotency_key: str | None,
        **targets: Any,
    ) -> dict[str, Any]:
        """Answer a query under the caller's budget (the session audits it in the ledger).

        Before the session sees it, the query's shape is checked and its plan made, so that a
        loss outside the accepted range or below the ε floor is refused with a bounded audit
        line, and nothing unbounded ever reaches the ledger.

        A failure after the data gate — in the session, or here while the committed answer is
        turned into JSON — is the one fixed :class:`EvaluationFailed` outcome.
        """
        opened, floor = self._open(caller, name)
        session = self._session(caller, opened, floor)
        try:
            checked_number("epsilon", epsilon)
            checked_number("delta", delta)
            check_sql_shape(sql)
            with _planning(sql):
                # The plan is made here, bounded, so that planning's failures are refusals; the
                # session checks the policy (the ε floor) in plan() and again in query().
                session.plan(sql, epsilon, delta=delta, confidence=confidence, **targets)
        except UserError as refusal:
            if not _session_refuses(refusal):
                self._audit_refusal(caller, opened, sql, refusal)
                raise
            # Otherwise the session refuses it again below, and writes the audit line itself.
        result = session.query(
            sql,
            epsilon,
            delta=delta,
            confidence=confidence,
            idempotency_key=idempotency_key,
            **targets,
        )
        try:
            return {"dataset": name, **result.to_dict()}
        except Exception as error:
            _log.warning(
                "request failed after the data gate: dataset %r, entry %s: the answer could not "
                "be serialised (%s)",
                name,
                result.entry_id,
                type(error).__name__,
            )
            raise EvaluationFailed() from None

    def _release(
        self,
        caller: Caller,
        name: str,
        request: Any,
        numbers: tuple[str, ...],
        run: Callable[[Session], R],
    ) -> R:
        """A release product under the caller's budget (the session audits it): the request's
        ``numbers`` and filter checked first, then ``run`` on the caller's session.
        """
        for part in numbers:
            checked_number(part, getattr(request, part))
        where = getattr(request, "where", None)
        if where is not None:
            check_sql_shape(where)
        opened, floor = self._open(caller, name)
        return run(self._session(caller, opened, floor))

    def density(self, caller: Caller, name: str, request: Any) -> dict[str, Any]:
        """Release a density curve or surface under the caller's budget (audited by the session)."""
        result = self._release(
            caller,
            name,
            request,
            ("epsilon", "delta", "rho"),
            lambda session: session.density(
                request.table,
                request.columns,
                bandwidth=request.bandwidth,
                epsilon=request.epsilon,
                delta=request.delta,
                rho=request.rho,
                points=request.points,
                where=request.where,
                confidence=request.confidence,
                idempotency_key=request.idempotency_key,
            ),
        )
        return {"dataset": name, **result.to_dict()}

    def hierarchy(self, caller: Caller, name: str, request: Any) -> dict[str, Any]:
        """Release a consistent hierarchy of counts under the caller's budget."""
        result = self._release(
            caller,
            name,
            request,
            ("epsilon", "delta", "rho"),
            lambda session: session.hierarchy(
                request.table,
                request.levels,
                epsilon=request.epsilon,
                delta=request.delta,
                rho=request.rho,
                where=request.where,
                split=request.split,
                confidence=request.confidence,
                idempotency_key=request.idempotency_key,
            ),
        )
        return {"dataset": name, **result.to_dict()}

    def continual(self, caller: Caller, name: str, request: Any) -> dict[str, Any]:
        """Publish a continual series' closed periods; its first publication is charged once."""
        result = self._release(
            caller,
            name,
            request,
            ("epsilon",),
            lambda session: session.continual(
                request.table,
                time=request.time,
                period=request.period,
                start=request.start,
                horizon=request.horizon,
                epsilon=request.epsilon,
                max_rows=request.max_rows,
                value=request.value,
                levels=request.levels,
                as_of=request.as_of,
                confidence=request.confidence,
            ),
        )
        return {"dataset": name, **result.to_dict()}

    def onthemap(self, caller: Caller, name: str, request: Any) -> dict[str, Any]:
        """Release synthetic origin–destination rows under the caller's budget."""
        result = self._release(
            caller,
            name,
            request,
            ("epsilon", "delta", "prior", "count_epsilon"),
            lambda session: session.onthemap(
                request.table,
                origin=request.origin,
                destination=request.destination,
                epsilon=request.epsilon,
                delta=request.delta,
                prior=request.prior,
                per_destination=request.per_destination,
                count_epsilon=request.count_epsilon,
                where=request.where,
                idempotency_key=request.idempotency_key,
            ),
        )
        return {"dataset": name, **result.to_dict()}

    def synthesize(
        self, caller: Caller, name: str, request: Any, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Release synthetic rows (MST or AIM) under the caller's budget; the rows come as
        ``data``. ``progress`` is called after each round (``/synthesize/progress``).
        """
        result = self._release(
            caller,
            name,
            request,
            ("epsilon", "delta", "rho"),
            lambda session: session.synthesize(
                request.table,
                request.columns,
                epsilon=request.epsilon,
                delta=request.delta,
                rho=request.rho,
                bins=request.bins,
                rows=request.rows,
                where=request.where,
                method=request.method,
                degree=request.degree,
                idempotency_key=request.idempotency_key,
                progress=progress,
            ),
        )
        return {"dataset": name, **result.to_dict(), "data": _columns(result)}

    def perturb(self, caller: Caller, name: str, request: Any) -> dict[str, Any]:
        """Release every row of a table, each value perturbed, under the caller's budget; the
        rows come with the error table (audited by the session).
        """
        result = self._release(
            caller,
            name,
            request,
            ("epsilon", "delta"),
            lambda session: session.perturb(
                request.table,
                request.columns,
                epsilon=request.epsilon,
                delta=request.delta,
                tight=request.tight,
                confidence=request.confidence,
                idempotency_key=request.idempotency_key,
            ),
        )
        return {"dataset": name, **result.to_dict()}

    def choose_bounds(self, caller: Caller, name: str, request: Any) -> dict[str, Any]:
        """Choose a column's clipping bounds privately under the caller's budget."""
        result = self._release(
            caller,
            name,
            request,
            ("epsilon",),
            lambda session: session.choose_bounds(
                request.table,
                request.column,
                epsilon=request.epsilon,
                idempotency_key=request.idempotency_key,
            ),
        )
        return {"dataset": name, **result.to_dict()}

    def fetch_release(self, caller: Caller, name: str, entry_id: str) -> dict[str, Any]:
        """A release the caller already received, again by its entry id (no cost).

        Synthetic rows (MST or AIM) come with their ``data``: one list per column.
        """
        opened, floor = self._open(caller, name)
        result = self._session(caller, opened, floor).release(entry_id)
        doc = {"dataset": name, **result.to_dict()}
        if isinstance(result, SyntheticResult):
            doc["data"] = _columns(result)
        return doc

    def batch(
        self,
        caller: Caller,
        name: str,
        queries: list[dict[str, Any]],
        epsilon: Any,
        delta: Any,
        confidence: float | None,
        run: bool,
    ) -> dict[str, Any]:
        """Split ε optimally over queries with error targets; with ``run``, answer each one.

        Planning reads no data and spends nothing. Each answer goes through :meth:`query`, so it
        is checked, charged and audited exactly as a single query with that target.
        """
        checked_number("epsilon", epsilon)
        checked_number("delta", delta)
        for query in queries:
            check_sql_shape(str(query.get("sql", "")))
        opened, floor = self._open(caller, name)
        session = self._session(caller, opened, floor)
        with _planning(str(queries[0].get("sql", "")) if queries else ""):
            # The session refuses a batch with a query below the policy's ε floor.
            plan = session.plan_batch(queries, epsilon, delta=delta, confidence=confidence)
        results = [
            self.query(
                caller,
                name,
                item.sql,
                None,
                delta,
                confidence,
                None,
                target_error=dict(item.targets.by_output) or item.targets.everywhere,
            )
            for item in (plan.items if run else ())
        ]
        return {"dataset": name, **plan.to_dict(), "results": results}

    def min_epsilon(self, dataset: str) -> Fraction:
        """The ε floor of one query on ``dataset``: the gateway's, or the curator's if higher."""
        return self._floor(self.store.floor(dataset))

    def _floor(self, own: Fraction | None) -> Fraction:
        """The gateway's ε floor, or the dataset's own (``own``) if higher."""
        floor = Fraction(repr(self.config.limits.min_epsilon))
        return max(floor, own) if own is not None else floor

    def set_min_epsilon(self, caller: Caller, name: str, epsilon: Any) -> dict[str, Any]:
        """Set (``None``: lift) a dataset's own ε floor per query; the gateway's still applies."""
        value = None
        if epsilon is not None:
            checked_number("epsilon", epsilon)
            value = as_fraction(epsilon, "epsilon")
        self.store.set_floor(name, value, by=caller.name)
        return self.dataset_accounting(name)

    def _audit_refusal(
        self, caller: Caller, opened: OpenDataset, sql: str, refusal: UserError
    ) -> None:
        """Record a refusal the gateway made itself (no loss: nothing unbounded is written)."""
        first = str(refusal).splitlines()[0] if str(refusal) else type(refusal).__name__
        self.ledger.record(
            principal=caller.name,
            dataset=opened.catalog.name,
            sql=sql,
            outcome="refused",
            detail=first[:500],
            plan_hash=None,
            loss=None,
        )

    # -- budgets and records -----------------------------------------------------------------

    def _definition(self, dataset: str) -> Definition:
        for info in self.ledger.datasets():
            if info.name == dataset:
                return info.definition
        return "pure"

    def budget(self, analyst: str, dataset: str) -> dict[str, Any]:
        """An analyst's budget on a dataset, with spent and remaining."""
        found = self.ledger.budgets(principal=analyst, dataset=dataset)
        definition = self._definition(dataset)
        known = any(info.name == dataset for info in self.ledger.datasets())
        spent = self.ledger.spent(analyst, dataset) if known else zero_loss("pure")
        remaining = self.ledger.remaining(analyst, dataset) if known else zero_loss("pure")
        return describe.budget_json(
            analyst, dataset, definition, found[0] if found else None, spent, remaining
        )

    def caller_budget(self, caller: Caller, name: str) -> dict[str, Any]:
        """The caller's own budget on a dataset they may see."""
        self._registration(caller, name)
        return self.budget(caller.name, name)

    def caller_budgets(self, caller: Caller) -> list[dict[str, Any]]:
        """The caller's budget on every dataset they may see."""
        return [self.budget(caller.name, name) for name in self.visible_names(caller)]

    def entries(self, analyst: str | None, dataset: str | None, limit: int) -> list[dict[str, Any]]:
        """Ledger entries (charges), newest first."""
        found = self.ledger.entries(principal=analyst, dataset=dataset)
        return [describe.entry_json(e) for e in reversed(found[-limit:])]

    def audit(self, analyst: str | None, dataset: str | None, limit: int) -> list[dict[str, Any]]:
        """The ledger's audit trail, newest first."""
        found = self.ledger.audit(principal=analyst, dataset=dataset)
        return [describe.audit_json(r) for r in reversed(found[-limit:])]

    def request_log(self, principal: str | None, limit: int) -> list[dict[str, Any]]:
        """The gateway's request log, newest first (this process's pending lines included)."""
        self.requests.flush()
        return [
            describe.request_json(r) for r in self.store.requests(principal=principal, limit=limit)
        ]

    # -- curator operations ------------------------------------------------------------------

    def _catalog_path(self, text: str) -> Path:
        try:
            path = Path(text).expanduser()
            if not path.is_absolute():
                base = self.config.source.resolve().parent if self.config.source else Path.cwd()
                path = base / path
            path = path.resolve()
        except (OSError, ValueError, RuntimeError) as error:
            raise ConfigurationError(
                f"The catalog path {text!r} is not a usable file path: {error}.",
                fix="give the path of the catalog's TOML file on the server.",
            ) from None
        root = self.config.catalog_root
        if root is not None and not path.is_relative_to(root):
            raise ConfigurationError(
                f"The catalog {str(path)!r} is outside the gateway's catalog folder {str(root)!r}.",
                why="the gateway's configuration limits registration to catalogs under catalog_root.",
                fix=f"put the catalog under {root} and register it from there.",
            )
        return path

    def register(
        self,
        caller: Caller,
        catalog: str,
        definition: str | None,
        total_cap: LossSpec | None,
    ) -> dict[str, Any]:
        """Register a dataset by the path of its catalog on the server.

        The catalog is opened first (every table must be readable), so a bad catalog is refused
        with its own error and nothing is recorded. The ledger learns the dataset's accounting
        definition (``pure`` unless given) and its optional total cap on all analysts together.
        """
        path = self._catalog_path(catalog)
        parsed, executor = open_catalog(str(path), data_root=self.config.data_root)
        executor.close()
        cap = total_cap.to_loss("total cap") if total_cap is not None else None
        target = parse_definition(definition) if definition is not None else None
        current = self._definition(parsed.name)
        known = any(info.name == parsed.name for info in self.ledger.datasets())
        if not known or target is not None or cap is not None:
            if target is not None:
                chosen = target
            elif known:
                chosen = current
            else:
                chosen = definition_of(cap) if cap is not None else "pure"
            self.ledger.set_dataset(parsed.name, definition=chosen, total_cap=cap)
        registration = self.store.register(parsed.name, str(path), by=caller.name)
        return self.describe_dataset(caller, registration.name)

    def unregister(self, name: str) -> None:
        """Remove a dataset and its grants (the ledger keeps its budgets and records)."""
        self.store.unregister(name)
        self.datasets.forget(name)

    def set_total_cap(self, name: str, cap: LossSpec | None) -> dict[str, Any]:
        """Set (or with ``None`` lift) the cap on every analyst's losses on a dataset together."""
        if self.store.registration(name) is None:
            raise NotFoundError(f"No dataset named {name!r} is registered.")
        if cap is None:
            if any(info.name == name for info in self.ledger.datasets()):
                self.ledger.remove_total_cap(name)
        else:
            loss = cap.to_loss("total cap")
            known = any(info.name == name for info in self.ledger.datasets())
            definition = self._definition(name) if known else definition_of(loss)
            self.ledger.set_dataset(name, definition=definition, total_cap=loss)
        return self.dataset_accounting(name)

    def set_fail_closed(self, name: str, fail_closed: bool) -> dict[str, Any]:
        """Whether a failure after the data gate also exhausts that analyst's budget there."""
        if self.store.registration(name) is None:
            raise NotFoundError(f"No dataset named {name!r} is registered.")
        known = any(info.name == name for info in self.ledger.datasets())
        definition = self._definition(name) if known else "pure"
        self.ledger.set_dataset(name, definition=definition, fail_closed=fail_closed)
        return self.dataset_accounting(name)

    def dataset_accounting(self, name: str) -> dict[str, Any]:
        """A dataset's definition, total cap and what every analyst together has spent."""
        if self.store.registration(name) is None:
            raise NotFoundError(f"No dataset named {name!r} is registered.")
        failures = self.ledger.failure_counts().get(name, 0)
        for info in self.ledger.datasets():
            if info.name == name:
                return {
                    "dataset": name,
                    "definition": info.definition,
                    "total_cap": describe.loss_json(info.total_cap),
                    "total_spent": describe.loss_json(self.ledger.total_spent(name)),
                    "fail_closed": info.fail_closed,
                    "failures": failures,
                    "min_epsilon": float(self.min_epsilon(name)),
                }
        return {
            "dataset": name,
            "definition": "pure",
            "total_cap": None,
            "total_spent": describe.loss_json(zero_loss("pure")),
            "fail_closed": False,
            "failures": failures,
            "min_epsilon": float(self.min_epsilon(name)),
        }

    def principal(self, name: str) -> dict[str, Any]:
        """A principal with its grants and tokens."""
        found = self.store.principal(name)
        if found is None:
            raise NotFoundError(f"No principal named {name!r}.")
        grants = [dataset for _, dataset in self.store.grants(name)]
        return describe.principal_json(found, grants, self.store.tokens(name))

    def principals(self) -> list[dict[str, Any]]:
        """Every principal with its grants and tokens."""
        grants: dict[str, list[str]] = {}
        for who, dataset in self.store.grants():
            grants.setdefault(who, []).append(dataset)
        tokens = self.store.tokens()
        return [
            describe.principal_json(
                p, grants.get(p.name, []), [t for t in tokens if t.principal == p.name]
            )
            for p in self.store.principals()
        ]

    def create_principal(
        self,
        caller: Caller,
        name: str,
        role: str,
        issue: bool,
        label: str,
        expires_in_days: int | None = None,
    ) -> dict[str, Any]:
        """Create an analyst or curator, with a first token unless ``issue`` is false."""
        self.store.create_principal(name, role, by=caller.name)
        token = None
        if issue:
            token = self.issue_token(caller, name, label, expires_in_days)
        return self.principal(name) | {"token": token}

    def issue_token(
        self, caller: Caller, name: str, label: str, expires_in_days: int | None = None
    ) -> dict[str, Any]:
        """A new token for ``name``, shown once; it expires after ``expires_in_days`` if given."""
        expires = None
        if expires_in_days is not None:
            expires = datetime.now(UTC) + timedelta(days=expires_in_days)
        issued = self.store.issue_token(name, label=label, by=caller.name, expires_at=expires)
        return self._issued(name, issued) | {"expires_at": expires.isoformat() if expires else None}

    def revoke_token(self, name: str, token_id: str) -> None:
        """Revoke one of ``name``'s tokens."""
        self.store.revoke_token(name, token_id)

    @staticmethod
    def _issued(name: str, issued: IssuedToken) -> dict[str, Any]:
        return {
            "principal": name,
            "token_id": issued.token_id,
            "token": issued.token,
            "note": "Shown once: the gateway keeps only a hash of this token.",
        }

    def grant(self, caller: Caller, name: str, dataset: str) -> dict[str, Any]:
        """Let an analyst see and query a dataset."""
        self.store.grant(name, dataset, by=caller.name)
        return self.principal(name)

    def revoke_grant(self, name: str, dataset: str) -> dict[str, Any]:
        """Withdraw a grant."""
        self.store.revoke_grant(name, dataset)
        return self.principal(name)

    def set_budget(
        self, analyst: str, dataset: str, cap: LossSpec, refresh_days: int | None
    ) -> dict[str, Any]:
        """Set an analyst's budget on a registered dataset."""
        check_name(analyst, "analyst")
        if self.store.principal(analyst) is None:
            raise NotFoundError(f"No principal named {analyst!r}.", fix="create the analyst first.")
        if self.store.registration(dataset) is None:
            raise NotFoundError(f"No dataset named {dataset!r} is registered.")
        self.ledger.set_budget(analyst, dataset, cap.to_loss("budget"), refresh_days=refresh_days)
        return self.budget(analyst, dataset)

    def budgets(self, analyst: str | None, dataset: str | None) -> list[dict[str, Any]]:
        """Every budget (optionally of one analyst or dataset) with spent and remaining."""
        return [
            self.budget(info.principal, info.dataset)
            for info in self.ledger.budgets(principal=analyst, dataset=dataset)
        ]

    def bootstrap(self, name: str, role: str = ANALYST, *, label: str = "") -> IssuedToken:
        """Create ``name`` if missing and issue it a token (for the command line, not HTTP)."""
        self.store.ensure_principal(name, role, by="dalenius serve")
        return self.store.issue_token(
            name, label=label or "issued at start-up", by="dalenius serve"
        )

    def close(self) -> None:
        """Write the pending request log, close the engines, the ledger and the store."""
        self.query_pool.shutdown(wait=True, cancel_futures=True)
        self.sign_in_pool.shutdown(wait=True)
        self.requests.close()
        self.datasets.close()
        self.ledger.close()
        self.store.close()
        self.slots.close()


def _columns(result: SyntheticResult) -> dict[str, list[str]]:
    """Synthetic rows as one list of labels per column (JSON-ready)."""
    frame = result.to_pandas()
    return {c: [str(v) for v in frame[c]] for c in frame.columns}
