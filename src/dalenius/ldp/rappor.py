"""RAPPOR (Erlingsson, Pihur and Korolova, CCS 2014): Bloom filters, two randomized responses.

Client, for a string ``v``, in cohort ``j`` (one of ``m``, fixed per client):

1. *Bloom filter* ``B``: ``k`` bits with the ``h`` positions ``hash_i(j, v)`` set (SHA-256 of the
   cohort and the string; public, so the server can rebuild it for any candidate string).
2. *Permanent randomized response* ``B'``: each bit is 1 with probability ``f/2``, 0 with ``f/2``,
   else ``B_i``. It is **memoised per (client, value)**: its random words come from
   ``HMAC-SHA256(client secret, value)``, so the same value always gives the same ``B'`` with
   nothing stored, and repeated reports of one value never reveal more than ``B'`` does.
3. *Instantaneous randomized response* ``S``: bit ``i`` is 1 with probability ``q`` if
   ``B'_i = 1`` and ``p`` if ``B'_i = 0``, fresh from the OS generator for every report.

Privacy (the two values' Bloom filters differ in at most ``2h`` bits):

* ``ε∞ = 2h·ln((1 − f/2)/(f/2))`` — everything any number of reports of one value can reveal;
* ``ε₁ = h·ln(q*(1 − p*)/(p*(1 − q*)))`` — one report, with ``q* = P[S_i = 1 | B_i = 1] =
  (f/2)·p + (1 − f/2)·q`` and ``p* = P[S_i = 1 | B_i = 0] = (f/2)·q + (1 − f/2)·p``.

``f/2``, ``p`` and ``q`` are rounded to the ``2**-32`` grid towards more privacy (``f/2`` up,
``p`` and ``q`` towards each other) and the ε's computed from the rounded rationals, rounded up.

Server: per cohort and bit, ``t̂ = (c − p*·N)/(q* − p*)`` estimates how many clients' Bloom
filters have the bit set (unbiased; ``Var = (t·q*(1−q*) + (N−t)·p*(1−p*))/(q*−p*)²``). The
decoder (:mod:`dalenius.ldp.rappor_decode`) then explains those estimates by candidate strings.

Example:
    >>> params = RapporParams(bits=8, hashes=2, cohorts=128, f=0.45, p=0.39, q=0.61)
    >>> round(float(params.epsilon_one), 3), round(float(params.epsilon_inf), 3)
    (0.973, 4.947)
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number, PureDP, as_fraction
from dalenius.ldp._draws import Draws, client_draws
from dalenius.ldp._grid import epsilon_up, grid_down, grid_up, on_grid


def _probability(value: Number, name: str) -> Fraction:
    frac = as_fraction(value, name, allow_zero=True)
    if not frac <= 1:
        raise ConfigurationError(f"{name} must be a probability in [0, 1], got {value!r}.")
    return frac


@dataclass(frozen=True)
class RapporParams:
    """A RAPPOR deployment's public parameters.

    Args:
        bits: Bloom filter size ``k``.
        hashes: hash functions ``h`` (bits set per value).
        cohorts: number of cohorts ``m`` (each has its own hash functions).
        f: permanent randomized response probability (``0 <= f < 1``).
        p: probability of a 1 in the report where the permanent bit is 0.
        q: probability of a 1 where it is 1 (``q > p``).
    """

    bits: int = 16
    hashes: int = 2
    cohorts: int = 64
    f: Number = Fraction(1, 2)
    p: Number = Fraction(1, 2)
    q: Number = Fraction(3, 4)
    half_f: Fraction = field(init=False)
    p_irr: Fraction = field(init=False)
    q_irr: Fraction = field(init=False)

    def __post_init__(self) -> None:
        for name, low, high in (("bits", 1, 4096), ("hashes", 1, 64), ("cohorts", 1, 1 << 16)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigurationError(
                    f"{name} must be an integer in [{low}, {high}], got {value!r}."
                )
        if self.hashes > self.bits:
            raise ConfigurationError("hashes must not exceed bits.")
        f = _probability(self.f, "f")
        p, q = _probability(self.p, "p"), _probability(self.q, "q")
        if f >= 1 or not p < q:
            raise ConfigurationError(
                f"RAPPOR needs f < 1 and p < q, got f={self.f}, p={self.p}, q={self.q}.",
                why="with f = 1 or p >= q the reports carry no information about the value.",
                fix="use, for example, f=0.5, p=0.5, q=0.75 (Chrome's settings).",
            )
        object.__setattr__(self, "half_f", min(grid_up(f / 2), Fraction(1, 2)))
        p_irr, q_irr = grid_up(p), grid_down(q)
        if not p_irr < q_irr:  # pragma: no cover - p and q 2**-32 apart
            raise ConfigurationError("p and q are too close.")
        object.__setattr__(self, "p_irr", p_irr)
        object.__setattr__(self, "q_irr", q_irr)

    @property
    def p_star(self) -> Fraction:
        """``P[S_i = 1 | B_i = 0] = (f/2)·q + (1 − f/2)·p``."""
        return self.half_f * self.q_irr + (1 - self.half_f) * self.p_irr

    @property
    def q_star(self) -> Fraction:
        """``P[S_i = 1 | B_i = 1] = (f/2)·p + (1 − f/2)·q``."""
        return self.half_f * self.p_irr + (1 - self.half_f) * self.q_irr

    @property
    def epsilon_inf(self) -> Fraction:
        """``2h·ln((1 − f/2)/(f/2))``, rounded up: the bound for all reports of one value."""
        if self.half_f == 0:
            raise ConfigurationError("with f = 0 the permanent response protects nothing (ε∞ = ∞).")
        return epsilon_up(((1 - self.half_f) / self.half_f) ** (2 * self.hashes))

    @property
    def epsilon_one(self) -> Fraction:
        """``h·ln(q*(1 − p*)/(p*(1 − q*)))``, rounded up: the bound for one report."""
        ps, qs = self.p_star, self.q_star
        return epsilon_up((qs * (1 - ps) / (ps * (1 - qs))) ** self.hashes)

    @property
    def loss(self) -> PureDP:
        """The lifetime loss of a client for one value (memoisation: ``ε∞``)."""
        return PureDP(self.epsilon_inf)

    def describe(self) -> dict[str, object]:
        """Parameters and guarantees as JSON-ready values."""
        return {
            "protocol": "rappor",
            "bits": self.bits,
            "hashes": self.hashes,
            "cohorts": self.cohorts,
            "f": float(2 * self.half_f),
            "p": float(self.p_irr),
            "q": float(self.q_irr),
            "epsilon_one": float(self.epsilon_one),
            "epsilon_inf": float(self.epsilon_inf) if self.half_f else None,
        }


def bloom_positions(value: str, cohort: int, params: RapporParams) -> list[int]:
    """The ``h`` Bloom positions of ``value`` in ``cohort`` (may repeat, like the original).

    Example:
        >>> len(bloom_positions("v1", 0, RapporParams()))
        2
    """
    digest = hashlib.sha256(f"{cohort}:{value}".encode()).digest()
    while len(digest) < 4 * params.hashes:  # pragma: no cover - more than 8 hashes
        digest += hashlib.sha256(digest).digest()
    return [
        int.from_bytes(digest[4 * i : 4 * i + 4], "big") % params.bits for i in range(params.hashes)
    ]


def bloom_matrix(candidates: Sequence[str], params: RapporParams) -> npt.NDArray[np.uint8]:
    """``X[j, s, i]``: bit ``i`` of candidate ``s``'s Bloom filter in cohort ``j``."""
    out = np.zeros((params.cohorts, len(candidates), params.bits), dtype=np.uint8)
    for j in range(params.cohorts):
        for s, value in enumerate(candidates):
            out[j, s, bloom_positions(value, j, params)] = 1
    return out


