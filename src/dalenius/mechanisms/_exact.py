"""Scalar exact samplers (Canonne, Kamath & Steinke 2020), for rare paths and as references.

Every decision here compares uniformly random integers with exact rationals, so the distributions
are exactly the ones claimed — no floating point anywhere. These samplers are slow (pure Python,
one draw at a time); the vectorised samplers use them only for events of tiny probability (a tail
beyond a table) and the tests use them as an independent reference.

Algorithms (CKS 2020, "The Discrete Gaussian for Differential Privacy"):

* Algorithm 1 — Bernoulli(exp(−γ)) for rational γ: a chain of Bernoulli(γ/k) trials for γ ≤ 1,
  and a product of Bernoulli(exp(−1)) trials for the integer part of larger γ.
* Algorithm 2 — discrete Laplace with rational scale, through a geometric variable built from
  Bernoulli(exp(−1)) trials and a uniform offset accepted with probability exp(−U/t).
* Algorithm 3 — discrete Gaussian by rejection from a discrete Laplace proposal.

Example:
    >>> from dalenius.core.rng import system_random
    >>> rng = system_random()
    >>> bernoulli_exp(Fraction(0), rng)
    True
    >>> uniform_below(1, rng)
    0
"""

from __future__ import annotations

import math
from fractions import Fraction

from dalenius.core.rng import RandomSource


def random_bits(k: int, rng: RandomSource) -> int:
    """``k`` uniformly random bits as a non-negative integer below ``2**k``."""
    if k <= 0:
        return 0
    nbytes = (k + 7) // 8
    value = int.from_bytes(rng.random_bytes(nbytes), "little")
    return value >> (8 * nbytes - k)


def uniform_below(n: int, rng: RandomSource) -> int:
    """A uniform integer in ``[0, n)`` by rejection sampling (no modulo bias)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n == 1:
        return 0
    k = (n - 1).bit_length()
    while True:
        value = random_bits(k, rng)
        if value < n:
            return value


def bernoulli(p: Fraction, rng: RandomSource) -> bool:
    """True with probability exactly ``p`` (a rational in ``[0, 1]``)."""
    if not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got {p}")
    return uniform_below(p.denominator, rng) < p.numerator


def _bernoulli_exp_unit(gamma: Fraction, rng: RandomSource) -> bool:
    """Bernoulli(exp(−γ)) for ``0 <= γ <= 1`` (CKS Algorithm 1, first part)."""
    k = 1
    while bernoulli(gamma / k, rng):
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction, rng: RandomSource) -> bool:
    """True with probability exactly ``exp(−γ)`` for a rational ``γ >= 0`` (CKS Algorithm 1)."""
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    whole = math.floor(gamma)
    for _ in range(whole):
        if not _bernoulli_exp_unit(Fraction(1), rng):
            return False
    return _bernoulli_exp_unit(gamma - whole, rng)


def geometric_exp(rate: Fraction, rng: RandomSource) -> int:
    """A draw ``X >= 0`` with ``P(X = x) ∝ exp(−rate·x)`` for a rational ``rate > 0`` (CKS Alg. 2)."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    s, t = rate.numerator, rate.denominator
    while True:
        u = uniform_below(t, rng)
        if not bernoulli_exp(Fraction(u, t), rng):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rng):
            v += 1
        # X = u + t·v has P ∝ exp(−X/t); flooring X/s gives ratio exp(−s/t) = exp(−rate).
        return (u + t * v) // s


def discrete_laplace_one(scale: Fraction, rng: RandomSource) -> int:
    """One draw with ``P(z) ∝ exp(−|z|/scale)`` on the integers (CKS Algorithm 2)."""
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    while True:
        magnitude = geometric_exp(1 / scale, rng)
        negative = random_bits(1, rng) == 1
        if negative and magnitude == 0:
            continue
        return -magnitude if negative else magnitude


def discrete_gaussian_one(sigma2: Fraction, rng: RandomSource) -> int:
    """One draw with ``P(z) ∝ exp(−z²/(2σ²))`` on the integers (CKS Algorithm 3)."""
    if sigma2 <= 0:
        raise ValueError(f"sigma2 must be > 0, got {sigma2}")
    t = math.isqrt(math.floor(sigma2)) + 1
    while True:
        y = discrete_laplace_one(Fraction(t), rng)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp(gamma, rng):
            return y


def gaussian_tail_one(sigma2: Fraction, start: int, rng: RandomSource) -> int:
    """A draw ``y >= start`` with ``P(y) ∝ exp(−y²/(2σ²))``, for ``start >= 1``.

    Proposes ``y = start + G`` with ``G`` geometric of rate ``start/σ²`` and accepts with
    probability ``exp(−G²/(2σ²))``: since ``y² = start² + 2·start·G + G²``, the accepted draws
    have exactly the target distribution.
    """
    if start < 1:
        raise ValueError(f"start must be >= 1, got {start}")
    while True:
        g = geometric_exp(Fraction(start) / sigma2, rng)
        if bernoulli_exp(Fraction(g * g) / (2 * sigma2), rng):
            return start + g
