"""Truncated partition selection: exact privacy checks on small cases, and its calibration.

The exact checks use a rational noise ratio ``a`` (``P(z) ∝ a^|z|``): that is the same mechanism
at a privacy loss ``ε`` with ``e^ε = 1/a``, so every probability is an exact fraction. For each
tiny dataset and each unit, the whole output distribution (released keys and their noisy counts)
is computed under the dataset and under the dataset without the unit, and the hockey-stick
divergence ``Σ max(0, P(o) − e^ε·Q(o))`` is computed exactly, in both directions.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.support.seeded import SeededRandom

from dalenius.core.errors import ConfigurationError
from dalenius.mechanisms.partition_selection import (
    Powers,
    SelectionCalibration,
    calibrate,
    laplace_threshold,
    select_groups,
    shift_delta,
    truncated_selection,
    truncation_delta,
)

Output = tuple[tuple[str, int], ...]


def truncated(a: Fraction, k: int) -> dict[int, Fraction]:
    """The exact pmf of discrete Laplace with ratio ``a`` truncated to ``[−k, k]``."""
    norm = sum(a ** abs(z) for z in range(-k, k + 1))
    return {z: a ** abs(z) / norm for z in range(-k, k + 1)}


def group_output(a: Fraction, cal: SelectionCalibration, n: int) -> dict[int | None, Fraction]:
    """Distribution of one group's release (its noisy count, or None) for an exact count ``n``.

    ``n == 0`` stands for a group absent from the data: nothing is drawn and nothing released.
    """
    out: dict[int | None, Fraction] = Counter()
    if n == 0:
        return {None: Fraction(1)}
    for k, weight in ((cal.truncation, cal.mix), (cal.truncation + 1, 1 - cal.mix)):
        if weight == 0:
            continue
        for z, p in truncated(a, k).items():
            out[n + z if n + z > k else None] += weight * p
    return dict(out)


def release(
    a: Fraction, cal: SelectionCalibration, counts: dict[str, int]
) -> dict[Output, Fraction]:
    """Exact distribution of the whole release: the released (key, noisy count) pairs."""
    dist: dict[Output, Fraction] = {(): Fraction(1)}
    for key in sorted(counts):
        nxt: dict[Output, Fraction] = Counter()
        for value, p in group_output(a, cal, counts[key]).items():
            for out, q in dist.items():
                nxt[out + (((key, value),) if value is not None else ())] += p * q
        dist = dict(nxt)
    return dist


def hockey_stick(
    p: dict[Output, Fraction], q: dict[Output, Fraction], factor: Fraction
) -> Fraction:
    return sum(
        (max(Fraction(0), pr - factor * q.get(o, Fraction(0))) for o, pr in p.items()), Fraction(0)
    )


def counts_of(units: list[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for unit in units:
        total.update(unit)
    return dict(total)


def datasets(per_unit: list[dict[str, int]], size: int) -> Iterator[list[dict[str, int]]]:
    """Every multiset of ``size`` units drawn from the allowed per-unit contributions."""
    yield from (list(c) for c in itertools.combinations_with_replacement(per_unit, size))


def contributions(keys: str, groups: int, max_count: int) -> list[dict[str, int]]:
    """Every way one unit can contribute: at most ``groups`` keys, at most ``max_count`` each."""
    out = []
    for g in range(1, groups + 1):
        for chosen in itertools.combinations(keys, g):
            for amounts in itertools.product(range(1, max_count + 1), repeat=g):
                out.append(dict(zip(chosen, amounts, strict=True)))
    return out


@pytest.mark.parametrize("a", [Fraction(1, 2), Fraction(3, 8), Fraction(2, 3)])
@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_shift_delta_is_the_exact_hockey_stick_of_one_group(a: Fraction, k: int) -> None:
    powers = Powers(base=a)
    for d in range(1, min(k + 1, 3) + 1):
        bound = shift_delta(powers, k, d)
        assert bound == sum(a ** (k - i) for i in range(d)) / sum(
            a ** abs(z) for z in range(-k, k + 1)
        )
        cal = SelectionCalibration(truncation=k, mix=Fraction(1), delta=bound)
        worst = Fraction(0)
        for n in range(4 * k + 4):
            low, high = group_output(a, cal, n), group_output(a, cal, n + d)
            p = {((("g", v),) if v is not None else ()): w for v, w in high.items()}
            q = {((("g", v),) if v is not None else ()): w for v, w in low.items()}
            factor = a**-d
            worst = max(worst, hockey_stick(p, q, factor), hockey_stick(q, p, factor))
        # Tight: some pair of neighbouring counts spends exactly the bound.
        assert worst == bound


@pytest.mark.parametrize(
    ("a", "groups", "max_count", "target"),
    [
        (Fraction(1, 2), 1, 1, Fraction(1, 20)),
        (Fraction(1, 2), 2, 1, Fraction(1, 10)),
        (Fraction(2, 5), 1, 2, Fraction(1, 25)),
        (Fraction(3, 5), 2, 2, Fraction(1, 8)),
    ],
)
def test_whole_release_is_dp_for_every_neighbouring_pair(
    a: Fraction, groups: int, max_count: int, target: Fraction
) -> None:
    sensitivity = groups * max_count
    cal = calibrate(
        Powers(base=a), target, groups=groups, max_count=max_count, sensitivity=sensitivity
    )
    assert cal.delta <= target
    # δ is spent (up to the 2^-32 rounding of the mixing probability toward safety).
    assert target - cal.delta <= Fraction(1, 2**31)
    factor = a**-sensitivity  # e^ε for a count vector of L1 sensitivity Δ at scale t
    worst = Fraction(0)
    per_unit = contributions("xy", groups, max_count)
    for size in (1, 2):
        for data in datasets(per_unit, size):
            full = release(a, cal, counts_of(data))
            for i in range(len(data)):
                rest = data[:i] + data[i + 1 :]
                smaller = release(a, cal, counts_of(rest))
                worst = max(worst, hockey_stick(full, smaller, factor))
                worst = max(worst, hockey_stick(smaller, full, factor))
    assert worst <= cal.delta, (worst, cal)
    if groups == 1 and max_count == 1:
        assert worst == cal.delta  # one key per unit: the bound is attained, nothing is wasted


def test_the_untruncated_threshold_is_kept_as_the_baseline() -> None:
    assert laplace_threshold(Fraction(2), Fraction(1, 10**6), groups=1, max_count=1) == 28
    with pytest.raises(ConfigurationError, match="delta"):
        truncated_selection(Fraction(1), Fraction(0))


def test_production_calibration_at_epsilon_one() -> None:
    cal = truncated_selection(Fraction(1), Fraction(1, 10**6))
    assert (cal.truncation, cal.threshold) == (13, 14)
    assert cal.delta <= Fraction(1, 10**6)
    # The two truncations' δ bracket the target and the mixture spends it.
    lo = truncation_delta(Powers(scale=Fraction(1)), 14, groups=1, max_count=1, sensitivity=1)
    hi = truncation_delta(Powers(scale=Fraction(1)), 13, groups=1, max_count=1, sensitivity=1)
    assert lo < Fraction(1, 10**6) < hi
    assert abs(float(cal.mix) - 0.9325) < 1e-3
    a = math.exp(-1)
    # The certified bound is above the float value of a^k / C_k and within 1e-12 of it.
    exact = a**13 / sum(a ** abs(z) for z in range(-13, 14))
    assert float(hi) >= exact * (1 - 1e-15) and abs(float(hi) - exact) < 1e-12 * exact


def test_more_groups_per_unit_raise_the_truncation() -> None:
    one = truncated_selection(Fraction(1), Fraction(1, 10**6))
    two = truncated_selection(Fraction(2), Fraction(1, 10**6), groups=2)
    rows = truncated_selection(Fraction(3), Fraction(1, 10**6), groups=1, max_count=3)
    assert one.truncation < two.truncation
    assert rows.threshold > two.threshold
    for cal in (two, rows):
        assert cal.delta <= Fraction(1, 10**6)


def test_sampled_noise_follows_the_truncated_mixture() -> None:
    cal = truncated_selection(Fraction(3, 2), Fraction(1, 100))
    rng = SeededRandom(11)
    draws = np.concatenate(
        [
            select_groups(np.zeros(20_000, dtype=np.int64), Fraction(3, 2), cal, rng)[0]
            for _ in range(5)
        ]
    )
    a = math.exp(-2 / 3)
    pmf: Counter[int] = Counter()
    for k, w in ((cal.truncation, float(cal.mix)), (cal.truncation + 1, 1 - float(cal.mix))):
        norm = sum(a ** abs(z) for z in range(-k, k + 1))
        for z in range(-k, k + 1):
            pmf[z] += w * a ** abs(z) / norm
    assert int(np.abs(draws).max()) <= cal.truncation + 1
    support = sorted(pmf)
    observed = np.array([int((draws == z).sum()) for z in support])
    expected = np.array([pmf[z] for z in support]) * draws.size
    thick = expected >= 5
    stat = float(((observed[thick] - expected[thick]) ** 2 / expected[thick]).sum())
    rest_o, rest_e = observed[~thick].sum(), expected[~thick].sum()
    if rest_e > 0:
        stat += (rest_o - rest_e) ** 2 / max(rest_e, 1e-9)
    assert stats.chi2.sf(stat, int(thick.sum())) > 1e-7


def test_released_groups_are_those_above_their_own_truncation() -> None:
    cal = SelectionCalibration(truncation=3, mix=Fraction(1, 2), delta=Fraction(0))
    counts = np.array([0, 1, 2, 4, 8, 50], dtype=np.int64)
    for seed in range(20):
        noisy, keep = select_groups(counts, Fraction(1), cal, SeededRandom(seed))
        assert np.all(np.abs(noisy - counts) <= 4)
        assert not keep[0] and keep[-1]  # 0 + Z <= 4 is never released; 50 always is
        assert np.all(noisy[keep] >= 4)
