"""The Multinomial–Dirichlet synthesizer of OnTheMap: synthetic counts from a posterior predictive.

Machanavajjhala, Kifer, Abowd, Gehrke & Vilhuber (ICDE 2008) publish synthetic commuting data:
for each destination, the histogram ``x`` of the real origins (``k`` public origin values, ``n``
people) is combined with a Dirichlet prior of ``α`` pseudo-counts per origin, and ``m`` synthetic
origins are drawn from the posterior predictive — the Dirichlet–multinomial with parameters
``x + α``. Drawn one at a time, that is Pólya's urn: origin ``i`` comes next with probability
``(x_i + α + s_i) / (n + kα + t)`` after ``t`` draws of which ``s_i`` were ``i``.

**Guarantee** (the paper's Theorem: ε-differential privacy if and only if every pseudo-count is
at least ``m / (e^ε − 1)``; derived again, for adding or removing one row, in
``docs/mechanisms/dirichlet.md``): one row changes the probability of any synthetic histogram by
a factor within ``[(1 + m/(kα))⁻¹, 1 + m/α]``, so one destination's draw is
``ln(1 + m/α)``-DP, and a unit with at most ``R`` rows is ``R·ln(1 + m/α)``-DP across all
destinations (its rows fall in destinations drawn independently). :func:`epsilon_for` rounds that
up; :func:`smallest_prior` gives the smallest pseudo-count (on a 1/1000 grid) that fits a budget.

**Sampling** is exact: ``α`` is rational, every weight is an integer in units of ``1/den(α)``, and
each draw is a uniform integer below the total weight (rejection sampling on OS bytes, no float),
located in a Fenwick tree of the weights. The guarantee is about this exact distribution, so —
unlike MST's sampling, which is post-processing — the randomness here must be the OS generator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import InvalidLossError
from dalenius.core.exact import exp_bounds, ln_bounds
from dalenius.core.rng import RandomSource, system_random
from dalenius.mechanisms._exact import uniform_below

PRIOR_GRID = 1000
"""Pseudo-counts proposed by :func:`smallest_prior` are multiples of ``1/PRIOR_GRID``."""


def epsilon_for(prior: Fraction, size: int, rows: int = 1) -> Fraction:
    """``R·ln(1 + m/α)``, rounded up: the pure-DP loss of drawing ``m = size`` origins per destination.

    Example:
        >>> float(epsilon_for(Fraction(1), 1))  # ln 2
        0.6931471805599453
    """
    if prior <= 0:
        raise InvalidLossError(
            f"the prior must be a positive pseudo-count, got {prior}.", fix="pass prior=1."
        )
    if size < 0 or rows < 1:
        raise ValueError(f"size must be >= 0 and rows >= 1, got {size} and {rows}")
    if size == 0:
        return Fraction(0)
    return rows * ln_bounds(1 + Fraction(size) / prior)[1]


def smallest_prior(epsilon: Fraction, size: int, rows: int = 1) -> Fraction:
    """The smallest pseudo-count on the ``1/PRIOR_GRID`` grid with ``epsilon_for(α, m, R) <= ε``.

    ``α ≥ m / (e^{ε/R} − 1)`` exactly (``e^{ε/R}`` bounded from below, so α errs large).

    Example:
        >>> smallest_prior(Fraction(1), 100)  # 100 / (e − 1) = 58.19...
        Fraction(29099, 500)
    """
    if epsilon <= 0:
        raise InvalidLossError("epsilon must be positive.", fix="pass epsilon=1, for example.")
    if size == 0:
        return Fraction(1, PRIOR_GRID)
    bound = exp_bounds(epsilon / rows)[0] - 1
    alpha = Fraction(size) / bound
    grid = Fraction(-((-alpha.numerator * PRIOR_GRID) // alpha.denominator), PRIOR_GRID)
    while epsilon_for(grid, size, rows) > epsilon:  # only at an exact tie with the grid
        grid += Fraction(1, PRIOR_GRID)
    return grid


class _Buffered:
    """OS bytes read in chunks of up to 64 KiB (each byte used once): a draw costs no system call."""

    name = "buffered"

    def __init__(self, source: RandomSource, chunk: int) -> None:
        self._source = source
        self._chunk = min(65536, max(64, chunk))
        self._buffer = b""
        self._at = 0

    def random_bytes(self, n: int) -> bytes:
        if self._at + n > len(self._buffer):
            more = self._source.random_bytes(max(self._chunk, n))
            self._buffer = self._buffer[self._at :] + more
            self._at = 0
        out = self._buffer[self._at : self._at + n]
        self._at += n
        return out

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        return np.frombuffer(self.random_bytes(8 * size), dtype=np.uint64).copy()


def polya(
    counts: Sequence[int],
    prior: Fraction,
    size: int,
    rng: RandomSource | None = None,
) -> npt.NDArray[np.int64]:
    """``size`` synthetic origins from the Dirichlet–multinomial with parameters ``counts + prior``.

    Returns the synthetic count of each origin (they sum to ``size``). Exact: integer weights in
    units of ``1/den(prior)`` and uniform integers from the random source.
    """
    if prior <= 0:
        raise ValueError(f"prior must be positive, got {prior}")
    k = len(counts)
    out = np.zeros(k, dtype=np.int64)
    if size <= 0 or k == 0:
        return out
    num, den = prior.numerator, prior.denominator
    weights = [den * int(c) + num for c in counts]
    if min(weights) <= 0:
        raise ValueError("counts must be non-negative")
    tree = [0] * (k + 1)  # Fenwick tree of the weights (1-based)
    for i, w in enumerate(weights, start=1):
        tree[i] += w
        parent = i + (i & -i)
        if parent <= k:
            tree[parent] += tree[i]
    total = sum(weights)
    top = 1 << (k.bit_length() - 1)
    per_draw = (total + size * den).bit_length() // 8 + 1
    source = _Buffered(rng or system_random(), 2 * size * per_draw)
    for _ in range(size):
        u = uniform_below(total, source)
        pos, step = 0, top
        while step:  # the first index whose prefix sum exceeds u
            nxt = pos + step
            if nxt <= k and tree[nxt] <= u:
                pos = nxt
                u -= tree[nxt]
            step >>= 1
        out[pos] += 1
        i = pos + 1
        while i <= k:  # that origin's weight grows by one whole count
            tree[i] += den
            i += i & -i
        total += den
    return out
