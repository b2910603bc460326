"""The pure-protocol framework every frequency oracle shares (Wang et al., USENIX Security 2017).

A client holding ``x`` in the domain ``{0, …, d−1}`` sends a report ``y``; each report *supports*
a set of values ``S(y)``. A protocol is *pure* when two numbers describe it:
``p = P[x ∈ S(Y) | X = x]`` and ``q = P[v ∈ S(Y) | X = x]`` for every ``v ≠ x`` (the same for every
pair). The server counts, for each value ``v``, the reports that support it, ``C_v``; then

``ĉ_v = (C_v − n·q)/(p − q)`` is unbiased, and, because the ``n`` reports are independent,

``Var(ĉ_v) = (c_v·p(1−p) + (n − c_v)·q(1−q)) / (p − q)²`` exactly.

Each estimate carries an error bar: the normal-approximation half-width ``z·√Var`` with the
variance evaluated at the estimate clipped to ``[0, n]`` (the plug-in variance).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.core.loss import Number, PureDP, as_fraction
from dalenius.ldp._draws import Draws, client_draws
from dalenius.ldp._grid import epsilon_up

Reports = npt.NDArray[Any]
"""A batch of reports: one row (or one entry) per client, in the protocol's own format."""


def check_epsilon(epsilon: Number) -> Fraction:
    """ε as an exact positive rational, or a clear error (ε ≤ 0 is refused).

    Example:
        >>> check_epsilon("0.5")
        Fraction(1, 2)
    """
    eps = as_fraction(epsilon, "epsilon")
    if eps > 64:
        raise ConfigurationError(
            f"epsilon must be at most 64 for a local protocol, got {epsilon!r}.",
            why="beyond that the report is essentially the true value.",
            fix="pass a smaller epsilon, such as 1 or 4.",
        )
    return eps


def check_domain(size: int, *, limit: int = 1 << 24) -> int:
    """The domain size ``d``: an integer with ``2 <= d <= limit`` (one value has nothing to hide).

    Example:
        >>> check_domain(1)
        Traceback (most recent call last):
        ...
        dalenius.core.errors.ConfigurationError: domain must have at least 2 values, got 1.
        Why: with one possible value there is nothing to estimate and nothing to protect.
        Fix: list every value a client may hold (at least two).
    """
    if isinstance(size, bool) or not isinstance(size, int | np.integer):
        raise ConfigurationError(f"domain size must be an integer, got {size!r}.")
    size = int(size)
    if size < 2:
        raise ConfigurationError(
            f"domain must have at least 2 values, got {size}.",
            why="with one possible value there is nothing to estimate and nothing to protect.",
            fix="list every value a client may hold (at least two).",
        )
    if size > limit:
        raise ConfigurationError(
            f"domain has {size} values; this protocol supports at most {limit}.",
            fix="use a hashing protocol (olh, hcms) or a candidate list.",
        )
    return size


def check_codes(values: npt.ArrayLike | Sequence[int], size: int) -> npt.NDArray[np.int64]:
    """True values as integer codes ``0 .. size−1`` (one per client)."""
    codes = np.asarray(values)
    if codes.ndim != 1:
        codes = codes.reshape(-1)
    if codes.size and (
        not np.issubdtype(codes.dtype, np.integer)
        or codes.dtype == np.bool_
        or codes.min() < 0
        or codes.max() >= size
    ):
        raise ConfigurationError(
            f"values must be integer codes in 0..{size - 1}.",
            fix="map each value to its index in the domain first.",
        )
    return codes.astype(np.int64, copy=False)


def z_for(confidence: float) -> float:
    """The two-sided normal quantile for a confidence level in (0, 1)."""
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be in (0, 1), got {confidence!r}.")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


@dataclass(frozen=True)
class FrequencyEstimate:
    """Unbiased count estimates with their plug-in variances and error bars.

    Attributes:
        counts: ``ĉ_v`` for each value ``v`` (may be negative: clipping would bias them).
        variance: the exact variance formula evaluated at the clipped estimate.
        half_width: ``z·√variance``; the interval is ``counts ± half_width``.
        confidence: the confidence level of the interval.
        reports: the number ``n`` of reports aggregated.
    """

    counts: npt.NDArray[np.float64]
    variance: npt.NDArray[np.float64]
    half_width: npt.NDArray[np.float64]
    confidence: float
    reports: int

    @property
    def frequencies(self) -> npt.NDArray[np.float64]:
        """``ĉ_v / n``."""
        return self.counts / max(self.reports, 1)

    @property
    def lower(self) -> npt.NDArray[np.float64]:
        """Lower ends of the intervals."""
        return self.counts - self.half_width

    @property
    def upper(self) -> npt.NDArray[np.float64]:
        """Upper ends of the intervals."""
        return self.counts + self.half_width


class SupportAccumulator:
    """Adds up a server's support counts over batches of (validated) reports.

    Support counts are sums over reports, so batches add up; a protocol whose counts come from a
    cheaper additive summary (local hashing's ``(a, b, y)`` histogram) overrides
    :meth:`FrequencyOracle.accumulator` to add summaries and convert once at the end.
    """

    def __init__(self, oracle: FrequencyOracle) -> None:
        self.oracle = oracle
        self.reports = 0
        self._support = np.zeros(oracle.domain_size, dtype=np.int64)

    def add(self, reports: Reports) -> None:
        """Count one batch."""
        self._support += self.oracle.support_counts(reports)
        self.reports += len(reports)

    def support(self) -> npt.NDArray[np.int64]:
        """``C_v`` over every batch added."""
        return self._support.copy()


