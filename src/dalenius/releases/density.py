"""Private density curves: a kernel density estimate released whole by the Gaussian-process mechanism.

The curve is the Gaussian kernel density estimate of one numeric column (or two, for a 2-D
surface) evaluated on a public grid:

    f_D(x) = S_D(x) / n,    S_D(x) = (2πh²)^(−d/2) · Σ_rows exp(−‖x − row‖² / (2h²)).

Both parts are released with zCDP noise and divided afterwards (post-processing):

* ``S_D`` lies in the RKHS of the kernel, and adding or removing one privacy unit (at most ``R``
  rows, the unit's row cap) moves it by at most ``R·(2πh²)^(−d/2)`` in RKHS norm (each row's kernel
  has norm 1). It is released by :class:`~dalenius.mechanisms.gaussian_process.GaussianProcessMechanism`.
* ``n`` (the rows after the filter and the caps) is released with discrete Gaussian noise of
  sensitivity ``R``; 5% of ρ goes to it.

The engine never sees the kernel: it returns exact, contribution-bounded counts per bin of a fine
binning of the column's public bounds (:mod:`dalenius.sql.histograms`), and the sum is formed from
the bin centres. For an integer column with at most :data:`MAX_UNIT_BINS` values each value is its
own bin and ``S_D`` is exact; otherwise the bin width is ``h/32`` and the band below also covers the
binning error, at most ``(2πh²)^(−d/2)·(w√d/2)/(h√e)`` per row (the kernel's Lipschitz constant
times the distance to the bin centre).

Bands: pointwise (each point covered with the stated confidence) and simultaneous (all points at
once, by the union bound) — both cover the data's exact curve ``f_D``, not the population density.

Privacy loss: the dataset's definition decides. Under zCDP the release costs ``ρ``; under
(ε, δ) the largest ρ whose conversion ``ε = ρ + 2√(ρ ln(1/δ))`` fits is used and ``(ε, δ)`` is
charged. Pure ε is refused: no Gaussian mechanism satisfies it.
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

from dalenius.accounting.renyi import rho_for_approx
from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ZCDP, ApproxDP, Loss
from dalenius.core.rng import RandomSource
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.mechanisms.gaussian_process import GaussianProcessMechanism, KernelAxis
from dalenius.plan.protocol import (
    Fetch,
    Measure,
    Measured,
    as_declared,
    loss_parts,
    recorded,
    register_product,
    request_doc,
    rho_of,
    scaled_rho,
)
from dalenius.sql.histograms import Axis, BinnedCounts, binned_counts

MAX_UNIT_BINS = 20_000
"""An integer column with at most this many values gets one bin per value (an exact curve)."""

FINE_BINS = 32
"""Otherwise bins are ``h / FINE_BINS`` wide (capped so that the total stays bounded)."""

MAX_BINS_1D = 20_000
MAX_BINS_2D_AXIS = 400
DEFAULT_POINTS_1D = 200
DEFAULT_POINTS_2D = 40
DENSITY_FORMAT = "density-1"
"""The ledger record's format: the request, the noisy kernel sum and the noisy count."""

NoisyDensity = tuple[npt.NDArray[np.float64], int]
"""A density's noisy values: the kernel sum on the grid and the row count."""

COUNT_SHARE = Fraction(1, 20)
"""The share of ρ spent on the row count that normalises the curve."""


@dataclass(frozen=True)
class DensityRequest:
    """What the analyst asks: the curve of ``columns`` of ``table``.

    Attributes:
        table: the private table.
        columns: one column (a curve) or two (a surface), numeric with public bounds.
        bandwidth: the kernel bandwidth ``h``, in the columns' units (one value for every axis).
        points: grid points per axis (default 200 for a curve, 40 × 40 for a surface), or
            ``grid``: explicit grid values per axis.
        where: an optional SQL filter on the table's rows.
    """

    table: str
    columns: tuple[str, ...]
    bandwidth: float
    points: int | None = None
    grid: tuple[tuple[float, ...], ...] | None = None
    where: str | None = None


