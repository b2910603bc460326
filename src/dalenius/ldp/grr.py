"""Generalised randomized response (k-RR, "direct encoding").

A client keeps its value with probability ``p = e^ε/(e^ε + d − 1)`` and otherwise reports one of
the ``d − 1`` other values, each with ``q = 1/(e^ε + d − 1)``. Each report supports only itself,
so ``P[v ∈ S(Y)|x] = p`` for ``v = x`` and ``q`` otherwise: a pure protocol with variance per
report ``(d − 2 + e^ε)/(e^ε − 1)²`` (for a rare value). It is the best choice for small domains:
it beats local hashing when ``d < 3e^ε + 2``.

Exactness: ``q`` is rounded *up* to a multiple of ``2**-32`` and ``p = 1 − (d − 1)·q``, so
``p/q <= e^ε`` holds for the rationals the sampler uses; one 32-bit word decides each report.
The calibration and the sampler are the k-ary randomized response of
:mod:`dalenius.core.randomized_response`, shared with the central mechanism
(:mod:`dalenius.mechanisms.randomized_response`); this module adds the local protocol's framework.

Example:
    >>> oracle = GeneralizedRR(4, epsilon=1)
    >>> oracle.ratio <= Fraction(2.718281828459045)
    True
    >>> int(oracle.encode(2)) in range(4)
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number
from dalenius.core.randomized_response import move_probability, respond
from dalenius.ldp._base import FrequencyOracle, Reports, check_domain, check_epsilon
from dalenius.ldp._draws import Draws
from dalenius.ldp._grid import on_grid


def grr_probabilities(size: int, epsilon: Fraction) -> tuple[Fraction, Fraction]:
    """``(p, q)`` of k-RR on the ``2**-32`` grid with ``p/q <= e^ε``.

    Example:
        >>> p, q = grr_probabilities(3, Fraction(1))
        >>> p + 2 * q == 1 and p / q <= Fraction(2.718281828459045)
        True
    """
    q = move_probability(size, epsilon)
    return 1 - (size - 1) * q, q


class GeneralizedRR(FrequencyOracle):
    """k-ary randomized response over ``{0, …, d−1}``.

    Args:
        domain_size: ``d >= 2``.
        epsilon: the privacy loss of one report (``> 0``).
    """

    name = "grr"

    def __init__(self, domain_size: int, *, epsilon: Number) -> None:
        self.domain_size = check_domain(domain_size, limit=1 << 20)
        self.requested_epsilon = check_epsilon(epsilon)
        self.p, self.q = grr_probabilities(self.domain_size, self.requested_epsilon)
        self._check_ratio()

    @property
    def ratio(self) -> Fraction:
        """``p/q``."""
        return self.p / self.q

    def _perturb(self, codes: npt.NDArray[np.int64], draws: Draws) -> Reports:
        words = draws.words32(codes.size).astype(np.int64)
        return respond(codes, self.domain_size, on_grid(self.q), words)

    def check_reports(self, reports: npt.ArrayLike) -> Reports:
        """Integer reports in ``0 .. d−1``."""
        arr = np.asarray(reports)
        if arr.ndim != 1 or (arr.size and not _integers_in(arr, self.domain_size)):
            raise ConfigurationError(
                f"a grr report is one integer in 0..{self.domain_size - 1}.",
                fix="send the value index the client's encoder produced.",
            )
        return arr.astype(np.int64)

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        """Each report supports only itself: a histogram."""
        return np.bincount(reports, minlength=self.domain_size).astype(np.int64)

    def all_reports(self) -> Iterator[int]:
        """The values ``0 .. d−1``."""
        return iter(range(self.domain_size))

    def report_probability(self, report: int, value: int) -> Fraction:
        """``p`` if the report is the value, else ``q``."""
        return self.p if report == value else self.q


def _integers_in(arr: npt.NDArray[np.generic], bound: int) -> bool:
    return bool(
        np.issubdtype(arr.dtype, np.integer)
        and arr.dtype != np.bool_
        and arr.min() >= 0
        and arr.max() < bound
    )