class FrequencyOracle(abc.ABC):
    """A pure local protocol for frequencies over ``{0, …, d−1}``: encoder and aggregator.

    Subclasses set ``p`` and ``q`` (exact rationals: the probabilities the sampler realises) and
    implement ``_perturb`` (vectorised encoder), ``support_counts`` (server side),
    ``check_reports`` (shape validation) and ``report_probability`` (exact, for small domains).
    """

    name: str = ""
    domain_size: int
    requested_epsilon: Fraction
    p: Fraction
    q: Fraction

    @property
    @abc.abstractmethod
    def ratio(self) -> Fraction:
        """The largest ratio ``P[y | x] / P[y | x']`` over reports and pairs of values."""

    @property
    def epsilon(self) -> Fraction:
        """The ε the rounded probabilities guarantee, rounded up (never above the one requested)."""
        return min(epsilon_up(self.ratio), self.requested_epsilon)

    @property
    def loss(self) -> PureDP:
        """The privacy loss of one report."""
        return PureDP(self.epsilon)

    def _check_ratio(self) -> None:
        lo, _ = exp_bounds(self.requested_epsilon)
        if self.ratio > lo:  # pragma: no cover - a rounding bug, never user input
            raise AssertionError(f"{self.name}: ratio {self.ratio} exceeds e^ε")
        if self.p <= self.q:
            raise ConfigurationError(
                f"epsilon {float(self.requested_epsilon):g} is too small for {self.name} on "
                f"{self.domain_size} values: the reports would carry no information.",
                fix="use a larger epsilon.",
            )

    # -- client ---------------------------------------------------------------------------

    def encode(self, value: int) -> Reports:
        """One client's report of ``value``, randomised with the operating system's generator."""
        report: Reports = np.asarray(self.encode_many([value])[0])
        return report

    def encode_many(self, values: npt.ArrayLike | Sequence[int]) -> Reports:
        """Reports of many clients (one per value), each randomised independently by the OS."""
        return self._perturb(check_codes(values, self.domain_size), client_draws())

    @abc.abstractmethod
    def _perturb(self, codes: npt.NDArray[np.int64], draws: Draws) -> Reports:
        """The vectorised encoder (private: only the simulation passes other draws)."""

    def _simulated_reports(self, codes: npt.NDArray[np.int64], draws: Draws) -> Reports:
        """The same reports in the form this protocol's :meth:`accumulator` adds fastest.

        The protocol's own format unless a compact one exists (unary encodings: bit-packed
        rows). Used by simulations; the law of every report is that of :meth:`_perturb`.
        """
        return self._perturb(codes, draws)

    # -- server ---------------------------------------------------------------------------

    @abc.abstractmethod
    def check_reports(self, reports: npt.ArrayLike) -> Reports:
        """Reports in canonical form, or a :class:`ConfigurationError` naming the problem."""

    @abc.abstractmethod
    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        """``C_v``: how many of the (validated) reports support each value ``v``."""

    def accumulator(self, expected_reports: int) -> SupportAccumulator:
        """Somewhere to add up batches of reports, about ``expected_reports`` in all."""
        return SupportAccumulator(self)

    def estimate(self, reports: npt.ArrayLike, confidence: float = 0.95) -> FrequencyEstimate:
        """Unbiased counts with error bars from a batch of reports."""
        checked = self.check_reports(reports)
        return self.estimate_from_support(self.support_counts(checked), len(checked), confidence)

    def estimate_from_support(
        self, support: npt.ArrayLike, reports: int, confidence: float = 0.95
    ) -> FrequencyEstimate:
        """``ĉ_v = (C_v − n·q)/(p − q)`` with plug-in variance and normal error bars."""
        p, q = float(self.p), float(self.q)
        counts = (np.asarray(support, dtype=np.float64) - reports * q) / (p - q)
        variance = self.variance(np.clip(counts, 0, reports), reports)
        half = z_for(confidence) * np.sqrt(variance)
        return FrequencyEstimate(counts, variance, half, confidence, reports)

    def variance(
        self, true_counts: npt.ArrayLike, reports: int | None = None
    ) -> npt.NDArray[np.float64]:
        """Exact ``Var(ĉ_v) = (c_v·p(1−p) + (n − c_v)·q(1−q))/(p − q)²``."""
        c = np.asarray(true_counts, dtype=np.float64)
        n = float(c.sum()) if reports is None else float(reports)
        p, q = float(self.p), float(self.q)
        return (c * p * (1 - p) + (n - c) * q * (1 - q)) / (p - q) ** 2

    def variance_per_report(self) -> float:
        """``q(1−q)/(p−q)²``: the variance one client adds to a rare value's estimate."""
        p, q = float(self.p), float(self.q)
        return q * (1 - q) / (p - q) ** 2

    # -- exact distribution (tests, small domains) ----------------------------------------

    @abc.abstractmethod
    def all_reports(self) -> Iterator[Any]:
        """Every possible report (small domains only)."""

    @abc.abstractmethod
    def report_probability(self, report: Any, value: int) -> Fraction:
        """The exact probability that a client holding ``value`` sends ``report``."""

    def describe(self) -> dict[str, Any]:
        """Parameters as JSON-ready values."""
        return {
            "protocol": self.name,
            "domain_size": self.domain_size,
            "epsilon": float(self.epsilon),
            "p": float(self.p),
            "q": float(self.q),
            "variance_per_report": self.variance_per_report(),
        }
