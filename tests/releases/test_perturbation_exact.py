"""Record perturbation's privacy computed exactly on tiny tables, and its sampler against that law.

The release (``docs/releases/perturbation.md``) is a noisy number of rows ``k = max(0, n + Z)``,
the table's rows padded with midpoint dummies (``k > n``) or a uniform ``k``-subset of them
(``k <= n``), every value perturbed, the rows shuffled. Here its exact probability law is written
out independently of the sampler — the count's discrete Laplace, the subsets, the padding, each
value's discrete Laplace or discrete-mechanism pmf and the shuffle (a permanent) — for a table of
at most three rows with a numeric column ``x`` on the grid {0, 1, 2} (bounds [0, 2], grid step 1)
and a categorical column ``g`` with keys a, b; its neighbour has one row fewer.

**What is enumerated.** Every released value of ``x`` is an integer ``z``. All inputs lie in
[0, 2], so for ``z <= 0`` the value's pmf is ``q^(−z)`` times its pmf at 0 for *every* input:
the whole output's probability under either table scales by that same factor, and every output
with a value ``<= 0`` in that row has the ratio between the tables of the one at 0. Likewise
for ``z >= 2``. So the row classes {z <= 0, z = 1, z >= 2} × {a, b} are classes of constant
ratio: a class's hockey-stick terms add up to its own (exact) masses' term, and its largest
ratio is its ratio. As the rows are shuffled uniformly, an output's probability depends only on
its multiset of row classes. Every multiset of every length ``k <= K = (larger table's rows)
+ 2`` is enumerated (every subsample size, the boundary and two padding sizes). Beyond ``K``
both tables pad, their outputs are one row's mechanism applied to the added row against a
dummy, post-processed (the other rows' noise is independent, the shuffle fixed), and the
count's ratio ``P(k | D)/P(k | D')`` is one constant: each output's ratio is at most that
constant times the row's largest class ratio, and the hockey-stick sum at most ``P(n̂ > K)``
times the row's divergence, both computed exactly too.

Arithmetic: the noise's ``q = e^(−1/t)`` is not rational, so every probability is carried as a
certified interval of dyadic rationals (bounds on ``e^x`` from :mod:`dalenius.core.exact`,
products rounded outward); a check passes only if it holds at the interval's unsafe end.
The production grid has at least 1024 steps across a domain, too many to enumerate: the only
change from ``plan_perturbation``'s plan is the numeric column rebuilt with grid step 1 by the
same class, whose privacy map the session's audit still accepts.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA
from tests.support.seeded import SeededRandom

from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.core.exact import exp_bounds
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.protocol import within
from dalenius.releases.perturbation import (
    CategoryPerturbation,
    NumberPerturbation,
    PerturbationPlan,
    PerturbationRequest,
    plan_perturbation,
)

CATALOG = """
[dataset]
name = "tiny"

[tables.t]
source = { csv = "t.csv" }
privacy_unit = "row"

