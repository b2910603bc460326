"""A bounded cache of validated queries and DP plans, so a repeated query is not planned again.

Planning is a pure function of the SQL, the catalog and the privacy parameters: parsing and
validating with sqlglot, then the DP plan, then the exact SQL. Dashboards and the gateway send
the same SQL again and again, and planning (a few milliseconds) was the largest part of
Dalenius's own time per query. What is cached:

* the validated query, by (catalog, SQL);
* the DP plan, by (catalog, SQL, ε, δ), unless the query joins a public table: its multiplicity
  is read from the table (which may change), so such plans are always rebuilt;
* the exact SQL, by (catalog, SQL, ε, δ, dialect); where the query bounds a privacy unit, as a
  :class:`SaltedTemplate`, since its hash key is drawn afresh for every query. Such a template is
  read off the first query's SQL and proved exact by the second's (:class:`Candidate`), so no
  query writes its SQL more than once: a query asked once (most of what a gateway sees) pays for
  one writing, a repeated one for none from its third time on.

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
from dalenius.sql.emit import ExactSQL

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
        self.put(catalog, key, value)
        return value

    def peek(self, catalog: Catalog, key: Hashable) -> Any:
        """The cached value for ``(catalog, key)`` (marked as just used), or ``None``."""
        slot = (id(catalog), key)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry[0] is not catalog:
                return None
            self._entries.move_to_end(slot)
            return entry[1]

    def put(self, catalog: Catalog, key: Hashable, value: Any) -> None:
        """Cache ``value`` for ``(catalog, key)``, replacing what was there."""
        slot = (id(catalog), key)
        with self._lock:
            self._entries[slot] = (catalog, value)
            self._entries.move_to_end(slot)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

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


def _replace(exact: ExactSQL, old: int, new: int) -> ExactSQL:
    """``exact`` with every whole number ``old`` written as ``new``, and ``old + 1`` as ``new + 1``.

    Whole numbers only (a word boundary on both sides): a number is a maximal run of word
    characters, so ``12`` inside ``123`` or ``x12`` is left alone, and what is written in its
    place is again one such run.
    """
    pattern = re.compile(rf"\b({old}|{old + 1})\b")
    values = {str(old): str(new), str(old + 1): str(new + 1)}

    def put(text: str) -> str:
        return pattern.sub(lambda m: values[m.group(0)], text)

    return ExactSQL(
        main=put(exact.main),
        histograms=tuple((name, put(sql)) for name, sql in exact.histograms),
        reads=exact.reads,
        frequencies=tuple(put(sql) for sql in exact.frequencies),
    )


@dataclass(frozen=True)
class SaltedTemplate:
    """Exact SQL written with a stand-in hash key, to be given each query's fresh key.

    The SQL of a query that bounds a privacy unit holds its hash key as two integer literals
    (``salt`` and ``salt + 1``). Writing it is most of the planning time of such a query, so a
    repeated query's SQL is written once with a stand-in and the literals are replaced; see
    :class:`Candidate` for how a template is made and proved exact, without writing the SQL more
    often than each query needs anyway.
    """

    exact: ExactSQL
    sentinel: int

    def with_salt(self, salt: int) -> ExactSQL:
        """The exact SQL for hash key ``salt`` (``0 <= salt < SALT_LIMIT``)."""
        if not 0 <= salt < SALT_LIMIT:
            raise ValueError(f"a hash key must lie in [0, {SALT_LIMIT}), got {salt}")
        return _replace(self.exact, self.sentinel, salt)


@dataclass(frozen=True)
class Candidate:
    """A template read off one query's SQL, not yet proved exact: the next query proves it.

    A query is written with its own fresh key ``r1`` (the SQL it runs, exact by definition), and
    the candidate is that text with every whole number ``r1`` (``r1 + 1``) replaced by the
    stand-in ``s`` (``s + 1``). It is wrong if the text held ``r1``, ``r1 + 1``, ``s`` or ``s + 1``
    anywhere but in the hash calls (a literal of the query, a bound). The next time the same
    query is asked it is written again, with its fresh key ``r2``, and :meth:`confirmed_by`
    compares the candidate given ``r2`` with that text.

    Why equality proves the template exact for every key. Write the SQL for key ``x`` as
    ``f(x)``: a text ``C`` that does not depend on the key, with ``x`` and ``x + 1`` at fixed
    places ``P`` (the hash calls). Replacing whole numbers keeps every maximal run of word
    characters a run and every other character in place, so two such texts are equal only if
    they are equal run by run. At ``P`` both sides hold ``r2`` (``r2 + 1``). A run ``t`` of ``C``
    becomes ``h(g(t))`` in the candidate given ``r2``, where ``g`` writes ``r1 → s`` and ``h``
    writes ``s → r2`` (each with its ``+ 1``), and stays ``t`` in ``f(r2)``. If ``t`` is ``r1``
    (``r1 + 1``) it becomes ``r2`` (``r2 + 1``), which differs from ``t`` when ``r2 ≠ r1``; if ``t``
    is ``s`` (``s + 1``) it becomes ``r2`` (``r2 + 1``), which differs when ``r2 ≠ s``; any other
    run is left alone by both. So equality, with ``r2`` neither ``r1`` nor ``s`` (checked), shows
    that ``C`` holds none of the four, that is, the stand-in stands exactly at ``P``; and then the
    template given any key ``x`` is ``C`` with ``x`` at ``P``: ``f(x)``.

    The keys stay fresh from the OS generator for every query: a candidate only shapes the text.
    """

    template: SaltedTemplate
    salt: int
    """The key of the query it was read from (``r1``); kept to check that ``r2`` differs."""

    @staticmethod
    def of(exact: ExactSQL, salt: int) -> Candidate | None:
        """The candidate read off ``exact``, the SQL written with key ``salt`` (``None`` if the
        key is out of range or next to the stand-in).
        """
        if not 0 <= salt < SALT_LIMIT or abs(salt - _SENTINEL) <= 1:
            return None
        return Candidate(SaltedTemplate(_replace(exact, salt, _SENTINEL), _SENTINEL), salt)

    def confirmed_by(self, exact: ExactSQL, salt: int) -> bool:
        """Whether ``exact``, the same query written with another key ``salt``, proves the
        template exact (see the class's docstring).
        """
        if not 0 <= salt < SALT_LIMIT or salt in (self.salt, self.template.sentinel):
            return False
        return self.template.with_salt(salt) == exact


def learn(known: object, exact: ExactSQL, salt: int) -> SaltedTemplate | Candidate | None:
    """What to cache after writing a query's SQL ``exact`` with its key ``salt``.

    ``known`` is what the cache held: a :class:`Candidate` that ``exact`` confirms becomes its
    template; otherwise ``exact`` gives a new candidate (so a query holding a stand-in by chance
    is written afresh each time, and tried again with the next key).
    """
    if isinstance(known, Candidate) and known.confirmed_by(exact, salt):
        return known.template
    return Candidate.of(exact, salt)
