"""The lattice search returns the optimum that exhaustive search finds, on every small lattice.

The reference is a plain-Python brute force written from the definitions (tests/anonymity/
oracle.py): it generalises every row, suppresses failing classes and sums the loss, for every node.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pandas as pd
import pytest
from tests.anonymity import oracle

from dalenius.anonymity.encode import encode
from dalenius.anonymity.hierarchy import Hierarchy
from dalenius.anonymity.lattice import all_nodes, search
from dalenius.anonymity.metrics import METRICS
from dalenius.anonymity.models import (
    AlphaKAnonymity,
    BetaLikeness,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    Model,
    RecursiveCLDiversity,
    TCloseness,
)
from dalenius.anonymity.source import load

HIERARCHIES = {
    "age": Hierarchy.intervals([2, 4, 8]),
    "zip": Hierarchy.mask([1, 2]),
    "job": Hierarchy.tree(
        {"a": ["x", "p"], "b": ["x", "p"], "c": ["y", "p"], "d": ["y", "p"], "e": ["z", "q"]}
    ),
    "sex": Hierarchy.identity(),
}

MODEL_SETS: list[tuple[list[Model], list[tuple[Any, ...]]]] = [
    ([KAnonymity(3)], [("k", 3)]),
    ([KAnonymity(2), DistinctLDiversity(2)], [("k", 2), ("l", 2)]),
    ([EntropyLDiversity(1.8)], [("entropy", 1.8)]),
    ([KAnonymity(2), RecursiveCLDiversity(2, 2)], [("k", 2), ("recursive", 2, 2)]),
    ([TCloseness(0.3)], [("t", 0.3)]),
    ([AlphaKAnonymity(0.6, 2)], [("alpha", 0.6, 2)]),
    ([KAnonymity(2), BetaLikeness(1.5)], [("k", 2), ("beta", 1.5)]),
]


def table(seed: int, n: int) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame(
        {
            "age": [rng.randint(18, 33) for _ in range(n)],
            "zip": [rng.choice(["13053", "13068", "13012", "14850", "14853"]) for _ in range(n)],
            "job": [rng.choice("abcde") for _ in range(n)],
            "sex": [rng.choice("MF") for _ in range(n)],
            "disease": [rng.choice(["flu", "flu", "heart", "cancer", "cold"]) for _ in range(n)],
        }
    )


def brute_force(
    df: pd.DataFrame, qis: list[str], models: list[tuple[Any, ...]], metric: str, limit: float
) -> float:
    data = list(df[qis].itertuples(index=False, name=None))
    sensitive = list(df["disease"])
    chains = [{v: (v, *HIERARCHIES[c].labeller(v)) for v in set(df[c])} for c in qis]
    numeric = [c == "age" for c in qis]
    heights = [len(next(iter(ch.values()))) - 1 for ch in chains]
    best = math.inf
    for node in all_nodes(heights):
        node_t = tuple(int(x) for x in node)
        gen, kept = oracle.node_outcome(data, sensitive, chains, node_t, models, False)
        if kept.count(False) <= math.floor(limit * len(data) + 1e-9):
            best = min(best, oracle.loss(metric, data, chains, numeric, node_t, gen, kept))
    return best


CASES = [
    (1, ["age", "zip", "job"], 60),  # 4·3·4 = 48 nodes
    pytest.param((2, ["age", "zip", "job", "sex"], 80), marks=pytest.mark.slow),  # 96 nodes
    pytest.param((3, ["zip", "job", "sex"], 40), marks=pytest.mark.slow),
]
LIMITS = [pytest.param(0.0, marks=pytest.mark.slow), 0.1]


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("models_idx", range(len(MODEL_SETS)))
@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("case", CASES)
def test_search_equals_brute_force(
    case: tuple[int, list[str], int], limit: float, models_idx: int, metric: str
) -> None:
    seed, qis, n = case
    models, oracle_models = MODEL_SETS[models_idx]
    df = table(seed, n)
    loaded = load(df)
    enc = encode(loaded, qis, {c: HIERARCHIES[c] for c in qis}, ["disease"], set())
    assert len(all_nodes(enc.heights)) <= 500
    expected = brute_force(df, qis, oracle_models, metric, limit)
    found = search(enc, models, metric=metric, suppression_limit=limit)
    exhaustive = search(enc, models, metric=metric, suppression_limit=limit, exhaustive=True)
    if math.isinf(expected):
        assert found.best is None and exhaustive.best is None
        return
    assert found.best is not None and exhaustive.best is not None
    assert found.best.loss == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert exhaustive.best.loss == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert found.best.node == exhaustive.best.node  # same tie-breaking


def test_a_larger_lattice_of_500_nodes() -> None:
    df = table(7, 120)
    hier = {
        "age": Hierarchy.intervals([2, 4, 8, 16]),  # levels 0..5
        "zip": Hierarchy.mask([1, 2, 3, 4]),  # levels 0..5
        "job": HIERARCHIES["job"],
        "sex": Hierarchy.identity(),
    }
    qis = ["age", "zip", "job", "sex"]
    enc = encode(load(df), qis, hier, ["disease"], set())
    total = len(all_nodes(enc.heights))
    assert 250 <= total <= 500
    for metric in METRICS:
        a = search(enc, [KAnonymity(4)], metric=metric, suppression_limit=0.05)
        b = search(enc, [KAnonymity(4)], metric=metric, suppression_limit=0.05, exhaustive=True)
        assert a.best is not None and b.best is not None
        assert a.best.node == b.best.node
        assert a.evaluated < b.evaluated  # the pruning did prune


def test_progress_reports_nodes_settled_and_changes_nothing() -> None:
    df = table(7, 120)
    qis = ["age", "zip", "job"]
    enc = encode(load(df), qis, {c: HIERARCHIES[c] for c in qis}, ["disease"], set())
    total = len(all_nodes(enc.heights))
    calls: list[tuple[int, int]] = []
    with_bar = search(
        enc,
        [KAnonymity(4)],
        suppression_limit=0.05,
        progress=lambda done, of: calls.append((done, of)),
    )
    silent = search(enc, [KAnonymity(4)], suppression_limit=0.05)
    assert calls and calls[-1] == (total, total)
    assert all(0 <= done <= of == total for done, of in calls)
    assert with_bar.best is not None and silent.best is not None
    assert with_bar.best.node == silent.best.node and with_bar.evaluated == silent.evaluated
