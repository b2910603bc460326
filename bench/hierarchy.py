"""Consistent hierarchical tables on the demo census: error per level before and after post-processing.

Releases state → education counts (851 nodes) many times at each loss and prints, per level, the
root mean squared error of the independent noisy counts, of the least-squares consistent
estimates and of the final non-negative integers, against the exact counts — all from one run —
and the time per release. Beside the measured errors it prints the exact expected RMSE of the
noisy counts and of the consistent estimates (both are linear in the noise, so their variance is
Σ coefficient² × noise variance): a measured gap between them smaller than the sampling error of
the runs is noise, a gap in the exact figures would be a defect.

    .venv/bin/python bench/hierarchy.py [--people 50000] [--releases 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from dalenius.core.catalog import load_catalog
from dalenius.datasets.census import write_demo
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.releases.hierarchy import HierarchyRequest, plan_hierarchy


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--people", type=int, default=50_000)
    parser.add_argument("--releases", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        catalog = load_catalog(write_demo(Path(tmp), n=args.people))
        print(
            f"demo census, {args.people} people; state > education; {args.releases} releases per row"
        )
        print(
            f"{'loss':<16} {'level':>5} {'nodes':>6} {'noisy':>8} {'consistent':>11} {'final':>8}"
            f" {'noisy exact':>12} {'consist. exact':>15} {'ms/release':>11}"
        )
        for eps, delta in (
            (Fraction(1, 2), None),
            (Fraction(1), None),
            (Fraction(1), Fraction(1, 10**6)),
        ):
            report(catalog, eps, delta, args.releases)


def report(catalog, eps: Fraction, delta: Fraction | None, releases: int) -> None:  # type: ignore[no-untyped-def]
    plan = plan_hierarchy(
        catalog, HierarchyRequest("people", ("state", "education")), epsilon=eps, delta=delta
    )
    with DuckDBExecutor(catalog) as engine:
        for table in plan.tables:
            engine.prepare(table)
        exact = plan.leaf_counts(engine.fetch(plan.sql("duckdb", 1).main))
    plan.finish(plan.measure(exact), 0.95)  # the public coefficients and intervals, computed once
    squared = {name: np.zeros(3) for name in ("noisy", "consistent", "final")}
    times = []
    for _ in range(releases):
        start = time.perf_counter()
        release = plan.finish(plan.measure(exact), 0.95)
        times.append(time.perf_counter() - start)
        for name, total in squared.items():
            value = getattr(release, name)
            for depth in range(3):
                nodes = plan.tree.level == depth
                total[depth] += float(((value[nodes] - exact[nodes]) ** 2).mean())
    label = f"ε={float(eps):g}" + (f", δ={float(delta):g}" if delta else "")
    # The exact expected squared error of each node: its noise variance, and Σ_u a[v,u]²·var_u.
    own = plan.variance
    combined = (plan.coefficients**2) @ plan.variance
    for depth in range(3):
        nodes = int((plan.tree.level == depth).sum())
        at = plan.tree.level == depth
        expected = (float(np.sqrt(own[at].mean())), float(np.sqrt(combined[at].mean())))
        rmse = [
            float(np.sqrt(squared[n][depth] / releases)) for n in ("noisy", "consistent", "final")
        ]
        ms = 1000 * float(np.median(times)) if depth == 0 else float("nan")
        print(
            f"{label:<16} {depth:>5} {nodes:>6} {rmse[0]:>8.2f} {rmse[1]:>11.2f} {rmse[2]:>8.2f}"
            f" {expected[0]:>12.2f} {expected[1]:>15.2f} {ms:>11.1f}"
        )


if __name__ == "__main__":
    main()