def permanent_response(
    bloom: npt.NDArray[np.uint8], words: npt.NDArray[np.uint32], params: RapporParams
) -> npt.NDArray[np.uint8]:
    """``B'`` from ``B`` and one uniform 32-bit word per bit: 1 below ``f/2``, 0 up to ``f``."""
    a = np.uint32(on_grid(params.half_f)) if params.half_f < 1 else None
    if a is None:  # pragma: no cover - f/2 capped at 1/2
        raise ConfigurationError("f/2 must be below 1")
    return np.where(words < a, 1, np.where(words < 2 * int(a), 0, bloom)).astype(np.uint8)


def instantaneous_response(
    permanent: npt.NDArray[np.uint8], draws: Draws, params: RapporParams
) -> npt.NDArray[np.uint8]:
    """``S``: each bit 1 with probability ``q`` where ``B'`` is 1, ``p`` where it is 0."""
    words = draws.words32(permanent.size).reshape(permanent.shape)
    threshold = np.where(permanent == 1, on_grid(params.q_irr), on_grid(params.p_irr))
    return (words.astype(np.int64) < threshold).astype(np.uint8)


@dataclass(frozen=True)
class RapporReport:
    """What a client sends: its cohort and ``k`` bits."""

    cohort: int
    bits: npt.NDArray[np.uint8]


