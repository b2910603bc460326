"""The release protocol: what the one spending sequence needs of anything it releases.

Everything a session releases — a SQL query's answer, each query of a batch, a density curve, a
hierarchy of counts, synthetic rows, origin–destination flows, or a product still to come — is a
:class:`ReleasePlan`. The session runs every plan through one sequence
(:meth:`dalenius.engine.session.Session.spend`)::

    validate → audit the loss → policy → reserve → deadline → gate → measure → release → commit

and that sequence only calls the methods below, so constant-time mode, the loss audit, the
policy, the answer cache, the audit trail and the fixed post-gate failure cover a plan by
construction, not by a copy of the plumbing. A plan is built from the request and the catalog
alone; it reads no data until :meth:`ReleasePlan.prepare`'s measure step runs behind the gate.

The privacy map (:meth:`ReleasePlan.privacy_map`, OpenDP's ``map``) is the loss recomputed from
the mechanisms the plan *will draw its noise with*, each at the sensitivity the catalog's privacy
unit requires (derived independently of the mechanism's own claim). The session refuses a plan
whose map exceeds the loss it declares, before anything is reserved: a defect then costs nothing.

A product's record in the ledger is JSON with its ``format`` and its ``request``, so a release can
be rebuilt by entry id; :func:`register_product` tells the session how to plan a kind again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Generic, Protocol, TypeVar

from dalenius.accounting.renyi import zcdp_to_approx_tight
from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InternalError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP

V = TypeVar("V")


class Fetch(Protocol):
    """Behind the data gate: run one exact statement, return its rows (``reads`` names the
    columns each table is read for, so the engine converts only those).
    """

    def __call__(self, sql: str, reads: Sequence[tuple[str, Sequence[str]]] = ...) -> list[Any]:
        """The rows of ``sql``."""
        ...  # pragma: no cover


@dataclass(frozen=True)
class Measured(Generic[V]):
    """What the measure step produced: the ledger's record (text) and the same value, decoded."""

    record: str
    value: V


class Measure(Protocol[V]):
    """The measure step of a prepared plan: the only code that reads exact values."""

    def __call__(self, fetch: Fetch) -> Measured[V]:
        """Fetch the exact values, draw the noise; return the record and its value."""
        ...  # pragma: no cover


class ReleasePlan(Protocol[V]):
    """A release ready to be charged and run; built from the request and the catalog only.

    Attributes:
        kind: what is released (``query``, ``density``, …): names its record and its result.
        text: the audit trail's text of the request (what the analyst asked).
        loss: the loss the release declares, which the ledger reserves.
        tables: the tables it reads (their data versions key the answer cache).
        answer_format: the format of its ledger record; part of the cache key.
        plan_class: the class its constant-time deadline is calibrated for.
    """

    @property
    def kind(self) -> str:
        """What is released; names its record and its result class."""
        ...  # pragma: no cover

    @property
    def text(self) -> str:
        """The audit trail's text of the request."""
        ...  # pragma: no cover

    @property
    def loss(self) -> Loss:
        """The loss the release declares (what the ledger reserves)."""
        ...  # pragma: no cover

    @property
    def tables(self) -> tuple[Table, ...]:
        """The tables it reads (their data versions key the answer cache)."""
        ...  # pragma: no cover

    @property
    def answer_format(self) -> str:
        """The format of its ledger record (part of the cache key)."""
        ...  # pragma: no cover

    @property
    def plan_class(self) -> str:
        """The class its constant-time deadline is calibrated for."""
        ...  # pragma: no cover

    def fingerprint(self) -> str:
        """A hash naming exactly what is released (for the ledger and repeated requests)."""
        ...  # pragma: no cover

    def privacy_map(self) -> Loss:
        """The loss recomputed from the mechanisms the release will draw with (the audit)."""
        ...  # pragma: no cover

    def prepare(self, dialect: Dialect, salt: int) -> Measure[V]:
        """Write the exact statements (before the reserve: a failure is a free refusal) and
        return the measure step, which runs behind the gate.

        ``salt`` keys contribution bounding's hash ranking (drawn from the OS generator).
        """
        ...  # pragma: no cover

    def decode(self, record: str) -> V:
        """The value of a ledger record this plan wrote (an answer from the record)."""
        ...  # pragma: no cover

    def publish(self, value: V, confidence: float) -> Any:
        """The release from its noisy value: post-processing only, free, reads no data."""
        ...  # pragma: no cover


# -- privacy maps -----------------------------------------------------------------------------


class LossDefect(InternalError):
    """A plan whose loss, recomputed from its mechanisms, exceeds what it would reserve.

    Never the analyst's fault and never data-dependent: it is decided from the plan alone, before
    anything is reserved, and audited as a defect.
    """

    code = "loss_defect"


