"""Microsoft's telemetry collection (Ding, Kulkarni and Yekhanin, NeurIPS 2017).

**1BitMean** — a counter ``x ∈ [0, m]`` becomes one bit, 1 with probability
``π(x) = ρ + (x/m)(1 − 2ρ)`` where ``ρ = 1/(e^ε + 1)``; the mean estimate
``μ̂ = (m/n)·Σ (b_i − ρ)/(1 − 2ρ)`` is unbiased with
``Var(μ̂) = (m/n)²·Σ π_i(1 − π_i)/(1 − 2ρ)²``. The bit is drawn in two steps: a
Bernoulli ``x/m`` (carries the value, no privacy of its own) followed by binary randomized
response with ``ρ`` on the ``2**-32`` grid, so the ratio is exactly ``(1 − ρ)/ρ <= e^ε``.

**dBitFlip** — a value in ``k`` buckets. Each client samples ``d`` distinct buckets once (kept for
life) and for each sends one bit: 1 with probability ``e^{ε/2}/(e^{ε/2} + 1)`` if it is the
client's bucket, ``ρ = 1/(e^{ε/2} + 1)`` otherwise (two bits change between values: ratio
``((1 − ρ)/ρ)²``). The count of bucket ``t`` is
``ĉ_t = (k/d)·Σ_{i: t ∈ J_i} (b_{i,t} − ρ)/(1 − 2ρ)``, unbiased; with ``a = (1 − ρ)/(1 − 2ρ)``
and ``z = ρ/(1 − 2ρ)``, ``Var(ĉ_t) = (k/d)·[c_t·a² + (n − c_t)·z²]·… − c_t`` (see
:meth:`DBitFlip.variance`).

**Repeated collection.** Telemetry is collected every day; fresh randomness each day would let the
collector average the noise away. Both mechanisms *memoise*: the response for a value is drawn
once per client from ``HMAC-SHA256(client secret, value)`` and then always repeated, so reporting
an unchanged value again reveals nothing new and costs no ε. For 1BitMean the counter is first
*α-point rounded* to a grid of ``s + 1`` points ``{0, m/s, …, m}``: each client draws
``α ∈ [0, 1)`` once and rounds ``x`` up when its fractional grid position exceeds ``α`` — unbiased
(``E[round(x)] = x`` over ``α``) and stable (small changes of ``x`` rarely change the point).
A client's lifetime loss is ``ε`` times the number of *distinct* points (1BitMean) or values
(dBitFlip) it has ever reported (basic composition; each memoised response is drawn
independently). Ding et al.'s output perturbation, which hides *when* a client's point changes,
is not implemented.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.core.loss import Number, PureDP
from dalenius.ldp._base import check_epsilon, z_for
from dalenius.ldp._draws import Draws, client_draws
from dalenius.ldp._grid import GRID, epsilon_up, grid_up, on_grid


def _memo_words(secret: bytes, key: str, count: int) -> npt.NDArray[np.uint32]:
    """``count`` 32-bit words fixed by ``(secret, key)``: the memoised randomness."""
    stream = b""
    block = 0
    while len(stream) < 4 * count:
        message = key.encode() + b"\x00" + block.to_bytes(4, "big")
        stream += hmac.new(secret, message, hashlib.sha256).digest()
        block += 1
    return np.frombuffer(stream[: 4 * count], dtype=">u4").astype(np.uint32)


@dataclass(frozen=True)
class MeanEstimate:
    """A mean with its variance and error bar."""

    mean: float
    variance: float
    half_width: float
    confidence: float
    reports: int


class OneBitMean:
    """1BitMean for counters in ``[0, bound]``.

    Args:
        epsilon: the privacy loss of one (memoised) response.
        bound: ``m``, the largest counter value (clipped above).
        points: ``s``, the α-point rounding grid has ``s + 1`` points.
    """

    name = "1bitmean"

    def __init__(self, *, epsilon: Number, bound: float, points: int = 64) -> None:
        self.requested_epsilon = check_epsilon(epsilon)
        if not bound > 0 or not np.isfinite(bound):
            raise ConfigurationError(f"bound must be a positive finite number, got {bound!r}.")
        if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= 1 << 20:
            raise ConfigurationError(f"points must be an integer in [1, 2**20], got {points!r}.")
        self.bound, self.points = float(bound), points
        e_lo, _ = exp_bounds(self.requested_epsilon)
        self.flip = grid_up(1 / (e_lo + 1))

    @property
    def epsilon(self) -> Fraction:
        """``ln((1 − ρ)/ρ)`` rounded up."""
        return min(epsilon_up((1 - self.flip) / self.flip), self.requested_epsilon)

    @property
    def loss(self) -> PureDP:
        """The loss of one memoised response."""
        return PureDP(self.epsilon)

    def _bits(
        self, fractions: npt.NDArray[np.float64], words: npt.NDArray[np.uint32], draws: Draws
    ) -> npt.NDArray[np.uint8]:
        """Bernoulli(x/m) then randomized response; ``words`` decide the response."""
        carry = draws.words32(fractions.size) < np.minimum(fractions * GRID, GRID - 1)
        flipped = words < np.uint32(on_grid(self.flip))
        return (carry ^ flipped).astype(np.uint8)

    def _perturb(self, values: npt.NDArray[np.float64], draws: Draws) -> npt.NDArray[np.uint8]:
        """Simulation path: one fresh (unmemoised) report per value."""
        fractions = np.clip(values, 0, self.bound) / self.bound
        return self._bits(fractions, draws.words32(values.size), draws)

    def estimate(self, bits: npt.ArrayLike, confidence: float = 0.95) -> MeanEstimate:
        """``μ̂ = (m/n)·Σ (b − ρ)/(1 − 2ρ)``, plug-in variance, normal error bar."""
        arr = np.asarray(bits)
        if arr.ndim != 1 or (arr.size and not (np.isin(arr, (0, 1)).all())):
            raise ConfigurationError("a 1bitmean report is one bit (0 or 1).")
        n = arr.size
        if n == 0:
            raise ConfigurationError("no reports to estimate from.")
        rho = float(self.flip)
        mean = self.bound * float(np.mean((arr - rho) / (1 - 2 * rho)))
        pi = rho + np.clip(mean / self.bound, 0, 1) * (1 - 2 * rho)
        variance = (self.bound / (1 - 2 * rho)) ** 2 * pi * (1 - pi) / n
        return MeanEstimate(mean, variance, z_for(confidence) * variance**0.5, confidence, n)

    def variance(self, values: npt.ArrayLike) -> float:
        """Exact ``Var(μ̂)`` for true values (without rounding: see the rounding term below)."""
        x = np.clip(np.asarray(values, dtype=np.float64), 0, self.bound) / self.bound
        rho = float(self.flip)
        pi = rho + x * (1 - 2 * rho)
        return float((self.bound / (1 - 2 * rho)) ** 2 * np.sum(pi * (1 - pi)) / x.size**2)


class OneBitMeanClient:
    """A device reporting a counter repeatedly with α-point rounding and memoisation."""

    def __init__(self, mechanism: OneBitMean, *, secret: bytes | None = None) -> None:
        self.mechanism = mechanism
        self._secret = secret if secret is not None else os.urandom(32)
        self.alpha = float(client_draws().words32(1)[0]) / GRID

    def point(self, value: float) -> int:
        """The α-point rounded grid index of ``value`` (``0 .. s``)."""
        m, s = self.mechanism.bound, self.mechanism.points
        position = min(max(float(value), 0.0), m) / m * s
        low = int(np.floor(position))
        return min(low + (1 if position - low > self.alpha else 0), s)

    def report(self, value: float) -> tuple[int, int]:
        """``(point, bit)``: the memoised response for the rounded value."""
        point = self.point(value)
        words = _memo_words(self._secret, f"1bitmean:{point}", 2)
        fraction = point / self.mechanism.points
        carry = int(words[0]) < min(fraction * GRID, GRID - 1) if fraction < 1 else True
        flipped = int(words[1]) < on_grid(self.mechanism.flip)
        return point, int(carry ^ flipped)


class DBitFlip:
    """dBitFlip histograms over ``buckets`` values with ``d`` bits per client.

    Args:
        buckets: ``k`` (values are codes ``0 .. k−1``).
        bits: ``d``, buckets each client samples (``1 <= d <= k``).
        epsilon: the privacy loss of one (memoised) response.
    """

    name = "dbitflip"

    def __init__(self, buckets: int, *, bits: int, epsilon: Number) -> None:
        if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 2:
            raise ConfigurationError(f"buckets must be an integer >= 2, got {buckets!r}.")
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= buckets:
            raise ConfigurationError(f"bits must be an integer in [1, {buckets}], got {bits!r}.")
        self.buckets, self.bits = buckets, bits
        self.requested_epsilon = check_epsilon(epsilon)
        e_lo, _ = exp_bounds(self.requested_epsilon / 2)
        self.flip = grid_up(1 / (e_lo + 1))

    @property
    def epsilon(self) -> Fraction:
        """``2·ln((1 − ρ)/ρ)`` rounded up."""
        return min(epsilon_up(((1 - self.flip) / self.flip) ** 2), self.requested_epsilon)

    @property
    def loss(self) -> PureDP:
        """The loss of one memoised response."""
        return PureDP(self.epsilon)

    def sample_buckets(self, size: int, draws: Draws) -> npt.NDArray[np.int64]:
        """``size`` rows of ``d`` distinct buckets (uniform without replacement)."""
        keys = draws.words32(size * self.buckets).reshape(size, self.buckets)
        order = np.argsort(keys.astype(np.int64) * self.buckets + np.arange(self.buckets), axis=1)
        return np.sort(order[:, : self.bits], axis=1)

    def respond(
        self,
        chosen: npt.NDArray[np.int64],
        codes: npt.NDArray[np.int64],
        words: npt.NDArray[np.uint32],
    ) -> npt.NDArray[np.uint8]:
        """Bits for ``chosen`` buckets given the values and one word per bit."""
        truth = chosen == codes[:, None]
        flipped = words.reshape(truth.shape) < np.uint32(on_grid(self.flip))
        out: npt.NDArray[np.uint8] = (truth ^ flipped).astype(np.uint8)
        return out

    def _perturb(
        self, codes: npt.NDArray[np.int64], draws: Draws
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        chosen = self.sample_buckets(codes.size, draws)
        return chosen, self.respond(chosen, codes, draws.words32(chosen.size))

    def check_reports(
        self, chosen: npt.ArrayLike, bits: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        """``d`` distinct bucket indices and ``d`` bits per report."""
        c, b = np.asarray(chosen), np.asarray(bits)
        ok = c.ndim == 2 and c.shape[1] == self.bits and b.shape == c.shape
        if ok and c.size:
            ok = bool(
                np.issubdtype(c.dtype, np.integer)
                and c.min() >= 0
                and c.max() < self.buckets
                and np.isin(b, (0, 1)).all()
                and (np.diff(np.sort(c, axis=1), axis=1) > 0).all()
            )
        if not ok:
            raise ConfigurationError(
                f"a dbitflip report is {self.bits} distinct buckets in 0..{self.buckets - 1} "
                f"and {self.bits} bits.",
                fix="send what the client's encoder produced.",
            )
        return c.astype(np.int64), b.astype(np.uint8)

    def estimate_counts(
        self, chosen: npt.NDArray[np.int64], bits: npt.NDArray[np.uint8]
    ) -> npt.NDArray[np.float64]:
        """``ĉ_t = (k/d)·Σ_{i: t ∈ J_i} (b − ρ)/(1 − 2ρ)``."""
        rho = float(self.flip)
        ones = np.bincount(chosen[bits == 1], minlength=self.buckets).astype(np.float64)
        seen = np.bincount(chosen.ravel(), minlength=self.buckets).astype(np.float64)
        return self.buckets / self.bits * (ones - rho * seen) / (1 - 2 * rho)

    def variance(self, true_counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Exact ``Var(ĉ_t)``: each client adds ``(k/d)·E[(b − ρ)²]/(1 − 2ρ)² − 1[v = t]``."""
        c = np.asarray(true_counts, dtype=np.float64)
        n, rho = float(c.sum()), float(self.flip)
        scale = self.buckets / self.bits / (1 - 2 * rho) ** 2
        own = scale * ((1 - rho) * (1 - rho) ** 2 + rho * rho**2) - 1  # b ~ Bern(1 − ρ)
        other = scale * (rho * (1 - rho) ** 2 + (1 - rho) * rho**2)  # b ~ Bern(ρ)
        return c * own + (n - c) * other


class DBitFlipClient:
    """A device with its ``d`` buckets fixed for life and memoised bits per value."""

    def __init__(self, mechanism: DBitFlip, *, secret: bytes | None = None) -> None:
        self.mechanism = mechanism
        self._secret = secret if secret is not None else os.urandom(32)
        self.chosen = mechanism.sample_buckets(1, client_draws())[0]

    def report(self, value: int) -> tuple[list[int], list[int]]:
        """``(buckets, bits)`` for ``value``: the same every time the value is the same."""
        if not 0 <= int(value) < self.mechanism.buckets:
            raise ConfigurationError(f"value must be in 0..{self.mechanism.buckets - 1}.")
        words = _memo_words(self._secret, f"dbitflip:{int(value)}", self.mechanism.bits)
        bits = self.mechanism.respond(self.chosen[None, :], np.array([int(value)]), words)
        return self.chosen.tolist(), bits[0].tolist()