[tables.t.columns]
x = { type = "int", bounds = [0, 2] }
g = { type = "str", keys = ["a", "b"] }
"""

BITS = 192
ONE = 1 << BITS


@dataclass(frozen=True)
class Certified:
    """A non-negative real known to lie in ``[lo, hi] · 2^−192`` (outward-rounded arithmetic)."""

    lo: int
    hi: int

    @staticmethod
    def between(lo: Fraction, hi: Fraction) -> Certified:
        return Certified(math.floor(lo * ONE), math.ceil(hi * ONE))

    @staticmethod
    def exactly(x: Fraction | int) -> Certified:
        return Certified.between(Fraction(x), Fraction(x))

    def __add__(self, other: Certified) -> Certified:
        return Certified(self.lo + other.lo, self.hi + other.hi)

    def __mul__(self, other: Certified) -> Certified:
        return Certified((self.lo * other.lo) >> BITS, -((-self.hi * other.hi) >> BITS))

    def __pow__(self, k: int) -> Certified:
        out = Certified.exactly(1)
        for _ in range(k):
            out = out * self
        return out

    @property
    def low(self) -> Fraction:
        return Fraction(self.lo, ONE)

    @property
    def high(self) -> Fraction:
        return Fraction(self.hi, ONE)

    @property
    def mid(self) -> float:
        return float(self.lo + self.hi) / 2 / ONE


ZERO = Certified.exactly(0)


class DiscreteLaplace:
    """Exact pmf, tails and the constants of discrete Laplace noise ``P(z) ∝ q^|z|``."""

    def __init__(self, q_lo: Fraction, q_hi: Fraction) -> None:
        self.q = Certified.between(q_lo, q_hi)
        # (1 − q)/(1 + q) and 1/(1 + q) decrease in q.
        self.c = Certified.between((1 - q_hi) / (1 + q_hi), (1 - q_lo) / (1 + q_lo))
        self.tail = Certified.between(1 / (1 + q_hi), 1 / (1 + q_lo))

    @staticmethod
    def of_scale(scale: Fraction) -> DiscreteLaplace:
        return DiscreteLaplace(*exp_bounds(-1 / scale))

    def point(self, z: int) -> Certified:
        return self.c * self.q ** abs(z)

    def at_most(self, z: int) -> Certified:
        """``P(Z <= z)`` for ``z <= 0``."""
        assert z <= 0
        return self.tail * self.q ** (-z)

    def at_least(self, z: int) -> Certified:
        """``P(Z >= z)`` for ``z >= 0``."""
        assert z >= 0
        return self.tail * self.q**z


NO_NOISE = DiscreteLaplace(Fraction(0), Fraction(0))
"""A count released exactly (the negative control's defect)."""

Outcome = tuple[tuple[str, int], int]
"""One released row's class: (("le" | "eq" | "ge", z), key code)."""


@dataclass(frozen=True)
class Law:
    """The release's law, with the parameters of the mechanisms the plan draws with."""

    count: DiscreteLaplace
    value: DiscreteLaplace
    keep: Fraction
    move: Fraction
    dummy: tuple[int, int]

    @staticmethod
    def of(plan: PerturbationPlan) -> Law:
        number, category = plan.records
        assert isinstance(number, NumberPerturbation)
        assert isinstance(category, CategoryPerturbation)
        return Law(
            count=DiscreteLaplace.of_scale(plan.count.scale),
            value=DiscreteLaplace.of_scale(number.unit_scale),
            keep=category.rr.keep,
            move=category.rr.p,
            dummy=(int(number.dummy), 0),
        )

    def likelihood(self, outcome: Outcome, row: tuple[int, int]) -> Certified:
        """P(one input row is released in this class)."""
        (kind, z), key = outcome
        a, code = row
        if kind == "le":
            number = self.value.at_most(z - a)
        elif kind == "ge":
            number = self.value.at_least(z - a)
        else:
            number = self.value.point(z - a)
        return number * Certified.exactly(self.keep if key == code else self.move)

    def size(self, k: int, n: int) -> Certified:
        """P(n̂ = k) for a table of n rows."""
        if k == 0:
            return self.count.at_most(-n)
        return self.count.point(k - n)

    def probability(
        self, outcomes: Sequence[Outcome], table: Sequence[tuple[int, int]]
    ) -> Certified:
        """P(the release's rows, shuffled, are exactly this multiset of classes)."""
        k, n = len(outcomes), len(table)
        if k > n:
            inputs = [[*table, *[self.dummy] * (k - n)]]
        else:
            inputs = [list(s) for s in itertools.combinations(table, k)]
        weight = Fraction(
            1, len(inputs) * math.prod(math.factorial(c) for c in Counter(outcomes).values())
        )
        total = ZERO
        for rows in inputs:
            total = total + permanent([[self.likelihood(o, r) for r in rows] for o in outcomes])
        return self.size(k, n) * total * Certified.exactly(weight)


def permanent(matrix: list[list[Certified]]) -> Certified:
    """The permanent, by dynamic programming over subsets (no subtraction: stays certified)."""
    k = len(matrix)
    best = {0: Certified.exactly(1)}
    for mask in range(1, 1 << k):
        row = matrix[bin(mask).count("1") - 1]
        total = ZERO
        for j in range(k):
            if mask >> j & 1:
                total = total + best[mask ^ (1 << j)] * row[j]
        best[mask] = total
    return best[(1 << k) - 1]


PRIVACY_CLASSES: tuple[tuple[str, int], ...] = (("le", 0), ("eq", 1), ("ge", 2))
"""The numeric classes that represent every released value exactly (see the module)."""


def outcomes(classes: Sequence[tuple[str, int]]) -> list[Outcome]:
    return [(c, key) for c in classes for key in (0, 1)]


@dataclass
class Divergence:
    """One direction's certified findings: whether any output's ratio may exceed e^ε, an upper
    bound on the hockey-stick sum at e^ε, and the largest log-ratio seen (diagnostic, float)."""

    exceeded: bool = False
    hockey: Fraction = Fraction(0)
    worst: float = -math.inf

    def add(self, p: Certified, q: Certified, scale: Fraction = Fraction(1)) -> None:
        """One class of outputs (one ratio): its mass ``p`` against ``q``, already times e^ε."""
        if q.hi > 0 and p.hi > 0:
            self.worst = max(self.worst, math.log(p.mid / q.mid))
        if p.hi > q.lo:
            self.exceeded = True
            self.hockey += scale * Fraction(p.hi - q.lo, ONE)


def compare(
    law: Law,
    first: Sequence[tuple[int, int]],
    second: Sequence[tuple[int, int]],
    epsilon: Fraction,
) -> Divergence:
    """P(out | first) against e^ε·P(out | second), over every output (see the module)."""
    e_lo, _ = exp_bounds(epsilon)
    factor = Certified.between(e_lo, e_lo)
    top = max(len(first), len(second)) + 2
    found = Divergence()
    classes = outcomes(PRIVACY_CLASSES)
    for k in range(top + 1):
        for multiset in itertools.combinations_with_replacement(classes, k):
            p = law.probability(multiset, first)
            found.add(p, factor * law.probability(multiset, second))
    # Beyond ``top`` both tables pad: their outputs are the added row's mechanism against a
    # dummy's, post-processed, and the count's ratio P1(k)/P2(k) is one constant.
    beyond = top + 1
    p1, p2 = law.size(beyond, len(first)), law.size(beyond, len(second))
    if p1.hi == 0:
        return found
    added = (Counter(first) - Counter(second)) or (Counter(second) - Counter(first))
    row = next(iter(added))
    pair = (row, law.dummy) if len(first) > len(second) else (law.dummy, row)
    tail = law.count.tail * law.count.q ** (beyond - len(first))  # P(n̂ > top) under first
    if p2.lo == 0:
        found.exceeded, found.hockey = True, found.hockey + tail.high
        return found
    shrunk = e_lo * p2.low / p1.high  # e^ε·P2(k)/P1(k), rounded down
    for o in classes:
        p = law.likelihood(o, pair[0])
        q = Certified.between(shrunk, shrunk) * law.likelihood(o, pair[1])
        found.add(p, q, scale=tail.high)
    return found


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The tiny table's catalog (the rows themselves are passed to the release directly)."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "t.csv").write_text("x,g\n0,b\n")
    return parse_catalog(CATALOG, base_dir=folder)


def tiny_plan(
    catalog: Catalog, epsilon: Fraction, delta: Fraction | None = None
) -> PerturbationPlan:
    """The production plan for x and g of the tiny table, x rebuilt on grid step 1."""
    request = PerturbationRequest("t", ("x", "g"))
    plan = plan_perturbation(catalog, request, epsilon=epsilon, delta=delta)
    number = plan.records[0]
    assert isinstance(number, NumberPerturbation)
    coarse = NumberPerturbation(
        number.low, number.high, number.epsilon, number.delta, granularity=Fraction(1)
    )
    plan = replace(plan, records=(coarse, plan.records[1]))
    assert within(plan.privacy_map(), plan.loss)
    return plan


Row = tuple[int, int]
PAIRS: list[tuple[list[Row], list[Row]]] = [
    ([(0, 1)], []),
    ([(0, 1), (2, 0)], [(2, 0)]),
    ([(2, 0), (2, 0), (0, 1)], [(2, 0), (2, 0)]),
    ([(1, 0), (0, 1), (2, 1)], [(1, 0), (2, 1)]),
]
"""Tables and their neighbour without one row (x, g's key code): the removed row at one end of
the domain, the others at the other end or mixed; the empty table included."""


@pytest.mark.parametrize("epsilon", [Fraction(1), Fraction(3)])
@pytest.mark.parametrize(("table", "neighbour"), PAIRS)
def test_no_output_is_more_than_e_to_the_epsilon_likelier_under_either_table(
    catalog: Catalog, epsilon: Fraction, table: list[Row], neighbour: list[Row]
) -> None:
    law = Law.of(tiny_plan(catalog, epsilon))
    for first, second in ((table, neighbour), (neighbour, table)):
        found = compare(law, first, second, epsilon)
        assert not found.exceeded, (first, second, found)
        assert found.hockey == 0


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(Fraction(1), Fraction(3, 10)), (Fraction(1, 2), Fraction(3, 5))]
)
@pytest.mark.parametrize(("table", "neighbour"), PAIRS)
def test_the_hockey_stick_divergence_is_at_most_delta(
    catalog: Catalog,
    epsilon: Fraction,
    delta: Fraction,
    table: list[Row],
    neighbour: list[Row],
) -> None:
    law = Law.of(tiny_plan(catalog, epsilon, delta))
    forward = compare(law, table, neighbour, epsilon)
    backward = compare(law, neighbour, table, epsilon)
    assert forward.hockey <= delta and backward.hockey <= delta
    # At these δ the values' noise is narrower than pure ε would need: some outputs exceed
    # e^ε, and it is their exact mass that stays below δ.
    assert forward.exceeded or backward.exceeded


