"""Privacy models of syntactic anonymity, each a small checker over equivalence-class statistics.

An *equivalence class* is the set of rows sharing the same (generalised) quasi-identifiers. Every
model here reads only per-class statistics that one ``GROUP BY`` over the quasi-identifiers and a
sensitive attribute produces: the class sizes and, for each class, the count of every sensitive
value. :class:`ClassStats` holds those counts (from DuckDB, or from the lattice search's encoded
frequency set) and computes each model's per-class measure with vectorised numpy.

The reference distribution of t-closeness, β-likeness and δ-disclosure is the sensitive
attribute's distribution in the *original* table (all rows, suppressed ones included), as in the
papers — not the released table's.

Measures with logarithms or divisions are computed in double precision; a class passes a
threshold when its measure is within ``TOLERANCE`` of it (a rounding allowance far below any
threshold a custodian would set).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

TOLERANCE = 1e-12
"""Absolute rounding allowance when a floating-point measure is compared with its threshold."""


@dataclass(frozen=True)
class Sensitive:
    """One sensitive attribute, encoded: dense codes ``0..m-1`` and its original distribution.

    Attributes:
        name: the column's name.
        totals: ``totals[s]`` is the number of rows of the *original* table with code ``s``.
        ordered: whether its values are ordered (numeric): t-closeness then uses the
            ordered-distance EMD, else the equal-distance EMD.
    """

    name: str
    totals: IntArray
    ordered: bool

    @property
    def m(self) -> int:
        """The number of distinct values."""
        return len(self.totals)


@dataclass
class PairStats:
    """Per (class, sensitive value) counts for one sensitive attribute, sorted by class."""

    cls: IntArray
    value: IntArray
    count: IntArray
    size: IntArray  # size of each class (indexed by class id)
    sensitive: Sensitive

    @cached_property
    def distinct(self) -> IntArray:
        """Distinct sensitive values per class (distinct ℓ)."""
        return np.bincount(self.cls, minlength=len(self.size)).astype(np.int64)

    @cached_property
    def share(self) -> FloatArray:
        """p(s | class) per pair."""
        return self.count / self.size[self.cls]

    @cached_property
    def entropy_l(self) -> FloatArray:
        """exp(H(S | class)) per class (entropy ℓ: the class is entropy ℓ-diverse iff ≥ ℓ)."""
        p = self.share
        h = np.bincount(self.cls, weights=-p * np.log(p), minlength=len(self.size))
        return np.asarray(np.exp(h), dtype=np.float64)

    @cached_property
    def max_count(self) -> IntArray:
        """The count of the most frequent sensitive value per class (r1)."""
        out = np.zeros(len(self.size), dtype=np.int64)
        np.maximum.at(out, self.cls, self.count)
        return out

    def tail(self, ell: int) -> IntArray:
        """r_ℓ + r_(ℓ+1) + … per class (counts sorted in decreasing order, 1-based)."""
        order = np.lexsort((-self.count, self.cls))
        cls = self.cls[order]
        count = self.count[order]
        starts = np.searchsorted(cls, cls, side="left")
        rank = np.arange(len(cls)) - starts + 1
        keep = rank >= ell
        return np.bincount(cls[keep], weights=count[keep], minlength=len(self.size)).astype(
            np.int64
        )

    @cached_property
    def q(self) -> FloatArray:
        """The original table's distribution of the sensitive attribute."""
        t = self.sensitive.totals
        return np.asarray(t / t.sum(), dtype=np.float64)

    @cached_property
    def emd(self) -> FloatArray:
        """Earth mover's distance between each class's distribution and the original one."""
        if self.sensitive.ordered:
            return _ordered_emd(self)
        q = self.q
        present = np.bincount(
            self.cls, weights=np.abs(self.share - q[self.value]), minlength=len(self.size)
        )
        covered = np.bincount(self.cls, weights=q[self.value], minlength=len(self.size))
        return np.asarray(0.5 * (present + np.clip(1.0 - covered, 0.0, None)), dtype=np.float64)

    @cached_property
    def beta(self) -> FloatArray:
        """Max over values of the relative gain (p − q) / q per class (0 if none gains)."""
        q = self.q[self.value]
        gain = np.clip((self.share - q) / q, 0.0, None)
        out = np.zeros(len(self.size))
        np.maximum.at(out, self.cls, gain)
        return out

    @cached_property
    def delta(self) -> FloatArray:
        """Max over all values of |ln(p / q)| per class; infinite if a class lacks a value."""
        ratio = np.abs(np.log(self.share / self.q[self.value]))
        out = np.zeros(len(self.size))
        np.maximum.at(out, self.cls, ratio)
        present = np.count_nonzero(self.sensitive.totals)
        out[self.distinct < present] = math.inf
        return out