@dataclass(frozen=True)
class DensityPlan:
    """A density release ready to run: the exact statements, the mechanisms and the loss."""

    request: DensityRequest
    counts: BinnedCounts
    axes: tuple[Axis, ...]
    axis_grids: tuple[npt.NDArray[np.float64], ...] = field(compare=False)
    points: npt.NDArray[np.float64] = field(compare=False)
    curve: GaussianProcessMechanism = field(compare=False)
    count: IntegerGaussian = field(compare=False)
    loss: Loss
    rho: Fraction
    scale: float
    binning_error: float

    def fingerprint(self) -> str:
        """A hash naming exactly what is released (for the ledger and repeated requests)."""
        payload = {
            "kind": "density",
            "table": self.request.table,
            "columns": list(self.request.columns),
            "bandwidth": self.request.bandwidth,
            "where": self.request.where,
            "grid": [g.tolist() for g in self.axis_grids],
            "bins": [[a.column, str(a.low), str(a.high), a.bins] for a in self.axes],
            "loss": str(self.loss),
            "rho": str(self.rho),
            "plan": self.counts.plan.fingerprint(),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    # -- the release protocol (dalenius.plan.protocol) ----------------------------------------

    kind: ClassVar[str] = "density"
    answer_format: ClassVar[str] = DENSITY_FORMAT
    plan_class: ClassVar[str] = "density"

    @property
    def tables(self) -> tuple[Table, ...]:
        """The tables the exact counts read."""
        return self.counts.tables

    @property
    def text(self) -> str:
        """The audit trail's text: what the analyst asked."""
        req = self.request
        where = f" WHERE {req.where}" if req.where else ""
        return (
            f"DENSITY({', '.join(req.columns)}; bandwidth={req.bandwidth:g}) FROM {req.table}"
            f"{where}"
        )

    def privacy_map(self) -> Loss:
        """The curve's and the count's zCDP, each at the unit's row cap, composed.

        One unit changes the bin counts by at most R in L1, so the kernel sum by at most
        R·(2πh²)^(-d/2) in the RKHS norm the curve's mechanism is calibrated for per row, and the
        row count by R.
        """
        required = self.counts.plan.query.unit.max_rows
        total = scaled_rho(self.curve.rho, self.curve.max_rows, required) + scaled_rho(
            rho_of(self.count.loss), self.count.sensitivity, required
        )
        return as_declared(total, self.loss)

    def prepare(self, dialect: Dialect, salt: int) -> Measure[NoisyDensity]:
        """The exact statements now; the count, the bin counts and their noise behind the gate."""
        statements = self.counts.sql(dialect, salt)

        def measure(fetch: Fetch) -> Measured[NoisyDensity]:
            total = fetch(statements.main)
            bins = fetch(statements.histograms[0][1])
            count = int(total[0][0] if total and total[0][0] is not None else 0)
            noisy = self.noise(count, bins)
            record = {
                "format": DENSITY_FORMAT,
                "request": request_doc(self.request),
                "noisy_sum": [float(v) for v in noisy[0]],
                "count": noisy[1],
            }
            return Measured(json.dumps(record, sort_keys=True), noisy)

        return measure

    def decode(self, record: str) -> NoisyDensity:
        """The noisy kernel sum and count of a ledger record."""
        doc = recorded(record, DENSITY_FORMAT)
        return np.asarray(doc["noisy_sum"], dtype=np.float64), int(doc["count"])

    def publish(self, value: NoisyDensity, confidence: float) -> DensityRelease:
        """The curve and its bands (post-processing of the noisy values)."""
        return self.post_process(value[0], value[1], confidence)

    def describe(self) -> str:
        """A few lines for explain output: what is read, the noise, the expected band."""
        names = " × ".join(self.request.columns)
        sd = float(self.curve.sigma.max()) * self.scale
        return "\n".join(
            [
                f"Density of {names} in {self.request.table} (bandwidth {self.request.bandwidth:g}), "
                f"{self.points.shape[0]} grid points, {self.counts.bins} bins.",
                f"Privacy unit: at most {self.counts.max_rows} row(s) per unit; RKHS sensitivity "
                f"{self.counts.max_rows}·(2πh²)^(-d/2).",
                f"Noise: Gaussian process, σ ≈ {sd:.4g} on the unnormalised sum per point; "
                f"count: discrete Gaussian σ ≈ {float(self.count.sigma):.4g}.",
                f"Loss: {self.loss} (ρ = {float(self.rho):.6g}).",
            ]
        )

    def finish(
        self,
        total: int,
        bins: Sequence[tuple[Any, ...]],
        confidence: float,
        rng: RandomSource | None = None,
    ) -> DensityRelease:
        """Add the noise to the exact count and bin counts, and post-process into a curve."""
        noisy_sum, noisy_n = self.noise(total, bins, rng)
        return self.post_process(noisy_sum, noisy_n, confidence)

    def noise(
        self, total: int, bins: Sequence[tuple[Any, ...]], rng: RandomSource | None = None
    ) -> NoisyDensity:
        """The noisy kernel sum on the grid and the noisy row count (the only step that reads
        exact values).
        """
        counts = np.zeros(self.counts.bins, dtype=np.int64)
        for row in bins:
            index, value = int(row[-2]), int(row[-1])
            if 0 <= index < self.counts.bins:
                counts[index] += value
        # The mechanism works on the kernel sum in count units (sensitivity R); the scale
        # (2πh²)^(−d/2) and the division by n are post-processing.
        noisy_sum = self.scale * self.curve.release(counts, rng)
        noisy_n = int(self.count.release(np.array([int(total)], dtype=np.int64), rng=rng)[0])
        return noisy_sum, noisy_n

    def post_process(
        self, noisy_sum: npt.NDArray[np.float64], noisy_n: int, confidence: float
    ) -> DensityRelease:
        """The curve and its bands from the released noisy sum and count (free: no data)."""
        beta = 1.0 - confidence
        n_error = float(
            self.count.error_bar(Fraction(1) - Fraction(beta / 2).limit_denominator(10**12))
        )
        n_hat = max(noisy_n, 1)
        n_low, n_high = max(noisy_n - n_error, 1.0), max(noisy_n + n_error, 1.0)
        bias = self.binning_error * n_high
        rows = float(n_high)
        values = np.maximum(noisy_sum, 0.0) / n_hat
        bands = {}
        for simultaneous in (False, True):
            width = (
                self.curve.half_width(1 - beta / 2, simultaneous=simultaneous, rows=rows)
                * self.scale
                + bias
            )
            low = np.maximum(noisy_sum - width, 0.0) / n_high
            high = (np.maximum(noisy_sum, 0.0) + width) / n_low
            bands[simultaneous] = (np.minimum(low, values), np.maximum(high, values))
        return DensityRelease(
            columns=self.request.columns,
            grid=self.axis_grids,
            density=values.reshape([len(g) for g in self.axis_grids]),
            low=bands[False][0].reshape([len(g) for g in self.axis_grids]),
            high=bands[False][1].reshape([len(g) for g in self.axis_grids]),
            band_low=bands[True][0].reshape([len(g) for g in self.axis_grids]),
            band_high=bands[True][1].reshape([len(g) for g in self.axis_grids]),
            count=noisy_n,
            confidence=confidence,
            loss=self.loss,
            noisy_sum=noisy_sum,
        )


@dataclass(frozen=True)
class DensityRelease:
    """A released density: values on the grid, pointwise and simultaneous bands, the noisy count.

    ``density[i]`` lies in ``[low[i], high[i]]`` (pointwise band) and in
    ``[band_low[i], band_high[i]]`` (simultaneous band); both cover the data's exact curve with
    the stated confidence, as intervals on the noise (not on the kernel estimate's own bias).
    """

    columns: tuple[str, ...]
    grid: tuple[npt.NDArray[np.float64], ...]
    density: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    band_low: npt.NDArray[np.float64]
    band_high: npt.NDArray[np.float64]
    count: int
    confidence: float
    loss: Loss
    noisy_sum: npt.NDArray[np.float64] = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (what the ledger stores and the API returns)."""
        return {
            "columns": list(self.columns),
            "grid": [g.tolist() for g in self.grid],
            "density": self.density.tolist(),
            "low": self.low.tolist(),
            "high": self.high.tolist(),
            "band_low": self.band_low.tolist(),
            "band_high": self.band_high.tolist(),
            "count": self.count,
            "confidence": self.confidence,
            "loss": str(self.loss),
        }

    def to_pandas(self) -> Any:
        """One row per grid point: the grid columns, density, low, high, band_low, band_high."""
        import pandas as pd

        mesh = np.meshgrid(*self.grid, indexing="ij")
        data: dict[str, Any] = {c: m.reshape(-1) for c, m in zip(self.columns, mesh, strict=True)}
        for name in ("density", "low", "high", "band_low", "band_high"):
            data[name] = getattr(self, name).reshape(-1)
        return pd.DataFrame(data)


def plan_density(
    catalog: Catalog,
    request: DensityRequest,
    *,
    epsilon: Fraction | None,
    delta: Fraction | None,
    rho: Fraction | None = None,
) -> DensityPlan:
    """Validate a density request and calibrate its noise; reads no data.

    Give ``rho`` (zCDP datasets) or ``epsilon`` and ``delta`` ((ε, δ) datasets).

    Raises:
        QueryError: the table, columns, filter or grid cannot be used.
        InvalidLossError: the loss cannot be met by a Gaussian mechanism (pure ε, no δ).
    """
    if not 1 <= len(request.columns) <= 2:
        raise QueryError(
            f"a density takes one or two columns, got {len(request.columns)}.",
            fix="pass one column for a curve, two for a surface.",
        )
    h = request.bandwidth
    if not (isinstance(h, int | float) and math.isfinite(h) and h > 0):
        raise QueryError(
            f"bandwidth must be a positive number, got {h!r}.",
            fix="pass bandwidth=2.0, for example.",
        )
    loss, total_rho = _loss(epsilon, delta, rho)
    table = catalog.table(request.table)
    if table is None:
        raise QueryError(
            f"there is no table {request.table!r} in the catalog.", fix="check the table's name."
        )
    axes = tuple(_axis(table, c, h, len(request.columns)) for c in request.columns)
    counts = binned_counts(catalog, request.table, axes, request.where)
    grids = _grids(axes, request)
    mesh = np.meshgrid(*grids, indexing="ij")
    points = np.stack([m.reshape(-1) for m in mesh], axis=1)
    d = len(axes)
    scale = (2 * math.pi * h * h) ** (-d / 2)
    rho_count = total_rho * COUNT_SHARE
    kernel_axes = [
        KernelAxis(g, np.array([float(c) for c in a.centers()]))
        for g, a in zip(grids, axes, strict=True)
    ]
    curve = GaussianProcessMechanism(
        kernel_axes, bandwidth=h, max_rows=counts.max_rows, rho=total_rho - rho_count
    )
    count = IntegerGaussian(counts.max_rows, ZCDP(rho_count))
    exact_bins = all(a.unit_bins and _column_type(table, a.column) == "int" for a in axes)
    width = max(float(a.width) for a in axes)
    # A row moves the unscaled kernel by at most 1, so the per-row bound is capped at the scale.
    binning = (
        0.0
        if exact_bins
        else scale * min(1.0, (width * math.sqrt(d) / 2) / (h * math.sqrt(math.e)))
    )
    return DensityPlan(
        request=request,
        counts=counts,
        axes=axes,
        axis_grids=grids,
        points=points,
        curve=curve,
        count=count,
        loss=loss,
        rho=curve.rho + rho_count,
        scale=scale,
        binning_error=binning,
    )


def rho_for(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The largest ρ (to about 10⁻⁹ relative, rounded down) whose (ε, δ) conversion stays within
    ``epsilon``, by the Rényi conversion of Canonne, Kamath & Steinke (tighter than Bun–Steinke).

    Example:
        >>> from dalenius.accounting.renyi import zcdp_to_approx_tight
        >>> r = rho_for(Fraction(1), Fraction(1, 10**6))
        >>> zcdp_to_approx_tight(r, Fraction(1, 10**6)).epsilon <= 1
        True
    """
    return rho_for_approx(epsilon, delta)


def _loss(
    epsilon: Fraction | None, delta: Fraction | None, rho: Fraction | None
) -> tuple[Loss, Fraction]:
    if rho is not None:
        if rho <= 0:
            raise InvalidLossError("rho must be positive.", fix="pass rho=0.1, for example.")
        return ZCDP(rho), rho
    if epsilon is None or epsilon <= 0:
        raise InvalidLossError(
            "a density release needs epsilon > 0.",
            fix="pass epsilon=1 and delta=1e-6, for example.",
        )
    if delta is None or delta == 0:
        raise InvalidLossError(
            "a density release needs delta > 0 (or a zCDP budget).",
            why="it adds Gaussian-process noise, which satisfies (ε, δ)-DP and zCDP but never pure ε.",
            fix="pass delta=1e-6 (the dataset's accounting must then be 'approx'), or use rho on a zCDP dataset.",
        )
    if not 0 < delta < 1:
        raise InvalidLossError(
            f"delta must be in (0, 1), got {float(delta):g}.", fix="use delta=1e-6."
        )
    return ApproxDP(epsilon, delta), rho_for(epsilon, delta)


def _axis(table: Table, name: str, h: float, dims: int) -> Axis:
    column = table.column(name)
    if column is None or column.type not in ("int", "float") or column.bounds is None:
        raise QueryError(
            f"column {name!r} of {table.name!r} is not a numeric column with public bounds.",
            why="the bins and the grid are laid on the column's public bounds.",
            fix="choose a numeric column whose bounds the catalog declares.",
        )
    low, high = column.bounds
    if column.type == "int" and high - low + 1 <= (
        MAX_UNIT_BINS if dims == 1 else MAX_BINS_2D_AXIS
    ):
        return Axis(column.name, low, high, int(high - low + 1), unit_bins=True)
    cap = MAX_BINS_1D if dims == 1 else MAX_BINS_2D_AXIS
    bins = min(cap, max(1, math.ceil(float(high - low) * FINE_BINS / h)))
    return Axis(column.name, low, high, bins)


def _column_type(table: Table, name: str) -> str | None:
    column = table.column(name)
    return column.type if column is not None else None


def _grids(axes: Sequence[Axis], request: DensityRequest) -> tuple[npt.NDArray[np.float64], ...]:
    if request.grid is not None:
        if len(request.grid) != len(axes):
            raise QueryError(
                f"the grid has {len(request.grid)} axes for {len(axes)} columns.",
                fix="give one list of points per column.",
            )
        out = tuple(np.asarray(g, dtype=np.float64) for g in request.grid)
        for g, a in zip(out, axes, strict=True):
            if g.ndim != 1 or g.size < 2 or not np.all(np.isfinite(g)):
                raise QueryError(
                    f"the grid of {a.column!r} must be a list of at least two finite numbers."
                )
        return out
    per_axis = request.points or (DEFAULT_POINTS_1D if len(axes) == 1 else DEFAULT_POINTS_2D)
    if per_axis < 2:
        raise QueryError(
            f"points must be at least 2, got {per_axis}.", fix="use points=200, for example."
        )
    return tuple(np.linspace(float(a.low), float(a.high), per_axis) for a in axes)


@dataclass(frozen=True)
class DensityKind:
    """How a density is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = DENSITY_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> DensityPlan:
        """The plan of the recorded request under the loss it was charged."""
        epsilon, delta, rho = loss_parts(loss)
        grid = request["grid"]
        return plan_density(
            catalog,
            DensityRequest(
                table=request["table"],
                columns=tuple(request["columns"]),
                bandwidth=request["bandwidth"],  # as given: the fingerprint hashes it
                points=request["points"],
                grid=tuple(tuple(float(v) for v in a) for a in grid) if grid else None,
                where=request["where"],
            ),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )


register_product(DensityKind())
