"""Running a planned release (a density curve, …) through the same budget path as a query.

A release is planned in :mod:`dalenius.releases` from the catalog alone; here it is charged and
computed exactly like a query: the loss is reserved in the ledger (a refusal before this point
spends nothing), the engine is reached only through the session's data path, the noise is drawn,
the noisy values are committed (surviving a crash of the process), and only then does the release
leave. An identical
request (same plan, same data version) is answered from the ledger's record at no cost, so
asking again gains an attacker nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from dalenius.core.catalog import Table
from dalenius.core.errors import InternalError, QueryError, UserError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP
from dalenius.core.rng import system_random
from dalenius.ledger.base import (
    CACHED,
    COMMITTED,
    CachedAnswer,
    ChargeRequest,
    LedgerEntry,
    Reservation,
)
from dalenius.releases.density import DensityPlan, DensityRelease, DensityRequest, plan_density
from dalenius.releases.hierarchy import (
    HierarchyPlan,
    HierarchyRelease,
    HierarchyRequest,
    plan_hierarchy,
)
from dalenius.releases.onthemap import (
    OnTheMapPlan,
    OnTheMapRelease,
    OnTheMapRequest,
    plan_onthemap,
)
from dalenius.releases.synthetic import (
    Measurements,
    SyntheticRelease,
    SynthPlan,
    SynthRequest,
    plan_synthetic,
)

if TYPE_CHECKING:
    from dalenius.engine.session import Session

DENSITY_FORMAT = "density-1"
HIERARCHY_FORMAT = "hierarchy-1"
SYNTHETIC_FORMAT = "synthetic-1"
ONTHEMAP_FORMAT = "onthemap-1"
SALT_LIMIT = 2**31


def describe(plan: DensityPlan) -> str:
    """The audit trail's text for a density release (what the analyst asked)."""
    req = plan.request
    where = f" WHERE {req.where}" if req.where else ""
    return f"DENSITY({', '.join(req.columns)}; bandwidth={req.bandwidth:g}) FROM {req.table}{where}"


def run_density(
    session: Session,
    plan: DensityPlan,
    *,
    confidence: float,
    idempotency_key: str | None,
) -> tuple[DensityRelease, bool, str]:
    """Charge, compute and record a density release; return it, whether cached, and its entry id."""
    outcome = _reserve(
        session, plan, plan.counts.tables, DENSITY_FORMAT, describe(plan), idempotency_key
    )
    if isinstance(outcome, CachedAnswer):
        noisy_sum, noisy_n = _decode(outcome.answer)
        return plan.post_process(noisy_sum, noisy_n, confidence), True, outcome.entry_id
    statements = plan.counts.sql(session.executor.dialect, _salt())
    reservation = outcome

    def work(fetch: Any) -> tuple[DensityRelease, str]:
        total = fetch(statements.main)
        bins = fetch(statements.histograms[0][1])
        count = int(total[0][0] if total and total[0][0] is not None else 0)
        release = plan.finish(count, bins, confidence)
        return release, session.ledger.commit(reservation, _encode(release, plan))

    release, entry_id = session.through_gate(reservation, plan.counts.tables, work)
    return release, False, entry_id


def describe_hierarchy(plan: HierarchyPlan) -> str:
    """The audit trail's text for a hierarchical release."""
    req = plan.request
    where = f" WHERE {req.where}" if req.where else ""
    return f"HIERARCHY({' > '.join(req.levels)}) FROM {req.table}{where}"


def run_hierarchy(
    session: Session,
    plan: HierarchyPlan,
    *,
    confidence: float,
    idempotency_key: str | None,
) -> tuple[HierarchyRelease, bool, str]:
    """Charge, compute and record a hierarchical release; return it, whether cached, its entry."""
    outcome = _reserve(
        session, plan, plan.tables, HIERARCHY_FORMAT, describe_hierarchy(plan), idempotency_key
    )
    if isinstance(outcome, CachedAnswer):
        doc = _recorded(outcome.answer, HIERARCHY_FORMAT)
        noisy = np.asarray(doc["noisy"], dtype=np.int64)
        return plan.finish(noisy, confidence), True, outcome.entry_id
    statement = plan.sql(session.executor.dialect, _salt()).main
    reservation = outcome

    def work(fetch: Any) -> tuple[HierarchyRelease, str]:
        noisy = plan.measure(plan.leaf_counts(fetch(statement)))
        answer = json.dumps(
            {
                "format": HIERARCHY_FORMAT,
                "request": request_doc(plan.request),
                "noisy": [int(v) for v in noisy],
            }
        )
        entry_id = session.ledger.commit(reservation, answer)
        return plan.finish(noisy, confidence), entry_id

    release, entry_id = session.through_gate(reservation, plan.tables, work)
    return release, False, entry_id


