"""Means of numbers in ``[−1, 1]``: Duchi et al.'s mechanism and the piecewise mechanism.

**Duchi et al.** (JASA 2018, one dimension): the client sends ``±C`` with ``C = (e^ε+1)/(e^ε−1)``,
``+C`` with probability ``½ + x(e^ε−1)/(2(e^ε+1))``. Unbiased, ``Var = C² − x²``. Sampled as a
Bernoulli ``(1 + x)/2`` (carries the value) followed by binary randomized response with
``ρ = 1/(e^ε + 1)`` on the ``2**-32`` grid — the same law, with the ratio exactly
``(1 − ρ)/ρ <= e^ε``; ``C = 1/(1 − 2ρ)`` keeps it unbiased for the rounded ``ρ``.

**Piecewise mechanism** (Wang et al., ICDE 2019): with ``C = (e^{ε/2}+1)/(e^{ε/2}−1)``,
``l(x) = (C+1)/2·x − (C−1)/2`` and ``r(x) = l(x) + C − 1``, the client sends a uniform point of
``[l(x), r(x)]`` with probability ``e^{ε/2}/(e^{ε/2}+1)`` and of ``[−C, l(x)) ∪ (r(x), C]``
otherwise. The density is ``e^ε`` times higher inside than outside, so the ratio is ``e^ε``;
unbiased with ``Var = x²/(e^{ε/2}−1) + (e^{ε/2}+3)/(3(e^{ε/2}−1)²)``, smaller than Duchi's for
ε above about 1.29. The output is a real number sampled in floating point (53-bit uniforms);
the ratio holds for the real-valued law, and floating-point effects on it are not analysed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.core.loss import Number, PureDP
from dalenius.ldp._base import check_epsilon, z_for
from dalenius.ldp._draws import Draws, client_draws
from dalenius.ldp._grid import GRID, epsilon_up, grid_up, on_grid
from dalenius.ldp.microsoft import MeanEstimate


def _check_values(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size and (not np.isfinite(x).all() or np.abs(x).max() > 1):
        raise ConfigurationError(
            "values must be finite numbers in [-1, 1].",
            fix="rescale: x' = 2(x − low)/(high − low) − 1 with public bounds low, high.",
        )
    return x


def _uniform(draws: Draws, size: int) -> npt.NDArray[np.float64]:
    high = draws.words32(size).astype(np.uint64) << np.uint64(21)
    low = draws.words32(size).astype(np.uint64) >> np.uint64(11)
    return ((high | low).astype(np.float64) + 0.5) / 2.0**53


class _MeanMechanism:
    name = ""
    requested_epsilon: Fraction

    def _perturb(self, x: npt.NDArray[np.float64], draws: Draws) -> npt.NDArray[np.float64]:
        raise NotImplementedError

    def encode_many(self, values: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Reports of many clients (OS generator)."""
        return self._perturb(_check_values(values), client_draws())

    def encode(self, value: float) -> float:
        """One client's report."""
        return float(self.encode_many([value])[0])

    def report_bound(self) -> float:
        """The largest absolute value a report can take."""
        raise NotImplementedError

    def variance_of(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per-report variance for true values ``x``."""
        raise NotImplementedError

    def estimate(self, reports: npt.ArrayLike, confidence: float = 0.95) -> MeanEstimate:
        """The mean of the reports (unbiased), its plug-in variance and error bar."""
        arr = np.asarray(reports, dtype=np.float64).reshape(-1)
        bound = self.report_bound()
        if arr.size == 0:
            raise ConfigurationError("no reports to estimate from.")
        if not np.isfinite(arr).all() or np.abs(arr).max() > bound * (1 + 1e-12):
            raise ConfigurationError(
                f"a {self.name} report is a number in [-{bound:g}, {bound:g}]."
            )
        mean = float(arr.mean())
        variance = float(self.variance_of(np.array([np.clip(mean, -1, 1)]))[0]) / arr.size
        return MeanEstimate(
            mean, variance, z_for(confidence) * math.sqrt(variance), confidence, arr.size
        )

    def variance(self, values: npt.ArrayLike) -> float:
        """Exact variance of the mean estimate for true values."""
        x = _check_values(values)
        return float(self.variance_of(x).sum() / x.size**2)


class DuchiMean(_MeanMechanism):
    """Duchi et al.'s one-dimensional mechanism."""

    name = "duchi"

    def __init__(self, *, epsilon: Number) -> None:
        self.requested_epsilon = check_epsilon(epsilon)
        e_lo, _ = exp_bounds(self.requested_epsilon)
        self.flip = grid_up(1 / (e_lo + 1))
        self.c = 1 / (1 - 2 * float(self.flip))

    @property
    def epsilon(self) -> Fraction:
        """``ln((1 − ρ)/ρ)`` rounded up."""
        return min(epsilon_up((1 - self.flip) / self.flip), self.requested_epsilon)

    @property
    def loss(self) -> PureDP:
        """The loss of one report."""
        return PureDP(self.epsilon)

    def _perturb(self, x: npt.NDArray[np.float64], draws: Draws) -> npt.NDArray[np.float64]:
        carry = draws.words32(x.size) < np.minimum((1 + x) / 2 * GRID, GRID - 1)
        carry |= x >= 1
        flipped = draws.words32(x.size) < np.uint32(on_grid(self.flip))
        return np.where(carry ^ flipped, self.c, -self.c)

    def report_bound(self) -> float:
        """``C``."""
        return self.c

    def variance_of(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``C² − x²``."""
        return self.c**2 - x**2


class PiecewiseMean(_MeanMechanism):
    """Wang et al.'s piecewise mechanism."""

    name = "piecewise"

    def __init__(self, *, epsilon: Number) -> None:
        self.requested_epsilon = check_epsilon(epsilon)
        self.half = math.exp(float(self.requested_epsilon) / 2)
        self.c = (self.half + 1) / (self.half - 1)
        e_lo, _ = exp_bounds(self.requested_epsilon / 2)
        self.outside = grid_up(1 / (e_lo + 1))

    @property
    def epsilon(self) -> Fraction:
        """The ε asked for (the real-valued law's ratio is exactly ``e^ε``)."""
        return self.requested_epsilon

    @property
    def loss(self) -> PureDP:
        """The loss of one report."""
        return PureDP(self.requested_epsilon)

    def _perturb(self, x: npt.NDArray[np.float64], draws: Draws) -> npt.NDArray[np.float64]:
        c = self.c
        left = (c + 1) / 2 * x - (c - 1) / 2
        right = left + c - 1
        inside = draws.words32(x.size) >= np.uint32(on_grid(self.outside))
        u = _uniform(draws, x.size)
        centre = left + u * (c - 1)
        # outside: a uniform point of [−C, l) ∪ (r, C], total length C + 1
        t = u * (c + 1)
        below = left - (c + 1) + t  # t < l + C  →  −C + t
        outer = np.where(t < left + c, -c + t, right + (t - (left + c)))
        del below
        return np.where(inside, centre, outer)

    def report_bound(self) -> float:
        """``C``."""
        return self.c

    def variance_of(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``x²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²)``."""
        e = self.half
        return x**2 / (e - 1) + (e + 3) / (3 * (e - 1) ** 2)
