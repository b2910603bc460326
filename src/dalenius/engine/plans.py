"""A bounded cache of validated queries and DP plans, so a repeated query is not planned again.

Planning is a pure function of the SQL, the catalog and the privacy parameters: parsing and
validating with sqlglot, then the DP plan, then the exact SQL. Dashboards and the gateway send
the same SQL again and again, and planning (a few milliseconds) was the largest part of
Dalenius's own time per query. What is cached:

* the validated query, by (catalog, SQL);
* the DP plan, by (catalog, SQL, ε, δ), unless the query joins a public table: its multiplicity
  is read from the table (which may change), so such plans are always rebuilt;
* the exact SQL, by (catalog, SQL, ε, δ, dialect); where the query bounds a privacy unit, as a
  :class:`SaltedTemplate`, since its hash key is drawn afresh for every query.

Refusals are not cached (they are raised again, at the same cost as the first time). Entries are
keyed by the catalog object's identity and hold a reference to it, so a reloaded catalog never
sees another catalog's plans. The cache holds at most ``size`` entries, dropping the least
recently used.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from dalenius.core.catalog import Catalog
from dalenius.sql.to_sql import ExactSQL

T = TypeVar("T")

DEFAULT_SIZE = 1024


class PlanCache:
    """A thread-safe least-recently-used cache keyed by a catalog and a hashable key.

    Example:
        >>> from dalenius.core.catalog import Catalog
        >>> cache, catalog = PlanCache(size=2), Catalog(name="demo", tables=())
        >>> cache.get(catalog, ("sql", 1), lambda: "planned")
        'planned'
        >>> cache.get(catalog, ("sql", 1), lambda: "planned again")
        'planned'
        >>> cache.get(Catalog(name="demo", tables=()), ("sql", 1), lambda: "other catalog")
        'other catalog'
    """

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        if size < 1:
            raise ValueError("a plan cache holds at least one entry")
        self._size = size
        self._entries: OrderedDict[tuple[int, Hashable], tuple[Catalog, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, catalog: Catalog, key: Hashable, build: Callable[[], T]) -> T:
        """The cached value for ``(catalog, key)``, or ``build()`` (cached if it returns)."""
        slot = (id(catalog), key)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None and entry[0] is catalog:
                self._entries.move_to_end(slot)
                value: T = entry[1]
                return value
        value = build()
        with self._lock:
            self._entries[slot] = (catalog, value)
            self._entries.move_to_end(slot)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


PLANS = PlanCache()
"""The process's plan cache, shared by every session."""


SALT_LIMIT = (1 << 62) - 1
"""Hash keys are drawn from [0, SALT_LIMIT): the SQL writes ``salt`` and ``salt + 1`` modulo 2^62
(so that they fit a BIGINT on every engine), which leaves such keys as they are."""

_SENTINEL = secrets.randbelow(1 << 60) + (1 << 60)
"""A random stand-in for the hash key in cached exact SQL (drawn per process)."""


@dataclass(frozen=True)
class SaltedTemplate:
    """Exact SQL written with a stand-in hash key, to be given each query's fresh key.

    The SQL of a query that bounds a privacy unit holds its hash key as two integer literals
    (``salt`` and ``salt + 1``). Writing it is most of the planning time of such a query, so it
    is written once with a stand-in and the literals are replaced. :meth:`build` checks that the
    replacement gives exactly what writing the SQL with another key gives (a literal in the
    query that happened to contain the stand-in would fail the check); if not, no template is
    kept and the SQL is written afresh for every query.
    """

    exact: ExactSQL
    sentinel: int

    @staticmethod
    def build(write: Callable[[int], ExactSQL]) -> SaltedTemplate | None:
        """A template from ``write(salt)``, or ``None`` if replacing the key is not exact."""
        template = SaltedTemplate(write(_SENTINEL), _SENTINEL)
        other = _SENTINEL + 1000
        return template if template.with_salt(other) == write(other) else None

    def with_salt(self, salt: int) -> ExactSQL:
        """The exact SQL for hash key ``salt`` (``0 <= salt < SALT_LIMIT``)."""
        if not 0 <= salt < SALT_LIMIT:
            raise ValueError(f"a hash key must lie in [0, {SALT_LIMIT}), got {salt}")
        pattern = re.compile(rf"\b({self.sentinel}|{self.sentinel + 1})\b")
        values = {str(self.sentinel): str(salt), str(self.sentinel + 1): str(salt + 1)}

        def put(text: str) -> str:
            return pattern.sub(lambda m: values[m.group(0)], text)

        return ExactSQL(
            main=put(self.exact.main),
            histograms=tuple((name, put(sql)) for name, sql in self.exact.histograms),
        )
