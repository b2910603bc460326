"""Randomized response: Warner's binary form and the k-ary form, with unbiased estimators.

Each respondent holds one of ``k = m + 1`` categories and reports it truthfully with probability
``1 − m·p``, or moves to each of the ``m`` other categories with probability ``p`` (Warner 1965 is
``k = 2``). Course document 004 shows this is (ε, δ)-DP exactly when ``p >= (1 − δ)/(m + e^ε)``:
the worst event is "the report equals my true value", for which
``1 − m·p <= e^ε·p + δ``. Dalenius keeps ``p`` rational and ``p <= 1/k`` (truth is never less
likely than a lie), so every report is decided by one exact uniform integer. The calibration,
the privacy map and the sampler are :mod:`dalenius.core.randomized_response`'s, shared with the
local protocols; this module adds the survey interface: (ε, δ) or a given ``p``, estimators and
their error bars.

Estimation. With ``n`` reports of which ``n_j`` say category ``j``,
``E[n_j] = f_j·(1 − (m+1)·p) + n·p``, so ``f̂_j = (n_j − n·p)/(1 − (m+1)·p)`` is unbiased and

``Var(f̂_j) = (f_j·(1 − m·p)·m·p + (n − f_j)·p·(1 − p)) / (1 − (m+1)·p)²``.

Error bar: ``n_j`` is a sum of ``n`` independent indicators, so by Hoeffding's inequality
``|f̂_j − f_j| <= √(n·ln(2/β)/2)/(1 − (m+1)·p)`` with probability ``>= 1 − β`` for each ``j``.

Example:
    >>> rr = RandomizedResponse.warner(Fraction(1))
    >>> rr.categories, rr.loss
    (2, PureDP(epsilon=Fraction(1, 1)))
    >>> reports = rr.privatize([0, 1, 1, 0, 1])
    >>> reports.shape
    (5,)
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import ln_bounds, sqrt_bounds
from dalenius.core.loss import ApproxDP, Number, PureDP, as_fraction
from dalenius.core.randomized_response import epsilon_for, move_probability, respond
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._grid import float_up
from dalenius.mechanisms._uniform import uniform_below_array
from dalenius.mechanisms._validate import confidence_fraction


def _check_categories(categories: int) -> int:
    if isinstance(categories, bool) or not isinstance(categories, int) or categories < 2:
        raise ConfigurationError(
            f"categories must be an integer >= 2, got {categories!r}.",
            fix="pass the number of possible answers (2 for a yes/no question).",
        )
    return categories


class RandomizedResponse:
    """k-ary randomized response with a rational move probability ``p``.

    Args:
        categories: the number ``k >= 2`` of possible answers (coded ``0 .. k−1``).
        p: the probability of reporting each particular other answer, ``0 < p <= 1/k``.
            Give either ``p`` or ``epsilon``.
        epsilon: the privacy loss to calibrate ``p`` to (rounded up to a multiple of 2**-32).
        delta: the δ of an (ε, δ) guarantee (0 for pure ε-DP).

    Attributes:
        p: the move probability actually used.
        keep: ``1 − m·p``, the probability of a truthful report.
        loss: ``PureDP(ε)`` or ``ApproxDP(ε, δ)``; ε is the one passed in, or derived from ``p``
            (rounded up).
    """

    def __init__(
        self,
        categories: int,
        p: Fraction | None = None,
        *,
        epsilon: Number | None = None,
        delta: Number = 0,
    ) -> None:
        self.categories = _check_categories(categories)
        self.delta = as_fraction(delta, "delta", allow_zero=True)
        if not self.delta < 1:
            raise ConfigurationError(f"delta must be below 1, got {delta!r}.")
        if (p is None) == (epsilon is None):
            raise ConfigurationError(
                "give exactly one of p and epsilon.",
                fix="RandomizedResponse(2, epsilon=1) or RandomizedResponse(2, p=Fraction(1, 4)).",
            )
        m = self.categories - 1
        if epsilon is not None:
            eps = as_fraction(epsilon, "epsilon", allow_zero=True)
            self.p = move_probability(self.categories, eps, self.delta)
        else:
            self.p = Fraction(p)  # type: ignore[arg-type]
            if not 0 < self.p <= Fraction(1, self.categories) or self.p.denominator > 2**62:
                raise ConfigurationError(
                    f"p must be a rational in (0, 1/{self.categories}] with denominator "
                    f"<= 2**62, got {p!r}.",
                    why="a larger p would make lying more likely than the truth.",
                    fix=f"pass p <= 1/{self.categories}, or give epsilon instead.",
                )
            eps = epsilon_for(self.categories, self.p, self.delta)
        self.keep = 1 - m * self.p
        self.epsilon = eps
        self.loss: PureDP | ApproxDP = PureDP(eps) if self.delta == 0 else ApproxDP(eps, self.delta)

    @classmethod
    def warner(cls, epsilon: Number, delta: Number = 0) -> RandomizedResponse:
        """Warner's (1965) binary randomized response calibrated to ε (and δ)."""
        return cls(2, epsilon=epsilon, delta=delta)

    def __repr__(self) -> str:
        return f"RandomizedResponse(categories={self.categories}, p={self.p})"

    def _codes(self, values: npt.ArrayLike | Sequence[int]) -> npt.NDArray[np.int64]:
        codes = np.asarray(values)
        if codes.size and (
            not np.issubdtype(codes.dtype, np.integer)
            or codes.dtype == np.bool_
            or codes.min() < 0
            or codes.max() >= self.categories
        ):
            raise ConfigurationError(
                f"values must be integer codes in 0..{self.categories - 1}.",
                fix="map each answer to its index in the list of possible answers first.",
            )
        return codes.astype(np.int64)

    def privatize(
        self, values: npt.ArrayLike | Sequence[int], *, rng: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """Each respondent's randomized report (one exact uniform integer per respondent).

        Args:
            values: true answers as codes ``0 .. k−1``.
            rng: leave ``None`` in production; tests may pass a seeded source.
        """
        codes = self._codes(values)
        a, d = self.p.numerator, self.p.denominator
        draws = uniform_below_array(d, codes.size, rng or system_random()).reshape(codes.shape)
        return respond(codes, self.categories, a, draws)

    def _check_estimable(self) -> Fraction:
        factor = 1 - self.categories * self.p
        if factor == 0:
            raise ConfigurationError(
                "with p = 1/k the reports carry no information, so nothing can be estimated.",
                fix="use a smaller p (a larger epsilon).",
            )
        return factor

    def observed_counts(self, reports: npt.ArrayLike | Sequence[int]) -> npt.NDArray[np.int64]:
        """How many reports name each category."""
        codes = self._codes(reports)
        return np.bincount(codes.ravel(), minlength=self.categories)

    def estimate_counts(self, reports: npt.ArrayLike | Sequence[int]) -> npt.NDArray[np.float64]:
        """Unbiased estimates ``f̂_j = (n_j − n·p)/(1 − (m+1)·p)`` of the true counts."""
        factor = self._check_estimable()
        observed = self.observed_counts(reports).astype(np.float64)
        n = float(observed.sum())
        return (observed - n * float(self.p)) / float(factor)

    def variance(self, true_counts: npt.ArrayLike | Sequence[int]) -> npt.NDArray[np.float64]:
        """``Var(f̂_j)`` given the true counts (exact formula, evaluated in floating point)."""
        factor = float(self._check_estimable())
        f = np.asarray(true_counts, dtype=np.float64)
        n = float(f.sum())
        p, m = float(self.p), self.categories - 1
        return (f * (1 - m * p) * m * p + (n - f) * p * (1 - p)) / factor**2

    def estimated_variance(self, reports: npt.ArrayLike | Sequence[int]) -> npt.NDArray[np.float64]:
        """The variance formula evaluated at the (clipped) estimated counts."""
        estimate = self.estimate_counts(reports)
        n = float(estimate.sum())
        return self.variance(np.clip(estimate, 0, n))

    def error_bar(self, respondents: int, confidence: float | Fraction) -> float:
        """Hoeffding half-width for each ``f̂_j``: ``√(n·ln(2/β)/2)/(1 − (m+1)·p)``, rounded up.

        Example:
            >>> rr = RandomizedResponse(2, p=Fraction(1, 4))
            >>> round(rr.error_bar(10_000, 0.95), 2)
            271.62
        """
        if isinstance(respondents, bool) or not isinstance(respondents, int) or respondents < 0:
            raise ConfigurationError(f"respondents must be an integer >= 0, got {respondents!r}.")
        factor = abs(self._check_estimable())
        beta = 1 - confidence_fraction(confidence)
        _, log_hi = ln_bounds(2 / beta)
        _, root_hi = sqrt_bounds(respondents * log_hi / 2, bits=64)
        return float_up(root_hi / factor)
