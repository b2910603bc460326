"""A SQL query's answer as a release plan: the SQL path's side of the release protocol.

:class:`QueryRelease` wraps a prepared query (its DP plan and its exact SQL, already written) so
that the session's one spending sequence runs it as it runs every product: its privacy map is
:func:`dalenius.engine.noise.audited_loss` over the mechanisms that will draw the noise (the same
objects, built once), its measure step fetches the exact aggregates and draws the noise, its record
is the noisy answer in the ledger's answer format, and publishing it is post-processing.

The request key, fingerprint and audit text are those the query path has always used, so ledger
records and cached answers written before are found again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from dalenius.core.catalog import Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InternalError
from dalenius.core.loss import Loss
from dalenius.engine import elastic_release
from dalenius.engine.noise import Mechanisms, Noisy, add_noise, audited_loss, build_mechanisms
from dalenius.engine.postprocess import Answer, exact_values, post_process
from dalenius.engine.timing import plan_class
from dalenius.plan.nodes import DPQuery
from dalenius.plan.protocol import Fetch, Measure, Measured

if TYPE_CHECKING:
    from dalenius.engine.session import Prepared

ANSWER_FORMAT = 2
"""The format of a query's ledger record (part of its request key)."""


@dataclass(frozen=True)
class QueryRelease:
    """A prepared SQL query, run by the session's spending sequence.

    Attributes:
        prepared: the plan, its exact SQL (written, with its bounding key, before the reserve)
            and the tables it reads.
        sql: the analyst's text (the audit trail's).
    """

    prepared: Prepared
    sql: str
    kind: ClassVar[str] = "query"
    answer_format: ClassVar[str] = str(ANSWER_FORMAT)

    @property
    def plan(self) -> DPQuery:
        """The DP plan."""
        return self.prepared.plan

    @property
    def text(self) -> str:
        """The SQL as the analyst wrote it."""
        return self.sql

    @property
    def loss(self) -> Loss:
        """The plan's loss (its ε split, δ)."""
        return self.plan.loss

    @property
    def tables(self) -> tuple[Table, ...]:
        """The tables the query reads."""
        return self.prepared.tables

    @cached_property
    def plan_class(self) -> str:
        """The constant-time class (quantile, join, group_by or scan)."""
        return plan_class(self.plan)

    def fingerprint(self) -> str:
        """The plan's fingerprint."""
        return self.plan.fingerprint()

    @cached_property
    def mechanisms(self) -> Mechanisms:
        """The mechanisms that will draw the noise, built once (the audit checks these)."""
        return build_mechanisms(self.plan)

    def privacy_map(self) -> Loss:
        """The loss recomputed bottom-up from :attr:`mechanisms` (for a join bounded by elastic
        sensitivity, from the plan's parts, whose noise is calibrated on the data).
        """
        if self.plan.elastic is not None:
            return elastic_release.elastic_loss(self.plan)
        return audited_loss(self.plan, self.mechanisms)

    def prepare(self, dialect: Dialect, salt: int) -> Measure[Noisy]:
        """The measure step over the exact SQL already written (its bounding key was drawn when
        it was written, from the same range as ``salt``).
        """
        exact = self.prepared.exact
        plan = self.plan
        if plan.elastic is not None:

            def elastic(fetch: Fetch) -> Measured[Noisy]:
                main = fetch(exact.main, exact.reads)
                left, right = (int(fetch(sql, exact.reads)[0][0]) for sql in exact.frequencies)
                values = exact_values(plan, main, {})
                noisy = elastic_release.release(plan, values, (left, right))
                return Measured(encode(noisy), noisy)

            return elastic
        mechanisms = self.mechanisms

        def measure(fetch: Fetch) -> Measured[Noisy]:
            main = fetch(exact.main, exact.reads)
            histograms = {name: fetch(sql, exact.reads) for name, sql in exact.histograms}
            noisy = add_noise(plan, exact_values(plan, main, histograms), mechanisms)
            return Measured(encode(noisy), noisy)

        return measure

    def decode(self, record: str) -> Noisy:
        """The noisy answer of a ledger record."""
        return decode(record)

    def publish(self, value: Noisy, confidence: float) -> Answer:
        """AVG from SUM and COUNT, error bars, HAVING and ORDER BY: post-processing, free."""
        if self.plan.elastic is not None:
            return elastic_release.publish(self.plan, value, confidence)
        return post_process(self.plan, value, confidence)


def encode(noisy: Noisy) -> str:
    """A query's noisy answer as its ledger record."""
    return json.dumps({"format": ANSWER_FORMAT, **noisy.to_json()}, sort_keys=True, default=str)


def decode(answer: str) -> Noisy:
    """The noisy answer of a query's ledger record."""
    doc = json.loads(answer)
    if doc.get("format") != ANSWER_FORMAT:
        raise InternalError("the ledger's record has an unknown format")
    return Noisy.from_json(doc)
