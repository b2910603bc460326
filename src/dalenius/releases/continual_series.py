"""A continual series over time: its state in the ledger and its next publication.

Every publication of a series has a ledger entry whose idempotency key is its slot
(:func:`~dalenius.releases.continual.slot`: the series, its generation, the periods measured
before it). From the analyst's entries alone — before any data is read — this module finds the
generation to publish in, the loss its first publication was charged, the last publication's
record (its stored nodes) and any publication still in progress, and plans the next step: the
periods closed by the publication day since the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from fractions import Fraction
from typing import Any

from dalenius.core.catalog import Catalog
from dalenius.core.errors import QueryError
from dalenius.core.loss import Loss
from dalenius.core.periods import closed_by, publication_day
from dalenius.plan.protocol import recorded
from dalenius.releases.continual import (
    CONTINUAL_FORMAT,
    SLOT_PREFIX,
    ContinualPlan,
    SeriesRequest,
    Step,
    checked_lifetime,
    decode_record,
    plan_continual,
    series_id,
    series_shape,
)


@dataclass(frozen=True)
class SeriesState:
    """What the ledger holds of a series: the generation to publish in and its last record.

    Attributes:
        generation: the generation the next publication belongs to.
        covered: the loss the generation's first publication was charged (``None``: not yet).
        latest: the entry id of its last publication, and that publication's record.
        busy: the id of a publication of this generation still in progress, if any.
    """

    generation: int = 0
    covered: Loss | None = None
    latest: tuple[str, str] | None = None
    busy: str | None = None

    @property
    def measured(self) -> int:
        """How many periods the last publication measured (0 before the first)."""
        if self.latest is None:
            return 0
        return int(recorded(self.latest[1], CONTINUAL_FORMAT)["request"]["closed"])


def series_state(series: str, entries: Sequence[Any]) -> SeriesState:
    """The state of ``series`` from the analyst's ledger entries (each with ``id``,
    ``idempotency_key``, ``status``, ``answer`` and ``loss``), oldest first.

    A generation ends when one of its publications failed or was lost after the data gate: its
    nodes may have been drawn and are never drawn again, so the next publication opens a new
    generation (charged again). Returned reservations (``rolled_back``) never read data and
    are ignored.
    """
    prefix = f"{SLOT_PREFIX}{series}:g"
    by_generation: dict[int, list[Any]] = {}
    for entry in entries:
        key = entry.idempotency_key or ""
        if not key.startswith(prefix) or entry.status == "rolled_back":
            continue
        generation = int(key[len(prefix) :].split(":", 1)[0])
        by_generation.setdefault(generation, []).append(entry)
    if not by_generation:
        return SeriesState()
    generation = max(by_generation)
    own = by_generation[generation]
    if any(e.status in ("failed", "lost") for e in own):
        return SeriesState(generation=generation + 1)
    done = [e for e in own if e.status == "committed" and e.answer]
    busy = next((e.id for e in own if e.status in ("pending", "charged")), None)
    opening = next((e for e in done if (e.idempotency_key or "").endswith(":open")), None)
    latest = max(
        done,
        key=lambda e: int(recorded(e.answer, CONTINUAL_FORMAT)["request"]["closed"]),
        default=None,
    )
    return SeriesState(
        generation=generation,
        covered=opening.loss if opening is not None else None,
        latest=(latest.id, latest.answer) if latest is not None else None,
        busy=busy,
    )


def plan_series_step(
    catalog: Catalog,
    request: SeriesRequest,
    analyst: str,
    epsilon: Fraction | None,
    entries: Sequence[Any],
    *,
    as_of: str | date | None = None,
) -> tuple[ContinualPlan | None, str | None]:
    """The next publication of a series, from the catalog and the analyst's ledger entries.

    Returns the plan of the publication that measures every period closed by ``as_of`` since
    the last one, or ``(None, entry id)`` when none closed since: the last publication (that
    entry) is the answer. Reads no data.

    Raises:
        QueryError: the series cannot be planned, ``as_of`` is later than today (UTC), or a
            publication of the series is still in progress.
    """
    epsilon = checked_lifetime(epsilon)
    bounds, shape = series_shape(catalog, request)
    series = series_id(analyst, catalog.name, request, epsilon, shape)
    state = series_state(series, entries)
    if state.busy is not None:
        raise QueryError(
            f"a publication of this series is still in progress (ledger entry {state.busy}).",
            why="each node of the tree is measured once; two publications at once could "
            "measure it twice.",
            fix="ask again when it is done; if its process stopped, the custodian runs "
            "`dalenius ledger recover`.",
        )
    closed = closed_by(bounds, _publication_day(as_of))
    if state.latest is not None and closed <= state.measured:
        return None, state.latest[0]
    step = Step(
        generation=state.generation,
        opening=state.covered is None,
        measured=state.measured,
        closed=closed,
    )
    previous = decode_record(state.latest[1]) if state.latest is not None else None
    plan = plan_continual(
        catalog,
        request,
        series=series,
        epsilon=epsilon,
        step=step,
        previous=previous,
        covered=state.covered,
    )
    return plan, None


def _publication_day(as_of: str | date | None) -> date:
    """The day a publication is made on: ``as_of`` or today, never a later day."""
    return publication_day(
        as_of,
        "a node is measured once, when its last period closes: measured early, it would miss "
        "the rest of its rows for ever.",
    )
