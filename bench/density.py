"""Private density curves against a private histogram of the same loss, on the demo census.

For each ε (with δ = 1e-6) it releases the density of a column with the Gaussian-process
mechanism and, at the same (ε, δ), a histogram of the same column with discrete Gaussian noise on
every bin (the natural alternative, normalised by its own noisy total), and prints the error of
each against the exact kernel density (mean absolute error over the grid, and the largest error),
the band half-widths, and the time per release — all from one run.

    .venv/bin/python bench/density.py [--people 50000] [--releases 20]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import ZCDP
from dalenius.datasets.census import write_demo
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.releases.density import DensityRequest, plan_density, rho_for


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--people", type=int, default=50_000)
    parser.add_argument("--releases", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        catalog_path = write_demo(Path(tmp), n=args.people)
        catalog = load_catalog(catalog_path)
        print(
            f"demo census, {args.people} people; column age, bandwidth 2, 200 grid points; δ = 1e-6"
        )
        print(
            f"{'ε':>5} {'GP MAE':>10} {'GP max':>10} {'hist MAE':>10} {'hist max':>10} {'band ±':>10} {'ms/release':>11}"
        )
        for eps in (Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(4)):
            row = compare(catalog, eps, args.releases)
            print(
                f"{float(eps):>5g} "
                + " ".join(f"{v:>10.3g}" for v in row[:5])
                + f" {row[5]:>11.1f}"
            )


def compare(catalog, eps: Fraction, releases: int) -> tuple[float, ...]:  # type: ignore[no-untyped-def]
    delta = Fraction(1, 10**6)
    request = DensityRequest("people", ("age",), bandwidth=2.0)
    plan = plan_density(catalog, request, epsilon=eps, delta=delta)
    sql = plan.counts.sql("duckdb", 1)
    with DuckDBExecutor(catalog) as engine:
        for table in plan.counts.tables:
            engine.prepare(table)
        total = int(engine.fetch(sql.main)[0][0])
        rows = engine.fetch(sql.histograms[0][1])
    counts = np.zeros(plan.counts.bins)
    for r in rows:
        counts[int(r[-2])] += r[-1]
    grid = plan.axis_grids[0]
    centres = np.array([float(c) for c in plan.axes[0].centers()])
    kernel = np.exp(-((grid[:, None] - centres[None, :]) ** 2) / 8.0) / math.sqrt(8 * math.pi)
    truth = kernel @ counts / total
    hist = IntegerGaussian(1, ZCDP(rho_for(eps, delta)))  # the whole histogram has L2 sensitivity 1
    gp_err, gp_max, h_err, h_max, times = [], [], [], [], []
    for _ in range(releases):
        start = time.perf_counter()
        r = plan.finish(total, rows, 0.95)
        times.append(time.perf_counter() - start)
        gp_err.append(float(np.abs(r.density - truth).mean()))
        gp_max.append(float(np.abs(r.density - truth).max()))
        noisy = hist.release(counts.astype(np.int64)).astype(float)
        density = np.interp(grid, centres, np.maximum(noisy, 0) / max(noisy.sum(), 1.0))
        exact_hist = np.interp(grid, centres, counts / total)
        h_err.append(float(np.abs(density - exact_hist).mean()))
        h_max.append(float(np.abs(density - exact_hist).max()))
    band = float(((r.high - r.low) / 2).mean())
    return (
        float(np.mean(gp_err)),
        float(np.mean(gp_max)),
        float(np.mean(h_err)),
        float(np.mean(h_max)),
        band,
        1000 * float(np.median(times)),
    )


if __name__ == "__main__":
    main()