def _ordered_emd(stats: PairStats) -> FloatArray:
    """Ordered-distance EMD (Li et al. 2007): Σ_i |P_i − Q_i| / (m − 1), with cumulative P, Q.

    Runs in O(pairs · log m): between two values present in a class the class's cumulative
    distribution is a constant c, and since the original cumulative Q is non-decreasing the sum of
    |c − Q_i| over that stretch splits where Q crosses c, read from prefix sums.
    """
    m = stats.sensitive.m
    n_classes = len(stats.size)
    if m <= 1:
        return np.zeros(n_classes)
    big_q = np.cumsum(stats.q)[: m - 1]  # Q_0..Q_{m-2}; the last term is always 0
    prefix = np.concatenate(([0.0], np.cumsum(big_q)))  # prefix[x] = Σ_{i<x} Q_i
    order = np.lexsort((stats.value, stats.cls))
    cls = stats.cls[order]
    val = stats.value[order]
    cum = np.cumsum(stats.count[order])
    first = np.searchsorted(cls, cls, side="left")
    before = np.where(first > 0, cum[first - 1], 0)
    c = (cum - before) / stats.size[cls]  # class cumulative from this value on
    nxt = np.append(val[1:], m - 1)
    last = np.append(cls[1:] != cls[:-1], True)
    end = np.where(last, m - 1, nxt)
    total = _segment_sum(np.zeros(len(val)), np.zeros(len(val), dtype=np.int64), val, big_q, prefix)
    # the stretch [0, first value) has c = 0 — only once per class
    lead = np.where(first == np.arange(len(cls)), total, 0.0)
    body = _segment_sum(c, val, end, big_q, prefix)
    out = np.bincount(cls, weights=lead + body, minlength=n_classes)
    return np.asarray(out / (m - 1), dtype=np.float64)


def _segment_sum(
    c: FloatArray, start: IntArray, stop: IntArray, big_q: FloatArray, prefix: FloatArray
) -> FloatArray:
    """Σ_{i in [start, stop)} |c − Q_i| for each segment, with Q non-decreasing."""
    cross = np.clip(np.searchsorted(big_q, c, side="right"), start, stop)
    below = c * (cross - start) - (prefix[cross] - prefix[start])
    above = (prefix[stop] - prefix[cross]) - c * (stop - cross)
    return np.asarray(below + above, dtype=np.float64)


