"""Local hashing: binary (BLH) and optimal (OLH) local hashing, with a hash numpy can evaluate.

Each client draws its own hash function ``h(x) = ((a·x + b) mod P) mod g`` — ``P`` the smallest
prime ``>= d``, ``a`` uniform in ``[1, P)``, ``b`` uniform in ``[0, P)`` — hashes its value into
``g`` buckets and sends ``(a, b, y)`` where ``y`` is the bucket randomised by ``g``-ary randomized
response (keep with ``p_g = e^ε/(e^ε + g − 1)``, else each other bucket with ``q_g``). A report
supports every value that hashes to ``y``. BLH uses ``g = 2``; OLH ``g = round(e^ε + 1)``, which
minimises the variance (Wang et al., USENIX Security 2017).

Why this hash family. For ``x ≠ v`` the pair ``(a·x + b, a·v + b) mod P`` is uniform over the
ordered pairs of *distinct* residues, so the collision probability ``c = P[h(x) = h(v)]`` is known
exactly: ``c = Σ_k n_k(n_k − 1)/(P(P − 1))`` with ``n_k`` the residues ``< P`` congruent to ``k``
mod ``g``. A client's report supports a value ``v ≠ x`` with probability
``q = p_g·c + q_g·(1 − c)`` and its own value with ``p = p_g``, independently across clients —
so the protocol is pure, the estimator ``(C_v − n·q)/(p − q)`` is unbiased and its variance is the
framework's closed form. Hash functions are fresh per client (no fixed seeds: a small fixed family
would give every value a fixed bias that does not shrink with ``n``).

Why it is fast. The server needs, for every value ``v``, how many reports have
``h_i(v) = y_i`` — ``n·d`` hash evaluations done naively. Two exact shortcuts:

* *Enumeration*: the values a report supports are ``v = (w − b)·a⁻¹ mod P`` for the residues
  ``w ≡ y (mod g)``, about ``P/g`` per report — cheap when ``g`` is large.
* *Correlation*: group reports by ``a``; with ``u = a·v mod P`` the count is a circular
  correlation over ``b`` of the ``(b, y)`` histogram with the indicator of ``w ≡ y (mod g)``,
  computed with FFTs in ``O(P·g·P log P)`` independent of ``n`` — cheap when ``g`` is small.
  The FFT's result is an integer count; it is rounded and the rounding error checked.

Example:
    >>> olh = LocalHashing(1000, epsilon=1)
    >>> olh.buckets, olh.prime
    (4, 1009)
    >>> olh.encode(7).shape
    (3,)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.core.loss import Number
from dalenius.core.randomized_response import move_probability, respond
from dalenius.ldp._base import (
    FrequencyOracle,
    Reports,
    SupportAccumulator,
    check_domain,
    check_epsilon,
)
from dalenius.ldp._draws import Draws
from dalenius.ldp._grid import on_grid

FFT_CELLS = 1 << 23
"""The correlation path is used only when its ``(P−1)·P·g`` histogram has at most this many cells."""
_CHUNK = 1 << 21


def next_prime(n: int) -> int:
    """The smallest prime ``>= n`` (``n >= 2``).

    Example:
        >>> next_prime(1000), next_prime(2)
        (1009, 2)
    """
    candidate = max(n, 2)
    while True:
        if all(candidate % k for k in range(2, math.isqrt(candidate) + 1)):
            return candidate
        candidate += 1


def collision_probability(prime: int, buckets: int) -> Fraction:
    """``P[h(x) = h(v)]`` for ``x ≠ v`` under the family ``((a·x + b) mod P) mod g``.

    Example:
        >>> collision_probability(5, 2)  # residues 0..4: three even, two odd
        Fraction(2, 5)
    """
    sizes = [len(range(k, prime, buckets)) for k in range(buckets)]
    return Fraction(sum(s * (s - 1) for s in sizes), prime * (prime - 1))


def _modular_inverses(prime: int) -> npt.NDArray[np.int64]:
    """``inv[a]`` with ``a·inv[a] ≡ 1 (mod P)`` for ``a`` in ``1 .. P−1`` (``inv[0] = 0``)."""
    base = np.arange(prime, dtype=np.int64)
    result = np.ones(prime, dtype=np.int64)
    exponent = prime - 2
    while exponent:
        if exponent & 1:
            result = result * base % prime
        base = base * base % prime
        exponent >>= 1
    result[0] = 0
    return result


class LocalHashing(FrequencyOracle):
    """OLH (``buckets=None``: ``g = round(e^ε + 1)``) or BLH (``buckets=2``).

    Reports are ``int64`` rows ``(a, b, y)``.
    """

    def __init__(self, domain_size: int, *, epsilon: Number, buckets: int | None = None) -> None:
        self.domain_size = check_domain(domain_size, limit=1 << 24)
        self.requested_epsilon = check_epsilon(epsilon)
        e_lo, _ = exp_bounds(self.requested_epsilon)
        if buckets is None:
            self.name = "olh"
            buckets = max(2, round(float(e_lo) + 1))
        else:
            self.name = "blh" if buckets == 2 else "lh"
            if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 2:
                raise ConfigurationError(f"buckets must be an integer >= 2, got {buckets!r}.")
        self.buckets = buckets
        self.prime = next_prime(self.domain_size)
        self.q_bucket = move_probability(buckets, self.requested_epsilon)
        self.p = 1 - (buckets - 1) * self.q_bucket
        self.collision = collision_probability(self.prime, buckets)
        self.q = self.p * self.collision + self.q_bucket * (1 - self.collision)
        self._check_ratio()

    @property
    def ratio(self) -> Fraction:
        """``p_g/q_g``: the hash is public, only the bucket is randomised."""
        return self.p / self.q_bucket

    def hash(
        self, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], x: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """``((a·x + b) mod P) mod g`` elementwise."""
        return ((a * x + b) % self.prime) % self.buckets

    def _perturb(self, codes: npt.NDArray[np.int64], draws: Draws) -> Reports:
        n, g = codes.size, self.buckets
        a = draws.below(self.prime - 1, n) + 1
        b = draws.below(self.prime, n)
        bucket = self.hash(a, b, codes)
        words = draws.words32(n).astype(np.int64)
        y = respond(bucket, g, on_grid(self.q_bucket), words)
        return np.stack([a, b, y], axis=1)

    def check_reports(self, reports: npt.ArrayLike) -> Reports:
        """Rows ``(a, b, y)`` with ``1 <= a < P``, ``0 <= b < P``, ``0 <= y < g``."""
        arr = np.asarray(reports)
        ok = arr.ndim == 2 and arr.shape[1] == 3
        if ok and arr.size:
            ok = bool(np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_)
            ok = ok and bool(
                arr[:, 0].min() >= 1
                and arr[:, 0].max() < self.prime
                and arr[:, 1].min() >= 0
                and arr[:, 1].max() < self.prime
                and arr[:, 2].min() >= 0
                and arr[:, 2].max() < self.buckets
            )
        if not ok:
            raise ConfigurationError(
                f"an {self.name} report is three integers [a, b, y] with 1 <= a < {self.prime}, "
                f"0 <= b < {self.prime} and 0 <= y < {self.buckets}.",
                fix="send the triple the client's encoder produced.",
            )
        return arr.astype(np.int64, copy=False)

    def _correlation_pays(self, reports: int) -> bool:
        """Whether the FFT correlation is cheaper than enumeration for this many reports."""
        prime, g = self.prime, self.buckets
        cells = (prime - 1) * prime * g
        fft_cost = cells * max(1.0, math.log2(prime)) * 2
        enum_cost = reports * (prime / g + 1) * 12
        return cells <= FFT_CELLS and fft_cost < enum_cost

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        """``C_v`` by correlation or enumeration, whichever is cheaper (both exact)."""
        if self._correlation_pays(len(reports)):
            return self._correlate(self._histogram(reports))
        return self._by_enumeration(reports)

    def accumulator(self, expected_reports: int) -> SupportAccumulator:
        """Adds up the ``(a, b, y)`` histogram when correlation pays: one FFT at the end."""
        if self._correlation_pays(expected_reports):
            return _HistogramAccumulator(self)
        return SupportAccumulator(self)

    def _by_enumeration(self, reports: Reports) -> npt.NDArray[np.int64]:
        prime, g, d = self.prime, self.buckets, self.domain_size
        inverse = _modular_inverses(prime)
        counts = np.zeros(d, dtype=np.int64)
        for start in range(0, len(reports), _CHUNK):
            block = reports[start : start + _CHUNK]
            inv_a, b, y = inverse[block[:, 0]], block[:, 1], block[:, 2]
            for w0 in range(0, prime, g):
                w = y + w0
                v = (w - b) % prime * inv_a % prime
                keep = (w < prime) & (v < d)
                counts += np.bincount(v[keep], minlength=d)
        return counts

    def _histogram(self, reports: Reports) -> npt.NDArray[np.int64]:
        """How many reports have each ``(a, b, y)``: shape ``(P − 1, P, g)``."""
        prime, g = self.prime, self.buckets
        key = ((reports[:, 0] - 1) * prime + reports[:, 1]) * g + reports[:, 2]
        hist = np.bincount(key, minlength=(prime - 1) * prime * g)
        return hist.reshape(prime - 1, prime, g)

    def _correlate(self, hist: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``C_v`` from the ``(a, b, y)`` histogram by FFT correlation over ``b``."""
        prime, g, d = self.prime, self.buckets, self.domain_size
        residues = np.arange(prime)
        indicator = (residues[None, :] % g == np.arange(g)[:, None]).astype(np.float64)
        spectrum = np.fft.rfft(indicator, axis=1)  # (g, P//2+1)
        values = np.arange(d, dtype=np.int64)
        counts = np.zeros(d, dtype=np.int64)
        rows = max(1, (1 << 22) // (prime * g))
        for start in range(0, prime - 1, rows):
            block = hist[start : start + rows].transpose(0, 2, 1).astype(np.float64)
            corr = np.fft.irfft(np.conj(np.fft.rfft(block, axis=2)) * spectrum, n=prime, axis=2)
            by_u = corr.sum(axis=1)
            rounded = np.rint(by_u)
            if np.abs(by_u - rounded).max(initial=0.0) > 0.25:  # pragma: no cover - numerics
                raise ArithmeticError("FFT correlation lost integer precision")
            a = np.arange(start + 1, start + 1 + block.shape[0], dtype=np.int64)
            u = a[:, None] * values[None, :] % prime
            counts += np.take_along_axis(rounded.astype(np.int64), u, axis=1).sum(axis=0)
        return counts

    def all_reports(self) -> Iterator[tuple[int, int, int]]:
        """Every ``(a, b, y)``."""
        for a in range(1, self.prime):
            for b in range(self.prime):
                for y in range(self.buckets):
                    yield (a, b, y)

    def report_probability(self, report: tuple[int, int, int], value: int) -> Fraction:
        """``P[a]·P[b]·P[y | h(value)]``."""
        a, b, y = report
        bucket = ((a * value + b) % self.prime) % self.buckets
        keep = self.p if y == bucket else self.q_bucket
        return keep / ((self.prime - 1) * self.prime)

    def describe(self) -> dict[str, object]:
        """Parameters, with the hash family's."""
        out = super().describe()
        out.update(buckets=self.buckets, prime=self.prime, collision=float(self.collision))
        return out


class _HistogramAccumulator(SupportAccumulator):
    """Local hashing's additive summary: the ``(a, b, y)`` histogram, correlated once."""

    def __init__(self, oracle: LocalHashing) -> None:
        super().__init__(oracle)
        self.hashing = oracle
        self._hist = np.zeros(((oracle.prime - 1), oracle.prime, oracle.buckets), dtype=np.int64)

    def add(self, reports: Reports) -> None:
        """Add one batch's histogram."""
        self._hist += self.hashing._histogram(reports)
        self.reports += len(reports)

    def support(self) -> npt.NDArray[np.int64]:
        """``C_v`` from the summed histogram (one FFT correlation)."""
        return self.hashing._correlate(self._hist)


def olh(domain_size: int, *, epsilon: Number) -> LocalHashing:
    """Optimal local hashing."""
    return LocalHashing(domain_size, epsilon=epsilon)


def blh(domain_size: int, *, epsilon: Number) -> LocalHashing:
    """Binary local hashing."""
    return LocalHashing(domain_size, epsilon=epsilon, buckets=2)
