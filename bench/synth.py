"""Synthetic data on adult.csv: workload error, time and peak memory of Dalenius's MST and AIM, and
of smartnoise-synth's MST and AIM, from one run.

Every synthesiser gets every column of ``tests/fixtures/adult.toml`` that has public keys or bounds
(numeric columns in 10 bins) at ε = 1, δ = 1e-9, several times; the table prints the workload
error — total-variation distance ½·L1 between normalised marginals, averaged over all 1-way, all
2-way and 200 random 3-way marginals — against the real table on the same domains, the median
wall seconds per release and the peak resident memory of the process that ran it. Each
synthesiser runs in a process of its own (so the peak is its own), writes its rows to CSV, and
the errors are computed here from those files, the same way for all.

Dalenius: MST, and AIM with its default workload (every 2-way marginal); ``--degree 3`` runs
AIM on every 3-way marginal instead. Its seconds include the exact contingency statement.

smartnoise-synth pulls in torch and pins an old mbi, so it is never installed beside Dalenius:
point ``SMARTNOISE_PYTHON`` (or ``--smartnoise-python``) at the Python of a virtualenv that has it
(``python -m venv /tmp/sn-peers && /tmp/sn-peers/bin/pip install smartnoise-synth``); without it
the peers' rows say "not installed". Its input is prepared as its documentation asks: every
column discretised beforehand on public cut points and declared categorical
(``categorical_columns``), so no preprocessing budget is needed (``preprocessor_eps=0``: nothing is
inferred from the data). Its output is read back as text and each value mapped to the label of
the same text in the column's domain (``education_num`` has integer labels: compared as text
against integers, every one of its cells would count as wrong); a value outside the domain stays
as it is, and counts as error. Its AIM (``Synthesizer.create("aim")``, workload of every 2-way
marginal, as ours) is slow: each release of a peer is given ``--peer-budget`` seconds (default
300); one that does not finish is stopped, and the table says so (``>300``) instead of an error —
the remaining releases of that peer are then not attempted.

    .venv/bin/python bench/synth.py [--runs 3] [--peer-budget 300] [--degree 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dalenius.core.catalog import load_catalog
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.releases.aim import AimRequest, plan_aim
from dalenius.releases.synth_table import workload_error
from dalenius.releases.synthetic import SynthRequest, plan_synthetic

CATALOG = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "adult.toml"
EPSILON, DELTA = Fraction(1), Fraction(1, 10**9)

SMARTNOISE = """
import json, resource, sys, time
import pandas as pd
from snsynth import Synthesizer
frame = pd.read_csv(sys.argv[1], dtype=str, keep_default_na=False)
start = time.perf_counter()
synth = Synthesizer.create(sys.argv[3], epsilon=1.0, delta=1e-9)
out = synth.fit_sample(frame, categorical_columns=list(frame.columns), preprocessor_eps=0.0)
seconds = time.perf_counter() - start
out.to_csv(sys.argv[2], index=False)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak}))
"""


def plan_for(method: str, degree: int) -> Any:
    """Dalenius's plan of the benchmark's release: every column, 10 bins, ε = 1, δ = 1e-9."""
    catalog = load_catalog(CATALOG)
    if method == "aim":
        request = AimRequest("adult", bins=10, degree=degree)
        return plan_aim(catalog, request, epsilon=EPSILON, delta=DELTA)
    return plan_synthetic(catalog, SynthRequest("adult", bins=10), epsilon=EPSILON, delta=DELTA)


def exact(plan: Any) -> tuple[Any, float]:
    """The exact contingency table and the seconds its statement took."""
    catalog = load_catalog(CATALOG)
    with DuckDBExecutor(catalog) as engine:
        for table in plan.tables:
            engine.prepare(table)
        start = time.perf_counter()
        rows = engine.fetch(plan.sql("duckdb", 1).main)
        seconds = time.perf_counter() - start
    return plan.contingency(rows), seconds


def worker(method: str, degree: int, runs: int, prefix: str) -> None:
    """One Dalenius synthesiser, ``runs`` releases written to ``prefix.N``; prints its timing
    and its process's peak resident memory as JSON (the parent runs it in its own process)."""
    plan = plan_for(method, degree)
    table, exact_seconds = exact(plan)
    seconds = []
    for run in range(runs):
        start = time.perf_counter()
        release = plan.synthesise(plan.measure(table))
        seconds.append(time.perf_counter() - start + exact_seconds)
        release.to_pandas().to_csv(f"{prefix}.{run}", index=False)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--degree", type=int, choices=(2, 3), default=2, help="AIM's workload")
    parser.add_argument(
        "--peer-budget", type=float, default=300.0, help="seconds per peer release (default 300)"
    )
    parser.add_argument(
        "--smartnoise-python", default=os.environ.get("SMARTNOISE_PYTHON"), help=argparse.SUPPRESS
    )
    parser.add_argument("--worker", choices=("mst", "aim"), help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.degree, args.runs, args.prefix)
        return
    plan = plan_for("mst", 2)
    table, _ = exact(plan)
    columns = [d.name for d in plan.domains]
    real = pd.DataFrame(np.repeat(table.codes, table.counts, axis=0), columns=columns)
    for i, d in enumerate(plan.domains):
        real[d.name] = np.asarray(d.labels, dtype=object)[real.iloc[:, i].to_numpy()]
    labels = {d.name: {str(label): label for label in d.labels} for d in plan.domains}
    print(
        f"adult.csv, {len(real)} rows with every chosen column present, {len(columns)} columns: "
        f"{', '.join(columns)}"
    )
    print(
        f"ε = 1, δ = 1e-9; workload error = mean TVD over 1-way, 2-way and 200 random 3-way "
        f"marginals, mean of {args.runs} releases each; seconds: median per release (wall); "
        f"peak: the process's resident memory; AIM's workload: every {args.degree}-way marginal; "
        f"a peer's release gets {args.peer_budget:g} s"
    )
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")
    rows: dict[str, dict[str, float] | str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "real.csv"
        real.to_csv(source, index=False)
        for method in ("mst", "aim"):
            rows[f"Dalenius {method.upper()}"] = ours(method, args, real, labels, tmp)
        for method in ("mst", "aim"):
            name = f"smartnoise-synth {method.upper()}"
            rows[name] = smartnoise(method, args, real, labels, source, tmp)
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")
    print(f"{'':<22} {'1-way':>8} {'2-way':>8} {'3-way':>8} {'seconds':>9} {'peak MB':>8}")
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"{name:<22} {row}")
            continue
        print(
            f"{name:<22} {row['1-way']:>8.4f} {row['2-way']:>8.4f} {row['3-way']:>8.4f} "
            f"{row['seconds']:>9.2f} {row['peak_mb']:>8.0f}"
        )
    ratios(rows)


