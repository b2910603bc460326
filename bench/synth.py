"""Synthetic data on adult.csv: workload error and time of Dalenius's MST, and of smartnoise-synth.

Dalenius synthesises every column of ``tests/fixtures/adult.toml`` that has public keys or bounds
(numeric columns in 10 bins) at ε = 1, δ = 1e-9, several times, and prints the workload error —
total-variation distance ½·L1 between normalised marginals, averaged over all 1-way, all 2-way
and 200 random 3-way marginals — against the real table on the same domains, and the time.

smartnoise-synth pulls in torch and pins an old mbi, so it is never installed beside Dalenius:
point ``SMARTNOISE_PYTHON`` at the Python of a virtualenv that has it (``python -m venv
/tmp/sn-peers && /tmp/sn-peers/bin/pip install smartnoise-synth``), and the same table (the same
binned columns, written to a CSV) is synthesised there in the same run, ``--runs`` times, without
it the comparison row says "not installed". Its input is prepared as its documentation asks of
MST: every column discretised beforehand on public cut points and declared categorical
(``categorical_columns``), so no preprocessing budget is needed (``preprocessor_eps=0``: nothing
is inferred from the data). Its output is read back as text and each value mapped to the label of
the same text in the column's domain (``education_num`` has integer labels: compared as text
against integers, every one of its cells would count as wrong); a value outside the domain stays
as it is, and counts as error.

    .venv/bin/python bench/synth.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from dalenius.core.catalog import load_catalog
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.releases.synthetic import SynthRequest, plan_synthetic, workload_error

CATALOG = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "adult.toml"

SMARTNOISE = """
import json, sys, time
import pandas as pd
from snsynth import Synthesizer
frame = pd.read_csv(sys.argv[1], dtype=str, keep_default_na=False)
seconds = []
for run in range(int(sys.argv[3])):
    start = time.perf_counter()
    synth = Synthesizer.create("mst", epsilon=1.0, delta=1e-9)
    out = synth.fit_sample(frame, categorical_columns=list(frame.columns), preprocessor_eps=0.0)
    seconds.append(time.perf_counter() - start)
    out.to_csv(f"{sys.argv[2]}.{run}", index=False)
print(json.dumps({"seconds": seconds}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    catalog = load_catalog(CATALOG)
    eps, delta = Fraction(1), Fraction(1, 10**9)
    plan = plan_synthetic(catalog, SynthRequest("adult", bins=10), epsilon=eps, delta=delta)
    with DuckDBExecutor(catalog) as engine:
        for table in plan.tables:
            engine.prepare(table)
        start = time.perf_counter()
        rows = engine.fetch(plan.sql("duckdb", 1).main)
        exact_seconds = time.perf_counter() - start
    table = plan.contingency(rows)
    columns = [d.name for d in plan.domains]
    real = pd.DataFrame(np.repeat(table.codes, table.counts, axis=0), columns=columns)
    for i, d in enumerate(plan.domains):
        real[d.name] = np.asarray(d.labels, dtype=object)[real.iloc[:, i].to_numpy()]
    print(
        f"adult.csv, {len(real)} rows with every chosen column present, {len(columns)} columns: {', '.join(columns)}"
    )
    print(
        f"ε = 1, δ = 1e-9; workload error = mean TVD over 1-way, 2-way and 200 random 3-way "
        f"marginals, mean of {args.runs} releases each; seconds: median per release (wall)"
    )
    errors, seconds = [], []
    for _ in range(args.runs):
        start = time.perf_counter()
        release = plan.synthesise(plan.measure(table))
        seconds.append(time.perf_counter() - start + exact_seconds)
        errors.append(workload_error(real, release.to_pandas(), columns))
    ours = {k: float(np.mean([e[k] for e in errors])) for k in errors[0]}
    labels = {d.name: {str(label): label for label in d.labels} for d in plan.domains}
    theirs = smartnoise(real, labels, args.runs)
    print(f"{'':<22} {'1-way':>8} {'2-way':>8} {'3-way':>8} {'seconds':>9}")
    print(
        f"{'Dalenius MST':<22} {ours['1-way']:>8.4f} {ours['2-way']:>8.4f} {ours['3-way']:>8.4f} {np.median(seconds):>9.2f}"
    )
    if theirs is None:
        print(
            f"{'smartnoise-synth MST':<22} not installed (set SMARTNOISE_PYTHON to a venv's python that has it)"
        )
    else:
        print(
            f"{'smartnoise-synth MST':<22} {theirs['1-way']:>8.4f} {theirs['2-way']:>8.4f} {theirs['3-way']:>8.4f} {theirs['seconds']:>9.2f}"
        )


def smartnoise(
    real: pd.DataFrame, labels: dict[str, dict[str, object]], runs: int
) -> dict[str, float] | None:
    """smartnoise-synth's MST on the same table, ``runs`` times: mean errors, median seconds."""
    python = os.environ.get("SMARTNOISE_PYTHON")
    if not python or not Path(python).exists():
        return None
    columns = list(real.columns)
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "real.csv", Path(tmp) / "synthetic.csv"
        real.to_csv(source, index=False)
        done = subprocess.run(
            [python, "-c", SMARTNOISE, str(source), str(target), str(runs)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(f"smartnoise-synth failed: {done.stderr.strip().splitlines()[-1:]}")
            return None
        timing = json.loads(done.stdout.strip().splitlines()[-1])
        errors = []
        for run in range(runs):
            out = pd.read_csv(f"{target}.{run}", dtype=str, keep_default_na=False)
            for column in columns:  # the text of each value back to the domain's label
                out[column] = out[column].map(lambda v, c=column: labels[c].get(v, v))
            errors.append(workload_error(real, out, columns))
        mean = {k: float(np.mean([e[k] for e in errors])) for k in errors[0]}
        return {**mean, "seconds": float(np.median(timing["seconds"]))}


if __name__ == "__main__":
    main()
