"""Synthetic origin–destination rows (OnTheMap's synthesizer) on the demo census: how close, how fast.

Releases state → education flows (50 origins, 16 destinations) several times at each ε and prints
the mean total-variation distance (½·L1) between each destination's synthetic and real origin
distributions, weighted by the destinations' real sizes, beside the same distance for origins
drawn uniformly (what the prior alone would give), the prior the budget allowed and the seconds
per release — all from one run.

    .venv/bin/python bench/onthemap.py [--people 50000] [--runs 5]
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
from dalenius.releases.onthemap import OnTheMapRequest, plan_onthemap


def tvd(real: np.ndarray, synthetic: np.ndarray) -> float:
    """Size-weighted mean over destinations of ½·L1 between origin distributions."""
    sizes = real.sum(axis=1)
    p = real / np.maximum(sizes, 1)[:, None]
    q = synthetic / np.maximum(synthetic.sum(axis=1), 1)[:, None]
    return float((0.5 * np.abs(p - q).sum(axis=1) * sizes).sum() / sizes.sum())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--people", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        catalog = load_catalog(write_demo(Path(tmp), n=args.people))
        print(
            f"demo census, {args.people} people; state -> education; {args.runs} releases per row"
        )
        print(
            f"{'ε':>4} {'per dest.':>9} {'prior':>9} {'TVD':>7} {'uniform TVD':>12} {'s/release':>10}"
        )
        for eps in (1, 4, 8, 12):
            plan = plan_onthemap(
                catalog,
                OnTheMapRequest("people", "state", "education", per_destination=20_000),
                epsilon=Fraction(eps),
                delta=None,
            )
            with DuckDBExecutor(catalog) as engine:
                for table in plan.tables:
                    engine.prepare(table)
                real = plan.table_counts(engine.fetch(plan.sql("duckdb", 1).main))
            uniform = tvd(real, np.ones_like(real))
            errors, times = [], []
            for _ in range(args.runs):
                start = time.perf_counter()
                synthetic = plan.synthesise(real)
                times.append(time.perf_counter() - start)
                errors.append(tvd(real, synthetic))
            print(
                f"{eps:>4} {plan.per_destination:>9} {float(plan.prior):>9.3f} "
                f"{np.mean(errors):>7.3f} {uniform:>12.3f} {np.median(times):>10.2f}"
            )


if __name__ == "__main__":
    main()
