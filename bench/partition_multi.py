"""Q6′: private partition selection when each person contributes rows to several ZIP codes.

``SELECT zip, COUNT(*) FROM visits GROUP BY zip`` with the privacy unit *person*, no public key
list, ε = 1, δ = 1e-6. Data (generated, seeded): the people of the Q6 table (``--rows`` persons of
the synthetic census, their ZIP codes long-tailed); each person gets ``1 + Binomial(9, 0.3)``
visits (1 to 10, mean 3.7), each in the person's own ZIP with probability 1/2, otherwise in a ZIP
drawn from the population's ZIP distribution (PCG64 keyed by ``--seed``; data synthesis, not
noise). A person then holds 1 to 8 distinct ZIPs (mean 2.7).

Every mechanism needs a cap ``k`` on the ZIPs one person counts in (its L0 contribution). Each
person keeps the ``k`` of their ZIPs with the smallest keyed hash (one key per cap, as the
engine's bounding does); a mechanism's row reports its best cap over ``--caps``, as the
literature recommends tuning it. For each mechanism: mean true keys released over ``--runs``
releases (a key is true when some visit has it; fake keys cannot be released by any of these
mechanisms, which only see observed keys, and are counted as a check), the sd, and the cap.

* Dalenius, uniform: truncated selection on distinct persons per ZIP at scale ``k/ε``, ``k``
  groups per person (the production mechanism for ``max_groups = k``), keys and counts.
* Dalenius, weighted: weighted Gaussian selection (a person holding ``d`` ZIPs weighs ``1/√d`` in
  each), keys only at the full ε; and at ε/2 with the counts released at ε/2 (what a query
  releasing counts spends).
* Dalenius, planner: at each cap, the mechanism :func:`dalenius.plan.selection.prefer_weighted`
  picks from public numbers (keys only, full ε).
* OpenDP: ``make_laplace_threshold`` (L0 = k, L∞ = 1 on the capped distinct-person counts) at the
  smallest threshold whose real probability of releasing a person's own ``k`` keys is at most δ
  (see ``bench/partition.py`` for why not its own map); the peer is given the capped counts, so its
  contribution bounding is as good as ours.
* SmartNoise SQL: the visits table with ``person`` as private id and ``max_ids = k`` (it bounds
  *rows* per person, hence ZIPs), its default mechanism, in its own virtualenv
  (``SMARTNOISE_PYTHON``); slow (seconds per query), so its caps (``--smartnoise-caps``) are swept
  with ``--sweep-runs`` releases each and the best cap is re-run ``--runs`` times.

    PYTHONPATH=src:<site-packages with opendp> .venv/bin/python bench/partition_multi.py

This is a benchmark, not a test: it prints one table and asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from dalenius.datasets.census import write_benchmark
from dalenius.mechanisms.partition_selection import select_groups, truncated_selection
from dalenius.mechanisms.weighted_selection import select_weighted
from dalenius.plan.selection import prefer_weighted, weighted_calibration

SMARTNOISE = """
import json, sys
import pandas as pd
import snsql
from snsql import Privacy
frame = pd.read_csv(sys.argv[1], dtype={"zip": str})
eps, delta, runs, cap = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
meta = {"bench": {"bench": {"visits": {
    "row_privacy": False, "max_ids": cap, "rows": len(frame),
    "person": {"type": "int", "private_id": True}, "zip": {"type": "string"}}}}}
reader = snsql.from_df(frame, privacy=Privacy(epsilon=eps, delta=delta), metadata=meta)
out = []
for _ in range(runs):
    result = reader.execute("SELECT zip, COUNT(*) AS n FROM bench.visits GROUP BY zip")
    out.append(sorted(str(row[0]) for row in result[1:]))
