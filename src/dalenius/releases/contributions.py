"""Per-unit caps a custodian need not guess: noisy histograms of how much each unit contributes.

A table whose privacy unit is a column (a person id) needs caps: the rows one person may
contribute (``max_rows``) and, for a grouping column, the groups one person may appear in
(``max_groups``). Caps too low throw rows away; caps too high multiply every query's noise. The
custodian usually does not know the distribution, and must not look at it: the caps are public.

This release measures it privately. For each person it counts their rows (and, per named column,
their distinct values), and releases the number of persons per count, in bins ``0, 1, …, 16`` and
then powers of two. Every person falls into exactly one bin of each histogram, so adding or
removing a person moves each histogram by 1 in L1 — **whatever the person's number of rows**: no
cap is needed to bound the sensitivity, which is what makes the histogram usable for choosing
the cap. Each histogram gets discrete Laplace noise of scale ``k/ε`` (``k`` histograms, ε split
equally). The suggested cap is read off the noisy histogram (post-processing): bins whose noisy
count does not reach the threshold ``τ`` of :func:`dalenius.releases.bounds.threshold` (an empty
bin passes it with probability at most 1/1000 over all bins) are read as empty, and the cap is
the smallest bin edge such that the persons with more are at most ``1 − coverage`` of all.

The derivation is in ``docs/mechanisms/private_bounds.md``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import ConfigurationError, QueryError
from dalenius.core.loss import Loss, PureDP, as_fraction
from dalenius.core.unit import IdUnit
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.protocol import (
    Fetch,
    Measure,
    Measured,
    loss_parts,
    recorded,
    register_product,
    request_doc,
    scaled_epsilon,
)
from dalenius.releases.bounds import threshold

if TYPE_CHECKING:
    import pandas as pd

FORMAT = "contributions-1"

EXACT_UP_TO = 16
"""Counts up to this have a bin each; above it, bins are ``(2^k, 2^(k+1)]``."""

TOP_POWER = 32
"""The last bin holds every count above ``2^31`` (up to ``2^32`` and beyond)."""

DEFAULT_COVERAGE = Fraction(95, 100)


def edges() -> tuple[int, ...]:
    """The largest count of each bin: ``0, 1, …, 16, 32, 64, …, 2^32`` (the last also holds
    everything above).

    Example:
        >>> e = edges()
        >>> e[:3], e[15:20], len(e)
        ((0, 1, 2), (15, 16, 32, 64, 128), 45)
    """
    return (*range(EXACT_UP_TO + 1), *(2**k for k in range(5, TOP_POWER + 1)))


def bin_of(count: int, tops: Sequence[int]) -> int:
    """The bin of a person's count (the first whose largest count reaches it; else the last)."""
    for i, top in enumerate(tops):
        if count <= top:
            return i
    return len(tops) - 1


@dataclass(frozen=True)
class ContributionsRequest:
    """How many rows (and distinct values of ``groups``) each unit of ``table`` contributes."""

    table: str
    groups: tuple[str, ...]
    epsilon: Fraction
    coverage: Fraction = DEFAULT_COVERAGE


@dataclass(frozen=True)
class CapSuggestion:
    """One histogram and the cap read off it.

    Attributes:
        what: ``"rows"``, or the grouping column whose distinct values per unit were counted.
        counts: the noisy number of units per bin.
        cap: the suggested cap; ``None`` when no bin reaches the threshold.
        beyond: the noisy share of units with more than ``cap`` (bins above the threshold).
    """

    what: str
    counts: tuple[int, ...]
    cap: int | None
    beyond: float