def ratios(rows: dict[str, dict[str, float] | str]) -> None:
    """Dalenius AIM's errors over each other row's, where that row finished."""
    aim = rows["Dalenius AIM"]
    assert not isinstance(aim, str)
    for name, row in rows.items():
        if name == "Dalenius AIM" or isinstance(row, str):
            continue
        parts = ", ".join(f"{k} {aim[k] / row[k]:.2f}" for k in ("2-way", "3-way"))
        print(f"Dalenius AIM / {name}: {parts}; time {aim['seconds'] / row['seconds']:.3f}")


def errors_of(
    files: list[str], real: pd.DataFrame, labels: dict[str, dict[str, object]]
) -> dict[str, float]:
    """Mean workload error of synthetic CSVs, each value read as text and mapped to its label."""
    errors = []
    for path in files:
        out = pd.read_csv(path, dtype=str, keep_default_na=False)
        for column in real.columns:
            out[column] = out[column].map(lambda v, c=column: labels[c].get(v, v))
        errors.append(workload_error(real, out, list(real.columns)))
    return {k: float(np.mean([e[k] for e in errors])) for k in errors[0]}


def ours(
    method: str,
    args: argparse.Namespace,
    real: pd.DataFrame,
    labels: dict[str, dict[str, object]],
    tmp: str,
) -> dict[str, float]:
    """Dalenius's synthesiser in its own process: mean errors, median seconds, peak memory."""
    prefix = str(Path(tmp) / f"dalenius-{method}.csv")
    command = [sys.executable, __file__, "--worker", method, "--runs", str(args.runs)]
    command += ["--degree", str(args.degree), "--prefix", prefix]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    timing = json.loads(done.stdout.strip().splitlines()[-1])
    files = [f"{prefix}.{run}" for run in range(args.runs)]
    return {
        **errors_of(files, real, labels),
        "seconds": float(np.median(timing["seconds"])),
        "peak_mb": float(timing["peak_mb"]),
    }


def smartnoise(
    method: str,
    args: argparse.Namespace,
    real: pd.DataFrame,
    labels: dict[str, dict[str, object]],
    source: Path,
    tmp: str,
) -> dict[str, float] | str:
    """smartnoise-synth's ``method`` on the same table, one process per release, each stopped
    after ``--peer-budget`` seconds: mean errors, median seconds, largest peak memory."""
    python = args.smartnoise_python
    if not python or not Path(python).exists():
        return "not installed (set SMARTNOISE_PYTHON to a venv's python that has it)"
    files, seconds, peaks = [], [], []
    for run in range(args.runs):
        target = str(Path(tmp) / f"smartnoise-{method}.csv.{run}")
        command = [python, "-c", SMARTNOISE, str(source), target, method]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, check=False, timeout=args.peer_budget
            )
        except subprocess.TimeoutExpired:
            return (
                f"did not finish one release within --peer-budget {args.peer_budget:g} s "
                f"(stopped; >{args.peer_budget:g} s)"
            )
        if done.returncode != 0:
            return f"failed: {done.stderr.strip().splitlines()[-1:]}"
        timing = json.loads(done.stdout.strip().splitlines()[-1])
        files.append(target)
        seconds.append(timing["seconds"])
        peaks.append(timing["peak_mb"])
    return {
        **errors_of(files, real, labels),
        "seconds": float(np.median(seconds)),
        "peak_mb": float(max(peaks)),
    }


if __name__ == "__main__":
    main()