def scaled_epsilon(
    epsilon: Fraction, calibrated: Fraction | int, required: Fraction | int
) -> Fraction:
    """The pure-DP loss of Laplace-type noise calibrated for sensitivity ``calibrated`` when one
    unit can change the answer by ``required``: ``ε · required / calibrated`` (exact).
    """
    return epsilon * Fraction(required) / Fraction(calibrated)


def scaled_rho(rho: Fraction, calibrated: Fraction | int, required: int) -> Fraction:
    """The zCDP loss of Gaussian noise calibrated for L2 sensitivity ``calibrated`` when one unit
    moves the answer by ``required`` in L2: ``ρ · (required / calibrated)²`` (exact).
    """
    ratio = Fraction(required) / Fraction(calibrated)
    return rho * ratio * ratio


def rho_of(loss: Loss) -> Fraction:
    """The ρ of a Gaussian mechanism's loss given as zCDP (the only kind this map composes)."""
    if isinstance(loss, ZCDP):
        return loss.rho
    raise InternalError(f"a Gaussian mechanism of a release is calibrated to {loss!r}, not zCDP")


def as_declared(total_rho: Fraction, declared: Loss) -> Loss:
    """A composed zCDP loss expressed as the declared loss is (zCDP, or (ε, δ) at its δ).

    An (ε, δ) declaration is met by the Rényi conversion of ``total_rho`` at the declared δ
    (rounded up), the conversion the products calibrate with.
    """
    if isinstance(declared, ApproxDP) and declared.delta > 0:
        return zcdp_to_approx_tight(total_rho, declared.delta)
    return ZCDP(total_rho)


def within(actual: Loss, declared: Loss) -> bool:
    """Whether a recomputed loss spends no more than the declared one, part by part."""
    if isinstance(actual, PureDP):
        if isinstance(declared, PureDP | ApproxDP):
            return actual.epsilon <= declared.epsilon
        return False
    if isinstance(actual, ApproxDP):
        if isinstance(declared, PureDP):
            return actual.delta == 0 and actual.epsilon <= declared.epsilon
        return (
            isinstance(declared, ApproxDP)
            and actual.epsilon <= declared.epsilon
            and actual.delta <= declared.delta
        )
    return isinstance(declared, ZCDP) and actual.rho <= declared.rho


# -- products: rebuilding a release from its record ----------------------------------------------


class ProductKind(Protocol):
    """How the session plans a product again from its ledger record (fetch by entry id)."""

    @property
    def answer_format(self) -> str:
        """The format of its ledger record (part of the cache key)."""
        ...  # pragma: no cover

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> ReleasePlan[Any]:
        """The plan of a recorded request (its record's ``request``) under the loss charged."""
        ...  # pragma: no cover


PRODUCTS: dict[str, ProductKind] = {}
"""Every registered product, by its record's format."""


def register_product(kind: ProductKind) -> ProductKind:
    """Make a product's records fetchable by entry id; returns ``kind``. Idempotent."""
    known = PRODUCTS.get(kind.answer_format)
    # A module imported twice (under two names) registers its own kind again: that is the same
    # product; another product with the same format is a bug.
    if known is not None and type(known).__qualname__ != type(kind).__qualname__:
        raise InternalError(f"two products share the record format {kind.answer_format!r}")
    PRODUCTS[kind.answer_format] = kind
    return kind


def loss_parts(loss: Loss) -> tuple[Fraction | None, Fraction | None, Fraction | None]:
    """The planning arguments (epsilon, delta, rho) that produced a product's loss."""
    if isinstance(loss, PureDP):
        return loss.epsilon, None, None
    if isinstance(loss, ApproxDP):
        return loss.epsilon, loss.delta, None
    if isinstance(loss, ZCDP):
        return None, None, loss.rho
    raise InternalError(f"a release was charged an unknown kind of loss: {loss!r}")


def recorded(answer: str, answer_format: str) -> dict[str, Any]:
    """A product's ledger record, checked to be of ``answer_format``."""
    doc: dict[str, Any] = json.loads(answer)
    if doc.get("format") != answer_format:
        raise InternalError("the ledger's record of this release has an unknown format")
    return doc


def request_doc(request: Any) -> dict[str, Any]:
    """A product's request (a dataclass) as JSON, fractions as text: kept in its record."""
    return {f.name: _jsonable(getattr(request, f.name)) for f in dataclasses.fields(request)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def fits_sequence(parts: Sequence[Loss]) -> Loss:
    """Sequential composition of pure-ε parts (the products' Laplace families), exact."""
    total = Fraction(0)
    for part in parts:
        if not isinstance(part, PureDP):
            raise InternalError(f"cannot compose {part!r} as pure DP")
        total += part.epsilon
    return PureDP(total)
