"""The floating-point attack (Mironov 2012) fails against grid mechanisms and works on naive noise.

The attack: given a released value ``y`` and two candidate exact answers ``a`` and ``b``, decide
whether ``y`` could have been produced from each. With naive float noise ``fl(a + L)``, many
outputs from ``a`` are impossible from ``b`` (their low-order bits give the input away). With a
grid mechanism every output is a multiple of the public granularity ``g``, and every multiple of
``g`` is reachable from every input, so the reachable sets coincide and the test below can never
single one input out.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from tests.support.seeded import SeededRandom

from dalenius.mechanisms import GridLaplace

DRAWS = 100_000


def reachable_on_grid(outputs: np.ndarray, granularity: Fraction) -> np.ndarray:
    """Which outputs a grid mechanism with step ``g`` can produce from *any* input."""
    units = outputs / float(granularity)
    return (units == np.floor(units)) & (np.abs(units) <= 2**53)


def naive_reachable_from_one(outputs: np.ndarray) -> np.ndarray:
    """Whether ``y == fl(1 + l)`` is possible for some float ``l`` (checked for ``|y| < 1/2``).

    Floats ``fl(1 + l)`` below 1/2 in magnitude are multiples of 2**-53: the sum is rounded to the
    precision of its operands, whose exponent is at least that of 1 minus one.
    """
    scaled = outputs * 2.0**53
    return scaled == np.floor(scaled)


def test_naive_float_laplace_is_distinguishable() -> None:
    """Sanity check of the attack itself: it singles out most small naive outputs."""
    generator = np.random.Generator(np.random.PCG64(5))
    outputs = 0.0 + generator.laplace(scale=1.0, size=DRAWS)
    small = outputs[np.abs(outputs) < 0.5]
    impossible = ~naive_reachable_from_one(small)
    assert impossible.mean() > 0.5


def test_zero_versus_one_outputs_coincide_on_the_grid() -> None:
    m = GridLaplace(Fraction(1), Fraction(1))
    from_zero = m.release_each(np.zeros(DRAWS), rng=SeededRandom(1))
    from_one = m.release_each(np.ones(DRAWS), rng=SeededRandom(2))
    for outputs in (from_zero, from_one):
        assert reachable_on_grid(outputs, m.granularity).all()
    small = from_zero[np.abs(from_zero) < 0.5]
    assert small.size > 1000
    # The naive attack's evidence ("not a multiple of 2**-53") never appears either.
    assert naive_reachable_from_one(small).all()
    # Outputs from both inputs share the grid's low-order structure: same set of residues.
    residues_zero = set(np.mod(from_zero / float(m.granularity), 64).astype(int).tolist())
    residues_one = set(np.mod(from_one / float(m.granularity), 64).astype(int).tolist())
    assert residues_zero == residues_one == set(range(64))


@pytest.mark.parametrize("k", [-30, -12, -1, 0, 3, 17, 40])
def test_zero_versus_power_of_two(k: int) -> None:
    shift = Fraction(2) ** k
    m = GridLaplace(shift, Fraction(1, 2))
    a = m.release_each(np.zeros(20_000), rng=SeededRandom(10 + k + 100))
    b = m.release_each(np.full(20_000, float(shift)), rng=SeededRandom(20 + k + 100))
    for outputs in (a, b):
        assert reachable_on_grid(outputs, m.granularity).all()
        units = outputs / float(m.granularity)
        assert np.all(np.abs(units) < 2**53)
    # Each output set lies inside the other's reachable set, so neither input can be excluded.
    assert reachable_on_grid(a, m.granularity).all() and reachable_on_grid(b, m.granularity).all()
    assert float(m.granularity) <= float(shift)


@pytest.mark.parametrize("granularity", [Fraction(1, 2**30), Fraction(1), Fraction(2**20)])
def test_explicit_granularities_keep_outputs_on_grid(granularity: Fraction) -> None:
    m = GridLaplace(Fraction(1), Fraction(1), granularity=granularity)
    outputs = m.release_each(
        np.array([0.0, 1e-300, 5e-324, 123456.789, -2.5e6]), rng=SeededRandom(3)
    )
    assert reachable_on_grid(outputs, granularity).all()
