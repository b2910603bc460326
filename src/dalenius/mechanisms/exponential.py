"""Private selection: the exponential mechanism, permute-and-flip (= report-noisy-max), quantiles.

Given candidates with utility scores ``u_i`` whose sensitivity is Δ (one privacy unit changes any
score by at most Δ), each mechanism here is pure ε-DP:

* **Exponential mechanism** (McSherry & Talwar 2007; Dwork & Roth 2014, Thm 3.10): pick ``i`` with
  probability ``∝ exp(ε·u_i/(2Δ))``. Sampled exactly by inversion of the certified CDF — one
  32-bit uniform per selection, refined only on a tie.
* **Permute-and-flip** (McKenna & Sheldon 2020): visit candidates in random order and stop at the
  first accepted, accepting ``i`` with probability ``exp(ε·(u_i − u*)/(2Δ))``. Never worse in
  expected utility than the exponential mechanism. Dalenius flips every candidate's exact
  Bernoulli(exp(−γ_i)) coin up front and returns a uniformly random accepted one (the same law),
  so the time taken does not depend on which candidate wins.
* **Report-noisy-max** with exponential noise is the same distribution as permute-and-flip (Ding,
  Kifer et al. 2021), so :func:`report_noisy_max` is permute-and-flip.

With ``monotonic=True`` (every score moves in the same direction when a unit is added) the factor
2 is dropped, as both papers allow.

Utility guarantee (both mechanisms): for ``n`` candidates and ``β = 1 − confidence``, the chosen
score is at least ``u* − (2Δ/ε)·ln(n/β)`` with probability at least ``1 − β`` (``Δ/ε`` when
monotonic).

:func:`quantile_from_bin_counts` applies permute-and-flip to bins of a public range, with utility
``−dist(q·n, [rank below bin i, rank through bin i])`` (sensitivity 1); MIN and MAX are the
quantiles 0 and 1, and :func:`bounds_from_bin_counts` finds a clipping range privately.

Example:
    >>> mechanism = PermuteAndFlip(1, Fraction(1))
    >>> mechanism.select([0, 0, 50]) in (0, 1, 2)
    True
    >>> mechanism.loss
    PureDP(epsilon=Fraction(1, 1))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import SupportsFloat

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import ln_bounds, round_up
from dalenius.core.loss import Number, PureDP
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._bounds import exp_neg_fixed
from dalenius.mechanisms._inversion import InversionTable, bernoulli_exp_array
from dalenius.mechanisms._uniform import uniform_below_array
from dalenius.mechanisms._validate import (
    confidence_fraction,
    draw_count,
    epsilon_fraction,
    positive_fraction,
)

Score = int | Fraction | float


def _scores(scores: Sequence[Score]) -> list[Fraction]:
    """Scores as exact rationals (a float is read as its exact binary value)."""
    values = list(scores)
    if not values:
        raise ConfigurationError(
            "there are no candidates to select from.",
            fix="pass at least one candidate score.",
        )
    out = []
    for raw in values:
        value = raw.item() if isinstance(raw, np.generic) else raw
        if isinstance(value, bool) or not isinstance(value, int | Fraction | float):
            raise ConfigurationError(f"scores must be numbers, got {raw!r}.")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigurationError(f"scores must be finite, got {raw!r}.")
        out.append(Fraction(value))
    return out


class _Selection:
    """Shared calibration of the selection mechanisms."""

    def __init__(
        self, sensitivity: Number | SupportsFloat, epsilon: Fraction, *, monotonic: bool = False
    ) -> None:
        self.sensitivity = positive_fraction(sensitivity, "sensitivity")
        self.epsilon = epsilon_fraction(epsilon)
        self.monotonic = monotonic
        self.loss = PureDP(self.epsilon)
        # exp(rate·(u_i − u*)) is the unnormalised weight of candidate i.
        self.rate = self.epsilon / (self.sensitivity if monotonic else 2 * self.sensitivity)

    def gaps(self, scores: Sequence[Score]) -> list[Fraction]:
        """``γ_i = rate·(u* − u_i) >= 0`` for every candidate."""
        values = _scores(scores)
        best = max(values)
        return [self.rate * (best - v) for v in values]

    def utility_error_bar(self, candidates: int, confidence: float | Fraction) -> Fraction:
        """``t`` such that the chosen score is ``>= u* − t`` with probability ``>= confidence``.

        ``t = ln(n/β)/rate`` with ``β = 1 − confidence``, rounded up.
        """
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise ConfigurationError(f"candidates must be a positive integer, got {candidates!r}.")
        beta = 1 - confidence_fraction(confidence)
        _, log_hi = ln_bounds(Fraction(candidates) / beta)
        return round_up(max(Fraction(0), log_hi) / self.rate)


class ExponentialMechanism(_Selection):
    """Select candidate ``i`` with probability ``∝ exp(ε·u_i/(2Δ))``, exactly.

    Args:
        sensitivity: the most one privacy unit changes any score.
        epsilon: the privacy loss of one selection.
        monotonic: whether all scores move in the same direction when a unit is added
            (then the weights are ``exp(ε·u_i/Δ)``).

    Example:
        >>> ExponentialMechanism(1, Fraction(1, 2)).select([3, 1, 2]) in (0, 1, 2)
        True
    """

    def probabilities(self, scores: Sequence[Score]) -> list[float]:
        """The selection probabilities, in floating point (for reports and tests only)."""
        weights = [math.exp(-float(g)) for g in self.gaps(scores)]
        total = sum(weights)
        return [w / total for w in weights]

    def select(self, scores: Sequence[Score], *, rng: RandomSource | None = None) -> int:
        """The index of the selected candidate.

        Args:
            scores: one utility per candidate (ints, Fractions or floats).
            rng: leave ``None`` in production; tests may pass a seeded source.
        """
        return int(self.sample(scores, 1, rng=rng)[0])

    def sample(
        self, scores: Sequence[Score], size: int, *, rng: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """``size`` independent selections (each one costs ``epsilon``), vectorised.

        Inversion of the certified CDF ``Σ_{j<=k} w_j / Σ_j w_j`` with ``w_j = exp(−γ_j)``.
        """
        gaps = self.gaps(scores)
        count = draw_count(size)
        if len(gaps) == 1:
            return np.zeros(count, dtype=np.int64)

        def cdf(prec: int) -> list[tuple[int, int]]:
            guard = 16 + (len(gaps)).bit_length()
            while True:
                p = prec + guard
                weights = [exp_neg_fixed(g, p) for g in gaps]
                total_lo = sum(lo for lo, _ in weights)
                total_hi = sum(hi for _, hi in weights)
                out = []
                run_lo = run_hi = 0
                for lo, hi in weights[:-1]:
                    run_lo += lo
                    run_hi += hi
                    out.append(((run_lo << prec) // total_hi, -(-(run_hi << prec) // total_lo)))
                if all(h - lo_ <= 4 for lo_, h in out):
                    return out
                guard += 32

        table = InversionTable(cdf, len(gaps) - 1, bits=32, guide=count > 4096)
        source = rng or system_random()
        u = source.uint64(count) >> np.uint64(32)
        return table.lookup(u, source).astype(np.int64)


class PermuteAndFlip(_Selection):
    """Permute-and-flip (McKenna & Sheldon 2020): exact, ε-DP, never worse than the exponential.

    Args:
        sensitivity: the most one privacy unit changes any score.
        epsilon: the privacy loss of one selection.
        monotonic: whether all scores move in the same direction when a unit is added.

    Example:
        >>> PermuteAndFlip(1, Fraction(1)).select([10, 0]) in (0, 1)
        True
    """

    def select(self, scores: Sequence[Score], *, rng: RandomSource | None = None) -> int:
        """The index of the selected candidate.

        Every candidate's coin is flipped (the best one's always lands heads), then one of the
        accepted candidates is chosen uniformly — the law of "first accepted in a random order".
        """
        return int(self.sample(scores, 1, rng=rng)[0])

    def sample(
        self, scores: Sequence[Score], size: int, *, rng: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """``size`` independent selections (each one costs ``epsilon``), vectorised."""
        gaps = self.gaps(scores)
        count = draw_count(size)
        source = rng or system_random()
        accepted = bernoulli_exp_array(gaps, source, size=count)
        tallies = accepted.sum(axis=1)
        # The r-th accepted candidate of a row, r uniform below the row's tally (exact, per tally).
        rank = np.zeros(count, dtype=np.int64)
        for tally in np.unique(tallies):
            rows = np.flatnonzero(tallies == tally)
            rank[rows] = uniform_below_array(int(tally), rows.size, source)
        order = np.cumsum(accepted, axis=1) - 1
        hit: npt.NDArray[np.bool_] = accepted & (order == rank[:, None])
        chosen: npt.NDArray[np.int64] = np.argmax(hit, axis=1).astype(np.int64)
        return chosen


def report_noisy_max(
    scores: Sequence[Score],
    sensitivity: Number | SupportsFloat,
    epsilon: Fraction,
    *,
    monotonic: bool = False,
    rng: RandomSource | None = None,
) -> int:
    """Report-noisy-max with exponential noise, which is exactly permute-and-flip (Ding et al. 2021).

    Example:
        >>> report_noisy_max([1, 2, 3], 1, Fraction(1)) in (0, 1, 2)
        True
    """
    return PermuteAndFlip(sensitivity, epsilon, monotonic=monotonic).select(scores, rng=rng)


@dataclass(frozen=True)
class QuantileRelease:
    """A private quantile: the chosen bin of the public range, with its guarantee.

    Attributes:
        bin: index of the chosen bin.
        low: the bin's lower edge.
        high: the bin's upper edge.
        value: the bin's midpoint (a post-processed point estimate).
        loss: what the selection cost.
        rank_error: with probability at least ``confidence``, some value in the chosen bin has a
            rank within ``rank_error`` of ``q·n``.
        confidence: the level ``rank_error`` refers to.
    """

    bin: int
    low: float
    high: float
    value: float
    loss: PureDP
    rank_error: Fraction
    confidence: Fraction


def _bins(bin_edges: Sequence[Score], counts: Sequence[int]) -> tuple[list[Fraction], list[int]]:
    edges = _scores(bin_edges)
    if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise ConfigurationError(
            "bin_edges must be at least two strictly increasing numbers.",
            fix="pass the public edges of the bins, such as [0, 10, 20, 30].",
        )
    values = [int(c) for c in counts]
    if len(values) != len(edges) - 1:
        raise ConfigurationError(
            f"there are {len(values)} counts for {len(edges) - 1} bins.",
            fix="pass one count per bin (len(counts) == len(bin_edges) - 1).",
        )
    if any(c < 0 for c in values):
        raise ConfigurationError("counts must be non-negative.")
    return edges, values


def quantile_utilities(counts: Sequence[int], q: Fraction) -> list[Fraction]:
    """``−dist(q·n, [R_i, R_{i+1}])`` per bin, where ``R_i`` counts the values below bin ``i``.

    Adding or removing one value moves every ``R_i`` by at most 1 and ``q·n`` by ``q``, so each
    utility moves by at most ``max(q, 1 − q) <= 1``: the sensitivity is 1.

    Example:
        >>> [str(u) for u in quantile_utilities([2, 0, 2], Fraction(1, 2))]
        ['0', '0', '0']
        >>> [str(u) for u in quantile_utilities([4, 0, 0], Fraction(1))]
        ['0', '0', '0']
    """
    total = sum(counts)
    target = q * total
    out = []
    below = 0
    for count in counts:
        through = below + count
        out.append(-max(Fraction(0), below - target, target - through))
        below = through
    return out


def quantile_from_bin_counts(
    bin_edges: Sequence[Score],
    counts: Sequence[int],
    q: Number | SupportsFloat,
    epsilon: Fraction,
    *,
    confidence: float | Fraction = Fraction(95, 100),
    rng: RandomSource | None = None,
) -> QuantileRelease:
    """A private ``q``-quantile from exact per-bin counts over a public range (ε-DP).

    Args:
        bin_edges: the public bin edges (``m + 1`` increasing numbers).
        counts: the exact number of values in each bin (values in ``[edge_i, edge_{i+1})``).
        q: the quantile in ``[0, 1]`` (0 is the MIN, 1 the MAX).
        epsilon: the privacy loss.
        confidence: level for the reported rank error.
        rng: leave ``None`` in production.

    Error: with probability ``>= confidence`` the chosen bin holds a value of rank within
    ``(2/ε)·ln(m/β)`` of ``q·n``, so the answer is off by at most that rank error plus one bin
    width (``value`` adds at most half a bin).

    Example:
        >>> release = quantile_from_bin_counts([0, 10, 20, 30], [0, 100, 0], 0.5, Fraction(1))
        >>> release.bin, release.value
        (1, 15.0)
    """
    edges, values = _bins(bin_edges, counts)
    quantile = Fraction(repr(float(q))) if isinstance(q, float) else Fraction(q)  # type: ignore[arg-type]
    if not 0 <= quantile <= 1:
        raise ConfigurationError(f"q must be in [0, 1], got {q!r}.", fix="pass 0.5 for the median.")
    mechanism = PermuteAndFlip(1, epsilon)
    chosen = mechanism.select(quantile_utilities(values, quantile), rng=rng)
    low, high = edges[chosen], edges[chosen + 1]
    level = confidence_fraction(confidence)
    return QuantileRelease(
        bin=chosen,
        low=float(low),
        high=float(high),
        value=float((low + high) / 2),
        loss=mechanism.loss,
        rank_error=mechanism.utility_error_bar(len(values), level),
        confidence=level,
    )


def bounds_from_bin_counts(
    bin_edges: Sequence[Score],
    counts: Sequence[int],
    epsilon: Fraction,
    *,
    coverage: Fraction = Fraction(98, 100),
    rng: RandomSource | None = None,
) -> tuple[float, float, PureDP]:
    """A private clipping range: the outer edges of the ``(1−c)/2`` and ``(1+c)/2`` quantile bins.

    Spends ``ε/2`` on each end (sequential composition), ``ε`` in total.

    Example:
        >>> low, high, loss = bounds_from_bin_counts([0, 1, 2, 3, 4], [0, 50, 50, 0], Fraction(2))
        >>> low <= 1 and high >= 3 - 1, loss.epsilon
        (True, Fraction(2, 1))
    """
    eps = epsilon_fraction(epsilon)
    cover = Fraction(coverage)
    if not 0 < cover < 1:
        raise ConfigurationError(f"coverage must be in (0, 1), got {coverage!r}.")
    lower = quantile_from_bin_counts(bin_edges, counts, (1 - cover) / 2, eps / 2, rng=rng)
    upper = quantile_from_bin_counts(bin_edges, counts, (1 + cover) / 2, eps / 2, rng=rng)
    low, high = lower.low, max(upper.high, lower.low)
    return low, high, PureDP(eps)
