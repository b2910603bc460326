"""Private partition selection: which groups of a GROUP BY without public keys may be released.

Two mechanisms live here.

* :func:`truncated_selection` (used by every query): each observed group's count of privacy units
  gets discrete Laplace noise of scale ``t`` *truncated to* ``[−k, k]``, and the group is released
  with its noisy count iff that count is at least ``k + 1``. A group that exists only because of
  one unit is then released with probability at most ``a^k / C_k`` (``a = exp(−1/t)``,
  ``C_k = Σ_{|z|≤k} a^|z|``), and the same quantity bounds the only extra loss the truncation
  causes for groups present in both neighbours. To spend δ exactly, each group draws its
  truncation independently: ``k`` with probability ``λ`` and ``k + 1`` otherwise. For one group per
  unit this reaches the optimal release curve of Desfontaines, Voss, Gipson & Mandayam (PoPETs
  2022, Thm. 1) while still releasing the counts. The proof is in
  ``docs/mechanisms/partition_selection.md``.
* :func:`laplace_threshold`, the classic untruncated threshold (Korolova et al. 2009), kept as the
  baseline the benchmark and the documentation compare with.

Every bound on ``a`` comes from certified rational bounds on ``exp`` and rounds toward a larger
δ, and ``λ`` is rounded down, so the δ spent is never above the δ asked for.

Example:
    >>> from fractions import Fraction
    >>> cal = truncated_selection(Fraction(1), Fraction(1, 10**6))
    >>> cal.truncation, cal.threshold, round(float(cal.mix), 4)
    (13, 14, 0.9325)
    >>> cal.delta <= Fraction(1, 10**6)
    True
    >>> laplace_threshold(Fraction(2), Fraction(1, 10**6), groups=1, max_count=1)
    28
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._dlaplace import laplace_sampler
from dalenius.mechanisms._uniform import bernoulli_array

MIX_BITS = 32
"""``λ`` is rounded down to a multiple of ``2**-32`` (a cheap exact Bernoulli trial per group)."""


def _check(delta: Fraction, scale: Fraction, groups: int, max_count: int) -> None:
    if not 0 < delta < 1:
        raise ConfigurationError(
            f"delta must be in (0, 1) for partition selection, got {float(delta):.3g}.",
            fix="pass a small delta such as 1e-6.",
        )
    if scale <= 0 or groups < 1 or max_count < 1:
        raise ConfigurationError("scale, groups and max_count must be positive.")


def laplace_threshold(scale: Fraction, delta: Fraction, *, groups: int, max_count: int) -> int:
    """The smallest τ with ``groups · P(max_count + Z >= τ) <= delta`` for discrete Laplace ``Z``.

    The untruncated baseline: a group of one unit is released with probability
    ``q^(τ−c)/(1 + q)``, ``q = exp(−1/scale)``, and τ is an integer, so part of δ is left unspent.

    Args:
        scale: the discrete Laplace scale ``t`` used for the counts.
        delta: the failure probability to spend.
        groups: the most groups one unit can create (its L0 contribution).
        max_count: the most one unit adds to one group's count.

    The tail is certified with rational bounds on ``exp``, so τ is never too small.
    """
    _check(delta, scale, groups, max_count)
    target = delta / groups

    def tail_upper(m: int) -> Fraction:
        # P(Z >= m) = q^m / (1 + q) for m >= 0; an upper bound from exp bounds.
        _, qm_hi = exp_bounds(-Fraction(m) / scale)
        q_lo, _ = exp_bounds(-1 / scale)
        return qm_hi / (1 + q_lo)

    guess = float(scale) * math.log(groups / (float(delta) * (1 + math.exp(-1 / float(scale)))))
    m = max(0, math.ceil(guess))
    while m > 0 and tail_upper(m - 1) <= target:
        m -= 1
    while tail_upper(m) > target:
        m += 1
    return max_count + m


# -- truncated selection -------------------------------------------------------------------------


@dataclass(frozen=True)
class Powers:
    """Rational bounds ``lo <= a^m <= hi`` on the powers of ``a = exp(−1/t)``.

    Production uses certified bounds on ``exp``; the exact tests pass a rational ``a`` (then
    ``lo == hi``), which is the same mechanism for a privacy loss ``ε`` with ``e^ε = 1/a``.
    """

    scale: Fraction | None = None
    base: Fraction | None = None

    def __call__(self, m: int) -> tuple[Fraction, Fraction]:
        """Bounds on ``a^m`` for an integer ``m >= 0``."""
        if self.base is not None:
            value = self.base**m
            return value, value
        assert self.scale is not None
        if m == 0:
            return Fraction(1), Fraction(1)
        return exp_bounds(-Fraction(m) / self.scale)


def shift_delta(powers: Powers, k: int, d: int) -> Fraction:
    """Upper bound on the hockey-stick divergence of ``n + Z`` and ``n + d + Z``, at ``e^ε = a^−d``.

    ``Z`` is discrete Laplace truncated to ``[−k, k]``. The only outcomes without an ``a^−d``
    match are the ``d`` outermost points of one support, of mass
    ``Σ_{i<d} a^(k−i) / C_k = a^(k−d+1)(1 − a^d) / ((1 − a) C_k)``. Needs ``0 <= d <= k + 1``.
    """
    if d == 0:
        return Fraction(0)
    if not 1 <= d <= k + 1:
        raise ValueError(f"shift {d} needs a truncation of at least {d - 1}, got {k}")
    a_lo, a_hi = powers(1)
    _, top_hi = powers(k + 1)
    _, edge_hi = powers(k - d + 1)
    width_lo, _ = powers(d)
    # C_k = (1 + a − 2a^(k+1)) / (1 − a) grows with a: each substitution below lowers it, and
    # each one in the edge mass raises it, so the ratio is an upper bound.
    norm_lo = (1 + a_lo - 2 * top_hi) / (1 - a_lo)
    mass_hi = edge_hi * (1 - width_lo) / (1 - a_hi) if d > 1 else edge_hi
    return mass_hi / norm_lo


def truncation_delta(
    powers: Powers, k: int, *, groups: int, max_count: int, sensitivity: int
) -> Fraction:
    """Upper bound on the δ of truncated selection at truncation ``k`` (threshold ``k + 1``).

    One unit changes the counts of at most ``groups`` groups, each by at most ``max_count``, and
    their sum by at most ``sensitivity``. Per group the loss is ``(d/t, shift_delta(k, d))``;
    basic composition adds them, and ``shift_delta`` is convex in ``d`` with value 0 at 0, so the
    worst case fills whole groups first.
    """
    per_group = min(max_count, sensitivity)
    full = min(groups, sensitivity // per_group)
    rest = sensitivity - full * per_group if full < groups else 0
    total = full * shift_delta(powers, k, per_group)
    if rest:
        total += shift_delta(powers, k, rest)
    return total


@dataclass(frozen=True)
class SelectionCalibration:
    """How truncated selection runs: per group, truncation ``k`` w.p. ``mix``, else ``k + 1``.

    Attributes:
        truncation: ``k``; the noise of a group with truncation ``k`` lies in ``[−k, k]``.
        mix: the probability that a group uses ``k`` (threshold ``k + 1``) rather than ``k + 1``
            (threshold ``k + 2``).
        delta: the certified upper bound on the δ spent, ``mix·δ_k + (1 − mix)·δ_(k+1)``.
    """

    truncation: int
    mix: Fraction
    delta: Fraction

    @property
    def threshold(self) -> int:
        """The smallest noisy count released (for groups drawing truncation ``k``)."""
        return self.truncation + 1


def calibrate(
    powers: Powers, delta: Fraction, *, groups: int, max_count: int, sensitivity: int
) -> SelectionCalibration:
    """The smallest truncation ``k`` and the largest ``mix`` whose δ bound is at most ``delta``."""

    def bound(k: int) -> Fraction:
        return truncation_delta(
            powers, k, groups=groups, max_count=max_count, sensitivity=sensitivity
        )

    low = min(max_count, sensitivity) - 1  # the smallest truncation the bound covers
    a = float(powers(1)[1])
    if a < 1:
        # a^k (1 − a) / (1 + a) ≈ δ / groups, a first guess refined exactly below.
        ratio = groups * (1 - a) / ((1 + a) * float(delta))
        guess = math.ceil(math.log(max(ratio, 1.0)) / -math.log(a)) if ratio > 1 else low
        k = max(low, guess)
    else:
        k = low
    while k > low and bound(k - 1) <= delta:
        k -= 1
    while bound(k) > delta:
        k += 1
    # bound(k) <= delta < bound(k − 1): mix k − 1 (w.p. λ) with k, spending δ exactly.
    if k == low:
        return SelectionCalibration(truncation=k, mix=Fraction(1), delta=bound(k))
    upper, lower = bound(k - 1), bound(k)
    lam = (delta - lower) / (upper - lower)
    lam = Fraction(math.floor(lam * 2**MIX_BITS), 2**MIX_BITS)
    spent = lam * upper + (1 - lam) * lower
    return SelectionCalibration(truncation=k - 1, mix=lam, delta=spent)


def truncated_selection(
    scale: Fraction,
    delta: Fraction,
    *,
    groups: int = 1,
    max_count: int = 1,
    sensitivity: int | None = None,
) -> SelectionCalibration:
    """Calibrate truncated selection for discrete Laplace noise of scale ``scale``.

    Args:
        scale: the noise scale ``t`` of the selection count (``t >= sensitivity / ε``).
        delta: the δ to spend.
        groups: the most groups one unit can change (its L0 contribution).
        max_count: the most one unit changes one group's count.
        sensitivity: the most one unit changes the sum of all counts (default: groups·max_count).
    """
    _check(delta, scale, groups, max_count)
    total = groups * max_count if sensitivity is None else sensitivity
    return calibrate(
        Powers(scale=scale), delta, groups=groups, max_count=max_count, sensitivity=total
    )


def truncated_laplace(
    scale: Fraction, truncations: npt.NDArray[np.int64], rng: RandomSource | None = None
) -> npt.NDArray[np.int64]:
    """One discrete Laplace draw of scale ``scale`` per entry, conditioned on ``|Z| <= truncations[i]``.

    Exact by rejection: draws are made from the exact (untruncated) sampler and those outside their
    range are drawn again. Which draws were rejected is independent of the values finally
    accepted, so the number of rounds (a rejection happens with probability about δ per group)
    reveals nothing about the output.
    """
    source = rng or system_random()
    sampler = laplace_sampler(scale)
    out = sampler.sample(truncations.size, source)
    pending = np.flatnonzero(np.abs(out) > truncations)
    while pending.size:
        fresh = sampler.sample(pending.size, source)
        ok = np.abs(fresh) <= truncations[pending]
        out[pending[ok]] = fresh[ok]
        pending = pending[~ok]
    return out


def select_groups(
    counts: npt.NDArray[np.int64],
    scale: Fraction,
    calibration: SelectionCalibration,
    rng: RandomSource | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Noisy counts and the release mask of truncated selection over exact ``counts``.

    Each group draws its truncation (``k`` w.p. ``mix``, else ``k + 1``), then noise truncated to
    it, and is released iff its noisy count exceeds its truncation.
    """
    source = rng or system_random()
    values = np.asarray(counts, dtype=np.int64)
    n = values.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_)
    low = bernoulli_array(calibration.mix, n, source)
    truncations = np.where(low, calibration.truncation, calibration.truncation + 1).astype(np.int64)
    noisy = values + truncated_laplace(scale, truncations, source)
    return noisy, noisy > truncations