def run_synthetic(
    session: Session,
    plan: SynthPlan,
    *,
    idempotency_key: str | None,
) -> tuple[SyntheticRelease, bool, str]:
    """Charge, measure and record a synthetic-data release; the rows are drawn afterwards.

    The record holds the noisy measurements and the sampling seed, so the same request gives back
    the same synthetic rows at no cost.
    """
    where = f" WHERE {plan.request.where}" if plan.request.where else ""
    text = f"SYNTHETIC({', '.join(d.name for d in plan.domains)}) FROM {plan.request.table}{where}"
    outcome = _reserve(session, plan, plan.tables, SYNTHETIC_FORMAT, text, idempotency_key)
    if isinstance(outcome, CachedAnswer):
        doc = _recorded(outcome.answer, SYNTHETIC_FORMAT)
        measured = Measurements.from_json(doc["measurements"])
        return plan.synthesise(measured, seed=int(doc["seed"])), True, outcome.entry_id
    statement = plan.sql(session.executor.dialect, _salt()).main
    seed = int(system_random().uint64(1)[0] % (2**63))
    reservation = outcome

    def work(fetch: Any) -> tuple[Measurements, str]:
        measured = plan.measure(plan.contingency(fetch(statement)))
        doc = {
            "format": SYNTHETIC_FORMAT,
            "request": request_doc(plan.request),
            "measurements": measured.to_json(),
            "seed": seed,
        }
        return measured, session.ledger.commit(reservation, json.dumps(doc))

    measured, entry_id = session.through_gate(reservation, plan.tables, work)
    return plan.synthesise(measured, seed=seed), False, entry_id


def run_onthemap(
    session: Session,
    plan: OnTheMapPlan,
    *,
    idempotency_key: str | None,
) -> tuple[OnTheMapRelease, bool, str]:
    """Charge, draw and record a synthetic origin–destination release.

    The record holds the synthetic counts themselves, so the same request gives back the same
    rows at no cost.
    """
    req = plan.request
    where = f" WHERE {req.where}" if req.where else ""
    text = (
        f"ONTHEMAP({req.origin} -> {req.destination}; prior={plan.prior}, "
        f"per_destination={plan.per_destination}) FROM {req.table}{where}"
    )
    outcome = _reserve(session, plan, plan.tables, ONTHEMAP_FORMAT, text, idempotency_key)
    if isinstance(outcome, CachedAnswer):
        doc = _recorded(outcome.answer, ONTHEMAP_FORMAT)
        counts = np.asarray(doc["counts"], dtype=np.int64).reshape(
            len(plan.destinations), len(plan.origins)
        )
        return plan.finish(counts), True, outcome.entry_id
    statement = plan.sql(session.executor.dialect, _salt()).main
    reservation = outcome

    def work(fetch: Any) -> tuple[OnTheMapRelease, str]:
        synthetic = plan.synthesise(plan.table_counts(fetch(statement)))
        doc = {
            "format": ONTHEMAP_FORMAT,
            "request": request_doc(plan.request),
            "counts": [int(v) for v in synthetic.reshape(-1)],
        }
        return plan.finish(synthetic), session.ledger.commit(reservation, json.dumps(doc))

    release, entry_id = session.through_gate(reservation, plan.tables, work)
    return release, False, entry_id


class _Planned(Protocol):
    """What every release plan offers the budget path: its hash and its loss."""

    @property
    def loss(self) -> Loss: ...

    def fingerprint(self) -> str: ...


