"""Syntactic anonymity: Dalenius against ANJANA (and its checker, pyCANON) on adult.csv.

    .venv/bin/python bench/anonymity.py                     # adult: k = 2, 5, 10, 50; l = 2, 3; t = 0.2
    .venv/bin/python bench/anonymity.py --census 1000000    # also: check + Mondrian on a 1M-row census

Both tools get the same data and the same hierarchies (docs/anonymity/adult.toml: 8
quasi-identifiers, occupation sensitive) and a 1% suppression limit. ANJANA crashes on missing
values, so empty cells are written as the category "?" for both. ANJANA pins old numpy/pandas: it
runs in its own virtualenv (``ANJANA_PYTHON``, default /tmp/anjana-venv/bin/python) through a
subprocess, timed inside that process around the anonymisation call only; without that venv its
columns are skipped with a note. Information loss of both releases is measured by the same code
(NCP, rows suppressed — ANJANA drops rows — and the release's own k / ℓ / t as checked by
Dalenius). Each setting runs ANJANA and then Dalenius back to back, and both processes report
wall-clock and CPU seconds (process time, all threads): on a shared machine the wall-clock
seconds swing with the load, the CPU seconds much less, so the speed-up is printed on both.
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
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dalenius.anonymity import (
    DistinctLDiversity,
    Hierarchy,
    KAnonymity,
    TCloseness,
    anonymize,
    check,
    load_config,
)

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult.csv"
CONFIG = ROOT / "docs" / "anonymity" / "adult.toml"
ANJANA_PYTHON = os.environ.get("ANJANA_PYTHON", "/tmp/anjana-venv/bin/python")
SENSITIVE = "occupation"
LIMIT = 0.01

SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("k=2", {"k": 2}),
    ("k=5", {"k": 5}),
    ("k=10", {"k": 10}),
    ("k=50", {"k": 50}),
    ("k=5, l=2", {"k": 5, "l": 2}),
    ("k=5, l=3", {"k": 5, "l": 3}),
    ("k=5, t=0.2", {"k": 5, "t": 0.2}),
]

ANJANA_SCRIPT = r"""
import json, sys, time
import pandas as pd
import anjana.anonymity as an
import pycanon.anonymity as pc
from anjana.anonymity.utils import utils as au
job = json.load(open(sys.argv[1]))
data = pd.read_csv(job["csv"], keep_default_na=False)
for c in job["int_columns"]:
    data[c] = data[c].astype(int)
hier = {q: {int(l): pd.Series(v) for l, v in levels.items()} for q, levels in job["hierarchies"].items()}
out = {}
if job.get("pycanon"):
    qi = job["pycanon"]["qi"]; s = job["pycanon"]["sensitive"]
    t0 = time.perf_counter()
    c0 = time.process_time()
    out["pycanon"] = {
        "k": int(pc.k_anonymity(data, qi)),
        "l": int(pc.l_diversity(data, qi, [s])),
        "entropy_l": float(pc.entropy_l_diversity(data, qi, [s])),
        "t": float(pc.t_closeness(data, qi, [s])),
        "seconds": time.perf_counter() - t0,
        "cpu": time.process_time() - c0,
    }
runs = []
for setting in job["settings"]:
    args = dict(data=data, ident=job["ident"], quasi_ident=job["qi"], supp_level=job["supp"], hierarchies=hier)
    t0 = time.perf_counter()
    c0 = time.process_time()
    try:
        if "t" in setting:
            rel = an.t_closeness(sens_att=job["sensitive"], k=setting["k"], t=setting["t"], **args)
        elif "l" in setting:
            rel = an.l_diversity(sens_att=job["sensitive"], k=setting["k"], l_div=setting["l"], **args)
        else:
            rel = an.k_anonymity(k=setting["k"], **args)
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - c0
        rel = rel.reset_index(drop=False)
        kept = [int(i) for i in rel["index"]] if "index" in rel.columns else []
        levels = [int(x) for x in au.get_transformation(rel, job["qi"], hier)] if len(rel) else None
        runs.append({"seconds": seconds, "cpu": cpu, "kept": kept, "levels": levels, "rows": len(rel)})
    except Exception as exc:  # report, do not crash the bench
        runs.append({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "error": repr(exc)})
