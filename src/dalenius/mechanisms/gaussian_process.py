"""The Gaussian-process mechanism for a kernel sum over binned data, exact and float-safe.

Hall, Rinaldo & Wasserman (2013), "Differential privacy for functions and functional data"
(JMLR 14): a function ``f_D`` in the reproducing-kernel Hilbert space ``H`` of a kernel ``K``, with
``‖f_D − f_D′‖_H ≤ Δ`` on neighbouring datasets, is released as ``f_D + c·G``, ``G`` a Gaussian
process with covariance ``K``. On a grid ``X`` this is ``f_D(X) + N(0, c²·K(X, X))``; in the
whitened coordinates ``w = L⁻¹ f(X)`` (``L Lᵀ = K(X, X)``) neighbours are at Euclidean distance at
most ``Δ`` because ``g(X)ᵀ K(X, X)⁻¹ g(X) ≤ ‖g‖²_H`` for every ``g ∈ H``, so the release is an
ordinary Gaussian mechanism there.

Here ``f_D(x) = Σ_b c_b·k(x, z_b)`` is a kernel sum over the exact counts ``c_b`` of a binning of
the data (bin centres ``z_b``), and Dalenius computes the release so that no floating-point value
that depends on the data ever meets the noise (Mironov 2012):

1. the kernel ``k(x_i, z_b)`` and the whitening matrix ``M ≈ (L + λ)⁻¹`` are fixed public matrices,
   quantised to integers (``K_q = round(2²⁰·k)``, ``M_q = round(2⁴⁰·M)``);
2. the whitened values ``M_q·K_q·c`` are computed exactly in integers and rounded to a grid of
   step ``g = 2^a``: integer units;
3. exact discrete Gaussian noise ``N_ℤ(0, σ_u²)`` is added to each unit (Canonne, Kamath &
   Steinke 2020), and the result is mapped back with ``L`` — post-processing of integers.

The sensitivity is that of the integer map actually used, computed without appeal to the RKHS:
one privacy unit changes the counts by a vector of L1 norm at most ``R`` (its row cap), so the
whitened values move by at most ``Δ_w = R·max_b ‖A e_b‖₂`` with ``A = M_q K_q / 2⁶⁰`` (the RKHS
argument shows ``Δ_w ≤ R``; the code measures it). Rounding moves each unit by at most ½ on each
side, so the integer shift has L2 norm at most ``Δ_u = Δ_w/g + ⌈√m⌉``. For an integer shift the
discrete Gaussian has the continuous one's Rényi bound ``α·v²/(2σ²)`` (CKS 2020, Prop. 5), and
independent coordinates add, so the release is ρ-zCDP with ``ρ = Δ_u² / (2σ_u²)``: σ_u² is set to
make that exactly the ρ requested.

For a two-column surface on a mesh grid the kernel factorises: ``K = K₀ ⊗ K₁``, the whitening is
``M₀ ⊗ M₁`` (jitter on each factor), column norms multiply, and every product is taken axis by
axis, so a 40 × 40 grid never builds a 1600 × 1600 matrix.

``λ`` (:data:`JITTER`) regularises the factors: the Cholesky factor of ``K + λI`` is well
conditioned, and the noise covariance is ``σ²(K + λI)``, 0.1% more variance than ``σ²K``.
The derivation, with the error bars, is in ``docs/mechanisms/gaussian_process.md``.

Example:
    >>> import numpy as np
    >>> axis = KernelAxis(np.linspace(0.0, 10.0, 11), np.arange(0.0, 11.0))
    >>> m = GaussianProcessMechanism([axis], bandwidth=2.0, max_rows=1, rho=Fraction(1, 2))
    >>> m.rho == Fraction(1, 2)
    True
    >>> m.release(np.zeros(11, dtype=np.int64)).shape
    (11,)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._validate import confidence_fraction, positive_fraction
from dalenius.mechanisms.gaussian import discrete_gaussian

JITTER = 1e-3
"""``λ`` in ``K + λI`` for each axis: noise variance +0.1%, condition number at most ``1 + λ_max/λ``."""

KERNEL_BITS = 20
"""Kernel values are quantised to multiples of 2⁻²⁰ (a public matrix; the error is in the bands)."""

WHITEN_BITS = 40
"""The whitening matrix is quantised to multiples of 2⁻⁴⁰."""

COUNT_LIMIT = 2**27
"""Bin counts are clamped to 2²⁷ (134 million rows in one bin), a contraction, so sums stay exact."""

MAX_POINTS = 4096
"""At most this many grid points per axis."""

SIGMA_UNITS = 4096
"""The noise is at most ``N_ℤ(0, 4096²)`` in grid units (the exact sampler's largest table)."""


def gaussian_kernel(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], bandwidth: float
) -> npt.NDArray[np.float64]:
    """``exp(−(a_i − b_j)² / (2h²))`` for every pair of entries of the 1-D arrays ``a`` and ``b``."""
    diff = a[:, None] - b[None, :]
    out: npt.NDArray[np.float64] = np.exp(-(diff * diff) / (2.0 * bandwidth * bandwidth))
    return out


