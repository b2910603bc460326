"""Consistent hierarchical tables: the estimator, the integer tables, neighbours, charging, intervals.

Data are generated with seeded numpy generators (data only); the noise comes from the OS
generator. Statistical tests state their false-alarm rate.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dalenius
from dalenius.core.catalog import load_catalog
from dalenius.core.errors import QueryError
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.releases.hierarchy import (
    HierarchyRequest,
    Tree,
    consistent,
    nonnegative_integers,
    plan_hierarchy,
)

CATALOG = """
[dataset]
name = "shops"

[tables.sales]
source = { csv = "sales.csv" }
privacy_unit = { column = "pid", max_rows = 2, max_groups = 1 }

[tables.sales.columns]
pid = { type = "int" }
region = { type = "str", keys = ["north", "south", "east"] }
shop = { type = "str", keys = ["a", "b", "c", "d"] }
amount = { type = "int", bounds = [0, 100] }
"""


def sales(seed: int = 2, persons: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)  # data only
    rows = rng.integers(1, 4, size=persons)  # some exceed the cap of 2
    pid = np.repeat(np.arange(persons), rows)
    region = np.repeat(
        rng.choice(["north", "south", "east"], size=persons, p=[0.6, 0.35, 0.05]), rows
    )
    shop = np.repeat(rng.choice(["a", "b", "c", "d"], size=persons), rows)
    return pd.DataFrame(
        {"pid": pid, "region": region, "shop": shop, "amount": rng.integers(0, 100, size=pid.size)}
    )


def write(tmp: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(tmp / "sales.csv", index=False)
    (tmp / "shops.toml").write_text(CATALOG, encoding="utf-8")
    return tmp / "shops.toml"


def dense_gls(tree: Tree, y: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """The least-squares estimate by brute force: leaves as unknowns, every node a sum of them."""
    leaves = [i for i, p in enumerate(tree.paths) if len(p) == tree.depth]
    a = np.zeros((len(tree.paths), len(leaves)))
    for j, leaf in enumerate(leaves):
        node = leaf
        while node >= 0:
            a[node, j] = 1
            node = int(tree.parent[node])
    w = np.diag(1 / variance)
    solution = np.linalg.solve(a.T @ w @ a, a.T @ w @ y)
    return a @ solution


def test_the_two_pass_estimate_is_the_least_squares_estimate() -> None:
    rng = np.random.default_rng(1)  # data only
    tree = Tree.build([["x", "y", "z"], [1, 2], ["p", "q", "r", "s"]])
    for _ in range(20):
        y = rng.normal(50, 20, size=len(tree.paths))
        variance = np.array([[1.0, 4.0, 2.0, 9.0][int(d)] for d in tree.level]) * rng.uniform(
            0.5, 2
        )
        assert np.allclose(consistent(tree, y, variance), dense_gls(tree, y, variance), atol=1e-8)


def test_on_a_complete_tree_with_equal_variances_it_is_hays_closed_form() -> None:
    """Hay, Rastogi, Miklau & Suciu (2010), Theorem 3: z_v from the bottom, then x_v from the top."""
    k, height = 3, 3
    tree = Tree.build([list(range(k))] * (height - 1))
    rng = np.random.default_rng(4)  # data only
    y = rng.normal(10, 3, size=len(tree.paths))
    children = tree.children()
    z = y.copy()
    for node in reversed(range(len(tree.paths))):
        if children[node]:
            ell = height - int(tree.level[node])  # the node's height (leaves: 1)
            z[node] = (
                (k**ell - k ** (ell - 1)) * y[node] + (k ** (ell - 1) - 1) * z[children[node]].sum()
            ) / (k**ell - 1)
    x = z.copy()
    for node in range(len(tree.paths)):
        kids = children[node]
        if kids:
            x[kids] = z[kids] + (x[node] - z[kids].sum()) / k
    assert np.allclose(consistent(tree, y, np.ones(len(tree.paths))), x)


def test_final_tables_are_non_negative_integers_that_add_up() -> None:
    rng = np.random.default_rng(9)  # data only
    tree = Tree.build([["a", "b", "c", "d"], [1, 2, 3]])
    children = tree.children()
    for _ in range(50):
        estimate = consistent(
            tree, rng.normal(3, 6, size=len(tree.paths)), np.ones(len(tree.paths))
        )
        final = nonnegative_integers(tree, estimate, np.ones(len(tree.paths)))
        assert final.dtype == np.int64 and (final >= 0).all()
        for node, kids in enumerate(children):
            if kids:
                assert final[node] == final[kids].sum()


def exact_nodes(path: Path, plan, salt: int = 1) -> np.ndarray:  # type: ignore[no-untyped-def]
    with DuckDBExecutor(load_catalog(path)) as engine:
        for table in plan.tables:
            engine.prepare(table)
        return plan.leaf_counts(engine.fetch(plan.sql("duckdb", salt).main))


def test_removing_one_person_moves_every_level_by_at_most_the_row_cap(tmp_path: Path) -> None:
    frame = sales()
    path = write(tmp_path, frame)
    plan = plan_hierarchy(
        load_catalog(path),
        HierarchyRequest("sales", ("region", "shop")),
        epsilon=Fraction(1),
        delta=None,
    )
    base = exact_nodes(path, plan)
    assert base[0] == sum(min(2, n) for n in frame.groupby("pid").size())
    for pid in (0, 3, 599):
        (tmp_path / "n").mkdir(exist_ok=True)
        other = exact_nodes(write(tmp_path / "n", frame[frame.pid != pid]), plan)
        for depth in range(3):
            nodes = plan.tree.level == depth
            assert int(np.abs(base[nodes] - other[nodes]).sum()) <= 2


def test_a_release_is_charged_once_and_every_value_lies_in_its_interval(tmp_path: Path) -> None:
    session = dalenius.connect(write(tmp_path, sales()), budget=2)
    result = session.hierarchy("sales", ["region", "shop"], epsilon=1)
    assert result.loss == PureDP(Fraction(1))
    assert session.remaining() == PureDP(Fraction(1))
    r = result.release
    for name in ("noisy", "consistent", "final"):
        value, low, high = getattr(r, name), getattr(r, f"{name}_low"), getattr(r, f"{name}_high")
        assert np.all((low <= value) & (value <= high)), name
    again = session.hierarchy("sales", ["region", "shop"], epsilon=1)
    assert again.cached and np.array_equal(again.release.final, r.final)
    assert session.remaining() == PureDP(Fraction(1))
    frame = result.to_pandas()
    assert list(frame.columns[:3]) == ["level", "region", "shop"] and len(frame) == 1 + 3 + 12


def test_an_approx_dataset_gets_gaussian_noise(tmp_path: Path) -> None:
    session = dalenius.connect(
        write(tmp_path, sales()), budget=ApproxDP(Fraction(1), Fraction(1, 10**5))
    )
    result = session.hierarchy("sales", ["region"], epsilon=0.5, delta=1e-6, split=[1, 3])
    assert result.loss == ApproxDP(Fraction(1, 2), Fraction(1, 10**6))


def test_refusals_name_the_problem_and_spend_nothing(tmp_path: Path) -> None:
    session = dalenius.connect(write(tmp_path, sales()), budget=2)
    with pytest.raises(QueryError, match="amount"):
        session.hierarchy("sales", ["amount"], epsilon=1)
    with pytest.raises(QueryError, match="split"):
        session.hierarchy("sales", ["region"], epsilon=1, split=[1, 2, 3])
    with pytest.raises(QueryError, match="nowhere"):
        session.hierarchy("sales", ["region"], epsilon=1, where="nowhere = 1")
    assert session.remaining() == PureDP(Fraction(2))


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("epsilon", "delta"), [(Fraction(1), None), (Fraction(1), Fraction(1, 10**6))]
)
def test_post_processing_beats_independent_noise_and_intervals_cover(
    tmp_path: Path, epsilon: Fraction, delta: Fraction | None
) -> None:
    """Over 200 releases: the consistent estimate's mean squared error is at most the raw noise's
    at every level (it is the best linear unbiased estimate; the test allows 10% sampling slack),
    and each product's intervals miss at most 5% of nodes (binomial test, false-alarm rate 1e-4)."""
    path = write(tmp_path, sales())
    plan = plan_hierarchy(
        load_catalog(path),
        HierarchyRequest("sales", ("region", "shop")),
        epsilon=epsilon,
        delta=delta,
    )
    exact = exact_nodes(path, plan)
    errors = {name: np.zeros(3) for name in ("noisy", "consistent", "final")}
    misses = dict.fromkeys(errors, 0)
    releases = 200
    for _ in range(releases):
        r = plan.finish(plan.measure(exact), 0.95)
        for name, total in errors.items():
            value = getattr(r, name)
            for depth in range(3):
                nodes = plan.tree.level == depth
                total[depth] += float(((value[nodes] - exact[nodes]) ** 2).mean())
            misses[name] += int(
                ((exact < getattr(r, f"{name}_low")) | (exact > getattr(r, f"{name}_high"))).sum()
            )
    assert np.all(errors["consistent"] <= errors["noisy"] * 1.1)
    for name in misses:
        assert (
            stats.binomtest(misses[name], releases * len(exact), 0.05, alternative="greater").pvalue
            > 1e-4
        )


def test_a_final_count_made_zero_keeps_an_interval_of_positive_width(tmp_path: Path) -> None:
    """Noisy counts far below zero: every final count is 0, and its interval is [0, half-width],
    not [0, 0] — a width of zero would read as certainty, and the noise gave none."""
    plan = plan_hierarchy(
        load_catalog(write(tmp_path, sales())),
        HierarchyRequest("sales", ("region", "shop")),
        epsilon=Fraction(1),
        delta=None,
    )
    noisy = np.full(len(plan.tree.paths), -(10**6), dtype=np.int64)
    r = plan.finish(noisy, 0.95)
    assert np.all(r.final == 0)
    assert np.all(r.final_low == 0)
    assert np.all(r.final_high > 0)
    assert np.all((r.final_low <= r.final) & (r.final <= r.final_high))
