"""What every synthesiser (MST, AIM) starts from: the chosen columns' public domains, the exact
contingency table behind the data gate, its marginals, and the Gaussian loss they are measured at.

A synthetic table's values come from public domains, never from the data: categorical columns need
key lists, numeric columns with public bounds are cut into ``bins`` equal intervals (the synthetic
value is the interval's label, ``[17, 23.3)``). The exact statement counts the rows of each
combination of values present (rows with a NULL in a chosen column are left out); each synthesiser
measures marginals of that table with discrete Gaussian noise.
"""

from __future__ import annotations

import itertools
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.plan.expr import BinOp, Col, Expr, Func, Lit
from dalenius.plan.nodes import DPQuery, GroupKey, Measurement, Query, output_fields
from dalenius.plan.protocol import Fetch, Measure, Measured, recorded, request_doc
from dalenius.releases.density import rho_for
from dalenius.sql.bind import to_query
from dalenius.sql.emit import ExactSQL, exact_queries
from dalenius.sql.filters import product_filter

MAX_CELLS = 5_000_000
"""At most this many cells in the largest 2-way marginal times the number of pairs."""

MAX_ROWS = 10_000_000
"""At most this many synthetic rows per release."""


@dataclass(frozen=True)
class Domain:
    """One column's public values: category keys, or bin labels of a numeric column."""

    name: str
    labels: tuple[Any, ...]
    binned: bool = False


@dataclass(frozen=True)
class Contingency:
    """A sparse contingency table: the code of each cell present, and its count."""

    codes: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]
    sizes: tuple[int, ...]

    @property
    def total(self) -> int:
        """The number of rows counted."""
        return int(self.counts.sum())


@dataclass(frozen=True)
class SynthColumns:
    """The columns of a synthetic table, planned: their domains, the exact contingency statement
    (each privacy unit's rows capped at ``max_rows``) and the tables it reads.
    """

    domains: tuple[Domain, ...]
    exact: DPQuery
    tables: tuple[Table, ...]
    max_rows: int

    @property
    def sizes(self) -> tuple[int, ...]:
        """The number of values of each column."""
        return tuple(len(d.labels) for d in self.domains)


@dataclass(frozen=True)
class SyntheticRelease:
    """Synthetic rows, the column sets the model keeps (MST: the tree's pairs; AIM: the
    junction tree's cliques), the loss spent and the noisy measurements they come from.
    """

    columns: tuple[str, ...]
    data: dict[str, npt.NDArray[Any]]
    edges: tuple[tuple[str, ...], ...]
    rows: int
    loss: Loss
    measurements: Any = field(repr=False)
    method: str = "mst"

    def to_pandas(self) -> Any:
        """The synthetic table as a DataFrame."""
        import pandas as pd

        return pd.DataFrame({c: self.data[c] for c in self.columns})


Sampler = Callable[[int, np.random.Generator], npt.NDArray[np.int64]]
"""Draws ``n`` rows of codes (one column per domain) with the generator given."""


def rows_from(
    domains: Sequence[Domain],
    sampler: Sampler,
    rows: int,
    seed: int | None,
    *,
    edges: tuple[tuple[str, ...], ...],
    loss: Loss,
    measurements: Any,
    method: str,
) -> SyntheticRelease:
    """``rows`` synthetic rows drawn by a fitted model, as the domains' labels.

    The sampling's randomness protects nothing (the model is post-processing of noisy
    measurements); its seed is recorded with them so the same rows come back, and drawn from the
    OS generator when none is given.
    """
    if not 0 <= rows <= MAX_ROWS:
        raise QueryError(
            f"rows must be between 0 and {MAX_ROWS}, got {rows}.", fix="ask for fewer rows."
        )
    # Not privacy noise: sampling rows from a model of already-noisy measurements is
    # post-processing, and the seed (from the OS generator) is recorded so the rows can be rebuilt.
    generator = np.random.default_rng(
        seed if seed is not None else int(system_random().uint64(1)[0])
    )
    codes = sampler(rows, generator)
    data = {d.name: np.asarray(d.labels, dtype=object)[codes[:, i]] for i, d in enumerate(domains)}
    return SyntheticRelease(
        columns=tuple(d.name for d in domains),
        data=data,
        edges=edges,
        rows=rows,
        loss=loss,
        measurements=measurements,
        method=method,
    )


