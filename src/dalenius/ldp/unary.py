"""Unary encodings: symmetric (SUE, basic one-time RAPPOR) and optimised (OUE).

The client one-hot encodes its value in ``d`` bits and randomises each bit independently: the bit
of its value is sent as 1 with probability ``p``, every other bit as 1 with probability ``q``. A
report supports the values whose bits are 1, so the protocol is pure with that ``(p, q)`` and
``ε = ln(p(1 − q)/((1 − p)q))`` (two bits change between neighbouring values).

* SUE: ``p = e^{ε/2}/(e^{ε/2} + 1)``, ``q = 1 − p`` (each bit is a binary RR at ε/2).
* OUE: ``p = 1/2``, ``q = 1/(e^ε + 1)``, which minimises the variance ``4e^ε/(e^ε − 1)²``.

Exactness: ``q`` is rounded up to the ``2**-32`` grid (and SUE's ``p = 1 − q``), which can only
lower the ratio.

Example:
    >>> oue = UnaryEncoding(5, epsilon=1, optimized=True)
    >>> oue.p
    Fraction(1, 2)
    >>> oue.encode(3).shape
    (5,)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.core.loss import Number
from dalenius.ldp._base import (
    FrequencyOracle,
    Reports,
    SupportAccumulator,
    check_domain,
    check_epsilon,
)
from dalenius.ldp._draws import Draws, packed_bernoulli
from dalenius.ldp._grid import grid_up, on_grid

CHUNK_BITS = 1 << 24
"""Bits randomised per block, so memory stays bounded for millions of clients."""


class UnaryEncoding(FrequencyOracle):
    """SUE (``optimized=False``) or OUE (``optimized=True``) over ``{0, …, d−1}``.

    Reports are ``uint8`` rows of ``d`` bits.
    """

    def __init__(self, domain_size: int, *, epsilon: Number, optimized: bool = True) -> None:
        self.domain_size = check_domain(domain_size, limit=1 << 16)
        self.requested_epsilon = check_epsilon(epsilon)
        self.name = "oue" if optimized else "sue"
        if optimized:
            e_lo, _ = exp_bounds(self.requested_epsilon)
            self.p, self.q = Fraction(1, 2), grid_up(1 / (e_lo + 1))
        else:
            e_lo, _ = exp_bounds(self.requested_epsilon / 2)
            self.q = grid_up(1 / (e_lo + 1))
            self.p = 1 - self.q
        self._check_ratio()

    @property
    def ratio(self) -> Fraction:
        """``p(1 − q)/((1 − p)q)``: the two bits that differ between two values."""
        return self.p * (1 - self.q) / ((1 - self.p) * self.q)

    @property
    def words(self) -> int:
        """64-bit words per bit-packed report: ``⌈d/64⌉``."""
        return -(-self.domain_size // 64)

    def _perturb(self, codes: npt.NDArray[np.int64], draws: Draws) -> Reports:
        d = self.domain_size
        out = np.empty((codes.size, d), dtype=np.uint8)
        rows = max(1, CHUNK_BITS // (64 * self.words))
        for start in range(0, codes.size, rows):
            packed = self._perturb_packed(codes[start : start + rows], draws)
            out[start : start + packed.shape[0]] = unpack(packed, d)
        return out

    def _perturb_packed(self, codes: npt.NDArray[np.int64], draws: Draws) -> npt.NDArray[np.uint64]:
        """Reports bit-packed, one row of ``⌈d/64⌉`` little-endian words per client.

        Every bit is drawn with probability ``q`` (:func:`packed_bernoulli`, exact), then the
        client's own bit is redrawn with probability ``p``; padding bits beyond ``d`` are zero.
        """
        n, w, d = codes.size, self.words, self.domain_size
        packed = packed_bernoulli(draws, on_grid(self.q), n * w).reshape(n, w)
        if d % 64:
            packed[:, -1] &= np.uint64((1 << (d % 64)) - 1)
        own = draws.bernoulli32(on_grid(self.p), n).astype(np.uint64)
        word, shift = codes >> 6, (codes & 63).astype(np.uint64)
        rows = np.arange(n)
        one = np.uint64(1)
        packed[rows, word] = (packed[rows, word] & ~(one << shift)) | (own << shift)
        return packed

    def _simulated_reports(self, codes: npt.NDArray[np.int64], draws: Draws) -> Reports:
        """Bit-packed reports: the simulation's accumulator counts them without unpacking all."""
        return self._perturb_packed(codes, draws)

    def accumulator(self, expected_reports: int) -> SupportAccumulator:
        """Counts bit-packed (simulation) or plain (``d``-bit rows) reports."""
        return _PackedAccumulator(self)

    def check_reports(self, reports: npt.ArrayLike) -> Reports:
        """Rows of ``d`` bits (0 or 1)."""
        arr = np.asarray(reports)
        ok = arr.ndim == 2 and arr.shape[1] == self.domain_size
        if ok and arr.size:
            ok = bool(
                (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_)
                and arr.min() >= 0
                and arr.max() <= 1
            )
        if not ok:
            raise ConfigurationError(
                f"an {self.name} report is a list of exactly {self.domain_size} bits (0 or 1).",
                fix="send the bit vector the client's encoder produced.",
            )
        return arr.astype(np.uint8, copy=False)

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        """The number of 1s in each bit position."""
        counts: npt.NDArray[np.int64] = reports.sum(axis=0, dtype=np.int64)
        return counts

    def all_reports(self) -> Iterator[tuple[int, ...]]:
        """All ``2^d`` bit vectors (small ``d`` only)."""
        return itertools.product((0, 1), repeat=self.domain_size)

    def report_probability(self, report: tuple[int, ...], value: int) -> Fraction:
        """The product of the independent bit probabilities."""
        prob = Fraction(1)
        for j, bit in enumerate(report):
            one = self.p if j == value else self.q
            prob *= one if bit else 1 - one
        return prob


