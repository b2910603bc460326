"""Record perturbation (course document 004): every row of a table published, each value noised.

Course document 004 perturbs the *database*: each record ``d`` of a public interval ``D`` is
published as ``d + L`` (:class:`~dalenius.mechanisms.perturbation.RecordPerturbation`, whose
(ε, δ) calibration the course gives and Dalenius certifies for its discrete noise). The course's
neighbouring tables differ in one *replaced* record, so the number of rows is public there.
Dalenius's neighbours differ by one privacy unit *added or removed* (``docs/privacy.md``), and
publishing exactly ``n`` rows would tell whether a row is present. So the number of rows
released is itself private:

1. ``n̂ = max(0, n + Z)``, ``Z`` discrete Laplace of scale ``1/ε_n`` (one row moves ``n`` by 1);
2. if ``n̂ >= n``: the ``n`` rows plus ``n̂ − n`` *dummy* rows, every value at its domain's
   midpoint; if ``n̂ < n``: a uniformly random ``n̂`` of the rows;
3. every value of every released row perturbed by its column's record mechanism at
   ``(ε_r/c, δ/c)`` for ``c`` columns, and the rows shuffled uniformly.

Privacy, for tables ``D`` and ``D' = D + {x}`` (the proof is in ``docs/releases/perturbation.md``):
given ``n̂ = k``, the two outputs can be coupled so that they differ in one row before the noise
(``x`` against a dummy when ``k > n``; ``x`` against a random row of ``D``, or not at all, when
``k <= n``); each released row is ``(ε_r, δ)``-indistinguishable from any other in ``D``
(basic composition over its ``c`` values), mixing and shuffling are post-processing. Composed with
the count: ``(ε_n + ε_r, δ)``. Only tables whose privacy unit holds one row are released: each
row its own unit, or an id column with ``max_rows = 1``, whose cap is enforced when the rows are
read exactly as a query's is (one row per id, chosen by a keyed hash of the unit's own rows; rows
without an id left out), so one unit still moves one row. A unit of ``R`` rows would need group
privacy (``R·ε`` and a δ growing like ``e^{(R−1)ε}``).

Float safety is the record mechanism's: values clamped to ``D``, on a power-of-two grid,
discrete Laplace noise with its δ(ε) certified exactly. NULL values are released as the
midpoint's perturbation (NULL-ness is not published).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ApproxDP, Loss, PureDP
from dalenius.core.randomized_response import epsilon_for
from dalenius.core.rng import RandomSource, system_random
from dalenius.core.unit import IdUnit, RowUnit
from dalenius.mechanisms._exact import uniform_below
from dalenius.mechanisms.calibration import accuracy_lower_bound, discrete_accuracy_lower_bound
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.mechanisms.perturbation import RecordPerturbation, discrete_laplace_delta
from dalenius.mechanisms.randomized_response import RandomizedResponse
from dalenius.plan.protocol import (
    Fetch,
    Measure,
    Measured,
    loss_parts,
    recorded,
    register_product,
    request_doc,
)
from dalenius.sql.emit.bounding import capped_rows

PERTURB_FORMAT = "perturbation-1"
"""The ledger record's format: the request and the released (noisy, shuffled) rows."""

COUNT_SHARE = Fraction(1, 20)
"""The share of ε spent on the number of rows released."""


@dataclass(frozen=True)
class PerturbationRequest:
    """What the analyst asks: every row of ``table``, its ``columns`` perturbed.

    Attributes:
        table: the private table (its privacy unit must be one row).
        columns: numeric columns with public bounds (the domains ``D``).
        tight: calibrate with the tight ``diam/(ε − 2·ln(1−δ))`` instead of the course's bound.
    """

    table: str
    columns: tuple[str, ...]
    tight: bool = False


@dataclass(frozen=True)
class ColumnError:
    """One column's line of the error table (all free: computed from the plan, not the data)."""

    column: str
    domain: str
    epsilon: Fraction
    delta: Fraction
    scale: Fraction
    mean_error: float
    error: float | None
    lower_bound: Fraction
    categorical: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "column": self.column,
            "domain": self.domain,
            "categorical": self.categorical,
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "scale": float(self.scale),
            "mean_abs_error": self.mean_error,
            "error": self.error,
            "lower_bound": float(self.lower_bound),
        }