class Recordable(Protocol):
    """Noisy measurements that the ledger records as JSON."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        ...  # pragma: no cover


M = TypeVar("M", bound=Recordable)


@dataclass(frozen=True)
class SynthesisRound:
    """One round of a synthesiser, as a progress display shows it: round ``round`` of at most
    ``rounds``, the ρ its mechanisms have drawn so far (as calibrated, never more than ``rho``)
    and the columns of the marginal it has just selected and measured.

    Nothing here is an exact quantity: the marginal is the exponential mechanism's output and the
    ρ spent follows from earlier noisy answers; both are in the release's ledger record.
    """

    method: str
    round: int
    rounds: int
    spent: Fraction
    rho: Fraction
    marginal: tuple[str, ...]


Progress = Callable[[SynthesisRound], None]
"""Called by a synthesiser after each round (``Session.synthesize(progress=...)``)."""


@dataclass(frozen=True)
class SynthesisSteps(ABC, Generic[M]):
    """A synthetic release ready to run, and the release protocol's steps every synthesiser
    shares: the exact contingency statement, the measurements behind the gate with a sampling seed
    from the OS generator, the ledger record (format, request, measurements, seed), and rows again
    from a record.

    A synthesiser's plan supplies :meth:`measure`, :meth:`measurements_from`, :meth:`synthesise`,
    its privacy map and fingerprint; its :meth:`measure` calls :meth:`report` after each round so
    ``progress`` (which is no part of the request or its fingerprint) can show a long run.
    """

    request: Any
    domains: tuple[Domain, ...]
    exact: DPQuery
    tables: tuple[Table, ...]
    loss: Loss
    rho: Fraction
    max_rows: int
    progress: Progress | None = field(default=None, compare=False, repr=False)

    kind: ClassVar[str] = "synthetic"
    answer_format: ClassVar[str]
    method: ClassVar[str]

    @property
    def using(self) -> str:
        """What the audit trail's text names after the table (the method, when not MST)."""
        return ""

    @property
    def text(self) -> str:
        """The audit trail's text: what the analyst asked."""
        where = f" WHERE {self.request.where}" if self.request.where else ""
        names = ", ".join(d.name for d in self.domains)
        return f"SYNTHETIC({names}) FROM {self.request.table}{where}{self.using}"

    def report(self, done: int, rounds: int, spent: Fraction, attrs: Sequence[int]) -> None:
        """Tell the progress callback, if any, that round ``done`` of at most ``rounds`` measured
        the marginal on ``attrs``, with ``spent`` of ρ drawn so far.
        """
        if self.progress is not None:
            names = tuple(self.domains[a].name for a in attrs)
            self.progress(SynthesisRound(self.method, done, rounds, spent, self.rho, names))

    @abstractmethod
    def measure(self, table: Contingency, rng: RandomSource | None = None) -> M:
        """The noisy measurements of the exact table (the only step that reads data)."""
        # Abstract: MST (SynthPlan) and AIM (AimPlan) each implement it.

    @abstractmethod
    def measurements_from(self, doc: dict[str, Any]) -> M:
        """The measurements of a record's JSON."""
        # Abstract: MST (SynthPlan) and AIM (AimPlan) each implement it.

    @abstractmethod
    def synthesise(
        self, measured: M, rows: int | None = None, seed: int | None = None
    ) -> SyntheticRelease:
        """Rows from the measurements (post-processing)."""
        # Abstract: MST (SynthPlan) and AIM (AimPlan) each implement it.

    def prepare(self, dialect: Dialect, salt: int) -> Measure[tuple[M, int]]:
        """The exact contingency statement now; the measurements behind the gate.

        The record keeps the noisy measurements and the sampling seed (drawn now, from the OS
        generator), so the same request gives back the same rows at no cost.
        """
        statement = self.sql(dialect, salt).main
        seed = int(system_random().uint64(1)[0] % (2**63))

        def measure(fetch: Fetch) -> Measured[tuple[M, int]]:
            measured = self.measure(self.contingency(fetch(statement)))
            doc = {
                "format": self.answer_format,
                "request": request_doc(self.request),
                "measurements": measured.to_json(),
                "seed": seed,
            }
            return Measured(json.dumps(doc), (measured, seed))

        return measure

    def decode(self, record: str) -> tuple[M, int]:
        """The measurements and sampling seed of a ledger record."""
        doc = recorded(record, self.answer_format)
        return self.measurements_from(doc["measurements"]), int(doc["seed"])

    def publish(self, value: tuple[M, int], confidence: float) -> SyntheticRelease:
        """The synthetic rows (post-processing of the measurements; no interval applies)."""
        return self.synthesise(value[0], seed=value[1])

    def sql(self, dialect: Dialect | str, salt: int = 0) -> ExactSQL:
        """The exact contingency table (counts per combination of values present)."""
        return exact_queries(self.exact, dialect, salt=salt)

    def contingency(self, rows: Sequence[tuple[Any, ...]]) -> Contingency:
        """The exact contingency table from the engine's rows (sparse: only cells present)."""
        return contingency(self.domains, rows)


