"""What an attacker may ask: the target interface, and the systems attacks are run against.

Every attack in :mod:`dalenius.attacks` learns about the data only through :class:`Target`: it
sends an aggregate SQL query and reads the answer, nothing else. An import-linter contract
(``pyproject.toml``) enforces it: attack modules may not import an engine (DuckDB, PostgreSQL,
Spark, sqlite3), an executor, a ledger, the session or the gateway; only this module may, to build
the targets. (:mod:`dalenius.attacks.population` writes the experiment's data and keeps its truth
for scoring; attacks are handed targets, never the rows.)

The targets, one per design a custodian might deploy:

* :class:`RawTarget` (``raw``) — the SQL runs unchanged on the engine (DuckDB) and the exact
  answer comes back: an aggregate-only query server with no noise.
* :class:`NaiveNoisyTarget` (``naive``) — the exact answer plus *fresh* Laplace noise of scale
  ``sensitivity/ε`` on every numeric cell of every answer, drawn from the OS generator. Each
  answer alone is ε-DP, but there is no budget and no cache: n answers cost n·ε, and asking the
  same query again averages the noise away. This is the design the course warns against.
* :class:`DaleniusTarget` (``dalenius``) — a real :class:`dalenius.Session` on the catalog, under a
  budget kept in a ledger: each new query spends ``epsilon``, a repeated query is answered from
  the ledger's record at no cost, and a query beyond the budget is refused before any data is
  read.
* :class:`GatewayTarget` (``dalenius`` over HTTP) — the same through a running gateway
  (``dalenius serve``) with an analyst's API token.

A refusal (budget exhausted, a query Dalenius cannot answer privately) is raised as the
:class:`~dalenius.core.errors.UserError` it is; attacks catch it and count it as a question that
got no answer. Every target counts the questions it answered (:attr:`Target.queries_asked`) and
the privacy loss they cost (:attr:`Target.epsilon_spent`).

Attacks on *released microdata* (linking, homogeneity) receive the released table itself: a
release is public by definition, so the experiment hands it over; a target that produces such a
release from private data (and so touches an engine) belongs in this module too.

Experiments that need many independent trials (a fresh analyst and budget each time) describe a
target with a :class:`TargetSpec` and open it on a :class:`Database` per trial; the database keeps
one engine per catalog so that a trial does not reload the data.

Example:
    >>> import tempfile, pathlib
    >>> from dalenius.attacks.population import make_people, write_population
    >>> db = write_population(make_people(30, seed=1), pathlib.Path(tempfile.mkdtemp()))
    >>> raw = TargetSpec("raw").open(Database(db.catalog))
    >>> raw.ask("SELECT COUNT(*) FROM people").value
    30.0
    >>> dp = TargetSpec("dalenius", epsilon=0.5, budget=1).open(Database(db.catalog))
    >>> first = dp.ask("SELECT COUNT(*) FROM people")
    >>> dp.ask("SELECT COUNT(*) FROM people").value == first.value  # the ledger's record
    True
    >>> dp.queries_asked, dp.epsilon_spent
    (2, Fraction(1, 2))
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from dalenius.core.catalog import Catalog
from dalenius.core.errors import BudgetExceededError, ConfigurationError, UserError
from dalenius.core.loss import as_fraction
from dalenius.engine.session import Session, connect
from dalenius.executors.base import Executor
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.mechanisms.laplace import GridLaplace, IntegerLaplace

KINDS = ("raw", "naive", "dalenius")
"""The target kinds an attack can be run against (``dalenius`` with a URL uses the gateway)."""


@dataclass(frozen=True)
class Answer:
    """One answer a target gave.

    Attributes:
        columns: output column names.
        rows: the released rows (exact, noisy, or Dalenius's noisy release).
        cached: the answer is the ledger's record of an identical earlier query (Dalenius only).
        epsilon: the privacy loss this answer cost (0 for raw, the per-query ε for naive — a
            loss nobody accounts for — and what the ledger charged for Dalenius).
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    cached: bool = False
    epsilon: Fraction = Fraction(0)

    @property
    def value(self) -> float:
        """The one number of a one-row, one-column answer (an empty SUM, NULL, reads as 0)."""
        if len(self.rows) != 1 or len(self.rows[0]) != 1:
            raise ConfigurationError(
                f"the answer has {len(self.rows)} row(s) of {len(self.columns)} column(s), "
                "not a single number.",
                fix="ask a scalar aggregate such as SELECT COUNT(*) FROM people WHERE ...",
            )
        cell = self.rows[0][0]
        return 0.0 if cell is None else float(cell)


@runtime_checkable
class Target(Protocol):
    """A system an attacker can ask aggregate SQL questions."""

    kind: str
    """``raw``, ``naive`` or ``dalenius``."""

    def ask(self, sql: str) -> Answer:
        """Answer one aggregate query, or raise the :class:`UserError` that refuses it."""
        ...

    @property
    def queries_asked(self) -> int:
        """How many questions got an answer (cached ones included)."""
        ...

    @property
    def epsilon_spent(self) -> Fraction | None:
        """The total ε the answers cost; ``None`` for raw, where no privacy is claimed."""
        ...

    @property
    def budget(self) -> Fraction | None:
        """The ε the system lets one analyst spend in all; ``None`` when nothing stops them."""
        ...

    def close(self) -> None:
        """Release what the target holds (not the shared engine of a :class:`Database`)."""
        ...


class Database:
    """A catalog and the one engine that answers raw and naive targets on it (opened lazily).

    Dalenius targets get their own executor per session unless ``share`` is set, in which case
    they reuse this one too (a fresh ledger per session keeps the budgets apart).
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._executor: Executor | None = None
        self._lock = threading.Lock()

    @property
    def executor(self) -> Executor:
        """The engine, loading every table on first use."""
        with self._lock:
            if self._executor is None:
                # One thread: experiment tables are small, and threads only add overhead.
                engine = DuckDBExecutor(self.catalog, threads=1)
                for table in self.catalog.tables:
                    engine.prepare(table)
                self._executor = engine
            return self._executor

    def close(self) -> None:
        """Close the engine."""
        with self._lock:
            if self._executor is not None:
                self._executor.close()
                self._executor = None

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Counter:
    """Counts answers and their cost (the bookkeeping every target shares)."""

    def __init__(self) -> None:
        self._asked = 0
        self._spent = Fraction(0)

    def _record(self, answer: Answer) -> Answer:
        self._asked += 1
        self._spent += answer.epsilon
        return answer

    @property
    def queries_asked(self) -> int:
        """How many questions got an answer."""
        return self._asked

    @property
    def epsilon_spent(self) -> Fraction | None:
        """The total ε of the answers given."""
        return self._spent

    @property
    def budget(self) -> Fraction | None:
        """``None``: nothing limits the questions."""
        return None

    def close(self) -> None:
        """Nothing of its own to release."""


class RawTarget(_Counter):
    """The exact answer of the engine: no noise, no budget."""

    kind = "raw"

    def __init__(self, database: Database) -> None:
        super().__init__()
        self._database = database

    def ask(self, sql: str) -> Answer:
        """Run ``sql`` on the engine and return its exact rows."""
        return self._record(_exact(self._database, sql))

    @property
    def epsilon_spent(self) -> Fraction | None:
        """``None``: exact answers offer no privacy to account."""
        return None


class NaiveNoisyTarget(_Counter):
    """Exact answers plus fresh Laplace noise per query: ε-DP per answer, nothing across answers.

    :attr:`epsilon_spent` is the loss the answers really cost together (n·ε): nobody stops or
    records it.

    Args:
        database: the data.
        epsilon: the ε of each single answer.
        sensitivity: the noise scale is ``sensitivity/ε`` for every numeric cell (1 suits counts).
    """

    kind = "naive"

    def __init__(self, database: Database, *, epsilon: Any, sensitivity: Any = 1) -> None:
        super().__init__()
        self._database = database
        self.epsilon = as_fraction(epsilon, "epsilon")
        self.sensitivity = as_fraction(sensitivity, "sensitivity")
        self._counts = IntegerLaplace(self.sensitivity, self.epsilon)
        self._reals = GridLaplace(self.sensitivity, self.epsilon)

    def ask(self, sql: str) -> Answer:
        """The exact rows with independent noise on each number (drawn from the OS generator)."""
        exact = _exact(self._database, sql)
        rows = tuple(tuple(self._noisy(cell) for cell in row) for row in exact.rows)
        return self._record(Answer(exact.columns, rows, epsilon=self.epsilon))

    def _noisy(self, cell: Any) -> Any:
        if cell is None:
            cell = 0
        if isinstance(cell, bool) or not isinstance(cell, int | float | Fraction):
            return cell
        if isinstance(cell, int):
            return int(self._counts.release([cell])[0])
        return float(self._reals.release([float(cell)])[0])


class DaleniusTarget(_Counter):
    """A Dalenius session: each new query spends ``epsilon`` from ``budget``; repeats are free.

    Args:
        database: the data (its catalog; its engine too when ``share_engine``).
        epsilon: the ε the attacker spends on each new query.
        budget: the analyst's total ε (a fresh in-memory ledger holds it unless ``ledger`` names
            a SQLite file or ``postgresql://`` URL).
        analyst: whose budget it is.
        share_engine: reuse the database's engine instead of opening one for this session.
    """

    kind = "dalenius"

    def __init__(
        self,
        database: Database,
        *,
        epsilon: Any,
        budget: Any,
        ledger: str | None = None,
        analyst: str = "attacker",
        share_engine: bool = True,
    ) -> None:
        super().__init__()
        self.epsilon = as_fraction(epsilon, "epsilon")
        self._budget = as_fraction(budget, "budget")
        executor = database.executor if share_engine else None
        # An experiment's budget is meant to live in memory unless a ledger is named.
        self.session: Session = connect(
            database.catalog,
            budget,
            ledger=ledger or "memory:",
            analyst=analyst,
            executor=executor,
        )
        self._owns_engine = not share_engine

    def ask(self, sql: str) -> Answer:
        """Ask the session; a refusal (budget, unanswerable SQL) raises before any data is read."""
        result = self.session.query(sql, epsilon=self.epsilon)
        spent = getattr(result.spent, "epsilon", Fraction(0))
        return self._record(Answer(result.columns, result.rows, result.cached, spent))

    @property
    def budget(self) -> Fraction | None:
        """The analyst's total ε."""
        return self._budget

    def close(self) -> None:
        """Close the ledger (and the engine, when the session opened its own)."""
        if self._owns_engine:
            self.session.close()
        else:
            self.session.ledger.close()


class GatewayTarget(_Counter):
    """A running Dalenius gateway, asked over HTTP with an analyst's API token.

    Args:
        url: the gateway's base URL (``http://host:port``).
        token: the analyst's API token.
        dataset: the dataset name on the gateway.
        epsilon: the ε spent on each new query.
        budget: the analyst's budget if known (for the report only; the gateway enforces it).
    """

    kind = "dalenius"

    def __init__(
        self, url: str, token: str, dataset: str, *, epsilon: Any, budget: Any = None
    ) -> None:
        super().__init__()
        self.url = url.rstrip("/")
        self._token = token
        self.dataset = dataset
        self.epsilon = as_fraction(epsilon, "epsilon")
        self._budget = None if budget is None else as_fraction(budget, "budget")

    def ask(self, sql: str) -> Answer:
        """POST the query to ``/v1/datasets/<dataset>/query``; a refusal raises :class:`UserError`."""
        name = urllib.parse.quote(self.dataset, safe="")
        body = json.dumps({"sql": sql, "epsilon": str(self.epsilon)}).encode()
        request = urllib.request.Request(
            f"{self.url}/v1/datasets/{name}/query",
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                doc = json.loads(reply.read())
        except urllib.error.HTTPError as error:
            detail = json.loads(error.read() or b"{}").get("error", {})
            raise UserError(
                f"the gateway refused (HTTP {error.code}): {detail.get('message', error.reason)}",
                fix=detail.get("fix"),
            ) from None
        except urllib.error.URLError as error:
            raise ConfigurationError(
                f"cannot reach the gateway at {self.url}: {error.reason}.",
                fix="check --url and that `dalenius serve` is running.",
            ) from None
        rows = tuple(
            tuple(c.get("value") if isinstance(c, dict) else c for c in row) for row in doc["rows"]
        )
        spent = Fraction(str(doc.get("spent", {}).get("epsilon_exact", "0")))
        return self._record(Answer(tuple(doc["columns"]), rows, bool(doc.get("cached")), spent))

    @property
    def budget(self) -> Fraction | None:
        """The budget given when the target was made, if any."""
        return self._budget


@dataclass(frozen=True)
class TargetSpec:
    """How to open a target: its kind and the knobs of that kind.

    Attributes:
        kind: ``raw``, ``naive`` or ``dalenius``.
        epsilon: ε per query (naive and dalenius).
        budget: the analyst's total ε (dalenius; default: ``epsilon``, one query's worth).
        sensitivity: the naive system's noise scale is ``sensitivity/epsilon``.
        url, token, dataset: a gateway to ask instead of an in-process session (dalenius).
    """

    kind: str
    epsilon: Any = None
    budget: Any = None
    sensitivity: Any = 1
    url: str | None = None
    token: str | None = None
    dataset: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigurationError(
                f"unknown target {self.kind!r}.", fix=f"use one of {', '.join(KINDS)}."
            )
        if self.kind != "raw" and self.epsilon is None:
            raise ConfigurationError(
                f"the {self.kind} target needs epsilon, the ε of one query.",
                fix="pass epsilon=0.5 (for example), or --epsilon 0.5 on the command line.",
            )
        if self.kind != "raw":
            as_fraction(self.epsilon, "epsilon")
        if self.url is not None and (self.token is None or self.kind != "dalenius"):
            raise ConfigurationError(
                "a gateway URL needs the dalenius target and an API token.",
                fix="pass --against dalenius --url http://host:port --token <analyst token>.",
            )

    @property
    def label(self) -> str:
        """How reports name the target, e.g. ``dalenius (ε=1/2 per query, budget 1)``."""
        if self.kind == "raw":
            return "raw"
        eps = _fmt(as_fraction(self.epsilon, "epsilon"))
        if self.kind == "naive":
            return f"naive (ε={eps} per query, no budget)"
        via = " via gateway" if self.url else ""
        return f"dalenius{via} (ε={eps} per query, budget {_fmt(self.total_budget)})"

    @property
    def total_budget(self) -> Fraction:
        """The Dalenius budget: ``budget``, else one query's ε."""
        return as_fraction(self.budget if self.budget is not None else self.epsilon, "budget")

    def open(self, database: Database) -> Target:
        """A new target on ``database`` (for dalenius: a new analyst with a full budget)."""
        if self.kind == "raw":
            return RawTarget(database)
        if self.kind == "naive":
            return NaiveNoisyTarget(database, epsilon=self.epsilon, sensitivity=self.sensitivity)
        if self.url is not None and self.token is not None:
            return GatewayTarget(
                self.url,
                self.token,
                self.dataset or database.catalog.name,
                epsilon=self.epsilon,
                budget=self.budget,
            )
        return DaleniusTarget(database, epsilon=self.epsilon, budget=self.total_budget)


def refused(error: UserError) -> str:
    """Why a target refused, in one line (for reports): ``budget`` or the refusal's first line."""
    if isinstance(error, BudgetExceededError):
        return "budget"
    return str(error).splitlines()[0]


def _exact(database: Database, sql: str) -> Answer:
    rows: Sequence[tuple[Any, ...]] = database.executor.fetch(sql)
    # The engine returns values only; columns are named by position.
    width = len(rows[0]) if rows else 0
    return Answer(tuple(f"column{i}" for i in range(width)), tuple(tuple(r) for r in rows))


def _fmt(value: Fraction) -> str:
    return str(value) if value.denominator != 1 else str(value.numerator)
