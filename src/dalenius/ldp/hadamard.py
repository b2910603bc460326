"""Hadamard response (Acharya, Sun and Zhang, AISTATS 2019) and the fast Walsh–Hadamard transform.

Let ``K`` be the smallest power of two above ``d`` and ``H`` the ``K × K`` Sylvester–Hadamard
matrix, ``H[r, y] = (−1)^{popcount(r & y)}``. Value ``x`` owns the set ``C_x = {y : H[x+1, y] = +1}``
of ``K/2`` columns (row 0, all ones, is skipped). The client sends one column ``y``: uniform in
``C_x`` with probability ``p = e^ε/(e^ε + 1)``, uniform in the complement otherwise, so every
column has probability ``2p/K`` or ``2(1 − p)/K`` and the ratio is ``p/(1 − p) <= e^ε``.

A report supports every value whose set holds ``y``. Two distinct non-constant rows of ``H`` agree
on exactly half the columns, so for ``v ≠ x``: ``q = P[y ∈ C_v] = ½·p + ½·(1 − p) = ½`` exactly —
a pure protocol with variance per report ``(e^ε + 1)²/(e^ε − 1)²`` and a report of ``log2 K``
bits. The server's counts are one transform: ``C_v = (n + (H·hist)[v + 1])/2``, ``O(K log K)``.

Exactness: ``1 − p`` is rounded up to the ``2**-32`` grid. Choosing a uniform column of ``C_x``:
draw a uniform column; if its side is wrong, flip the lowest set bit of ``x + 1`` in it — a
bijection between ``C_x`` and its complement, so the result is uniform on the side wanted.

Example:
    >>> hr = HadamardResponse(6, epsilon=1)
    >>> hr.columns, hr.q
    (8, Fraction(1, 2))
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number
from dalenius.core.randomized_response import move_probability
from dalenius.ldp._base import FrequencyOracle, Reports, check_domain, check_epsilon
from dalenius.ldp._draws import Draws
from dalenius.ldp._grid import on_grid


def parity(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``popcount(x) mod 2`` elementwise for non-negative 64-bit integers."""
    x = x.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        x ^= x >> shift
    return x & 1


def fwht(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The Walsh–Hadamard transform ``H·v`` (length a power of two), exact on integers.

    Example:
        >>> fwht([1, 0, 0, 0]).tolist(), fwht([0, 1, 0, 0]).tolist()
        ([1, 1, 1, 1], [1, -1, 1, -1])
    """
    out = np.array(values, dtype=np.int64)
    size = out.size
    if size & (size - 1):
        raise ValueError("length must be a power of two")
    h = 1
    while h < size:
        view = out.reshape(-1, 2, h)
        top, bottom = view[:, 0, :].copy(), view[:, 1, :]
        view[:, 0, :] = top + bottom
        view[:, 1, :] = top - bottom
        h *= 2
    return out


class HadamardResponse(FrequencyOracle):
    """Hadamard response over ``{0, …, d−1}``; reports are column indices in ``[0, K)``."""

    name = "hr"

    def __init__(self, domain_size: int, *, epsilon: Number) -> None:
        self.domain_size = check_domain(domain_size, limit=1 << 24)
        self.requested_epsilon = check_epsilon(epsilon)
        self.columns = 1 << self.domain_size.bit_length()  # smallest power of two > d
        self.p = 1 - move_probability(2, self.requested_epsilon)  # binary randomized response
        self.q = Fraction(1, 2)
        self._check_ratio()

    @property
    def ratio(self) -> Fraction:
        """``p/(1 − p)``."""
        return self.p / (1 - self.p)

    def _perturb(self, codes: npt.NDArray[np.int64], draws: Draws) -> Reports:
        row = codes + 1
        column = draws.below(self.columns, codes.size)
        inside = parity(row & column) == 0
        want_inside = draws.words32(codes.size) < np.uint32(on_grid(self.p))
        flip = row & -row  # lowest set bit of the row index
        return np.where(inside == want_inside, column, column ^ flip)

    def check_reports(self, reports: npt.ArrayLike) -> Reports:
        """Integers in ``[0, K)``."""
        arr = np.asarray(reports)
        ok = arr.ndim == 1
        if ok and arr.size:
            ok = bool(
                np.issubdtype(arr.dtype, np.integer)
                and arr.dtype != np.bool_
                and arr.min() >= 0
                and arr.max() < self.columns
            )
        if not ok:
            raise ConfigurationError(
                f"an hr report is one integer in 0..{self.columns - 1}.",
                fix="send the column index the client's encoder produced.",
            )
        return arr.astype(np.int64, copy=False)

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        """``C_v = (n + (H·hist)[v + 1])/2`` by one fast transform."""
        hist = np.bincount(reports, minlength=self.columns)
        transformed = fwht(hist)
        return (len(reports) + transformed[1 : self.domain_size + 1]) // 2

    def all_reports(self) -> Iterator[int]:
        """The columns ``0 .. K−1``."""
        return iter(range(self.columns))

    def report_probability(self, report: int, value: int) -> Fraction:
        """``2p/K`` inside the value's set, ``2(1 − p)/K`` outside."""
        inside = bin((value + 1) & report).count("1") % 2 == 0
        return (self.p if inside else 1 - self.p) * 2 / self.columns