def plan_columns(
    catalog: Catalog,
    table_name: str,
    columns: Sequence[str] | None,
    bins: int,
    where: str | None,
    rows: int | None,
) -> SynthColumns:
    """Validate the table, bins, columns, domain sizes and row count of a synthetic request and
    write its exact statement; reads no data.

    Long because it validates in order, each refusal naming the parameter, the reason and the fix.
    """
    table = catalog.table(table_name)
    if table is None:
        raise QueryError(
            f"there is no table {table_name!r} in the catalog.", fix="check the table's name."
        )
    if not 2 <= bins <= 1000:
        raise QueryError(
            f"bins must be between 2 and 1000, got {bins}.", fix="use bins=10, for example."
        )
    names = columns or tuple(
        c.name
        for c in table.columns
        if c.keys is not None or (c.bounds is not None and c.type in ("int", "float"))
    )
    if not names:
        raise QueryError(
            f"{table_name!r} has no column with public keys or bounds.",
            fix="declare keys or bounds in the catalog.",
        )
    quoted = '"' + table_name.replace('"', '""') + '"'
    condition = product_filter(where)
    resolved = to_query(
        f"SELECT COUNT(*) FROM {quoted}" + (f" WHERE {condition}" if condition else ""),
        catalog,
    )
    fields = {f.name.lower(): f for f in output_fields(resolved.query.relation)}
    domains: list[Domain] = []
    keys: list[GroupKey] = []
    for name in names:
        column = table.column(name)
        field_ = fields.get(name.lower())
        if column is None or field_ is None:
            raise QueryError(
                f"there is no column {name!r} in {table_name!r}.", fix="check the column's name."
            )
        if column.keys is not None:
            domains.append(Domain(column.name, tuple(column.keys)))
            keys.append(GroupKey(column.name, Col(field_.id), column.type, tuple(column.keys)))
        elif column.bounds is not None and column.type in ("int", "float"):
            low, high = column.bounds
            labels, expr = _bins(Col(field_.id), low, high, bins)
            domains.append(Domain(column.name, labels, binned=True))
            keys.append(GroupKey(column.name, expr, "int", tuple(range(len(labels)))))
        else:
            raise QueryError(
                f"column {name!r} has neither a public key list nor public bounds.",
                why="the synthetic table's values come from public domains, never from the data.",
                fix="declare its keys (or bounds) in the catalog, or leave it out.",
            )
    sizes = [len(d.labels) for d in domains]
    pairs = sum(sizes[i] * sizes[j] for i in range(len(sizes)) for j in range(i + 1, len(sizes)))
    if pairs > MAX_CELLS or math.prod(sizes) > 10**15:
        raise QueryError(
            "the columns' domains are too large to synthesise.",
            fix="use fewer columns or fewer bins.",
        )
    if rows is not None and not 0 <= rows <= MAX_ROWS:
        raise QueryError(
            f"rows must be between 0 and {MAX_ROWS}, got {rows}.", fix="ask for fewer rows."
        )
    query: Query = replace(
        resolved.query, group_by=tuple(keys), having=None, order_by=(), limit=None, offset=0
    )
    r = query.unit.max_rows
    count = Measurement(
        "m0", "count", None, "int", None, Fraction(0), Fraction(1), 1, r, Fraction(1)
    )
    exact = DPQuery(query, (count,), (), None, PureDP(Fraction(1)))
    return SynthColumns(tuple(domains), exact, resolved.tables, r)


def recorded_columns(request: dict[str, Any]) -> dict[str, Any]:
    """The table, columns, bins, rows and filter of a synthetic request's ledger record."""
    columns = request["columns"]
    return {
        "table": request["table"],
        "columns": tuple(columns) if columns is not None else None,
        "bins": int(request["bins"]),
        "rows": request["rows"],
        "where": request["where"],
    }


def contingency(domains: Sequence[Domain], rows: Sequence[tuple[Any, ...]]) -> Contingency:
    """The exact contingency table from the engine's rows (kept sparse: only cells present)."""
    index = [
        {i: i for i in range(len(d.labels))}
        if d.binned
        else {_norm(v): i for i, v in enumerate(d.labels)}
        for d in domains
    ]
    k = len(domains)
    codes: list[tuple[int, ...]] = []
    counts: list[int] = []
    for row in rows:
        cell = tuple(index[j].get(_norm(row[j]), -1) for j in range(k))
        if min(cell) >= 0 and row[k]:
            codes.append(cell)
            counts.append(int(row[k]))
    return Contingency(
        codes=np.asarray(codes, dtype=np.int64).reshape(-1, k),
        counts=np.asarray(counts, dtype=np.int64),
        sizes=tuple(len(d.labels) for d in domains),
    )


