"""The decomposable model behind AIM: chordal cliques, consistency, the junction-tree fit, exact
marginals across cliques, and the systematic sampler.

Everything here is post-processing; data come from seeded numpy generators (data only).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dalenius.releases.junction import (
    NoisyMarginal,
    chordal_cliques,
    combine,
    consistent,
    estimate,
    junction_tree,
)


def joint_on_two_triangles(seed: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """A random distribution over 5 columns that factorises on cliques (0,1,2), (1,2,3), (3,4)."""
    rng = np.random.default_rng(seed)  # data only
    sizes = (3, 4, 2, 5, 3)
    first = rng.dirichlet(np.ones(24)).reshape(3, 4, 2)
    second = rng.dirichlet(np.ones(5), size=(4, 2))  # P(3 | 1, 2)
    third = rng.dirichlet(np.ones(3), size=5)  # P(4 | 3)
    joint = first[:, :, :, None, None] * second[None, :, :, :, None] * third[None, None, None]
    return joint, sizes


def margin(joint: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    drop = tuple(i for i in range(joint.ndim) if i not in attrs)
    return joint.sum(axis=drop)


def test_chordal_cliques_accepts_decomposable_graphs_and_refuses_others() -> None:
    assert chordal_cliques(5, [(0, 1), (1, 2), (0, 2), (2, 3)]) == [(0, 1, 2), (2, 3), (4,)]
    assert chordal_cliques(4, [(0, 1), (1, 2), (2, 3), (3, 0)]) is None  # a 4-cycle
    assert chordal_cliques(4, [(0, 1, 2), (0, 2, 3), (1, 3)]) is None  # a clique of four
    assert chordal_cliques(4, [(0, 1, 2), (1, 2, 3)]) == [(0, 1, 2), (1, 2, 3)]
    assert chordal_cliques(3, []) == [(0,), (1,), (2,)]


def test_the_junction_tree_has_the_running_intersection_property() -> None:
    cliques = [(0, 1, 2), (3, 4), (1, 2, 3), (5,), (4, 6)]
    parent, separator, order = junction_tree(cliques)
    assert sorted(order) == list(range(5)) and parent[order[0]] == -1
    for k, p in enumerate(parent):
        if p >= 0:
            assert separator[k] == tuple(a for a in cliques[k] if a in cliques[p])
    for column in range(7):  # the cliques holding a column form a connected subtree
        holding = {k for k, c in enumerate(cliques) if column in c}
        tops = [k for k in holding if parent[k] not in holding]
        assert len(tops) == 1


def test_exact_marginals_are_reproduced_and_sets_across_cliques_are_summed_exactly() -> None:
    joint, sizes = joint_on_two_triangles(5)
    measured = [
        NoisyMarginal(a, 1000 * margin(joint, a), 1.0) for a in [(0, 1, 2), (1, 2, 3), (3, 4)]
    ]
    cliques = chordal_cliques(5, [m.attrs for m in measured])
    assert cliques == [(0, 1, 2), (1, 2, 3), (3, 4)]
    model = estimate(measured, sizes, cliques)
    assert math.isclose(model.total, 1000)
    for k in (1, 2, 3):
        for attrs in itertools.combinations(range(5), k):
            assert np.allclose(model.marginal(attrs), margin(joint, attrs), atol=1e-9), attrs


def test_consistency_makes_overlapping_measurements_agree_and_averages_by_inverse_variance() -> (
    None
):
    rng = np.random.default_rng(2)  # data only
    a = NoisyMarginal((0, 1), rng.normal(50, 5, size=(3, 4)), 1.0)
    b = NoisyMarginal((1, 2), rng.normal(50, 5, size=(4, 2)), 4.0)
    c = NoisyMarginal((1,), rng.normal(100, 5, size=4), 2.0)
    out = {m.attrs: m.values for m in consistent([a, b, c], (3, 4, 2))}
    assert np.allclose(out[(0, 1)].sum(axis=0), out[(1, 2)].sum(axis=1))
    assert np.allclose(out[(0, 1)].sum(axis=0), out[(1,)])
    # The row count: the three totals weighted by the inverse variance of each one's sum.
    weights = np.array([1 / (1.0 * 12), 1 / (4.0 * 8), 1 / (2.0 * 4)])
    totals = np.array([a.values.sum(), b.values.sum(), c.values.sum()])
    assert math.isclose(out[(1,)].sum(), float(weights @ totals / weights.sum()))
    # Repeated measurements of the same columns are averaged by inverse variance first.
    [both] = combine([c, NoisyMarginal((1,), c.values + 6.0, 6.0)])
    assert np.allclose(both.values, c.values + 1.5) and math.isclose(both.variance, 1.5)


def test_the_sampler_gives_each_cell_the_floor_or_ceiling_of_its_expected_rows() -> None:
    joint, sizes = joint_on_two_triangles(7)
    measured = [NoisyMarginal(a, margin(joint, a), 1.0) for a in [(0, 1, 2), (1, 2, 3), (3, 4)]]
    model = estimate(measured, sizes, chordal_cliques(5, [m.attrs for m in measured]) or [])
    n = 5000
    codes = model.sample(n, np.random.default_rng(3))  # post-processing randomness
    root = model.cliques[model.order[0]]
    counts = np.zeros([sizes[a] for a in root])
    np.add.at(counts, tuple(codes[:, a] for a in root), 1)
    expected = n * model.marginal(root)
    assert np.all(counts >= np.floor(expected - 1e-9)) and np.all(
        counts <= np.ceil(expected + 1e-9)
    )
    # Every clique's rows follow its conditional: the sampled joint is close to the model's.
    for attrs in [(1, 2, 3), (3, 4), (0, 4)]:
        found = np.zeros([sizes[a] for a in attrs])
        np.add.at(found, tuple(codes[:, a] for a in attrs), 1)
        assert 0.5 * np.abs(found / n - margin(joint, attrs)).sum() < 0.03, attrs