WORST = PAIRS[2]
"""The pair where the removed row differs from every other row in both columns."""


def test_the_check_finds_a_count_published_exactly(catalog: Catalog) -> None:
    """Negative control: without the count's noise the number of rows tells the tables apart."""
    epsilon, delta = Fraction(1), Fraction(1, 10)
    law = replace(Law.of(tiny_plan(catalog, epsilon, delta)), count=NO_NOISE)
    table, neighbour = WORST
    assert compare(law, table, neighbour, epsilon).hockey > delta
    assert compare(law, neighbour, table, epsilon).hockey > delta


def test_the_check_finds_values_noised_too_little(catalog: Catalog) -> None:
    """Negative control: each value's noise at a quarter of its scale breaks pure ε."""
    epsilon = Fraction(1)
    plan = tiny_plan(catalog, epsilon)
    number = plan.records[0]
    assert isinstance(number, NumberPerturbation)
    law = replace(Law.of(plan), value=DiscreteLaplace.of_scale(number.unit_scale / 4))
    table, neighbour = WORST
    assert compare(law, table, neighbour, epsilon).exceeded


DRAWS = 20_000


def classify(out: np.ndarray) -> tuple[Outcome, ...] | str:
    """A released table's cell: its ordered row classes, or "4+" for four rows or more."""
    if out.shape[0] >= 4:
        return "4+"
    cells = []
    for value, code in out.tolist():
        kind = ("le", 0) if value <= 0 else ("ge", 2) if value >= 2 else ("eq", 1)
        assert value == round(value) and code in (0, 1)
        cells.append((kind, int(code)))
    return tuple(cells)