@dataclass(frozen=True)
class PerturbationPlan:
    """A record-perturbation release ready to run: the statement, the mechanisms, the loss."""

    request: PerturbationRequest
    table: Table
    loss: Loss
    count: IntegerLaplace = field(compare=False)
    records: tuple[NumberPerturbation | CategoryPerturbation, ...] = field(compare=False)

    kind: ClassVar[str] = "perturbation"
    answer_format: ClassVar[str] = PERTURB_FORMAT
    plan_class: ClassVar[str] = "perturbation"

    @property
    def tables(self) -> tuple[Table, ...]:
        """The one table read."""
        return (self.table,)

    @property
    def text(self) -> str:
        """The audit trail's text: what the analyst asked."""
        tight = "; tight" if self.request.tight else ""
        return f"PERTURB({', '.join(self.request.columns)}{tight}) FROM {self.request.table}"

    def fingerprint(self) -> str:
        """A hash naming exactly what is released (for the ledger and repeated requests)."""
        payload = {
            "kind": "perturbation",
            "request": request_doc(self.request),
            "domains": [m.domain for m in self.records],
            "loss": str(self.loss),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def privacy_map(self) -> Loss:
        """The loss recomputed from the mechanisms: the count's ε at sensitivity 1, and each
        column's (ε, δ) re-certified from its grid shift and scale (exact δ of discrete Laplace).
        """
        epsilon = self.count.epsilon * Fraction(1) / self.count.sensitivity
        delta = Fraction(0)
        for m in self.records:
            if isinstance(m, CategoryPerturbation):
                epsilon += epsilon_for(m.rr.categories, m.rr.p, m.delta)
                delta += m.delta
            else:
                epsilon += m.epsilon
                delta += discrete_laplace_delta(m.grid_shift, m.unit_scale, m.epsilon)
        return PureDP(epsilon) if delta == 0 else ApproxDP(epsilon, delta)

    def sql(self, dialect: Dialect, salt: int = 0) -> str:
        """The exact statement (read behind the gate only): the columns of every row, or, for a
        unit named by an id column, of at most one row per unit, chosen as a query's rows are
        (by a hash keyed with ``salt``; rows without an id left out).
        """
        columns = list(self.request.columns)
        unit = self.table.privacy_unit
        if isinstance(unit, IdUnit):
            types = {c.name: c.type for c in self.table.columns}
            return capped_rows(
                self.table.name,
                columns,
                unit=unit.column,
                types={name: types[name] for name in (unit.column, *columns)},
                max_rows=1,
                dialect=dialect,
                salt=salt,
            )
        cols = ", ".join(dialect.quote(c) for c in columns)
        return f"SELECT {cols} FROM {dialect.quote(self.table.name)}"

    def prepare(self, dialect: Dialect, salt: int) -> Measure[npt.NDArray[np.float64]]:
        """The statement now; the rows, the count's noise and the values' noise behind the gate."""
        statement = self.sql(dialect, salt)
        unit = self.table.privacy_unit
        ids = [unit.column] if isinstance(unit, IdUnit) else []
        reads = [(self.table.name, list(dict.fromkeys([*ids, *self.request.columns])))]

        def measure(fetch: Fetch) -> Measured[npt.NDArray[np.float64]]:
            rows = fetch(statement, reads)
            noisy = self.noise(rows)
            record = {
                "format": PERTURB_FORMAT,
                "request": request_doc(self.request),
                "rows": noisy.tolist(),
            }
            return Measured(json.dumps(record), noisy)

        return measure

    def noise(
        self, rows: Sequence[Sequence[Any]], rng: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        """The released rows: a private number of them, each value perturbed, shuffled."""
        source = rng or system_random()
        width = len(self.records)
        mids = [m.dummy for m in self.records]
        exact = np.array(
            [[m.encode(r[j]) for j, m in enumerate(self.records)] for r in rows],
            dtype=np.float64,
        ).reshape(len(rows), width)
        n = exact.shape[0]
        released = max(0, int(self.count.release(np.array([n], dtype=np.int64), rng=source)[0]))
        order = _shuffled(n, source)
        if released <= n:
            chosen = exact[order[:released]]
        else:
            dummies = np.tile(np.array(mids, dtype=np.float64), (released - n, 1))
            chosen = np.vstack([exact, dummies])
        out = np.empty_like(chosen)
        for j, m in enumerate(self.records):
            out[:, j] = m.release(chosen[:, j], rng=source) if released else chosen[:, j]
        return out[_shuffled(released, source)]

    def decode(self, record: str) -> npt.NDArray[np.float64]:
        """The released rows of a ledger record."""
        doc = recorded(record, PERTURB_FORMAT)
        return np.asarray(doc["rows"], dtype=np.float64).reshape(-1, len(self.records))

    def decoded(self, rows: npt.NDArray[np.float64]) -> list[list[Any]]:
        """The rows with each categorical code replaced by its key (post-processing)."""
        return [[m.decode(v) for m, v in zip(self.records, row, strict=True)] for row in rows]

    def publish(self, value: npt.NDArray[np.float64], confidence: float) -> PerturbationRelease:
        """The rows and the error table (post-processing: reads no data)."""
        return PerturbationRelease(
            columns=self.request.columns,
            rows=value,
            values=self.decoded(value),
            errors=self.errors(confidence),
            count_error=int(self.count.error_bar(confidence)),
            count_epsilon=self.count.epsilon,
            confidence=confidence,
            loss=self.loss,
        )

    def errors(self, confidence: float) -> tuple[ColumnError, ...]:
        """Each column's scale, mean |error|, error bar and the floor γ no mechanism beats."""
        out = []
        for column, m in zip(self.request.columns, self.records, strict=True):
            if isinstance(m, CategoryPerturbation):
                out.append(m.error_line(column))
                continue
            # Discrete Laplace of scale t grid steps: E|X| = 2q/(1 − q²), q = e^(−1/t).
            q = math.exp(-1 / float(m.unit_scale))
            mean = float(m.granularity) * 2 * q / (1 - q * q)
            out.append(
                ColumnError(
                    column=column,
                    domain=f"[{_g(m.low)}, {_g(m.high)}]",
                    epsilon=m.epsilon,
                    delta=m.delta,
                    scale=m.scale,
                    mean_error=mean,
                    error=m.error_bar(confidence),
                    lower_bound=accuracy_lower_bound(m.high - m.low, m.epsilon, m.delta),
                )
            )
        return tuple(out)


def _shuffled(n: int, rng: RandomSource) -> npt.NDArray[np.int64]:
    """A uniformly random permutation of ``range(n)`` (Fisher–Yates on the given source)."""
    order = np.arange(n, dtype=np.int64)
    for i in range(n - 1, 0, -1):
        j = uniform_below(i + 1, rng)
        order[i], order[j] = order[j], order[i]
    return order


@dataclass(frozen=True)
class PerturbationRelease:
    """The released rows and the error table.

    ``rows`` has one column per requested column; their number is private (see the module), so
    a few rows may be dummies (the domain's midpoint, perturbed) or missing.
    """

    columns: tuple[str, ...]
    rows: npt.NDArray[np.float64] = field(repr=False)
    values: list[list[Any]] = field(repr=False)
    errors: tuple[ColumnError, ...]
    count_error: int
    count_epsilon: Fraction
    confidence: float
    loss: Loss

    def to_json(self) -> dict[str, Any]:
        """The rows and the error table as JSON."""
        return {
            "columns": list(self.columns),
            "rows": self.values,
            "errors": [e.to_json() for e in self.errors],
            "rows_released": int(self.rows.shape[0]),
            "rows_error": self.count_error,
            "confidence": self.confidence,
        }

    def to_pandas(self) -> Any:
        """The released rows as a table."""
        import pandas as pd

        return pd.DataFrame(self.values, columns=list(self.columns))

    def __str__(self) -> str:
        pct = f"{self.confidence:.0%}"
        lines = [
            f"{self.rows.shape[0]} rows released (their number is noisy: within "
            f"±{self.count_error} of the table's at {pct}, ε {float(self.count_epsilon):.4g}; "
            "missing rows are dropped at random, extra ones are dummies at the midpoint).",
            "",
            f"  {'column':<20}{'domain':>22}{'ε':>10}{'δ':>10}{'scale b':>12}"
            f"{'mean |err|':>12}{pct + ' error':>12}{'floor γ':>12}",
        ]
        for e in self.errors:
            bar = "—" if e.error is None else "±" + _g(e.error)
            floor = _g(e.lower_bound) if e.categorical else "±" + _g(e.lower_bound)
            lines.append(
                f"  {e.column:<20}{e.domain:>22}{_g(e.epsilon):>10}{_g(e.delta):>10}"
                f"{_g(e.scale):>12}{_g(e.mean_error):>12}{bar:>12}{floor:>12}"
            )
        lines.append("")
        lines.append(
            "Per value: scale b of the Laplace noise; mean |error| and the error bar cover the "
            "noise and the grid (not the clamping to the domain); floor γ: no (ε, δ)-DP mechanism "
            "on that domain has a smaller worst-case mean |error| (course document 004, Theorem 4). "
            "A categorical column (its public keys) gets the discrete mechanism: scale is p, the "
            "chance of each wrong key; mean |error| is the rate of wrong values m·p; floor γ the "
            "smallest rate any (ε, δ)-DP mechanism can have, (1−δ)·m/(m+e^ε) (Theorem 5)."
        )
        return "\n".join(lines)


def units_of_one_row(table: Table) -> bool:
    """Whether one privacy unit of ``table`` holds at most one row (each row its own unit, or
    an id column with ``max_rows = 1``, the cap enforced when the rows are read): the tables
    record perturbation releases.
    """
    unit = table.privacy_unit
    return isinstance(unit, RowUnit) or unit.max_rows == 1


def plan_perturbation(
    catalog: Catalog,
    request: PerturbationRequest,
    *,
    epsilon: Fraction | None,
    delta: Fraction | None,
) -> PerturbationPlan:
    """Validate a record-perturbation request and calibrate its noise; reads no data.

    Raises:
        QueryError: the table or a column cannot be used.
        InvalidLossError: no ε, or a δ outside [0, 1).
    """
    table = catalog.table(request.table)
    if table is None:
        raise QueryError(
            f"there is no table {request.table!r} in the catalog.", fix="check the table's name."
        )
    unit = table.privacy_unit
    if isinstance(unit, IdUnit) and not units_of_one_row(table):
        raise QueryError(
            f"table {table.name!r} protects a unit of up to {unit.max_rows} rows; record "
            "perturbation protects a unit of one row.",
            why="a unit of R rows would need group privacy: R·ε, and a δ growing like e^((R−1)ε).",
            fix="release a density, a hierarchy or synthetic rows of this table instead.",
        )
    if not request.columns or len(set(request.columns)) != len(request.columns):
        raise QueryError(
            "name each column to perturb once.", fix="pass --column age --column hours, say."
        )
    if epsilon is None or epsilon <= 0:
        raise InvalidLossError(
            "record perturbation needs epsilon > 0.", fix="pass epsilon=1, for example."
        )
    d = Fraction(0) if delta is None else delta
    if not 0 <= d < 1:
        raise InvalidLossError(f"delta must be in [0, 1), got {float(d):g}.", fix="use 1e-6.")
    count_eps = epsilon * COUNT_SHARE
    share = (epsilon - count_eps) / len(request.columns)
    records = tuple(
        _mechanism(table, c, share, d / len(request.columns), request.tight)
        for c in request.columns
    )
    loss: Loss = PureDP(epsilon) if d == 0 else ApproxDP(epsilon, d)
    return PerturbationPlan(
        request=request,
        table=table,
        loss=loss,
        count=IntegerLaplace(1, count_eps),
        records=records,
    )


def _mechanism(
    table: Table, name: str, epsilon: Fraction, delta: Fraction, tight: bool
) -> NumberPerturbation | CategoryPerturbation:
    column = table.column(name)
    if column is not None and column.type in ("int", "float") and column.bounds is not None:
        low, high = column.bounds
        return NumberPerturbation(Fraction(low), Fraction(high), epsilon, delta, tight=tight)
    if column is not None and column.keys is not None and len(column.keys) >= 2:
        return CategoryPerturbation(tuple(column.keys), epsilon, delta)
    raise QueryError(
        f"column {name!r} of {table.name!r} has neither public bounds nor at least two public "
        "keys.",
        why="each value is clamped to its column's public domain D (the bounds, or the key "
        "list), which sets the noise.",
        fix="choose a numeric column with bounds or a categorical one with keys.",
    )


class NumberPerturbation(RecordPerturbation):
    """A numeric column's record mechanism, with how its values enter and leave the release."""

    @property
    def domain(self) -> str:
        """The domain as the error table shows it."""
        return f"[{_g(self.low)}, {_g(self.high)}]"

    @property
    def dummy(self) -> float:
        """The value of a dummy row (and of NULL, NaN): the midpoint."""
        return float((self.low + self.high) / 2)

    def encode(self, value: Any) -> float:
        """A value as the mechanism takes it: NULL and NaN as the midpoint, infinities clamped."""
        if value is None:
            return self.dummy
        x = float(value)
        if math.isnan(x):
            return self.dummy
        return min(max(x, float(self.low)), float(self.high))

    def decode(self, value: float) -> float:
        """A released value as published."""
        return float(value)


class CategoryPerturbation:
    """A categorical column released by course document 004's discrete mechanism.

    Each value is reported as itself with probability ``1 − m·p`` and as each of the ``m`` other
    public keys with probability ``p >= (1−δ)/(m + e^ε)``
    (:class:`~dalenius.mechanisms.randomized_response.RandomizedResponse`). A value outside the
    key list, and NULL, enter as the first key (any fixed key of the domain keeps the proof).
    """

    def __init__(self, keys: tuple[Any, ...], epsilon: Fraction, delta: Fraction) -> None:
        self.keys = keys
        self.epsilon = epsilon
        self.delta = delta
        self.rr = RandomizedResponse(len(keys), epsilon=epsilon, delta=delta)
        self._index = {k: i for i, k in enumerate(keys)}

    @property
    def domain(self) -> str:
        """The domain as the error table shows it."""
        return f"{len(self.keys)} keys"

    dummy: ClassVar[float] = 0.0
    """A dummy row's code: the first key."""

    def encode(self, value: Any) -> float:
        """A value's code (the first key's for NULL and values outside the list)."""
        return float(self._index.get(value, 0))

    def decode(self, value: float) -> Any:
        """A released code's key."""
        return self.keys[int(value)]

    def release(
        self, codes: npt.NDArray[np.float64], *, rng: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        """Every code randomized (one exact uniform integer each)."""
        reports = self.rr.privatize(codes.astype(np.int64), rng=rng)
        return reports.astype(np.float64)

    def error_line(self, column: str) -> ColumnError:
        """The error table's line: p, the wrong-value rate m·p and Theorem 5's floor."""
        m = len(self.keys) - 1
        return ColumnError(
            column=column,
            domain=self.domain,
            epsilon=self.epsilon,
            delta=self.delta,
            scale=self.rr.p,
            mean_error=float(m * self.rr.p),
            error=None,
            lower_bound=discrete_accuracy_lower_bound(1, m, self.epsilon, self.delta),
            categorical=True,
        )


def _g(x: Fraction | float) -> str:
    value = float(x)
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.3e}"


@dataclass(frozen=True)
class PerturbationKind:
    """How a record perturbation is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = PERTURB_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> PerturbationPlan:
        """The plan of the recorded request under the loss it was charged."""
        epsilon, delta, _ = loss_parts(loss)
        return plan_perturbation(
            catalog,
            PerturbationRequest(
                table=request["table"],
                columns=tuple(request["columns"]),
                tight=bool(request["tight"]),
            ),
            epsilon=epsilon,
            delta=delta,
        )


register_product(PerturbationKind())
