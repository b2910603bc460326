"""Continual release: the error of each period's count and of the running totals, by tree height.

At one lifetime loss (ε = 1, R = 1 row per unit), for horizons of a month, a year of days and the
largest horizon, it prints the root mean squared error over every period of the per-period
estimates and of the running totals for

* the whole tree with Honaker's least-squares combination (the product's default),
* the whole tree read the classic way (Chan, Shi & Song 2011: each running total as the sum of the
  dyadic nodes covering its prefix, each period as its own leaf),
* trees cut to fewer levels (``levels``), down to 1 (each period measured once, nothing above),

all exact (every estimate is linear in independent discrete Laplace noise: its variance is
Σ coefficient² × the noise's variance), beside the RMSE measured over ``--releases`` draws of the
product's own noise for the default — all from one run. A last column times one publication's
post-processing (the combination and the intervals, computed once per shape).

    .venv/bin/python bench/continual.py [--releases 300]
"""

from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction

import numpy as np

from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.releases._dyadic import DyadicTree, full_levels
from dalenius.releases._intervals import noise_variance
from dalenius.releases.continual_estimates import estimate

EPSILON = Fraction(1)


def classic(tree: DyadicTree, closed: int) -> tuple[np.ndarray, np.ndarray]:
    """The classic reading: period p is its leaf; the total to t sums the dyadic decomposition
    of [0, t] (greedy: the largest measured node starting where the last one ended)."""
    per = np.zeros((closed, tree.size))
    run = np.zeros((closed, tree.size))
    leaf = {int(tree.start[i]): i for i in np.flatnonzero(tree.level == 0)}
    for p in range(closed):
        per[p, leaf[p]] = 1
        at = 0
        while at <= p:
            fits = np.flatnonzero((tree.start == at) & (tree.end <= p))
            node = fits[np.argmax(tree.level[fits])]
            run[p, node] = 1
            at = int(tree.end[node]) + 1
    return per, run


def rmse(coefficients: np.ndarray, variance: float) -> float:
    return math.sqrt(variance * float((coefficients**2).sum(axis=1).mean()))


def row(horizon: int, height: int | None, releases: int) -> None:
    tree = DyadicTree(horizon, height)
    mech = IntegerLaplace(tree.levels, EPSILON)
    var = noise_variance(mech)
    a = tree.combination(horizon)
    run = np.cumsum(a, axis=0)
    name = f"{tree.levels} level{'s' if tree.levels > 1 else ''}" + (
        " (all)" if height is None else ""
    )
    measured = ""
    if height is None:
        truth = tree.node_values(np.full(horizon, 50))
        per_err = np.zeros(horizon)
        tot_err = np.zeros(horizon)
        for _ in range(releases):
            noisy = mech.release(truth)
            est = estimate(tree, horizon, noisy, mech, 0.95, nonnegative=False)
            per_err += (est.per_period - 50) ** 2
            tot_err += (est.total - 50 * np.arange(1, horizon + 1)) ** 2
        measured = f"{math.sqrt(per_err.mean() / releases):>9.2f}{math.sqrt(tot_err.mean() / releases):>9.2f}"
    else:
        measured = f"{'':>18}"
    started = time.perf_counter()
    estimate(
        DyadicTree(horizon, height),
        horizon,
        np.zeros(tree.size, np.int64),
        mech,
        0.9,
        nonnegative=True,
    )
    ms = (time.perf_counter() - started) * 1000
    print(
        f"{horizon:>7} {name:<14}{rmse(a, var):>10.2f}{rmse(run, var):>10.2f}{measured}{ms:>10.0f}"
    )
    if height is None:
        per, tot = classic(tree, horizon)
        print(f"{horizon:>7} {'classic tree':<14}{rmse(per, var):>10.2f}{rmse(tot, var):>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--releases", type=int, default=300)
    args = parser.parse_args()
    print(f"ε = {EPSILON}, R = 1; RMSE over every period; measured over {args.releases} releases")
    print(
        f"{'horizon':>7} {'tree':<14}{'period':>10}{'running':>10}"
        f"{'period*':>9}{'running*':>9}{'ms':>10}"
    )
    for horizon in (30, 365, 1024):
        full = full_levels(horizon)
        for height in (None, *sorted({1, 2, full // 2, full - 2} - {0})):
            row(horizon, height, args.releases)
    print("* measured; the rest exact. 'classic tree': the same nodes without the combination.")


if __name__ == "__main__":
    main()
