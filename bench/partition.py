"""Private partition selection on the long-tail benchmark: true keys released beside the peers.

Q6 of ``bench/engines.py``: ``SELECT zip, COUNT(*) FROM people GROUP BY zip`` on the synthetic
census (one row per person, thousands of ZIP codes, most held by few people), at ε = 1 and
δ = 1e-6, with no public key list, so every engine must select the keys privately. For each
mechanism the run prints the mean number of true keys released over ``--runs`` releases, the
standard deviation, the fake keys released (keys not in the data; always 0 for all three by
construction, shown as a check), the RMSE of the released counts, and the percentage of the
*ceiling*: the expected keys of the optimal (ε, δ)-DP selection for one key per person,
Σ π*(n) over the true counts (Desfontaines, Voss, Gipson & Mandayam 2022, Thm. 1).

* Dalenius: the production query path (``Session.query``), truncated selection.
* Dalenius, untruncated: the previous mechanism (integer threshold on untruncated discrete Laplace,
  ``laplace_threshold``) on the same exact counts, for reference.
* OpenDP: ``make_laplace_threshold`` at scale 1/ε with the smallest integer threshold at which a
  key of one person is really released with probability ≤ δ; and, on a second row, the smaller
  threshold its own privacy map accepts, which under-reports δ by one noise step (opendp/opendp
  issue 2922), so that row spends more than δ and can pass the ceiling.
* SmartNoise SQL: installed in its own virtualenv (it pins old dependencies); point
  ``SMARTNOISE_PYTHON`` at that Python and the same table is queried there in the same run;
  without it the row says "not installed".

    .venv/bin/python bench/partition.py [--rows 100000] [--runs 100]

This is a benchmark, not a test: it prints one table and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import ApproxDP
from dalenius.datasets.census import write_benchmark
from dalenius.engine.session import connect
from dalenius.executors.factory import executor_for
from dalenius.ledger import open_ledger
from dalenius.mechanisms.laplace import discrete_laplace
from dalenius.mechanisms.partition_selection import laplace_threshold, truncated_selection

SQL = "SELECT zip, COUNT(*) FROM people GROUP BY zip"

SMARTNOISE = """
import json, sys
from importlib.metadata import version
import pandas as pd
import snsql
from snsql import Privacy
frame = pd.read_csv(sys.argv[1], dtype={"zip": str})
eps, delta, runs = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
meta = {"bench": {"bench": {"people": {
    "row_privacy": True, "max_ids": 1, "rows": len(frame),
    "zip": {"type": "string"}}}}}
privacy = Privacy(epsilon=eps, delta=delta)
reader = snsql.from_df(frame, privacy=privacy, metadata=meta)
out = []
for _ in range(runs):
    result = reader.execute("SELECT zip, COUNT(*) AS n FROM bench.people GROUP BY zip")
    out.append({str(row[0]): int(row[1]) for row in result[1:]})
