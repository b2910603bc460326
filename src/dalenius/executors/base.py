"""The executor interface: what the engine needs from a database, and nothing more."""

from __future__ import annotations

import abc
import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import ExecutionError
from dalenius.core.unit import IdUnit

Row = tuple[Any, ...]


class Executor(abc.ABC):
    """Runs exact aggregate SQL over the catalog's tables in one engine.

    Attributes:
        dialect: the SQL the engine speaks (:data:`~dalenius.core.dialect.DUCKDB`,
            :data:`~dalenius.core.dialect.POSTGRES` or :data:`~dalenius.core.dialect.SPARK`):
            the exact SQL is written for it, and the executor quotes its own statements with it.
    """

    dialect: Dialect
    time_limit: float | None = None
    """Seconds one :meth:`fetch` may run before the engine stops it (``None``: no limit)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def prepare(self, table: Table) -> None:  # noqa: B027 - optional hook
        """Make ``table`` queryable under its catalog name (load or attach it) before a fetch."""

    def check_source(self, table: Table) -> None:  # noqa: B027 - optional hook
        """Refuse ``table`` from metadata only (its file is missing, unreadable or of another
        kind), before any budget is reserved; by default every source passes.

        Raises:
            CatalogError: naming the table and the path, with the reason and a fix.
        """

    @abc.abstractmethod
    def fetch(self, sql: str) -> list[Row]:
        """Run an aggregate query and return all its rows (a handful: one per group)."""

    def scoped(self, sql: str, reads: Sequence[tuple[str, Sequence[str]]]) -> str:
        """``sql`` as this engine should run it, knowing which columns it reads of each table.

        ``reads`` pairs table names with the columns read of them
        (:attr:`dalenius.sql.emit.ExactSQL.reads`). An engine whose tables are relations
        that convert every declared column on each query may scan just those columns instead;
        the answer is the same either way. By default ``sql`` is run as it is.
        """
        return sql

    @abc.abstractmethod
    def data_version(self, table: Table) -> str:
        """A fingerprint that changes when the table's data change (for the answer cache)."""

    @property
    def engine_version(self) -> str:
        """The engine's name and version (deadlines are calibrated per engine version)."""
        return str(self.dialect)

    def interrupt(self, thread: int) -> None:  # noqa: B027 - optional hook
        """Stop the query ``thread`` is running now, if the engine can (called from another thread)."""

    def close(self) -> None:  # noqa: B027 - optional hook; most executors hold nothing to close
        """Release connections."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


LoadObserver = Callable[[str], contextlib.AbstractContextManager[object]]
"""Given a table's name, a context that wraps the table's load into memory (e.g. a spinner)."""

_load_observer: ContextVar[LoadObserver | None] = ContextVar("dalenius_load_observer", default=None)


@contextlib.contextmanager
def observe_loads(observer: LoadObserver) -> Iterator[None]:
    """Call ``observer`` around each table an executor loads into memory while the block runs.

    A load (a CSV file read into DuckDB) is one statement that reports no progress, and can take
    a while for a large file; the CLI uses this hook to show that the wait is a load, and of
    which table. Executors stay silent by default and import no display library. The observer
    is set for the current context (thread) only: a gateway's requests never see it.
    """
    token = _load_observer.set(observer)
    try:
        yield
    finally:
        _load_observer.reset(token)


def loading(table: str) -> contextlib.AbstractContextManager[object]:
    """The observer's context for loading ``table`` (see :func:`observe_loads`), or nothing."""
    observer = _load_observer.get()
    return contextlib.nullcontext() if observer is None else observer(table)


REPEAT = 0.05
"""Seconds between two runs of a watchdog's action once its deadline has passed."""


class Watchdog:
    """Runs an action once an armed deadline passes: the time limit of an executor's fetches.

    One daemon thread per executor, started on the first armed fetch and waiting on a condition
    between fetches, instead of a ``threading.Timer`` per fetch: starting a thread for every
    query a gateway serves with a time limit cost about a tenth of a millisecond each. One
    deadline is armed at a time (an executor runs one fetch at a time).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._wake = threading.Condition()
        self._armed: tuple[float, Callable[[], None], threading.Event] | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextlib.contextmanager
    def armed(self, seconds: float | None, action: Callable[[], None]) -> Iterator[threading.Event]:
        """Run ``action`` if the block still runs ``seconds`` from now (no limit if ``None`` or 0),
        and again every :data:`REPEAT` seconds until the block ends: an engine interrupted while
        it was still planning may start the query after the first interruption.

        Yields an event set once the deadline has passed, so that a block that finished between
        two interruptions can still tell it ran past its limit.
        """
        fired = threading.Event()
        if not seconds:
            yield fired
            return
        with self._wake:
            self._armed = (time.monotonic() + seconds, action, fired)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify()
        try:
            yield fired
        finally:
            with self._wake:
                self._armed = None

    def close(self) -> None:
        """Stop the thread (an armed deadline no longer fires)."""
        with self._wake:
            self._closed = True
            self._armed = None
            self._wake.notify()

    def _watch(self) -> None:
        with self._wake:
            while not self._closed:
                if self._armed is None:
                    self._wake.wait()
                    continue
                deadline, action, fired = self._armed
                left = deadline - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                fired.set()
                self._armed = (time.monotonic() + REPEAT, action, fired)
                # Under the lock: the block's exit waits for the action, so a late action can
                # only reach the fetch it was armed for (or an idle engine), as with a Timer.
                action()


def time_limit_error(engine: str, seconds: float) -> ExecutionError:
    """The error a fetch stopped by its time limit raises (the same words on every engine)."""
    return ExecutionError(
        f"{engine} stopped the exact aggregate at the time limit of {seconds:g} s."
    )


def files_fingerprint(paths: Sequence[str]) -> str:
    """Fingerprint files by path, size and modification time (cheap; no data is read)."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        try:
            stat = os.stat(path)
        except OSError:
            digest.update(f"{path}:missing".encode())
            continue
        # os.path.realpath is what Path.resolve computes, without building Path objects.
        digest.update(f"{os.path.realpath(path)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def table_view(table: Table, projection: str, relation: str, dialect: Dialect) -> str:
    """The ``SELECT`` of ``table``'s relation: its stored columns converted (``projection``)
    from ``relation``, and, for a unit reached through another table's key, that unit joined in.

    Each row is joined with every row of the referenced table (by name: its own converted
    relation, made first) whose key equals the row's column, and takes that row's unit; a row
    that reaches none keeps a NULL unit, which bounding leaves out as it does any row without
    an id (docs/privacy.md, "A unit reached through a key"). The same SQL on every engine.
    """
    select = f"SELECT {projection} FROM {relation}"
    unit = table.privacy_unit
    reach = table.reach
    if reach is None or not isinstance(unit, IdUnit):
        return select
    q = dialect.quote
    return (
        f"SELECT __b.*, __r.__unit AS {q(unit.column)} FROM ({select}) AS __b "
        f"LEFT JOIN (SELECT {q(reach.key)} AS __key, {q(reach.unit)} AS __unit "
        f"FROM {q(reach.table)}) AS __r ON __b.{q(reach.column)} = __r.__key"
    )
