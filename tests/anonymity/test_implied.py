"""The monotone models each model implies hold in every class that satisfies the model.

The lattice search prunes non-monotone models (t-closeness, β-likeness, …) with the distinct
ℓ-diversity and k-anonymity they imply; if a class could satisfy a model but fail its implied
models, the search would miss optima. These tests try many random classes, including the
classes that satisfy a model by the narrowest margin, and the tight cases by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from dalenius.anonymity.models import (
    AlphaKAnonymity,
    BetaLikeness,
    ClassStats,
    DeltaDisclosure,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    Model,
    RecursiveCLDiversity,
    Sensitive,
    TCloseness,
)

MODELS: list[Model] = [
    AlphaKAnonymity(0.4, 3),
    AlphaKAnonymity(1.0, 2),
    EntropyLDiversity(2.5),
    EntropyLDiversity(1.0),
    RecursiveCLDiversity(2, 3),
    TCloseness(0.1),
    TCloseness(0.35),
    TCloseness(0.6),
    BetaLikeness(0.5),
    BetaLikeness(3.0),
    DeltaDisclosure(1.2),
]


def random_classes(seed: int, m: int, ordered: bool) -> ClassStats:
    """Many small classes over m sensitive values with a skewed original distribution."""
    rng = np.random.default_rng(seed)  # test data only
    rows = 4000
    weights = rng.dirichlet(np.full(m, 0.7))
    codes = rng.choice(m, size=rows, p=weights).astype(np.int64)
    sizes = rng.integers(1, 25, size=rows)
    cls = np.repeat(np.arange(rows), sizes)[:rows].astype(np.int64)
    totals = np.bincount(codes, minlength=m).astype(np.int64)
    sens = Sensitive("s", totals, ordered)
    return ClassStats(cls, np.ones(rows, dtype=np.int64), [codes], [sens])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.describe())
def test_a_class_that_passes_a_model_passes_what_it_implies(seed: int, model: Model) -> None:
    stats = random_classes(seed, m=3 + seed, ordered=seed % 3 == 0)
    ok = model.passes(stats)
    for implied in model.implied(stats.sensitive):
        assert implied.monotone_with_suppression
        assert not np.any(ok & ~implied.passes(stats)), implied.describe()


def test_t_closeness_implies_the_values_covering_1_minus_t() -> None:
    sens = Sensitive("s", np.array([40, 30, 20, 10]), ordered=False)
    # covering 0.7 of q takes the two largest values; 0.9 takes three
    assert TCloseness(0.3).implied([sens]) == [DistinctLDiversity(2)]
    assert TCloseness(0.1).implied([sens]) == [DistinctLDiversity(3)]
    assert TCloseness(0.6).implied([sens]) == []  # one value already covers 0.4 ≥ 1 − 0.6
    # a class of exactly the two largest values sits at EMD = 0.3: it passes, and holds 2 values
    stats = ClassStats(
        np.zeros(7, dtype=np.int64), np.array([4, 3, 0, 0, 0, 0, 0]), [np.arange(7) % 4], [sens]
    )
    assert TCloseness(0.3).passes(stats).all()
    # the ordered-distance EMD gives no such bound
    assert TCloseness(0.3).implied([Sensitive("v", sens.totals, ordered=True)]) == []


def test_the_others_imply_what_their_definitions_need() -> None:
    sens = Sensitive("s", np.array([50, 25, 25]), ordered=False)
    assert AlphaKAnonymity(0.3, 4).implied([sens]) == [KAnonymity(4), DistinctLDiversity(4)]
    assert EntropyLDiversity(2.0).implied([sens]) == [DistinctLDiversity(2)]
    assert RecursiveCLDiversity(3, 2).implied([sens]) == [DistinctLDiversity(2)]
    assert DeltaDisclosure(1.0).implied([sens]) == [DistinctLDiversity(3)]
    # p ≤ 1.5 q: covering 2/3 of q takes two values
    assert BetaLikeness(0.5).implied([sens]) == [DistinctLDiversity(2)]
    assert KAnonymity(3).implied([sens]) == []


@pytest.mark.parametrize("seed", range(3))
def test_distinct_values_from_the_presence_table_match_the_pairs(seed: int) -> None:
    fresh = random_classes(seed, m=4 + seed, ordered=False)
    by_presence = fresh.distinct  # before the pairs are counted: the presence table
    assert "pairs" not in fresh.__dict__
    counted = random_classes(seed, m=4 + seed, ordered=False)
    by_pairs = [p.distinct for p in counted.pairs]
    assert len(by_presence) == len(by_pairs) == 1
    assert np.array_equal(by_presence[0], by_pairs[0])
    assert by_presence[0].min() >= 1 and by_presence[0].max() > 1