@dataclass(frozen=True)
class KernelAxis:
    """One axis: the public grid points where the curve is released, and the bin centres."""

    points: npt.NDArray[np.float64]
    centers: npt.NDArray[np.float64]


class _Factor:
    """The public matrices of one axis: quantised kernel, its Cholesky factor and whitening."""

    def __init__(self, axis: KernelAxis, bandwidth: float) -> None:
        points = np.asarray(axis.points, dtype=np.float64)
        centers = np.asarray(axis.centers, dtype=np.float64)
        m = points.size
        if m < 1 or m > MAX_POINTS or not np.all(np.isfinite(points)):
            raise ConfigurationError(
                f"an axis of the grid needs 1 to {MAX_POINTS} finite points, got {m}.",
                fix="use about 200 points for a curve, 40 per axis for a surface.",
            )
        self.m = m
        self.kernel = gaussian_kernel(points, centers, bandwidth)
        self.kernel_q = np.rint(self.kernel * 2.0**KERNEL_BITS).astype(np.int64)
        cov = gaussian_kernel(points, points, bandwidth) + JITTER * np.eye(m)
        self.factor = np.linalg.cholesky(cov)
        self.whiten_q = np.rint(np.linalg.inv(self.factor) * 2.0**WHITEN_BITS).astype(np.int64)
        whiten = self.whiten_q.astype(np.float64) / 2.0**WHITEN_BITS
        a = whiten @ (self.kernel_q.astype(np.float64) / 2.0**KERNEL_BITS)
        # The float error of these column norms is below 1e-12 relative; the margin covers it.
        self.column_norm = float(np.sqrt((a * a).sum(axis=0)).max()) * (1 + 1e-9) + 1e-12
        approx = self.factor @ a  # ≈ the kernel itself: what the release maps back to
        self.map_error = float(np.abs(approx - self.kernel).max()) * 2 + 2.0**-KERNEL_BITS
        self.row_l2 = np.sqrt((self.factor**2).sum(axis=1))
        self.row_l1 = np.abs(self.factor).sum(axis=1)