class RapporClient:
    """One device: a secret key (for memoised permanent responses) and a cohort.

    Args:
        params: the deployment's parameters.
        secret: 32 bytes kept on the device; drawn from the OS when ``None``.
        cohort: the client's cohort; drawn uniformly (OS) when ``None``.
    """

    def __init__(
        self, params: RapporParams, *, secret: bytes | None = None, cohort: int | None = None
    ) -> None:
        self.params = params
        self._secret = secret if secret is not None else os.urandom(32)
        if cohort is None:
            cohort = int(client_draws().below(params.cohorts, 1)[0])
        if not 0 <= cohort < params.cohorts:
            raise ConfigurationError(f"cohort must be in 0..{params.cohorts - 1}, got {cohort}.")
        self.cohort = cohort

    def bloom(self, value: str) -> npt.NDArray[np.uint8]:
        """The Bloom filter of ``value`` in this client's cohort."""
        out = np.zeros(self.params.bits, dtype=np.uint8)
        out[bloom_positions(value, self.cohort, self.params)] = 1
        return out

    def _memo_words(self, value: str) -> npt.NDArray[np.uint32]:
        """``k`` 32-bit words from ``HMAC-SHA256(secret, value ‖ block)``: fixed per value."""
        needed = 4 * self.params.bits
        stream = b""
        block = 0
        while len(stream) < needed:
            message = value.encode() + b"\x00" + block.to_bytes(4, "big")
            stream += hmac.new(self._secret, message, hashlib.sha256).digest()
            block += 1
        return np.frombuffer(stream[:needed], dtype=">u4").astype(np.uint32)

    def permanent(self, value: str) -> npt.NDArray[np.uint8]:
        """The memoised permanent randomized response of ``value`` (same every time)."""
        return permanent_response(self.bloom(value), self._memo_words(value), self.params)

    def report(self, value: str) -> RapporReport:
        """A fresh report of ``value``: instantaneous RR (OS generator) over the memoised ``B'``."""
        if not isinstance(value, str):
            raise ConfigurationError("RAPPOR reports strings; convert the value with str() first.")
        bits = instantaneous_response(self.permanent(value), client_draws(), self.params)
        return RapporReport(self.cohort, bits)


def check_reports(
    cohorts: npt.ArrayLike, bits: npt.ArrayLike, params: RapporParams
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """Validated ``(cohort, bits)`` arrays, or an error naming the problem."""
    c, b = np.asarray(cohorts), np.asarray(bits)
    ok = c.ndim == 1 and b.ndim == 2 and b.shape == (c.size, params.bits)
    if ok and c.size:
        ok = bool(
            np.issubdtype(c.dtype, np.integer)
            and (np.issubdtype(b.dtype, np.integer) or b.dtype == np.bool_)
            and c.min() >= 0
            and c.max() < params.cohorts
            and b.min() >= 0
            and b.max() <= 1
        )
    if not ok:
        raise ConfigurationError(
            f"a rappor report is a cohort in 0..{params.cohorts - 1} and exactly "
            f"{params.bits} bits (0 or 1).",
            fix="send the cohort and bits the client's encoder produced.",
        )
    return c.astype(np.int64), b.astype(np.uint8)


def bit_counts(
    cohorts: npt.NDArray[np.int64], bits: npt.NDArray[np.uint8], params: RapporParams
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``c[j, i]`` (reports of cohort ``j`` with bit ``i`` set) and ``N[j]`` (reports of ``j``)."""
    totals = np.bincount(cohorts, minlength=params.cohorts).astype(np.int64)
    counts = np.zeros((params.cohorts, params.bits), dtype=np.int64)
    np.add.at(counts, cohorts, bits.astype(np.int64))
    return counts, totals


def bit_estimates(
    counts: npt.NDArray[np.int64], totals: npt.NDArray[np.int64], params: RapporParams
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Unbiased ``t̂[j, i]`` and their plug-in variances."""
    ps, qs = float(params.p_star), float(params.q_star)
    n = totals[:, None].astype(np.float64)
    estimate = (counts - ps * n) / (qs - ps)
    t = np.clip(estimate, 0, n)
    variance = (t * qs * (1 - qs) + (n - t) * ps * (1 - ps)) / (qs - ps) ** 2
    return estimate, variance


def simulate_reports(
    values: npt.NDArray[np.int64],
    candidates: Sequence[str],
    params: RapporParams,
    draws: Draws,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """Reports of simulated clients, each holding ``candidates[values[i]]`` and reporting once.

    For the simulation path only (``draws`` from :class:`~dalenius.ldp._draws.SimulationDraws`):
    each simulated client reports once, so its permanent response is drawn fresh.
    """
    bloom = bloom_matrix(candidates, params)
    cohorts = draws.below(params.cohorts, values.size)
    filters = bloom[cohorts, values]
    permanent = permanent_response(
        filters, draws.words32(filters.size).reshape(filters.shape), params
    )
    return cohorts, instantaneous_response(permanent, draws, params)
