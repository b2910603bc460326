"""Which privately chosen bounds a session knows, and the catalog that holds them.

A column declared ``bounds = "private"`` has no bounds until a release of
:mod:`dalenius.releases.bounds` chooses them. That release is an ordinary product on the one
spending path, keyed in the ledger (like every release) by its plan and the data version of its
table, so "the bounds of this column for this data version" *is* the ledger entry that released
them: a repeat is answered from it at no cost, and a new data version needs a new choice.

This module only remembers what the ledger says. It never spends: :meth:`Session.prepare
<dalenius.engine.session.Session.prepare>` plans with the bounds known here, and when the binder
asks for one that is not (:class:`~dalenius.core.errors.BoundsNotChosen`), the session looks for
an earlier release in the ledger (:func:`find_recorded`) and, when asked to answer, chooses them
through :meth:`Session.choose_bounds <dalenius.engine.session.Session.choose_bounds>`.

A catalog with bounds filled in is built once per set of known bounds and kept, so the plan cache
(keyed by the catalog's identity) keeps working across queries.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dalenius.core.catalog import Catalog, PrivateBounds
from dalenius.core.errors import ConfigurationError
from dalenius.engine.plans import PLANS
from dalenius.ledger.base import COMMITTED, Ledger
from dalenius.releases.bounds import BoundsPlan, BoundsRelease, BoundsRequest, plan_bounds

if TYPE_CHECKING:
    from dalenius.plan.protocol import ReleasePlan

Settled = tuple[PrivateBounds, tuple[Fraction, Fraction] | None]
"""A column's settled declaration (outcome, entry) and its bounds (``None``: came out empty)."""

Pair = tuple[str, str]

_KNOWN: weakref.WeakKeyDictionary[Ledger, dict[tuple[str, str, str], Settled]] = (
    weakref.WeakKeyDictionary()
)
"""Per ledger: (analyst, dataset, request key) → what that release settled."""

_CATALOGS: weakref.WeakKeyDictionary[Catalog, dict[frozenset[tuple[Pair, Settled]], Catalog]] = (
    weakref.WeakKeyDictionary()
)
"""Per declared catalog: the catalogs with bounds filled in, one per set of settled columns."""

_LOCK = threading.Lock()

RequestKey = Callable[["ReleasePlan[Any]"], str]


def bounds_plan(catalog: Catalog, table: str, column: str, epsilon: Fraction | None) -> BoundsPlan:
    """The plan choosing ``table.column``'s bounds: at the catalog's ``bounds_epsilon`` unless
    ``epsilon`` is given (refused without either). Cached like query plans.
    """
    declared = catalog.table(table)
    col = declared.column(column) if declared is not None else None
    if epsilon is None and col is not None and col.is_numeric:
        if col.private_bounds is None:
            raise ConfigurationError(
                f'{table}.{column} does not declare bounds = "private", so no ε is set for '
                "choosing its bounds.",
                fix="pass epsilon=0.05 (for example) to choose bounds for it anyway.",
            )
        epsilon = col.private_bounds.epsilon
    if epsilon is None:  # no such table or numeric column: the plan says which
        return plan_bounds(catalog, BoundsRequest(table, column, Fraction(1)))
    chosen = epsilon
    return PLANS.get(
        catalog,
        ("bounds", table.lower(), column.lower(), chosen),
        lambda: plan_bounds(catalog, BoundsRequest(table, column, chosen)),
    )


def settle(release: BoundsRelease, entry_id: str | None) -> Settled:
    """What a release of bounds settles for its column."""
    outcome = "empty" if release.bounds is None else "chosen"
    return PrivateBounds(release.epsilon, outcome, entry_id), release.bounds


def remember(ledger: Ledger, analyst: str, dataset: str, key: str, settled: Settled) -> None:
    """Record that the release keyed ``key`` settled a column's bounds for ``analyst``."""
    with _LOCK:
        _KNOWN.setdefault(ledger, {})[(analyst, dataset, key)] = settled


def known_catalog(
    catalog: Catalog, ledger: Ledger, analyst: str, dataset: str, request_key: RequestKey
) -> Catalog:
    """``catalog`` with every privately chosen bound this analyst already has for the current
    data versions filled in (the declared catalog itself when there are none). Reads no data.
    """
    declared = catalog.private_bounds
    if not declared:
        return catalog
    with _LOCK:
        known = dict(_KNOWN.get(ledger, {}))
    found: dict[Pair, Settled] = {}
    for table, column in declared:
        plan = bounds_plan(catalog, table, column, None)
        settled = known.get((analyst, dataset, request_key(plan)))
        if settled is not None:
            found[(table, column)] = settled
    if not found:
        return catalog
    signature = frozenset(found.items())
    with _LOCK:
        built = _CATALOGS.setdefault(catalog, {})
        if signature not in built:
            built[signature] = catalog.with_private_bounds(found)
        return built[signature]


def find_recorded(
    catalog: Catalog,
    ledger: Ledger,
    analyst: str,
    dataset: str,
    request_key: RequestKey,
    pair: Pair,
) -> bool:
    """Whether the ledger holds this analyst's committed choice of ``pair``'s bounds for the
    current data version; if so it is remembered. Reads the ledger only.
    """
    plan = bounds_plan(catalog, pair[0], pair[1], None)
    key = request_key(plan)
    for entry in reversed(ledger.entries(analyst, dataset)):
        if entry.request_key == key and entry.status == COMMITTED and entry.answer is not None:
            release = plan.publish(plan.decode(entry.answer), 0.95)
            remember(ledger, analyst, dataset, key, settle(release, entry.id))
            return True
    return False


def chosen_notes(catalog: Catalog, clips: tuple[str, ...]) -> tuple[str, ...]:
    """Explain's notes on the privately chosen bounds a plan clips to."""
    notes = []
    for table in catalog.tables:
        for c in table.columns:
            p = c.private_bounds
            if p is None or p.outcome != "chosen" or c.bounds is None:
                continue
            if not any(f"({c.name}," in clip for clip in clips):
                continue
            low, high = (str(int(b)) if b.denominator == 1 else f"{float(b):g}" for b in c.bounds)
            notes.append(
                f"The bounds [{low}, {high}] of {table.name}.{c.name} were chosen privately "
                f"(ε = {float(p.epsilon):g}, ledger entry {p.entry}) for this data version; "
                "values outside them are clipped."
            )
    return tuple(notes)


def provisional_catalog(catalog: Catalog, pairs: tuple[Pair, ...]) -> Catalog:
    """``catalog`` with the bounds of ``pairs`` standing in as ``[0, 1]``: for the shape of an
    answer (its columns and types) before its bounds are chosen, never for noise.
    """
    stand_in = (Fraction(0), Fraction(1))
    chosen = {}
    for pair in pairs:
        table = catalog.table(pair[0])
        column = table.column(pair[1]) if table is not None else None
        if column is not None and column.private_bounds is not None:
            settled = PrivateBounds(column.private_bounds.epsilon, "provisional")
            chosen[pair] = (settled, stand_in)
    signature = frozenset(chosen.items())
    with _LOCK:
        built = _CATALOGS.setdefault(catalog, {})
        if signature not in built:
            built[signature] = catalog.with_private_bounds(chosen)
        return built[signature]