class GaussianProcessMechanism:
    """Release a kernel sum ``Σ_b c_b·k(x, z_b)`` on a grid under ρ-zCDP.

    Args:
        axes: one :class:`KernelAxis` for a curve, two for a surface on the mesh of their points.
        bandwidth: the Gaussian kernel's bandwidth ``h`` (public).
        max_rows: ``R``, the most rows (bin counts, in L1) one privacy unit changes.
        rho: the zCDP loss; :attr:`rho` equals it exactly.

    Attributes:
        max_rows: ``R``, the row cap the noise is calibrated for (a privacy map checks it).
        rho: the ρ this release satisfies.
        sigma: per grid point, the noise's subgaussian parameter in count units.
        rounding: per grid point, the most that rounding to the noise grid moves the value.
        approximation: per grid point and per row counted, the most that the public quantised
            matrices move the value from the exact kernel sum.
    """

    def __init__(
        self,
        axes: Sequence[KernelAxis],
        *,
        bandwidth: float,
        max_rows: int,
        rho: Fraction | int | float,
    ) -> None:
        if not 1 <= len(axes) <= 2:
            raise ConfigurationError(f"a kernel sum has one or two axes, got {len(axes)}.")
        if not (isinstance(bandwidth, int | float) and math.isfinite(bandwidth) and bandwidth > 0):
            raise ConfigurationError(
                f"bandwidth must be a positive number, got {bandwidth!r}.",
                fix="pass bandwidth=2.0 (in the column's units), for example.",
            )
        if max_rows < 1:
            raise ConfigurationError(f"max_rows must be at least 1, got {max_rows}.")
        target = positive_fraction(rho, "rho")
        # Decided from the sizes alone, before any matrix is built.
        m = math.prod(np.asarray(a.points).size for a in axes)
        slack = math.isqrt(m) + (0 if math.isqrt(m) ** 2 == m else 1)
        reach = Fraction(SIGMA_UNITS) * _sqrt_down(2 * target)  # Δ_u may be up to this
        if reach <= 2 * slack:
            raise ConfigurationError(
                f"rho = {float(target):.3g} is too small for a grid of {m} points.",
                why="rounding to the noise grid costs about √m units of sensitivity, which this ρ cannot cover.",
                fix="use fewer grid points, or a larger epsilon.",
            )
        self.max_rows = max_rows
        self.factors = [_Factor(a, float(bandwidth)) for a in axes]
        self.shape = tuple(f.m for f in self.factors)
        delta_w = Fraction(max_rows) * Fraction(math.prod(f.column_norm for f in self.factors))
        # g = 2^a, the smallest power of two with Δ_w/g + slack ≤ reach (so σ_u ≤ 4096).
        a = math.floor(math.log2(float(delta_w / (reach - slack)))) - 1
        while delta_w / Fraction(2) ** (a - 1) + slack <= reach:
            a -= 1
        while delta_w / Fraction(2) ** a + slack > reach:
            a += 1
        self.exponent = a
        self.granularity = Fraction(2) ** a
        shift = delta_w / self.granularity + slack
        self.sigma2_units = shift * shift / (2 * target)
        self.rho = shift * shift / (2 * self.sigma2_units)
        g = float(self.granularity)
        sigma_u = math.sqrt(float(self.sigma2_units))
        self.sigma = _outer([f.row_l2 for f in self.factors]) * g * sigma_u
        self.rounding = _outer([f.row_l1 for f in self.factors]) * g / 2
        e = [f.map_error for f in self.factors]
        self.approximation = e[0] if len(e) == 1 else e[0] * (1 + e[1]) + e[1]

    def exact_units(self, counts: npt.ArrayLike) -> npt.NDArray[Any]:
        """The whitened, rounded integer units of the bin counts (exact integer arithmetic)."""
        c = np.clip(np.asarray(counts, dtype=np.int64), 0, COUNT_LIMIT)
        shift = KERNEL_BITS * len(self.factors) + WHITEN_BITS * len(self.factors) + self.exponent
        if len(self.factors) == 1:
            (f,) = self.factors
            sums = (f.kernel_q @ c.reshape(-1)).astype(object)  # ≤ 2⁶² : exact in int64
            whitened = f.whiten_q.astype(object) @ sums
        else:
            f0, f1 = self.factors
            matrix = c.reshape(f0.kernel_q.shape[1], f1.kernel_q.shape[1])
            left = f0.kernel_q @ matrix  # ≤ 2⁵⁶ : exact in int64
            sums = left.astype(object) @ f1.kernel_q.T.astype(object)
            whitened = f0.whiten_q.astype(object) @ sums @ f1.whiten_q.T.astype(object)
        rounded: npt.NDArray[Any] = np.vectorize(
            lambda v: _round_shift(int(v), shift), otypes=[object]
        )(whitened)
        return rounded

    def release(
        self, counts: npt.ArrayLike, rng: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        """The kernel sum of ``counts`` at every grid point (row-major), with the noise added."""
        units = np.asarray(self.exact_units(counts)).reshape(-1)
        bound = 2**62
        clamped = np.array([max(-bound, min(bound, int(u))) for u in units], dtype=np.int64)
        noise = discrete_gaussian(self.sigma2_units, clamped.size, rng or system_random())
        noisy = (clamped + noise).astype(np.float64) * float(self.granularity)
        if len(self.factors) == 1:
            out: npt.NDArray[np.float64] = self.factors[0].factor @ noisy
            return out
        f0, f1 = self.factors
        surface: npt.NDArray[np.float64] = (
            f0.factor @ noisy.reshape(self.shape) @ f1.factor.T
        ).reshape(-1)
        return surface

    def half_width(
        self, confidence: float, *, simultaneous: bool, rows: float
    ) -> npt.NDArray[np.float64]:
        """Half-width at each grid point of an interval holding the exact kernel sum.

        The noise at a point is a fixed combination of independent discrete Gaussians, each
        σ_u-subgaussian (CKS 2020, Cor. 9), so ``P(|noise_i| > t) ≤ 2·exp(−t²/(2σ_i²))``; a
        simultaneous band over the ``m`` points takes the union bound. Rounding adds at most
        :attr:`rounding`, the quantised matrices at most ``approximation × rows`` (``rows``: an
        upper bound on the number of rows counted).
        """
        beta = 1.0 - float(confidence_fraction(confidence))
        if simultaneous:
            beta /= math.prod(self.shape)
        radius = math.sqrt(2.0 * math.log(2.0 / beta))
        out: npt.NDArray[np.float64] = (
            self.sigma * radius + self.rounding + self.approximation * rows
        )
        return out

    @property
    def covariance(self) -> npt.NDArray[np.float64]:
        """The released noise's covariance, ``g²σ_u²·L Lᵀ`` (at most; ≈ σ²(K + λI))."""
        scale = float(self.granularity) ** 2 * float(self.sigma2_units)
        ll = [f.factor @ f.factor.T for f in self.factors]
        full = ll[0] if len(ll) == 1 else np.kron(ll[0], ll[1])
        out: npt.NDArray[np.float64] = np.asarray(scale * full, dtype=np.float64)
        return out

    def exact_sum(self, counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The exact kernel sum (floating point) at every grid point: what the bands cover."""
        c = np.asarray(counts, dtype=np.float64)
        if len(self.factors) == 1:
            out: npt.NDArray[np.float64] = self.factors[0].kernel @ c.reshape(-1)
            return out
        f0, f1 = self.factors
        matrix = c.reshape(f0.kernel.shape[1], f1.kernel.shape[1])
        surface: npt.NDArray[np.float64] = (f0.kernel @ matrix @ f1.kernel.T).reshape(-1)
        return surface


def _outer(rows: Sequence[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
    if len(rows) == 1:
        return rows[0].copy()
    out: npt.NDArray[np.float64] = np.outer(rows[0], rows[1]).reshape(-1)
    return out


def _round_shift(value: int, shift: int) -> int:
    """``round(value / 2**shift)`` (halves up), exactly, for any integer shift."""
    if shift <= 0:
        return value << -shift
    return (value + (1 << (shift - 1))) >> shift


def _sqrt_down(x: Fraction) -> Fraction:
    """A rational lower bound of ``√x`` (to about 2⁻⁶⁰ relative)."""
    scale = 2**60
    return Fraction(math.isqrt(x.numerator * scale * scale // x.denominator), scale)