@dataclass
class ClassStats:
    """Statistics of the equivalence classes of one table (or one lattice node).

    Args:
        cls: class id of each input row (rows may be pre-aggregated; see ``count``).
        count: how many records each input row stands for.
        sensitive_codes: per sensitive attribute, the code of each input row.
        sensitive: the encoded sensitive attributes, in the same order.
    """

    cls: IntArray
    count: IntArray
    sensitive_codes: Sequence[IntArray]
    sensitive: Sequence[Sensitive]
    n_classes: int = field(default=-1)

    def __post_init__(self) -> None:
        if self.n_classes < 0:
            self.n_classes = int(self.cls.max()) + 1 if len(self.cls) else 0

    @cached_property
    def size(self) -> IntArray:
        """Records per class."""
        return np.bincount(self.cls, weights=self.count, minlength=self.n_classes).astype(np.int64)

    @cached_property
    def distinct(self) -> list[IntArray]:
        """Per sensitive attribute, the distinct values in each class (distinct ℓ).

        Read from the (class, value) pairs when they are counted already; otherwise marked in a
        presence table over the (class, value) key space, which is all distinct ℓ needs.
        """
        out = []
        for j, (codes, sens) in enumerate(zip(self.sensitive_codes, self.sensitive, strict=True)):
            bound = self.n_classes * sens.m
            if "pairs" in self.__dict__ or bound > 4 * len(codes) + 65_536:
                out.append(self.pairs[j].distinct)
                continue
            seen = np.zeros(bound, dtype=bool)
            seen[(self.cls * sens.m + codes)[self.count > 0]] = True
            out.append(
                np.count_nonzero(seen.reshape(self.n_classes, sens.m), axis=1).astype(np.int64)
            )
        return out

    @cached_property
    def pairs(self) -> list[PairStats]:
        """Per sensitive attribute, the (class, value) counts."""
        out = []
        for codes, sens in zip(self.sensitive_codes, self.sensitive, strict=True):
            key = self.cls * sens.m + codes
            bound = self.n_classes * sens.m
            if bound <= 4 * len(key) + 65_536:
                # small key space: count straight into it (sorted, no hashing or sorting)
                dense = np.bincount(key, weights=self.count, minlength=bound)
                uniq = np.flatnonzero(dense)
                counts = dense[uniq].astype(np.int64)
            else:
                uniq, inverse = np.unique(key, return_inverse=True)
                counts = np.bincount(inverse, weights=self.count).astype(np.int64)
            out.append(
                PairStats(
                    cls=(uniq // sens.m).astype(np.int64),
                    value=(uniq % sens.m).astype(np.int64),
                    count=counts,
                    size=self.size,
                    sensitive=sens,
                )
            )
        return out


class Model:
    """A privacy model: which classes satisfy it, and what it needs."""

    needs_sensitive = False
    monotone_with_suppression = False
    """True when suppressing the classes that fail keeps the model monotone over the lattice:
    if a node satisfies it within a suppression limit, so does every generalisation (k-anonymity
    and distinct ℓ-diversity). Other models are searched without that pruning, which stays exact."""

    def passes(self, stats: ClassStats) -> BoolArray:  # pragma: no cover - abstract
        """Per class: whether the class satisfies the model."""
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        """The model with its parameters, for reports."""
        raise NotImplementedError

    def min_class_size(self) -> int:
        """The smallest class size the model allows (for an early check against the table)."""
        return 1

    def implied(self, sensitive: Sequence[Sensitive]) -> list[Model]:
        """Monotone models every class that satisfies this one also satisfies.

        The lattice search prunes with them (a node they make infeasible is infeasible for this
        model too), which lets models that are not monotone under suppression still prune. A
        bound derived in floating point is loosened by ``SLACK`` so it never over-claims.
        """
        return []

    def to_dict(self) -> dict[str, Any]:
        """The model as a JSON-ready object."""
        return {"model": self.describe()}


SLACK = 1e-9
"""How much an implied bound is loosened against rounding (far above the model's TOLERANCE)."""


def _implied_distinct(sensitive: Sequence[Sensitive], top_share: float) -> list[Model]:
    """Distinct ℓ-diversity implied when the values a class holds must cover ``top_share`` of q.

    A class holding d distinct values covers at most the d largest shares of the original
    distribution; the model needs ``top_share``, so every class holds at least the smallest such
    d values, for every sensitive attribute (the least over attributes is implied).
    """
    ells = []
    for sens in sensitive:
        q = np.sort(sens.totals / max(int(sens.totals.sum()), 1))[::-1]
        reach = np.cumsum(q)
        ells.append(int(np.searchsorted(reach, top_share - SLACK, side="left")) + 1)
    ell = min(ells, default=1)
    return [DistinctLDiversity(ell)] if ell >= 2 else []


def _all_sensitive(stats: ClassStats, test: Any) -> BoolArray:
    ok = np.ones(stats.n_classes, dtype=bool)
    for pair in stats.pairs:
        ok &= test(pair)
    return ok


@dataclass(frozen=True)
class KAnonymity(Model):
    """k-anonymity (Samarati & Sweeney 1998): every class has at least k records."""

    k: int
    monotone_with_suppression = True

    def __post_init__(self) -> None:
        _check_int("k", self.k, 1)

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: size ≥ k."""
        return np.asarray(stats.size >= self.k)

    def min_class_size(self) -> int:
        """K."""
        return self.k

    def describe(self) -> str:
        """``k-anonymity (k=5)``."""
        return f"k-anonymity (k={self.k})"


@dataclass(frozen=True)
class AlphaKAnonymity(Model):
    """(α,k)-anonymity (Wong et al. 2006): k-anonymous, and no sensitive value above share α."""

    alpha: float
    k: int
    needs_sensitive = True

    def __post_init__(self) -> None:
        _check_int("k", self.k, 1)
        _check_unit("alpha", self.alpha, open_low=True)

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: size ≥ k and every share ≤ α."""
        ok = stats.size >= self.k
        return ok & _all_sensitive(
            stats, lambda p: p.max_count <= self.alpha * p.size + TOLERANCE * p.size
        )

    def min_class_size(self) -> int:
        """K."""
        return self.k

    def implied(self, sensitive: Sequence[Sensitive]) -> list[Model]:
        """K-anonymity, and ⌈1/α⌉ distinct values (no share above α)."""
        ell = math.ceil(1 / self.alpha - 1e-6)
        return [KAnonymity(self.k)] + ([DistinctLDiversity(ell)] if ell >= 2 else [])

    def describe(self) -> str:
        """``(α,k)-anonymity (α=0.5, k=5)``."""
        return f"(α,k)-anonymity (α={self.alpha:g}, k={self.k})"


@dataclass(frozen=True)
class DistinctLDiversity(Model):
    """Distinct ℓ-diversity: every class holds at least ℓ distinct sensitive values."""

    l: int  # noqa: E741 - the literature's name
    needs_sensitive = True
    monotone_with_suppression = True

    def __post_init__(self) -> None:
        _check_int("l", self.l, 1)

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: distinct values ≥ ℓ."""
        ok = np.ones(stats.n_classes, dtype=bool)
        for distinct in stats.distinct:
            ok &= distinct >= self.l
        return ok

    def min_class_size(self) -> int:
        """ℓ."""
        return self.l

    def describe(self) -> str:
        """``distinct ℓ-diversity (ℓ=2)``."""
        return f"distinct ℓ-diversity (ℓ={self.l})"


@dataclass(frozen=True)
class EntropyLDiversity(Model):
    """Entropy ℓ-diversity (Machanavajjhala et al. 2007): H(S | class) ≥ ln ℓ in every class."""

    l: float  # noqa: E741
    needs_sensitive = True

    def __post_init__(self) -> None:
        if isinstance(self.l, bool) or not isinstance(self.l, int | float) or not self.l >= 1:
            raise ConfigurationError(
                f"entropy ℓ must be a number ≥ 1; got {self.l!r}.", fix="write l = 2."
            )

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: exp(H) ≥ ℓ."""
        return _all_sensitive(stats, lambda p: p.entropy_l >= self.l * (1 - TOLERANCE))

    def implied(self, sensitive: Sequence[Sensitive]) -> list[Model]:
        """Distinct ⌈ℓ⌉-diversity: exp(H) never exceeds the number of distinct values."""
        ell = math.ceil(self.l - 1e-6)
        return [DistinctLDiversity(ell)] if ell >= 2 else []

    def describe(self) -> str:
        """``entropy ℓ-diversity (ℓ=2)``."""
        return f"entropy ℓ-diversity (ℓ={self.l:g})"


@dataclass(frozen=True)
class RecursiveCLDiversity(Model):
    """Recursive (c,ℓ)-diversity: r1 < c · (r_ℓ + … + r_m) in every class.

    r1 ≥ r2 ≥ … are the class's sensitive-value counts in decreasing order.
    """

    c: float
    l: int  # noqa: E741
    needs_sensitive = True

    def __post_init__(self) -> None:
        _check_int("l", self.l, 2)
        if isinstance(self.c, bool) or not isinstance(self.c, int | float) or not self.c > 0:
            raise ConfigurationError(
                f"recursive (c,ℓ)-diversity needs c > 0; got {self.c!r}.", fix="write c = 3."
            )

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: r1 < c · tail."""
        return _all_sensitive(stats, lambda p: p.max_count < self.c * p.tail(self.l))

    def implied(self, sensitive: Sequence[Sensitive]) -> list[Model]:
        """Distinct ℓ-diversity: r1 < c · (r_ℓ + …) needs an ℓ-th value."""
        return [DistinctLDiversity(self.l)]

    def min_class_size(self) -> int:
        """ℓ."""
        return self.l

    def describe(self) -> str:
        """``recursive (c,ℓ)-diversity (c=3, ℓ=2)``."""
        return f"recursive (c,ℓ)-diversity (c={self.c:g}, ℓ={self.l})"


@dataclass(frozen=True)
class TCloseness(Model):
    """t-closeness (Li, Li & Venkatasubramanian 2007): EMD(class, original table) ≤ t.

    Equal-distance EMD for unordered values; ordered-distance EMD for ordered (numeric) ones.
    """

    t: float
    needs_sensitive = True

    def __post_init__(self) -> None:
        _check_unit("t", self.t, open_low=False)

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: EMD ≤ t."""
        return _all_sensitive(stats, lambda p: p.emd <= self.t + TOLERANCE)

    def implied(self, sensitive: Sequence[Sensitive]) -> list[Model]:
        """Distinct ℓ-diversity, for unordered values.

        The equal-distance EMD is at least the share of q on the values a class lacks, so a class
        must hold values covering 1 − t of q.
        """
        if any(s.ordered for s in sensitive):
            return []
        return _implied_distinct(sensitive, 1 - self.t)

    def describe(self) -> str:
        """``t-closeness (t=0.2)``."""
        return f"t-closeness (t={self.t:g})"


@dataclass(frozen=True)
class BetaLikeness(Model):
    """Basic β-likeness (Cao & Karras 2012): (p − q) / q ≤ β for every value and class."""

    beta: float
    needs_sensitive = True

    def __post_init__(self) -> None:
        if isinstance(self.beta, bool) or not isinstance(self.beta, int | float) or self.beta < 0:
            raise ConfigurationError(f"β must be a number ≥ 0; got {self.beta!r}.")

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: the largest relative gain ≤ β."""
        return _all_sensitive(stats, lambda p: p.beta <= self.beta + TOLERANCE)

    def implied(self, sensitive: Sequence[Sensitive]) -> list[Model]:
        """Distinct ℓ-diversity: p ≤ (1 + β) q, so a class's values cover 1/(1 + β) of q."""
        return _implied_distinct(sensitive, 1 / (1 + self.beta))

    def describe(self) -> str:
        """``β-likeness (β=1)``."""
        return f"β-likeness (β={self.beta:g})"


@dataclass(frozen=True)
class DeltaDisclosure(Model):
    """δ-disclosure privacy (Brickell & Shmatikov 2008): |ln(p / q)| < δ for every value and class.

    A class that lacks a value of the table has ln 0 = −∞ and never satisfies it.
    """

    delta: float
    needs_sensitive = True

    def __post_init__(self) -> None:
        if (
            isinstance(self.delta, bool)
            or not isinstance(self.delta, int | float)
            or not self.delta > 0
        ):
            raise ConfigurationError(f"δ must be a number > 0; got {self.delta!r}.")

    def passes(self, stats: ClassStats) -> BoolArray:
        """Per class: the largest |ln(p/q)| < δ."""
        return _all_sensitive(stats, lambda p: p.delta < self.delta)

    def implied(self, sensitive: Sequence[Sensitive]) -> list[Model]:
        """Distinct ℓ-diversity with ℓ the number of values: a class lacking one fails."""
        ell = min((int(np.count_nonzero(s.totals)) for s in sensitive), default=1)
        return [DistinctLDiversity(ell)] if ell >= 2 else []

    def describe(self) -> str:
        """``δ-disclosure (δ=1)``."""
        return f"δ-disclosure (δ={self.delta:g})"


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigurationError(
            f"{name} must be an integer ≥ {low}; got {value!r}.",
            fix=f"write {name} = {max(low, 2)}.",
        )


def _check_unit(name: str, value: object, *, open_low: bool) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (0 < v <= 1) if open_low else (0 <= v <= 1)
    if not ok:
        rng = "(0, 1]" if open_low else "[0, 1]"
        raise ConfigurationError(
            f"{name} must be a number in {rng}; got {value!r}.", fix=f"write {name} = 0.2."
        )