def _reserve(
    session: Session,
    plan: _Planned,
    tables: Sequence[Table],
    answer_format: str,
    text: str,
    idempotency_key: str | None,
) -> Reservation | CachedAnswer:
    """Reserve a release's loss, keyed by its plan, the data version of ``tables`` and the
    format of its record (an identical earlier request is answered from the ledger).
    """
    versions = "|".join(session.executor.data_version(t) for t in tables)
    key = hashlib.sha256(f"{plan.fingerprint()}|{versions}|{answer_format}".encode()).hexdigest()
    request = ChargeRequest(
        principal=session.analyst,
        dataset=session.dataset,
        loss=plan.loss,
        request_key=key,
        sql=text,
        plan_hash=plan.fingerprint(),
        idempotency_key=idempotency_key,
    )
    return session.ledger.reserve(request)


def _recorded(answer: str, answer_format: str) -> dict[str, Any]:
    """The ledger's record of a release, checked to be of ``answer_format``."""
    doc: dict[str, Any] = json.loads(answer)
    if doc.get("format") != answer_format:
        raise InternalError("the ledger's record of this release has an unknown format")
    return doc


def _salt() -> int:
    """A fresh key for contribution bounding's hash ranking, from the OS generator."""
    return int(system_random().uint64(1)[0]) % SALT_LIMIT


def audit_refusal(session: Session, text: str, exc: UserError) -> None:
    """Write the audit line of a release refused before any data was read (nothing is spent)."""
    session.ledger.record(
        principal=session.analyst,
        dataset=session.dataset,
        sql=text,
        outcome="refused",
        detail=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        plan_hash=None,
        loss=None,
    )


def _encode(release: DensityRelease, plan: DensityPlan) -> str:
    doc = {
        "format": DENSITY_FORMAT,
        "request": request_doc(plan.request),
        "noisy_sum": [float(v) for v in release.noisy_sum],
        "count": release.count,
    }
    return json.dumps(doc, sort_keys=True)


def _decode(answer: str) -> tuple[np.ndarray[Any, np.dtype[np.float64]], int]:
    doc = _recorded(answer, DENSITY_FORMAT)
    return np.asarray(doc["noisy_sum"], dtype=np.float64), int(doc["count"])


Release = DensityRelease | HierarchyRelease | SyntheticRelease | OnTheMapRelease


