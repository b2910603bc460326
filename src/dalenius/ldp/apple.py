"""Apple's count-mean sketch (CMS) and Hadamard count-mean sketch (HCMS).

(Apple Differential Privacy Team, *Learning with Privacy at Scale*, 2017.) A deployment draws
``k`` hash functions ``h_1..h_k`` into ``{0, …, m−1}`` at random: here ``h_l(x)`` is
SHA-256 of a 32-byte deployment salt (from the OS), ``l`` and ``x``, reduced mod ``m``, so each
deployment has its own hash family and no one can pick values that collide on purpose.

CMS client (report: an index ``j`` and ``m`` signs): pick ``j`` uniform in ``[k]``; encode
``v = −1^m`` with ``v[h_j(x)] = +1``; flip each sign with ``ρ = 1/(e^{ε/2} + 1)``. Two values
differ in two coordinates, so the ratio is ``((1 − ρ)/ρ)² <= e^ε``.

HCMS client (report: ``j``, ``l`` and one sign): pick ``j`` uniform in ``[k]`` and ``l`` uniform in
``[m]`` (``m`` a power of two); send ``w = H[h_j(x), l]`` of the Hadamard matrix, flipped with
``ρ = 1/(e^ε + 1)``: the ratio is ``(1 − ρ)/ρ <= e^ε`` and the report is ``log2(k·m) + 1`` bits.

Server: with the debiasing constant ``c = 1/(1 − 2ρ)`` (``(e^{ε/2}+1)/(e^{ε/2}−1)`` for CMS), every report becomes a
row update of the ``k × m`` sketch ``M``: CMS adds ``k·(c/2·ṽ + ½)`` to row ``j``; HCMS adds
``k·c·w̃`` at ``(j, l)`` and the rows are transformed by ``H`` at the end. Then

``f̂(x) = m/(m − 1) · ((1/k)·Σ_l M[l, h_l(x)] − n/m)``

is unbiased over the clients' coins and the deployment's random hash family. Its variance, with
``Z_i`` a client's contribution, ``f`` the count of ``x`` and ``f_y`` the counts of the others:

* CMS: ``Var = (m/(m−1))²·[f·(c²−1)/4 + (n−f)·((c²−1)/4 + 1/m − 1/m²) + Σ_{y≠x} f_y(f_y−1)·(m−1)/(k·m²)]``
* HCMS: ``Var = (m/(m−1))²·[f·(c²−1) + (n−f)·(c² − 1/m²) + Σ_{y≠x} f_y(f_y−1)·(m−1)/(k·m²)]``

The last sum is the hash collisions: two clients holding the same ``y`` who chose the same row
collide with ``x`` together (probability ``1/(k·m)``), a covariance a fixed-seed family would hide
as a bias instead.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number, PureDP
from dalenius.core.randomized_response import move_probability
from dalenius.ldp._base import FrequencyEstimate, check_epsilon, z_for
from dalenius.ldp._draws import Draws, client_draws
from dalenius.ldp._grid import epsilon_up, on_grid
from dalenius.ldp.hadamard import fwht, parity


class CountMeanSketch:
    """A CMS or HCMS deployment: parameters, random hash family, client and server.

    Args:
        epsilon: the privacy loss of one report.
        hashes: ``k``, rows of the sketch.
        width: ``m``, columns (a power of two for HCMS).
        hadamard: HCMS instead of CMS.
        salt: the deployment's hash salt (32 bytes); drawn from the OS when ``None``. The server
            and every client of one deployment share it.
    """

    def __init__(
        self,
        *,
        epsilon: Number,
        hashes: int = 64,
        width: int = 1024,
        hadamard: bool = False,
        salt: bytes | None = None,
    ) -> None:
        self.requested_epsilon = check_epsilon(epsilon)
        for name, value in (("hashes", hashes), ("width", width)):
            if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 1 << 16:
                raise ConfigurationError(f"{name} must be an integer in [2, 65536], got {value!r}.")
        if hadamard and width & (width - 1):
            raise ConfigurationError(
                f"HCMS needs a width that is a power of two, got {width}.", fix="use 1024, say."
            )
        self.hashes, self.width, self.hadamard = hashes, width, hadamard
        self.name = "hcms" if hadamard else "cms"
        self.salt = salt if salt is not None else os.urandom(32)
        exponent = self.requested_epsilon if hadamard else self.requested_epsilon / 2
        self.flip = move_probability(2, exponent)  # binary randomized response
        self.c = 1 / (1 - 2 * float(self.flip))

    @property
    def ratio(self) -> Fraction:
        """The largest ratio of report probabilities between two values."""
        one = (1 - self.flip) / self.flip
        return one if self.hadamard else one * one

    @property
    def epsilon(self) -> Fraction:
        """The guaranteed ε (rounded up, at most the one asked for)."""
        return min(epsilon_up(self.ratio), self.requested_epsilon)

    @property
    def loss(self) -> PureDP:
        """The privacy loss of one report."""
        return PureDP(self.epsilon)

    def hash_rows(self, values: Sequence[str]) -> npt.NDArray[np.int64]:
        """``h_l(x)`` for every row ``l`` and value ``x``: shape ``(k, len(values))``."""
        encoded = [value.encode() for value in values]
        out = np.empty((self.hashes, len(values)), dtype=np.int64)
        for row in range(self.hashes):
            # The (salt, row) prefix is hashed once and copied: same digests, fewer bytes hashed.
            prefix = hashlib.sha256(self.salt + row.to_bytes(4, "big"))
            words = bytearray()
            for value in encoded:
                digest = prefix.copy()
                digest.update(value)
                words += digest.digest()[:8]
            top = np.frombuffer(bytes(words), dtype=">u8")
            out[row] = (top % np.uint64(self.width)).astype(np.int64)
        return out

    def report_probability(self, report: Mapping[str, Any], value: str) -> Fraction:
        """The exact probability that a client holding ``value`` sends ``report``."""
        k, m, rho = self.hashes, self.width, self.flip
        bucket = int(self.hash_rows([value])[int(report["row"]), 0])
        if self.hadamard:
            column, sign = int(report["column"]), int(report["sign"])
            true = 1 - 2 * (bin(bucket & column).count("1") % 2)
            return Fraction(1, k * m) * ((1 - rho) if sign == true else rho)
        prob = Fraction(1, k)
        for a, sign in enumerate(report["signs"]):
            true = 1 if a == bucket else -1
            prob *= (1 - rho) if sign == true else rho
        return prob

    # -- client -----------------------------------------------------------------------------

    def encode(self, value: str) -> dict[str, object]:
        """One client's report of ``value`` (OS generator)."""
        if not isinstance(value, str):
            raise ConfigurationError("sketch reports take strings; convert with str() first.")
        buckets = self.hash_rows([value])
        rows, cols, signs = self._perturb(buckets, np.zeros(1, dtype=np.int64), client_draws())
        if self.hadamard:
            return {"row": int(rows[0]), "column": int(cols[0]), "sign": int(signs[0])}
        return {"row": int(rows[0]), "signs": signs[0].tolist()}

    def _perturb(
        self, buckets: npt.NDArray[np.int64], codes: npt.NDArray[np.int64], draws: Draws
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int8]]:
        """Vectorised encoder: ``buckets[l, v]`` are the hashes, ``codes`` the clients' values."""
        n = codes.size
        rows = draws.below(self.hashes, n)
        target = buckets[rows, codes]
        flip = np.uint32(on_grid(self.flip))
        if self.hadamard:
            cols = draws.below(self.width, n)
            sign = 1 - 2 * parity(target & cols)
            flipped = draws.words32(n) < flip
            return rows, cols, np.where(flipped, -sign, sign).astype(np.int8)
        signs = np.full((n, self.width), -1, dtype=np.int8)
        signs[np.arange(n), target] = 1
        flipped = draws.words32(n * self.width).reshape(n, self.width) < flip
        signs[flipped] *= -1
        return rows, np.zeros(n, dtype=np.int64), signs

    # -- server -----------------------------------------------------------------------------

    def check_reports(
        self, rows: npt.ArrayLike, columns: npt.ArrayLike, signs: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int8]]:
        """Validated report arrays (CMS: ``columns`` ignored, ``signs`` is ``n × m``)."""
        r, c, s = np.asarray(rows), np.asarray(columns), np.asarray(signs)
        shape_ok = r.ndim == 1 and (
            (self.hadamard and s.shape == r.shape and c.shape == r.shape)
            or (not self.hadamard and s.shape == (r.size, self.width))
        )
        ok = shape_ok
        if ok and r.size:
            ok = bool(
                np.issubdtype(r.dtype, np.integer)
                and np.issubdtype(s.dtype, np.integer)
                and r.min() >= 0
                and r.max() < self.hashes
                and np.isin(s, (-1, 1)).all()
            )
            if ok and self.hadamard:
                ok = bool(
                    np.issubdtype(c.dtype, np.integer) and c.min() >= 0 and c.max() < self.width
                )
        if not ok:
            shape = (
                f"row in 0..{self.hashes - 1}, column in 0..{self.width - 1} and sign ±1"
                if self.hadamard
                else f"row in 0..{self.hashes - 1} and exactly {self.width} signs ±1"
            )
            raise ConfigurationError(
                f"a {self.name} report is a {shape}.",
                fix="send what the client's encoder produced.",
            )
        cols = c.astype(np.int64) if self.hadamard else np.zeros(r.size, dtype=np.int64)
        return r.astype(np.int64), cols, s.astype(np.int8)

    def sketch(
        self,
        rows: npt.NDArray[np.int64],
        columns: npt.NDArray[np.int64],
        signs: npt.NDArray[np.int8],
    ) -> npt.NDArray[np.float64]:
        """The debiased ``k × m`` sketch ``M`` (HCMS: already transformed back)."""
        k, m, c = self.hashes, self.width, self.c
        if self.hadamard:
            raw = np.zeros((k, m), dtype=np.int64)
            np.add.at(raw, (rows, columns), signs.astype(np.int64))
            transformed = np.stack([fwht(row) for row in raw]).astype(np.float64)
            return k * c * transformed
        sums = np.zeros((k, m), dtype=np.int64)
        np.add.at(sums, rows, signs.astype(np.int64))
        per_row = np.bincount(rows, minlength=k).astype(np.float64)
        return k * (c / 2 * sums + per_row[:, None] / 2)

    def estimate(
        self,
        sketch: npt.NDArray[np.float64],
        reports: int,
        candidates: Sequence[str],
        confidence: float = 0.95,
    ) -> FrequencyEstimate:
        """``f̂(x)`` for each candidate with the variance formula (plug-in) and error bars."""
        k, m = self.hashes, self.width
        buckets = self.hash_rows(list(candidates))
        raw = sketch[np.arange(k)[:, None], buckets].mean(axis=0)
        counts = m / (m - 1) * (raw - reports / m)
        variance = self.variance(np.clip(counts, 0, reports), reports)
        half = z_for(confidence) * np.sqrt(variance)
        return FrequencyEstimate(counts, variance, half, confidence, reports)

    def variance(self, counts: npt.ArrayLike, reports: int) -> npt.NDArray[np.float64]:
        """The exact variance of ``f̂`` over clients' coins and the random hash family.

        ``counts`` are the true counts of the values of interest; values not listed are assumed
        to be held by distinct clients (no collision term from them).
        """
        f = np.asarray(counts, dtype=np.float64)
        n, k, m, c = float(reports), self.hashes, self.width, self.c
        if self.hadamard:
            own, other = c * c - 1, c * c - 1 / m**2
        else:
            own, other = (c * c - 1) / 4, (c * c - 1) / 4 + 1 / m - 1 / m**2
        pairs = float(np.sum(f * (f - 1)))
        collisions = (pairs - f * (f - 1)) * (m - 1) / (k * m * m)
        return (m / (m - 1)) ** 2 * (f * own + (n - f) * other + collisions)
