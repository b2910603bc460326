"""Gaussian ÷ Laplace: the RMSE of a 50-group × 3-aggregate query at equal loss, from one run.

The query is ``SELECT state, COUNT(*), AVG(age), AVG(hours_per_week) FROM people GROUP BY state``
on the synthetic census (50 states with public keys; three measurements: the count and two
clipped sums). It is answered ``--runs`` times on a dataset accounted in pure ε (discrete Laplace
noise) and on the same data accounted in ρ-zCDP (the planner's discrete Gaussian), and the RMSE of
each output over the 50 groups and the runs is compared with the exact answers (computed with
pandas). Two comparisons:

* **equal charge on a zCDP dataset**: both at ε, which a zCDP ledger charges as ρ = ε²/2 — what
  the planner compares when it chooses;
* **equal (ε, δ)**: the Laplace query at ε is (ε, 0)-DP; the Gaussian at the largest ρ whose
  conversion ρ + 2√(ρ ln(1/δ)) stays within ε at ``--delta``.

Run it with ``.venv/bin/python bench/gaussian.py``.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

import dalenius
from dalenius.core.loss import ZCDP, PureDP
from dalenius.datasets.census import write_demo

SQL = (
    "SELECT state, COUNT(*) AS n, AVG(age) AS age, AVG(hours_per_week) AS hours "
    "FROM people GROUP BY state"
)


def exact(folder: Path) -> pd.DataFrame:
    people = pd.read_parquet(folder / "people.parquet")
    people["age"] = people["age"].clip(0, 100)
    people["hours_per_week"] = people["hours_per_week"].clip(0, 99)
    return people.groupby("state").agg(
        n=("age", "size"), age=("age", "mean"), hours=("hours_per_week", "mean")
    )


def rmse(session: dalenius.Session, epsilon: Fraction, truth: pd.DataFrame, runs: int) -> dict:
    errors: dict[str, list[float]] = {"n": [], "age": [], "hours": []}
    mechanisms = set()
    plan = session.plan(SQL, epsilon)
    for m in plan.measurements:
        mechanisms.add("Gaussian" if m.gaussian else "Laplace")
    for run in range(runs):
        # A different query text each run: a repeat would be answered from the ledger, free.
        sql = SQL.replace("FROM people", f"FROM people WHERE age >= {-1 - run}")
        result = session.query(sql, epsilon=epsilon).to_pandas().set_index("state")
        for column, squares in errors.items():
            diff = result[column] - truth.loc[result.index, column]
            squares.extend((diff**2).tolist())
    return {
        "mechanisms": "+".join(sorted(mechanisms)),
        **{c: math.sqrt(float(np.mean(v))) for c, v in errors.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--epsilon", type=Fraction, default=Fraction(1))
    parser.add_argument("--delta", type=float, default=1e-6)
    args = parser.parse_args()
    eps = args.epsilon
    with tempfile.TemporaryDirectory(prefix="dalenius-gauss-") as scratch:
        folder = Path(scratch)
        catalog = write_demo(folder, n=args.people)
        truth = exact(folder)
        budget = args.runs * 3 * eps
        laplace = dalenius.connect(str(catalog), budget=PureDP(budget), ledger="memory:")
        gaussian = dalenius.connect(str(catalog), budget=ZCDP(budget * budget), ledger="memory:")
        # Equal (ε, δ): the largest ρ with ρ + 2√(ρ ln(1/δ)) <= ε, and the ε whose ε²/2 is it.
        log = math.log(1 / args.delta)
        rho = (math.sqrt(log + float(eps)) - math.sqrt(log)) ** 2
        eps_equal = Fraction(math.sqrt(2 * rho)).limit_denominator(10**6)
        if eps_equal * eps_equal / 2 > Fraction(rho):
            eps_equal -= Fraction(1, 10**6)
        rows = [
            ("Laplace, ε", rmse(laplace, eps, truth, args.runs)),
            ("zCDP, ρ = ε²/2", rmse(gaussian, eps, truth, args.runs)),
            (f"zCDP at (ε, {args.delta:g})", rmse(gaussian, eps_equal, truth, args.runs)),
        ]
    print(f"{args.people} people, 50 groups, {args.runs} runs, ε = {float(eps):g}")
    print(f"{'plan':<24}{'noise':<18}{'RMSE n':>10}{'RMSE age':>10}{'RMSE hours':>12}")
    for name, r in rows:
        print(f"{name:<24}{r['mechanisms']:<18}{r['n']:>10.3f}{r['age']:>10.4f}{r['hours']:>12.4f}")
    base = rows[0][1]
    for name, r in rows[1:]:
        ratios = "  ".join(f"{c} {r[c] / base[c]:.2f}x" for c in ("n", "age", "hours"))
        print(f"Gaussian ÷ Laplace ({name}): {ratios}")


if __name__ == "__main__":
    main()