def request_doc(request: Any) -> dict[str, Any]:
    """A release's request as JSON (fractions as text), kept with it so it can be rebuilt by id."""
    return {f.name: _jsonable(getattr(request, f.name)) for f in dataclasses.fields(request)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def fetch_release(
    session: Session, entry_id: str, *, confidence: float
) -> tuple[Release, Loss, str]:
    """A release the analyst already received, rebuilt from its ledger entry; spends nothing.

    The entry's record holds the request and the noisy values (or the synthetic counts, or the
    measurements and sampling seed): the request is planned again from the catalog, checked
    against the plan hash the entry was charged under, and post-processed — the same release,
    the same bytes. Only the analyst's own committed entries on this dataset can be fetched.
    """
    entry, doc = _released_entry(session, entry_id)
    plan = _plan_again(session, doc, entry.loss)
    if plan.fingerprint() != entry.plan_hash:
        raise QueryError(
            f"the catalog has changed since entry {entry_id!r} was released, so it cannot be "
            "rebuilt exactly.",
            fix="ask for the release again under the current catalog (it is charged as new).",
        )
    release = _rebuilt(plan, entry.answer or "", doc, confidence)
    session.ledger.record(
        principal=session.analyst,
        dataset=session.dataset,
        sql=f"FETCH RELEASE {entry_id}: {entry.sql}",
        outcome=CACHED,
        detail="fetched again by id, at no cost",
        plan_hash=entry.plan_hash,
        loss=None,
    )
    return release, entry.loss, entry.id


def _released_entry(session: Session, entry_id: str) -> tuple[LedgerEntry, dict[str, Any]]:
    """The analyst's committed release ``entry_id`` (or its short prefix) and its record."""
    own = session.ledger.entries(principal=session.analyst, dataset=session.dataset)
    # The whole id, or the short prefix `dalenius ledger list` shows (at least 8 characters).
    found = [e for e in own if e.id == entry_id] or [
        e for e in own if len(entry_id) >= 8 and e.id.startswith(entry_id)
    ]
    entry = found[0] if len(found) == 1 else None
    if entry is None or entry.status != COMMITTED or entry.answer is None:
        raise QueryError(
            f"analyst {session.analyst!r} has no released entry {entry_id!r} on dataset "
            f"{session.dataset!r}.",
            fix="list your entries with `dalenius ledger list` (or GET /v1/me/ledger) and use "
            "the id of a committed release.",
        )
    doc = json.loads(entry.answer)
    kind = doc.get("format")
    if kind not in (DENSITY_FORMAT, HIERARCHY_FORMAT, SYNTHETIC_FORMAT, ONTHEMAP_FORMAT):
        raise QueryError(
            f"entry {entry_id!r} is a query answer, not a release.",
            fix="fetch density, hierarchy or synthetic releases by id; ask a query again to "
            "get its answer from the ledger at no cost.",
        )
    if "request" not in doc:
        raise QueryError(
            f"entry {entry_id!r} was recorded before releases kept their request.",
            fix="ask for the same release again: an identical request is answered from the "
            "ledger's record at no cost.",
        )
    return entry, doc


def _plan_again(
    session: Session, doc: dict[str, Any], loss: Loss
) -> DensityPlan | HierarchyPlan | SynthPlan | OnTheMapPlan:
    """The release's plan, built again from the request its record keeps, under ``loss``.

    Long because it has one arm per kind of release, each reading that kind's request back from
    its JSON record field by field.
    """
    kind = doc["format"]
    req = doc["request"]
    epsilon, delta, rho = _loss_parts(loss)
    plan: DensityPlan | HierarchyPlan | SynthPlan | OnTheMapPlan
    if kind == DENSITY_FORMAT:
        grid = req["grid"]
        plan = plan_density(
            session.catalog,
            DensityRequest(
                table=req["table"],
                columns=tuple(req["columns"]),
                bandwidth=req["bandwidth"],  # as given: the fingerprint hashes it
                points=req["points"],
                grid=tuple(tuple(float(v) for v in a) for a in grid) if grid else None,
                where=req["where"],
            ),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )
    elif kind == HIERARCHY_FORMAT:
        plan = plan_hierarchy(
            session.catalog,
            HierarchyRequest(
                table=req["table"],
                levels=tuple(req["levels"]),
                where=req["where"],
                split=tuple(float(w) for w in req["split"]) if req["split"] else None,
            ),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )
    elif kind == SYNTHETIC_FORMAT:
        plan = plan_synthetic(
            session.catalog,
            SynthRequest(
                table=req["table"],
                columns=tuple(req["columns"]) if req["columns"] is not None else None,
                bins=int(req["bins"]),
                rows=req["rows"],
                where=req["where"],
            ),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )
    else:
        plan = plan_onthemap(
            session.catalog,
            OnTheMapRequest(
                table=req["table"],
                origin=req["origin"],
                destination=req["destination"],
                prior=Fraction(req["prior"]) if req["prior"] is not None else None,
                per_destination=req["per_destination"],
                count_epsilon=Fraction(req["count_epsilon"])
                if req["count_epsilon"] is not None
                else None,
                where=req["where"],
            ),
            epsilon=epsilon,
            delta=None,
        )
    return plan


def _rebuilt(
    plan: DensityPlan | HierarchyPlan | SynthPlan | OnTheMapPlan,
    answer: str,
    doc: dict[str, Any],
    confidence: float,
) -> Release:
    """The release post-processed again from the recorded noisy values (``answer``, ``doc``)."""
    release: Release
    if isinstance(plan, DensityPlan):
        noisy_sum, noisy_n = _decode(answer)
        release = plan.post_process(noisy_sum, noisy_n, confidence)
    elif isinstance(plan, HierarchyPlan):
        release = plan.finish(np.asarray(doc["noisy"], dtype=np.int64), confidence)
    elif isinstance(plan, SynthPlan):
        release = plan.synthesise(
            Measurements.from_json(doc["measurements"]), seed=int(doc["seed"])
        )
    else:
        counts = np.asarray(doc["counts"], dtype=np.int64)
        release = plan.finish(counts.reshape(len(plan.destinations), len(plan.origins)))
    return release


def _loss_parts(loss: Loss) -> tuple[Fraction | None, Fraction | None, Fraction | None]:
    """The planning arguments (epsilon, delta, rho) that produced a release's loss."""
    if isinstance(loss, PureDP):
        return loss.epsilon, None, None
    if isinstance(loss, ApproxDP):
        return loss.epsilon, loss.delta, None
    if isinstance(loss, ZCDP):
        return None, None, loss.rho
    raise InternalError(f"a release was charged an unknown kind of loss: {loss!r}")