@dataclass(frozen=True)
class ContributionsRelease:
    """Suggested caps for a table's privacy unit, with the noisy histograms they come from."""

    table: str
    unit: str
    coverage: Fraction
    suggestions: tuple[CapSuggestion, ...]
    tops: tuple[int, ...] = field(repr=False)
    epsilon: Fraction
    threshold: int

    def bins(self) -> list[dict[str, Any]]:
        """One row per histogram bin whose noisy count reaches the threshold."""
        rows: list[dict[str, Any]] = []
        for s in self.suggestions:
            low = 0
            for top, c in zip(self.tops, s.counts, strict=True):
                if c >= self.threshold:
                    rows.append({"what": s.what, "from": low, "to": top, "noisy_units": c})
                low = top + 1
        return rows

    def to_pandas(self) -> pd.DataFrame:
        """:meth:`bins` as a DataFrame (pandas is imported here, not with the module)."""
        import pandas as pd

        return pd.DataFrame(self.bins(), columns=["what", "from", "to", "noisy_units"])

    def catalog_line(self) -> str:
        """The ``privacy_unit`` line of the catalog with the suggested caps."""
        parts = [f'column = "{self.unit}"']
        rows = next((s.cap for s in self.suggestions if s.what == "rows"), None)
        if rows is not None:
            parts.append(f"max_rows = {max(rows, 1)}")
        groups = [s.cap for s in self.suggestions if s.what != "rows" and s.cap is not None]
        if groups:
            parts.append(f"max_groups = {max(*groups, 1)}")
        return "privacy_unit = { " + ", ".join(parts) + " }"

    def to_json(self) -> dict[str, Any]:
        """The suggestions, the catalog line and the bins."""
        return {
            "table": self.table,
            "coverage": float(self.coverage),
            "threshold": self.threshold,
            "suggestions": [
                {"what": s.what, "cap": s.cap, "beyond": s.beyond} for s in self.suggestions
            ],
            "catalog": self.catalog_line(),
            "bins": self.bins(),
        }

    def __str__(self) -> str:
        share = f"{float(self.coverage):.0%}"
        lines = [f"Caps for each {self.unit} of {self.table} (to cover {share} of them fully):"]
        for s in self.suggestions:
            name = "rows" if s.what == "rows" else f"distinct {s.what}"
            if s.cap is None:
                lines.append(f"  {name}: no suggestion (no bin reached {self.threshold} units)")
            else:
                lines.append(f"  {name}: at most {s.cap} (about {s.beyond:.1%} of units have more)")
        lines.append("Catalog line:")
        lines.append(f"  {self.catalog_line()}")
        lines.append(
            f"Noisy units per count (ε = {float(self.epsilon):g}, split equally; bins under "
            f"{self.threshold} are noise and left out):"
        )
        for row in self.bins():
            first, last = row["from"], row["to"]
            span = f"{first}" if first == last else f"{first}–{last}"
            lines.append(f"  {row['what']:<12} {span:>14}: {row['noisy_units']}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ContributionsPlan:
    """One noisy histogram per measured quantity, each unit in one bin of each (L1 = 1)."""

    request: ContributionsRequest
    table: Table
    unit: str
    loss: Loss
    mechanism: IntegerLaplace = field(compare=False)
    kind: ClassVar[str] = "contributions"
    answer_format: ClassVar[str] = FORMAT
    plan_class: ClassVar[str] = "contributions"

    @property
    def tables(self) -> tuple[Table, ...]:
        """The one table read."""
        return (self.table,)

    @property
    def text(self) -> str:
        """The audit trail's text of the request."""
        measured = ", ".join(("rows", *self.request.groups))
        return f"CONTRIBUTIONS({measured}) PER {self.unit} FROM {self.table.name}"

    def fingerprint(self) -> str:
        """The request and the loss, hashed."""
        payload = [self.table.name, self.unit, list(self.request.groups), str(self.loss)]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()

    def privacy_map(self) -> Loss:
        """K histograms, each moved by at most 1 in L1 by one unit: k in all."""
        m = self.mechanism
        return PureDP(scaled_epsilon(m.epsilon, m.sensitivity, 1 + len(self.request.groups)))

    def statements(self, dialect: Dialect) -> list[str]:
        """Per measured quantity: the number of units per count (exact, no cap needed)."""
        q = dialect.quote
        unit, table = q(self.unit), q(self.table.name)
        measures = ["COUNT(*)", *(f"COUNT(DISTINCT {q(g)})" for g in self.request.groups)]
        return [
            f"SELECT n, COUNT(*) FROM (SELECT {m} AS n FROM {table} WHERE {unit} IS NOT NULL "
            f"GROUP BY {unit}) AS per_unit GROUP BY n"
            for m in measures
        ]

    def prepare(self, dialect: Dialect, salt: int) -> Measure[tuple[tuple[int, ...], ...]]:
        """Write the statements; the measure step bins them and adds the noise."""
        statements = self.statements(dialect)
        reads = [(self.table.name, [self.unit, *self.request.groups])]
        tops = edges()

        def measure(fetch: Fetch) -> Measured[tuple[tuple[int, ...], ...]]:
            released = []
            for statement in statements:
                counts = np.zeros(len(tops), dtype=np.int64)
                for n, units in fetch(statement, reads):
                    counts[bin_of(int(n), tops)] += int(units)
                released.append(tuple(int(v) for v in self.mechanism.release(counts)))
            value = tuple(released)
            doc = {
                "format": FORMAT,
                "request": request_doc(self.request),
                "counts": [list(c) for c in value],
            }
            return Measured(json.dumps(doc), value)

        return measure

    def decode(self, record: str) -> tuple[tuple[int, ...], ...]:
        """The noisy histograms of a ledger record."""
        return tuple(tuple(int(v) for v in c) for c in recorded(record, FORMAT)["counts"])

    def publish(
        self, value: tuple[tuple[int, ...], ...], confidence: float
    ) -> ContributionsRelease:
        """The caps read off the noisy histograms (post-processing)."""
        tops = edges()
        tau = threshold(len(tops), self.mechanism.scale)
        names = ("rows", *self.request.groups)
        suggestions = tuple(
            suggest(name, counts, tops, self.request.coverage, tau)
            for name, counts in zip(names, value, strict=True)
        )
        return ContributionsRelease(
            self.table.name,
            self.unit,
            self.request.coverage,
            suggestions,
            tops,
            self.request.epsilon,
            tau,
        )


def suggest(
    what: str, counts: Sequence[int], tops: Sequence[int], coverage: Fraction, tau: int
) -> CapSuggestion:
    """The smallest bin edge with at most ``1 − coverage`` of the units above it, reading bins
    whose noisy count is under ``tau`` as empty.

    Example:
        >>> suggest("rows", [0, 50, 30, 15, 5, 2], [0, 1, 2, 3, 4, 5], Fraction(9, 10), 3)
        CapSuggestion(what='rows', counts=(0, 50, 30, 15, 5, 2), cap=3, beyond=0.05)
    """
    clamped = [c if c >= tau else 0 for c in counts]
    total = sum(clamped)
    if total == 0:
        return CapSuggestion(what, tuple(counts), None, 0.0)
    above = total
    for top, c in zip(tops, clamped, strict=True):
        above -= c
        if Fraction(above, total) <= 1 - coverage:
            return CapSuggestion(what, tuple(counts), max(top, 1), above / total)
    return CapSuggestion(what, tuple(counts), tops[-1], 0.0)


def plan_contributions(catalog: Catalog, request: ContributionsRequest) -> ContributionsPlan:
    """Validate the request from the catalog alone and build the plan (reads no data)."""
    table = catalog.table(request.table)
    if table is None:
        raise QueryError(
            f"no table {request.table!r} in the catalog.",
            fix=f"name one of: {', '.join(catalog.table_names)}.",
        )
    unit = table.privacy_unit
    if not isinstance(unit, IdUnit):
        raise QueryError(
            f"{table.name}'s privacy unit is one row: there are no per-unit caps to choose.",
            fix="name a table whose privacy_unit is a column (a person id).",
        )
    groups = []
    for g in request.groups:
        col = table.column(g)
        if col is None:
            raise QueryError(
                f"{table.name} has no column {g!r}.",
                fix=f"name one of: {', '.join(table.column_names)}.",
            )
        if col.name.lower() == unit.column.lower():
            raise QueryError(
                f"{col.name} is the privacy unit: each unit has one value of it.",
                fix="name a column units are grouped by.",
            )
        groups.append(col.name)
    if not 0 < request.coverage < 1:
        raise ConfigurationError(
            f"coverage must be between 0 and 1; got {float(request.coverage):g}.",
            fix="pass coverage=0.95 (the share of units whose rows all fit under the cap).",
        )
    epsilon = as_fraction(request.epsilon, "epsilon")
    k = 1 + len(groups)
    settled = ContributionsRequest(table.name, tuple(groups), epsilon, request.coverage)
    return ContributionsPlan(
        settled, table, unit.column, PureDP(epsilon), IntegerLaplace(k, epsilon)
    )


@dataclass(frozen=True)
class ContributionsKind:
    """Fetching a suggestion of caps again by its ledger entry id."""

    answer_format: ClassVar[str] = FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> ContributionsPlan:
        """The plan of a recorded request, at its recorded ε."""
        epsilon, _, _ = loss_parts(loss)
        assert epsilon is not None
        return plan_contributions(
            catalog,
            ContributionsRequest(
                request["table"],
                tuple(request["groups"]),
                epsilon,
                Fraction(request["coverage"]),
            ),
        )


register_product(ContributionsKind())