def marginal(table: Contingency, axes: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """The exact marginal over ``axes`` (one array axis per column, in the order given)."""
    shape = tuple(table.sizes[a] for a in axes)
    if table.counts.size == 0:
        return np.zeros(shape, dtype=np.int64)
    flat = np.ravel_multi_index(tuple(table.codes[:, a] for a in axes), shape)
    out: npt.NDArray[np.int64] = (
        np.bincount(flat, weights=table.counts, minlength=math.prod(shape))
        .astype(np.int64)
        .reshape(shape)
    )
    return out


def synth_loss(
    epsilon: Fraction | None, delta: Fraction | None, rho: Fraction | None
) -> tuple[Loss, Fraction]:
    """The loss a synthetic release declares, and the ρ it is run at (zCDP, or converted from
    (ε, δ) by the largest ρ whose Rényi conversion fits).
    """
    if rho is not None:
        if rho <= 0:
            raise InvalidLossError("rho must be positive.", fix="pass rho=0.5, for example.")
        return ZCDP(rho), rho
    if epsilon is None or epsilon <= 0 or delta is None or not 0 < delta < 1:
        raise InvalidLossError(
            "synthetic data needs epsilon and delta (or rho).",
            why="the marginals are measured with Gaussian noise, which satisfies (ε, δ)-DP and "
            "zCDP but never pure ε.",
            fix="pass epsilon=1 and delta=1e-9, for example (the dataset's accounting must be 'approx'), or rho.",
        )
    return ApproxDP(epsilon, delta), rho_for(epsilon, delta)


def vector_gaussian(rows: int, rho: Fraction) -> IntegerGaussian:
    """Discrete Gaussian noise for a whole marginal (L2 sensitivity ``rows``), on the integer grid.

    Above σ = 3072 the sampler would round to a coarser grid whose sensitivity argument is a
    scalar one; a marginal is a vector, so such a loss is refused instead.
    """
    mech = IntegerGaussian(rows, ZCDP(rho))
    if mech.granularity > 1:
        raise InvalidLossError(
            "the loss is too small for this many columns (the noise per marginal would exceed σ = 3072).",
            fix="use a larger epsilon or rho, or fewer columns.",
        )
    return mech


def em_epsilon(rho: Fraction, rounds: int) -> Fraction:
    """The largest ε (rounded down) with rounds·ε²/8 ≤ ρ: each exponential mechanism is ε²/8-zCDP."""
    value = Fraction(math.sqrt(float(8 * rho / rounds))).limit_denominator(10**9)
    while rounds * value * value / 8 > rho:
        value *= Fraction(999_999, 1_000_000)
    return value


def _bins(column: Expr, low: Fraction, high: Fraction, bins: int) -> tuple[tuple[Any, ...], Expr]:
    width = (high - low) / bins
    edges = [low + i * width for i in range(bins + 1)]
    labels = tuple(
        f"[{float(edges[i]):g}, {float(edges[i + 1]):g}{']' if i == bins - 1 else ')'}"
        for i in range(bins)
    )
    clipped: Expr = Func("LEAST", (Func("GREATEST", (column, Lit(_num(low)))), Lit(_num(high))))
    index = Func(
        "LEAST",
        (
            Func("FLOOR", (BinOp("/", BinOp("-", clipped, Lit(_num(low))), Lit(_num(width))),)),
            Lit(bins - 1),
        ),
    )
    return labels, index


def _num(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)


def _norm(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def workload_error(
    real: Any, synthetic: Any, columns: Sequence[str], *, triples: int = 200, seed: int = 0
) -> dict[str, float]:
    """Average total-variation distance (½·L1 of normalised marginals) over all 1-way and 2-way
    marginals and ``triples`` random 3-way marginals — a custodian's check: it reads the real data.
    """
    rng = np.random.default_rng(seed)  # chooses which triples to compare, not privacy noise

    def tvd(cols: Sequence[str]) -> float:
        a = real.groupby(list(cols), observed=True).size() / len(real)
        b = synthetic.groupby(list(cols), observed=True).size() / max(len(synthetic), 1)
        joined = a.to_frame("a").join(b.to_frame("b"), how="outer").fillna(0.0)
        return float(0.5 * (joined["a"] - joined["b"]).abs().sum())

    out = {"1-way": float(np.mean([tvd([c]) for c in columns]))}
    pairs = list(itertools.combinations(columns, 2))
    out["2-way"] = float(np.mean([tvd(p) for p in pairs])) if pairs else 0.0
    all_triples = list(itertools.combinations(columns, 3))
    if all_triples:
        picks = rng.choice(len(all_triples), size=min(triples, len(all_triples)), replace=False)
        out["3-way"] = float(np.mean([tvd(all_triples[i]) for i in picks]))
    return out