json.dump({"runs": runs, **out}, open(sys.argv[2], "w"))
"""


def prepared_adult() -> pd.DataFrame:
    df = pd.read_csv(ADULT, keep_default_na=False, dtype=str)
    for col in ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"):
        df[col] = df[col].astype(int)
    return df.replace({"": "?"})


def shared_hierarchies(
    df: pd.DataFrame, qis: list[str]
) -> tuple[dict[str, Hierarchy], dict[str, Any]]:
    """The config's hierarchies, with '?' standing for missing, as trees both tools read."""
    cfg = load_config(CONFIG)
    ours: dict[str, Hierarchy] = {}
    theirs: dict[str, Any] = {}
    for q in qis:
        source = cfg.hierarchies[q]
        values = sorted(df[q].unique().tolist())
        chains = {v: source.labeller(None if v == "?" else v) for v in values}
        ours[q] = Hierarchy.tree({str(v): list(chains[v]) for v in values})
        depth = len(next(iter(chains.values())))
        theirs[q] = {0: [int(v) if isinstance(v, (int, np.integer)) else v for v in values]}
        for level in range(depth):
            theirs[q][level + 1] = [chains[v][level] for v in values]
    return ours, theirs


def ncp(
    df: pd.DataFrame,
    qis: list[str],
    hier: dict[str, Hierarchy],
    levels: list[int],
    kept: np.ndarray,
) -> float:
    """NCP of a full-domain release (same definition as dalenius.anonymity.metrics)."""
    total = 0.0
    for q, level in zip(qis, levels, strict=True):
        lv = hier[q].apply(q, df[q].unique().tolist())
        span = dict(zip(lv.values, lv.spans[level], strict=True))
        cost = df[q].map(lambda v, s=span: s[v]).to_numpy(dtype=float)
        total += float(cost[kept].sum()) + float((~kept).sum())
    return total / (len(df) * len(qis))


def models_for(setting: dict[str, Any]) -> list[Any]:
    models: list[Any] = [KAnonymity(setting["k"])]
    if "l" in setting:
        models.append(DistinctLDiversity(setting["l"]))
    if "t" in setting:
        models.append(TCloseness(setting["t"]))
    return models


def run_anjana(
    df: pd.DataFrame,
    qis: list[str],
    ident: list[str],
    theirs: dict[str, Any],
    pycanon: dict[str, Any] | None,
    settings: list[dict[str, Any]],
) -> dict[str, Any] | None:
    if not Path(ANJANA_PYTHON).exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "adult.csv"
        df.to_csv(csv, index=False)
        job = {
            "csv": str(csv),
            "int_columns": [
                "age",
                "fnlwgt",
                "education_num",
                "capital_gain",
                "capital_loss",
                "hours_per_week",
            ],
            "hierarchies": {q: {str(k): v for k, v in h.items()} for q, h in theirs.items()},
            "qi": qis,
            "ident": ident,
            "sensitive": SENSITIVE,
            "supp": LIMIT * 100,
            "settings": settings,
            "pycanon": pycanon,
        }
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        (Path(tmp) / "run.py").write_text(ANJANA_SCRIPT)
        subprocess.run(
            [
                ANJANA_PYTHON,
                str(Path(tmp) / "run.py"),
                str(Path(tmp) / "job.json"),
                str(Path(tmp) / "out.json"),
            ],
            check=True,
            capture_output=True,
        )
        result: dict[str, Any] = json.loads((Path(tmp) / "out.json").read_text())
        return result