print(json.dumps(out))
print(version("smartnoise-sql"))
"""

Release = dict[str, int]


def pistar(epsilon: float, delta: float, top: int) -> list[float]:
    """Optimal release probability of a key held by n persons, n = 0..top (one key per person)."""
    p = [0.0]
    for _ in range(top):
        last = p[-1]
        p.append(
            min(math.exp(epsilon) * last + delta, 1 - math.exp(-epsilon) * (1 - last - delta), 1.0)
        )
    return p


def dalenius_runs(
    folder: Path, epsilon: float, delta: float, runs: int
) -> tuple[list[Release], float]:
    """Releases through the production query path, and the median seconds per query."""
    catalog = load_catalog(folder / "census.toml")
    ledger = open_ledger(None)
    ledger.set_dataset(catalog.name, definition="approx")
    executor = executor_for(catalog)
    out, times = [], []
    for i in range(runs):
        start = time.perf_counter()
        analyst = f"bench-{i}"  # a fresh analyst per run, so no answer comes from the cache
        ledger.set_budget(analyst, catalog.name, ApproxDP(Fraction(10**6), Fraction(1, 2)))
        session = connect(catalog, ledger=ledger, analyst=analyst, executor=executor)
        result = session.query(SQL, epsilon=epsilon, delta=delta)
        zips, counts = result.column("zip"), result.column(result.columns[1])
        out.append({str(z): int(c) for z, c in zip(zips, counts, strict=True)})
        times.append(time.perf_counter() - start)
    executor.close()
    ledger.close()
    return out, statistics.median(times)


def untruncated_runs(truth: Release, epsilon: float, delta: float, runs: int) -> list[Release]:
    scale = 1 / Fraction(epsilon)
    tau = laplace_threshold(scale, Fraction(delta), groups=1, max_count=1)
    keys = list(truth)
    exact = np.array([truth[k] for k in keys], dtype=np.int64)
    out = []
    for _ in range(runs):
        noisy = exact + discrete_laplace(scale, exact.size)
        out.append({k: int(v) for k, v in zip(keys, noisy, strict=True) if v >= tau})
    return out


def one_person_release(epsilon: float, threshold: int) -> float:
    """P(1 + Z >= threshold) for discrete Laplace Z of scale 1/ε: how often a 1-person key shows."""
    a = math.exp(-epsilon)
    return a ** (threshold - 1) / (1 + a)


def opendp_runs(
    truth: Release, epsilon: float, delta: float, runs: int, *, own_map: bool
) -> tuple[list[Release], str]:
    """OpenDP's threshold: from its own privacy map, or the smallest one that really meets δ.

    ``make_laplace_threshold`` releases counts *at* the threshold, while its privacy map counts
    only the tail above it, so its reported δ is one noise step too small (opendp/opendp issue
    2922; the bench checks the release rate of 4-person keys against both readings). At equal
    (ε, δ) the fair threshold is the smallest whose real 1-person release rate is at most δ.
    """
    try:
        import opendp.prelude as dp
    except ImportError:
        return [], "not installed (pip install -e '.[bench]')"
    dp.enable_features("contrib")
    domain = dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T=dp.i32))
    metric = dp.l01inf_distance(dp.absolute_distance(T=dp.i32))

    def make(threshold: int) -> Any:
        return dp.m.make_laplace_threshold(domain, metric, scale=1 / epsilon, threshold=threshold)

    threshold = 1
    while make(threshold).map((1, 1, 1))[1] > delta or (
        not own_map and one_person_release(epsilon, threshold) > delta
    ):
        threshold += 1
    measurement = make(threshold)
    real = one_person_release(epsilon, threshold)
    note = f"threshold {threshold}; real P(1-person key) {real:.3g}"
    if real > delta:
        note += " > delta"
    return [dict(measurement(truth)) for _ in range(runs)], note


def smartnoise_runs(
    people: Path, epsilon: float, delta: float, runs: int
) -> tuple[list[Release], str]:
    python = os.environ.get("SMARTNOISE_PYTHON")
    if not python:
        return [], "not installed (set SMARTNOISE_PYTHON to a Python with smartnoise-sql)"
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "people.csv"
        pq.read_table(people, columns=["zip"]).to_pandas().to_csv(csv, index=False)
        script = Path(tmp) / "sn.py"
        script.write_text(SMARTNOISE)
        done = subprocess.run(
            [python, str(script), str(csv), str(epsilon), str(delta), str(runs)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode:
        return [], "failed: " + done.stderr.strip().splitlines()[-1][:80]
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-2]), f"smartnoise-sql {lines[-1]}, its default mechanism and threshold"


def summarise(
    name: str, releases: list[Release], truth: Release, ceiling: float, note: str
) -> None:
    if not releases:
        print(f"{name:<28} {'—':>10} {'':>6} {'':>5} {'':>6} {'':>9}  {note}")
        return
    true = [sum(k in truth for k in r) for r in releases]
    fake = sum(sum(k not in truth for k in r) for r in releases)
    errors = [r[k] - truth[k] for r in releases for k in r if k in truth]
    rmse = math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else float("nan")
    mean = statistics.fmean(true)
    sd = statistics.stdev(true) if len(true) > 1 else 0.0
    print(
        f"{name:<28} {mean:10.1f} {sd:6.1f} {fake:5d} {rmse:6.3f} {100 * mean / ceiling:8.1f}%  {note}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="people in the table")
    parser.add_argument("--runs", type=int, default=100, help="releases per mechanism")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "dalenius-bench",
        help="where the generated tables are kept between runs",
    )
    args = parser.parse_args(argv)
    folder = args.data / f"rows-{args.rows}"
    if not (folder / "census.toml").exists():
        write_benchmark(folder, args.rows)
    import pyarrow.parquet as pq

    zips = pq.read_table(folder / "people.parquet", columns=["zip"]).column("zip").to_pylist()
    truth: Release = dict(Counter(str(z) for z in zips))
    counts = list(truth.values())
    curve = pistar(args.epsilon, args.delta, max(counts))
    ceiling = sum(curve[c] for c in counts)
    eps, delta = Fraction(args.epsilon), Fraction(args.delta)
    cal = truncated_selection(1 / eps, delta)
    print(
        f"Q6 at {args.rows:,} rows: {len(truth):,} true keys, counts {min(counts)}..{max(counts)} "
        f"(median {statistics.median(counts):g}); epsilon = {args.epsilon:g}, delta = {args.delta:g}; "
        f"{args.runs} releases each"
    )
    print(
        f"ceiling (sum of the optimal release probabilities, one key per person): {ceiling:.1f} keys"
    )
    print(
        f"Dalenius truncated selection: threshold {cal.threshold} w.p. {float(cal.mix):.4f}, else "
        f"{cal.threshold + 1}; certified delta {float(cal.delta):.6g}"
    )
    head = f"{'mechanism':<28} {'true keys':>10} {'sd':>6} {'fake':>5} {'rmse':>6} {'% ceiling':>9}  note"
    print(head)
    print("-" * len(head))
    ours, took = dalenius_runs(folder, args.epsilon, args.delta, args.runs)
    summarise(
        "Dalenius", ours, truth, ceiling, f"truncated selection; {took * 1e3:.0f} ms per query"
    )
    old = untruncated_runs(truth, args.epsilon, args.delta, args.runs)
    tau = laplace_threshold(1 / eps, delta, groups=1, max_count=1)
    summarise("Dalenius, untruncated", old, truth, ceiling, f"previous mechanism, threshold {tau}")
    peer, note = opendp_runs(truth, args.epsilon, args.delta, args.runs, own_map=False)
    summarise("OpenDP", peer, truth, ceiling, note)
    own, note = opendp_runs(truth, args.epsilon, args.delta, args.runs, own_map=True)
    summarise("OpenDP, its own delta map", own, truth, ceiling, note)
    sn, note = smartnoise_runs(folder / "people.parquet", args.epsilon, args.delta, args.runs)
    summarise("SmartNoise SQL", sn, truth, ceiling, note)
    if peer:
        ratio = statistics.fmean(sum(k in truth for k in r) for r in ours) / statistics.fmean(
            sum(k in truth for k in r) for r in peer
        )
        print(f"\nDalenius / OpenDP true keys: {ratio:.3f}")
    if sn:
        ratio = statistics.fmean(sum(k in truth for k in r) for r in ours) / statistics.fmean(
            sum(k in truth for k in r) for r in sn
        )
        print(f"Dalenius / SmartNoise SQL true keys: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