@pytest.mark.statistical
def test_the_sampler_draws_the_exact_law(catalog: Catalog) -> None:
    """Pearson's chi-square of 20,000 seeded releases of a two-row table against the law above.

    Cells: the number of rows (0–3, or 4 and more) and each row's class *in the order released*
    (so the final shuffle is tested: without it the dummy would always come last). The count
    is drawn at ε = 1 instead of its 5% share so that most releases have 1–3 rows; the law reads
    every parameter from the plan, so it is the law of this plan.
    """
    plan = replace(tiny_plan(catalog, Fraction(2)), count=IntegerLaplace(1, Fraction(1)))
    law = Law.of(plan)
    table: list[Row] = [(0, 1), (2, 0)]
    rows = [(x, "ab"[code]) for x, code in table]
    expected: dict[Any, float] = {}
    for k in range(4):
        for ordered in itertools.product(outcomes(PRIVACY_CLASSES), repeat=k):
            multiset = tuple(sorted(ordered))
            repeats = math.prod(math.factorial(c) for c in Counter(multiset).values())
            share = Fraction(repeats, math.factorial(k))
            expected[ordered] = (law.probability(multiset, table) * Certified.exactly(share)).mid
    expected["4+"] = 1 - sum(expected.values())
    source = SeededRandom(34)
    seen = Counter(classify(plan.noise(rows, source)) for _ in range(DRAWS))
    assert set(seen) <= set(expected)
    thick = [cell for cell, p in expected.items() if p * DRAWS >= 5]
    observed = [seen[cell] for cell in thick]
    means = [expected[cell] * DRAWS for cell in thick]
    observed.append(DRAWS - sum(observed))
    means.append(DRAWS - sum(means))
    assert len(thick) > 100 and means[-1] >= 5
    statistic = sum((o - m) ** 2 / m for o, m in zip(observed, means, strict=True))
    assert stats.chi2.sf(statistic, len(means) - 1) > ALPHA