def adult_bench() -> None:
    cfg = load_config(CONFIG)
    qis = list(cfg.quasi_identifiers)
    df = prepared_adult()
    ours_h, theirs_h = shared_hierarchies(df, qis)
    check_qi = ["age", "education", "race", "sex"]
    ident = list(cfg.identifiers)
    t0 = time.perf_counter()
    ours_check = check(df, check_qi, [SENSITIVE])
    check_seconds = time.perf_counter() - t0
    have_anjana = Path(ANJANA_PYTHON).exists()
    if not have_anjana:
        print(
            f"note: no ANJANA virtualenv at {ANJANA_PYTHON}; its columns are skipped "
            "(python3 -m venv /tmp/anjana-venv && /tmp/anjana-venv/bin/pip install anjana)"
        )
    print(
        f"adult.csv: {len(df):,} rows, 8 quasi-identifiers, sensitive {SENSITIVE}, suppression limit {LIMIT:.0%}\n"
        "seconds: wall-clock / CPU; speed-up: ANJANA ÷ Dalenius, on wall-clock and on CPU\n"
    )
    header = f"{'setting':<12} {'Dalenius s':>12} {'NCP':>7} {'supp':>5} {'ANJANA s':>13} {'NCP':>7} {'supp':>6} {'speed-up':>13} {'NCP ratio':>9}  ANJANA release (checked by Dalenius)"
    print(header)
    print("-" * len(header))
    for name, setting in SETTINGS:
        anjana = run_anjana(df, qis, ident, theirs_h, None, [setting]) if have_anjana else None
        t0, c0 = time.perf_counter(), time.process_time()
        rel = anonymize(
            df,
            quasi_identifiers=qis,
            models=models_for(setting),
            sensitive=[SENSITIVE],
            identifiers=ident,
            hierarchies=ours_h,
            suppression_limit=LIMIT,
        )
        ours_s, ours_cpu = time.perf_counter() - t0, time.process_time() - c0
        ours_ncp = rel.report.loss["ncp"]
        line = f"{name:<12} {ours_s:>5.2f} / {ours_cpu:>4.2f} {ours_ncp:>7.4f} {rel.report.suppressed:>5}"
        run = anjana["runs"][0] if anjana else None
        if run is None:
            print(line + "   (ANJANA skipped)", flush=True)
            continue
        if "error" in run or not run.get("levels"):
            print(
                line
                + f" {run['seconds']:>6.2f}   ANJANA failed or released nothing: {run.get('error', 'empty')}"
            )
            continue
        kept = np.zeros(len(df), dtype=bool)
        kept[np.asarray(run["kept"], dtype=np.int64)] = True
        theirs_ncp = ncp(df, qis, ours_h, run["levels"], kept)
        released = df[kept].copy()
        for q, level in zip(qis, run["levels"], strict=True):
            lv = ours_h[q].apply(q, df[q].unique().tolist())
            released[q] = released[q].map(dict(zip(lv.values, lv.labels[level], strict=True)))
        chk = check(released, qis, [SENSITIVE])
        s = chk.sensitive[0]
        print(
            line
            + f" {run['seconds']:>6.2f} / {run['cpu']:>5.2f} {theirs_ncp:>7.4f} {len(df) - run['rows']:>6}"
            + f" {run['seconds'] / ours_s:>5.1f}x / {run['cpu'] / ours_cpu:>4.1f}x {ours_ncp / theirs_ncp:>9.3f}"
            + f"  k={chk.k} l={s.distinct_l} t={s.t:.3f}",
            flush=True,
        )
    print(
        f"\ncheck of adult by {check_qi} with {SENSITIVE}: Dalenius {check_seconds:.2f} s", end=""
    )
    pycanon = (
        run_anjana(df, qis, ident, theirs_h, {"qi": check_qi, "sensitive": SENSITIVE}, [])
        if have_anjana
        else None
    )
    if pycanon and "pycanon" in pycanon:
        pc = pycanon["pycanon"]
        s = ours_check.sensitive[0]
        print(f", pyCANON {pc['seconds']:.2f} s")
        print(
            f"  k: {ours_check.k} vs {pc['k']}; distinct l: {s.distinct_l} vs {pc['l']}; "
            f"entropy l: {s.entropy_l:.4f} vs {pc['entropy_l']} (pyCANON truncates); "
            f"t: {s.t:.4f} vs {pc['t']:.4f}"
        )
    else:
        print()


def census_bench(rows: int) -> None:
    from dalenius.datasets import generate_people

    people = generate_people(rows)
    qis = ["age", "sex", "zip", "education"]
    t0, c0 = time.perf_counter(), time.process_time()
    report = check(people, qis, ["income"])
    t_check, c_check = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    rel = anonymize(
        people,
        quasi_identifiers=qis,
        k=10,
        identifiers=["name", "person_id", "date_of_birth"],
        algorithm="mondrian",
    )
    t_mondrian, c_mondrian = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"\ncensus {rows:,} rows, quasi-identifiers {qis}:")
    print(
        f"  check (k={report.k}, t(income)={report.sensitive[0].t:.3f}): {t_check:.2f} s wall, {c_check:.2f} s CPU"
    )
    print(
        f"  Mondrian strict k=10: {t_mondrian:.2f} s wall, {c_mondrian:.2f} s CPU, {rel.report.loss['average_class_size']:.2f} C_avg, NCP {rel.report.loss['ncp']:.4f}"
    )
    print(
        f"  check + Mondrian: {t_check + t_mondrian:.2f} s wall, {c_check + c_mondrian:.2f} s CPU; peak resident memory of this process {peak:.2f} GiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--census", type=int, default=0, help="also time check + Mondrian on a census of N rows"
    )
    parser.add_argument("--skip-adult", action="store_true")
    args = parser.parse_args()
    if not args.skip_adult:
        adult_bench()
    if args.census:
        census_bench(args.census)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