def unpack(packed: npt.NDArray[np.uint64], bits: int) -> npt.NDArray[np.uint8]:
    """Rows of little-endian 64-bit words back to rows of ``bits`` bits (0 or 1)."""
    as_bytes = np.ascontiguousarray(packed).astype("<u8", copy=False).view(np.uint8)
    return np.unpackbits(as_bytes, axis=1, count=bits, bitorder="little")


def column_counts(packed: npt.NDArray[np.uint64], bits: int) -> npt.NDArray[np.int64]:
    """How many rows have each of the first ``bits`` bits set, without unpacking every row.

    Rows are added in pairs bit-sliced (a ripple-carry adder on 64 columns per word), halving the
    rows and adding one bit plane per round; after eight rounds each remaining row holds 8-bit
    counts of 256 rows, and only those few rows are unpacked. An odd row out is counted directly.

    Example:
        >>> rows = np.array([[0b101], [0b100], [0b001]], dtype=np.uint64)
        >>> column_counts(rows, 3).tolist()
        [2, 0, 2]
    """
    width = 64 * packed.shape[1]
    counts = np.zeros(width, dtype=np.int64)
    planes = [packed]
    while planes[0].shape[0] > 1 and len(planes) < 8:
        if planes[0].shape[0] % 2:
            for j, plane in enumerate(planes):
                counts += unpack(plane[-1:], width)[0].astype(np.int64) << j
            planes = [plane[:-1] for plane in planes]
        low, high = planes[0][0::2], planes[0][1::2]
        summed, carry = [low ^ high], low & high
        for a, b in zip((p[0::2] for p in planes[1:]), (p[1::2] for p in planes[1:]), strict=True):
            both = a ^ b
            summed.append(both ^ carry)
            carry = (a & b) | (both & carry)
        summed.append(carry)
        planes = summed
    for j, plane in enumerate(planes):
        counts += unpack(plane, width).sum(axis=0, dtype=np.int64) << j
    return counts[:bits]


class _PackedAccumulator(SupportAccumulator):
    """Adds bit-packed rows (``uint64``, as the simulation makes them) or plain bit rows."""

    def __init__(self, oracle: UnaryEncoding) -> None:
        super().__init__(oracle)
        self.unary = oracle

    def add(self, reports: Reports) -> None:
        """Count one batch: 1s per bit position."""
        if reports.dtype != np.uint64:
            super().add(reports)
            return
        d = self.unary.domain_size
        rows = max(1, CHUNK_BITS // (64 * self.unary.words))
        for start in range(0, reports.shape[0], rows):
            self._support += column_counts(reports[start : start + rows], d)
        self.reports += reports.shape[0]


def sue(domain_size: int, *, epsilon: Number) -> UnaryEncoding:
    """Symmetric unary encoding (basic one-time RAPPOR)."""
    return UnaryEncoding(domain_size, epsilon=epsilon, optimized=False)


def oue(domain_size: int, *, epsilon: Number) -> UnaryEncoding:
    """Optimised unary encoding."""
    return UnaryEncoding(domain_size, epsilon=epsilon, optimized=True)