print(json.dumps(out))
"""

IntArray = npt.NDArray[np.int64]


@dataclass
class Visits:
    """Distinct (person, zip) pairs, ZIPs as codes 0..n_zips−1, and the row-level table."""

    person: IntArray
    zip_code: IntArray
    zips: list[str]
    rows: pa.Table


def generate(people: Path, seed: int) -> Visits:
    zips_col = pq.read_table(people, columns=["zip"]).column("zip").to_pylist()
    names, home = np.unique(np.array([str(z) for z in zips_col]), return_inverse=True)
    rng = np.random.Generator(np.random.PCG64(seed))
    n = home.size
    visits = 1 + rng.binomial(9, 0.3, n)
    person = np.repeat(np.arange(n, dtype=np.int64), visits)
    population = home[rng.integers(0, n, person.size)]  # a ZIP drawn as the population's are
    code = np.where(rng.random(person.size) < 0.5, np.repeat(home, visits), population)
    rows = pa.table({"person": person, "zip": pa.array(names[code].tolist(), pa.string())})
    pairs = np.unique(person * len(names) + code)
    return Visits(pairs // len(names), pairs % len(names), names.tolist(), rows)


def capped(v: Visits, cap: int) -> tuple[IntArray, IntArray]:
    """Per ZIP: distinct persons after each keeps its ``cap`` ZIPs of smallest keyed hash; and the
    ZIP's counts of persons by degree (persons' kept ZIPs, 1..cap)."""
    key = hashlib.sha256(f"q6prime-{cap}".encode()).digest()
    mix = np.frombuffer(key[:8], dtype=np.uint64)[0]
    h = (v.person.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (
        v.zip_code.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F) + mix
    )
    order = np.lexsort((h, v.person))
    person, code = v.person[order], v.zip_code[order]
    starts = np.flatnonzero(np.r_[True, person[1:] != person[:-1]])
    sizes = np.diff(np.r_[starts, person.size])
    rank = np.arange(person.size) - np.repeat(starts, sizes)
    keep = rank < cap
    degree = np.repeat(np.minimum(sizes, cap), sizes)[keep]
    kept = code[keep]
    n = len(v.zips)
    counts = np.bincount(kept, minlength=n).astype(np.int64)
    by_degree = np.zeros((n, cap), dtype=np.int64)
    np.add.at(by_degree, (kept, degree - 1), 1)
    return counts, by_degree


def dalenius_uniform(counts: IntArray, eps: float, delta: float, cap: int, runs: int) -> list[int]:
    scale = Fraction(cap) / Fraction(eps)
    cal = truncated_selection(scale, Fraction(delta), groups=cap)
    observed = counts[counts > 0]
    return [int(select_groups(observed, scale, cal)[1].sum()) for _ in range(runs)]


def dalenius_weighted(
    by_degree: IntArray, eps: float, delta: float, cap: int, runs: int
) -> list[int]:
    plan = weighted_calibration(Fraction(eps), Fraction(delta), cap)
    observed = by_degree[by_degree.sum(axis=1) > 0]
    return [int(select_weighted(observed, plan.calibration).sum()) for _ in range(runs)]


def opendp_runs(counts: IntArray, eps: float, delta: float, cap: int, runs: int) -> list[int]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T=dp.i32))
    metric = dp.l01inf_distance(dp.absolute_distance(T=dp.i32))
    scale = cap / eps
    a = float(np.exp(-1 / scale))

    def make(threshold: int) -> Any:
        return dp.m.make_laplace_threshold(domain, metric, scale=scale, threshold=threshold)

    threshold = 1
    # a person's own cap keys, each counted once, released at count 1 + Z >= threshold
    while (
        make(threshold).map((cap, cap, 1))[1] > delta
        or cap * a ** (threshold - 1) / (1 + a) > delta
    ):
        threshold += 1
    measurement = make(threshold)
    data = {str(i): int(c) for i, c in enumerate(counts) if c > 0}
    return [len(measurement(data)) for _ in range(runs)]


def smartnoise_runs(
    v: Visits, eps: float, delta: float, cap: int, runs: int
) -> tuple[list[int], int]:
    """True keys per release, and fake keys released in all."""
    python = os.environ.get("SMARTNOISE_PYTHON")
    if not python:
        return [], 0
    truth = {v.zips[c] for c in np.unique(v.zip_code)}
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "visits.csv"
        v.rows.to_pandas().to_csv(csv, index=False)
        script = Path(tmp) / "sn.py"
        script.write_text(SMARTNOISE)
        done = subprocess.run(
            [python, str(script), str(csv), str(eps), str(delta), str(runs), str(cap)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode:
        print("SmartNoise failed:", done.stderr.strip().splitlines()[-1][:120])
        return [], 0
    releases = json.loads(done.stdout.strip().splitlines()[-1])
    fake = sum(sum(k not in truth for k in r) for r in releases)
    return [sum(k in truth for k in r) for r in releases], fake


def line(name: str, results: dict[int, list[int]], note: str = "") -> float:
    """Print the best cap's mean; return it."""
    if not results:
        print(f"{name:<40} {'—':>10}  {note or 'not run'}")
        return float("nan")
    means = {cap: statistics.fmean(r) for cap, r in results.items()}
    cap = max(means, key=lambda c: means[c])
    runs = results[cap]
    sd = statistics.stdev(runs) if len(runs) > 1 else 0.0
    sweep = ", ".join(f"{c}: {m:.0f}" for c, m in sorted(means.items()))
    print(f"{name:<40} {means[cap]:10.1f} {sd:6.1f} {cap:4d} {len(runs):5d}  caps {sweep} {note}")
    return means[cap]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="persons")
    parser.add_argument("--runs", type=int, default=100, help="releases per mechanism and cap")
    parser.add_argument("--sweep-runs", type=int, default=10, help="SmartNoise releases per cap")
    parser.add_argument("--caps", default="1,2,3,4,5,8", help="the caps k swept")
    parser.add_argument(
        "--smartnoise-caps", default=None, help="the caps swept for SmartNoise (default: --caps)"
    )
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "dalenius-bench")
    args = parser.parse_args(argv)
    folder = args.data / f"rows-{args.rows}"
    if not (folder / "census.toml").exists():
        write_benchmark(folder, args.rows)
    v = generate(folder / "people.parquet", args.seed)
    caps = [int(c) for c in args.caps.split(",")]
    eps, delta, runs = args.epsilon, args.delta, args.runs
    degree = np.bincount(np.bincount(v.person))
    print(
        f"Q6′: {args.rows:,} persons, {v.rows.num_rows:,} visits, {v.person.size:,} (person, zip) "
        f"pairs, {np.unique(v.zip_code).size:,} true ZIPs; ZIPs per person "
        f"{dict(enumerate(degree.tolist()))}; epsilon = {eps:g}, delta = {delta:g}"
    )
    head = f"{'mechanism (best cap)':<40} {'true keys':>10} {'sd':>6} {'cap':>4} {'runs':>5}"
    print(head)
    print("-" * len(head))
    uniform, weighted, half, planner, peer = {}, {}, {}, {}, {}
    for cap in caps:
        counts, by_degree = capped(v, cap)
        uniform[cap] = dalenius_uniform(counts, eps, delta, cap, runs)
        weighted[cap] = dalenius_weighted(by_degree, eps, delta, cap, runs)
        half[cap] = dalenius_weighted(by_degree, eps / 2, delta, cap, runs)
        use = prefer_weighted(Fraction(eps), Fraction(delta), cap)
        planner[cap] = weighted[cap] if use else uniform[cap]
        with contextlib.suppress(ImportError):  # OpenDP is optional (pip install -e '.[bench]')
            peer[cap] = opendp_runs(counts, eps, delta, cap, runs)
    best_uniform = line("Dalenius, uniform (truncated)", uniform)
    line("Dalenius, weighted Gaussian", weighted, "keys only")
    line("Dalenius, weighted at eps/2 (+ counts)", half)
    line("Dalenius, planner's choice", planner)
    for cap in caps:
        print(
            f"    cap {cap}: planner picks {'weighted' if planner[cap] is weighted[cap] else 'uniform'}"
        )
    best_opendp = line("OpenDP make_laplace_threshold", peer)
    sn: dict[int, list[int]] = {}
    fake = 0
    sn_caps = [int(c) for c in (args.smartnoise_caps or args.caps).split(",")]
    for cap in sn_caps:
        sn[cap], f = smartnoise_runs(v, eps, delta, cap, args.sweep_runs)
        fake += f
    sn = {c: r for c, r in sn.items() if r}
    if sn:
        best = max(sn, key=lambda c: statistics.fmean(sn[c]))
        sn[best], f = smartnoise_runs(v, eps, delta, best, runs)
        fake += f
    best_sn = line("SmartNoise SQL", sn, f"fake keys {fake}" if sn else "set SMARTNOISE_PYTHON")
    peers = [x for x in (best_opendp, best_sn) if not math.isnan(x)]
    if peers:
        top = max(peers)
        best_ours = max(statistics.fmean(r) for r in [*uniform.values(), *weighted.values()])
        print(f"\nDalenius best / best peer true keys: {best_ours / top:.3f}")
        print(f"Dalenius uniform / best peer: {best_uniform / top:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
