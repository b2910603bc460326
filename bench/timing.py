"""Timing side channel: how well response time tells neighbouring datasets apart, per release mode.

Run ``.venv/bin/python bench/timing.py`` (2,000 releases per side; see ``docs/constant-time.md``).
For each neighbour pair (D, D′) it opens one session per side and runs the same query
``--releases`` times on each, the two sides interleaved in a shuffled order, timing each
``Session.query`` end to end (perf_counter, in process). Pairs:

* ``heavy``: ``--persons`` persons with 2 rows each under a person-level unit capped at 2 rows,
  against the same plus one person holding ``--heavy-rows`` rows; ``SELECT COUNT(*)``;
* ``outlier``: a ``--parquet-rows``-row Parquet file (row unit, values in the bounds [0, 100]),
  against the same plus one row of value 10^12; ``SELECT SUM(x)``;
* ``group``: ``--persons`` rows in groups a and b, against the same plus one person in group c
  (keys a, b, c are public); ``SELECT g, COUNT(*) … GROUP BY g``;
* ``control`` (positive control): D against D itself, with a 0.5 ms busy wait
  (``--control-delay-ms``) injected into every engine call of the D′ side — a data-dependent delay the harness must detect (ε̂ > 0.5 when
  time is not protected).

Modes: ``off`` (today's release), ``off-noopt`` (the same with DuckDB's ``disabled_optimizers =
'statistics_propagation,filter_pushdown'``; the outlier pair only, to measure that setting alone)
and ``on`` (constant-time release: ``max_row_count`` declared, deadlines calibrated first by
``dalenius.engine.calibrate`` with ``--calibration-runs`` runs and ``--margin``, per-person cap
at load).

Printed for each pair and mode: median and p99 latency; the binned-latency ε̂ (a 95% lower
confidence bound: 40 quantile bins fixed on a held-out random 30% of each side's releases, which
also choose one event — a bin, or the latencies below or above a bin edge — and its direction;
Clopper–Pearson bounds on the other 70%, see :func:`binned_epsilon`); the two-sample KS and
Anderson–Darling p-values (scipy; AD's p-value is capped by scipy to [0.001, 0.25]); the AUC of a
latency classifier (per-bin log-likelihood ratio learnt on the held-out half, scored on the other,
with a 95% Hanley–McNeil interval); deadline misses; and, for ``on``, the latency cost (padded p50
and p99 divided by those of ``off``).

This is a benchmark, not a test: it prints and asserts nothing. On a shared machine the figures of
``off`` vary from run to run; ``on`` should not.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from scipy import stats

from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.core.deadlines import write_deadlines
from dalenius.core.errors import DeadlineError
from dalenius.core.loss import PureDP
from dalenius.engine.calibrate import calibrate
from dalenius.engine.session import Session
from dalenius.engine.timing import plan_class
from dalenius.executors.duckdb import CONSTANT_TIME_DISABLED_OPTIMIZERS, DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.protocol import ReleasePlan

BINS = 20
EVENT_BINS = 40
TRAIN_SHARE = 0.3
ALPHA = 0.05
CONTROL_DELAY_MS = 0.5
MODES = ("off", "off-noopt", "on")


# -- statistics -------------------------------------------------------------------------------


def _cp_lower(k: int, n: int, a: float) -> float:
    return 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))


def _cp_upper(k: int, n: int, a: float) -> float:
    return 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))


def _halves(x: np.ndarray, rng: random.Random, share: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    order = list(range(len(x)))
    rng.shuffle(order)
    cut = int(len(x) * share)
    return x[order[:cut]], x[order[cut:]]


def _bin_of(edges: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.searchsorted(edges, x, side="right")


def _edges(train: np.ndarray, bins: int) -> np.ndarray:
    return np.unique(np.quantile(train, np.arange(1, bins) / bins))


def _events(k: int) -> list[np.ndarray]:
    """The candidate events over ``k`` bins: each bin, and each lower and upper tail."""
    events = []
    for i in range(k):
        single = np.zeros(k, dtype=bool)
        single[i] = True
        events.append(single)
    for i in range(1, k):
        lower = np.arange(k) < i
        events.extend([lower, ~lower])
    return events


def _chosen_event_bound(
    train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], level: float
) -> float:
    """The event (bin or tail) and direction with the largest held-out log ratio, bounded on test.

    Choosing on the held-out half and testing one event on the other keeps the bound valid with no
    correction for the number of candidates, which makes it far more powerful than testing every
    bin (a shift of the whole distribution shows in a tail, not in one bin).
    """
    (ta, tb), (ea, eb) = train, test
    k = len(ta)
    best: tuple[float, np.ndarray, bool] | None = None
    for event in _events(k):
        pa = (ta[event].sum() + 0.5) / (ta.sum() + 1.0)
        pb = (tb[event].sum() + 0.5) / (tb.sum() + 1.0)
        for flipped, ratio in ((False, pa / pb), (True, pb / pa)):
            if best is None or math.log(ratio) > best[0]:
                best = (math.log(ratio), event, flipped)
    assert best is not None
    _, event, flipped = best
    p, q = int(ea[event].sum()), int(eb[event].sum())
    n_p, n_q = int(ea.sum()), int(eb.sum())
    if flipped:
        p, q, n_p, n_q = q, p, n_q, n_p
    low = _cp_lower(p, n_p, level)
    high = _cp_upper(q, n_q, level)
    return math.log(low / high) if low > high else 0.0


def binned_epsilon(
    a: Sequence[float],
    b: Sequence[float],
    *,
    bins: int = EVENT_BINS,
    alpha: float = ALPHA,
    seed: int = 0,
) -> float:
    """A (1 − alpha) lower confidence bound on the privacy loss visible in binned latencies.

    A random held-out share (:data:`TRAIN_SHARE`) of each side's latencies fixes ``bins``
    quantile bins and chooses one event — a bin, or the latencies below or above a bin edge —
    and one direction, those with the largest log ratio there. On the other releases the event's
    probability under each side gets one-sided Clopper–Pearson bounds at alpha / 2 each, and ε̂ is
    ``ln(lower / upper)``, or 0. Testing one event chosen on other data needs no correction for the
    number of candidates, so the bound is valid and far more powerful than testing every bin (a
    shift of the whole distribution shows in a tail, not in one bin).

    Example:
        >>> binned_epsilon([1.0] * 50 + [2.0] * 50, [1.0] * 50 + [2.0] * 50)
        0.0
    """
    rng = random.Random(seed)
    a_train, a_test = _halves(np.asarray(a, dtype=float), rng, TRAIN_SHARE)
    b_train, b_test = _halves(np.asarray(b, dtype=float), rng, TRAIN_SHARE)
    edges = _edges(np.concatenate([a_train, b_train]), bins)
    k = len(edges) + 1

    def counts(x: np.ndarray) -> np.ndarray:
        return np.bincount(_bin_of(edges, x), minlength=k)

    train = (counts(a_train), counts(b_train))
    return _chosen_event_bound(train, (counts(a_test), counts(b_test)), alpha / 2)


def classifier_auc(
    a: Sequence[float], b: Sequence[float], *, bins: int = BINS, seed: int = 0
) -> tuple[float, float, float]:
    """AUC of a latency classifier telling ``a`` from ``b``, with a 95% Hanley–McNeil interval.

    The classifier is the per-bin log-likelihood ratio (bins and ratios learnt on a held-out half,
    add-one smoothed); it is scored on the other half.
    """
    rng = random.Random(seed + 1)
    a_train, a_test = _halves(np.asarray(a, dtype=float), rng)
    b_train, b_test = _halves(np.asarray(b, dtype=float), rng)
    edges = _edges(np.concatenate([a_train, b_train]), bins)
    k = len(edges) + 1
    ca = np.bincount(_bin_of(edges, a_train), minlength=k) + 1.0
    cb = np.bincount(_bin_of(edges, b_train), minlength=k) + 1.0
    score = np.log(ca / ca.sum()) - np.log(cb / cb.sum())
    sa, sb = score[_bin_of(edges, a_test)], score[_bin_of(edges, b_test)]
    u = stats.mannwhitneyu(sa, sb, alternative="two-sided").statistic
    auc = float(u) / (len(sa) * len(sb))
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    n1, n2 = len(sa), len(sb)
    var = (auc * (1 - auc) + (n1 - 1) * (q1 - auc**2) + (n2 - 1) * (q2 - auc**2)) / (n1 * n2)
    half = 1.96 * math.sqrt(max(var, 0.0))
    return auc, auc - half, auc + half


def two_sample_p(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """KS and Anderson–Darling p-values (AD's is capped by scipy to [0.001, 0.25])."""
    ks = float(stats.ks_2samp(a, b).pvalue)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ad = float(stats.anderson_ksamp([np.asarray(a), np.asarray(b)]).pvalue)
    return ks, ad


# -- data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """A neighbour pair: the catalog text of each side (``{source}`` to fill) and the query."""

    name: str
    sql: str
    catalog: str
    sources: tuple[str, str]
    max_rows: int
    delay: bool = False


CATALOG_HEAVY = """
[dataset]
name = "timing_{name}"
{extra}
[tables.t]
source = {{ parquet = "{source}" }}
privacy_unit = {{ column = "pid", max_rows = 2 }}
{cap}
[tables.t.columns]
pid = "int"
x = {{ type = "int", bounds = [0, 100] }}
g = {{ type = "str", keys = ["a", "b", "c"] }}
"""

CATALOG_ROWS = CATALOG_HEAVY.replace('{{ column = "pid", max_rows = 2 }}', '"row"')


def _copy(con: duckdb.DuckDBPyConnection, select: str, path: Path) -> str:
    con.execute(f"COPY ({select}) TO '{path}' (FORMAT PARQUET)")
    return str(path)


def make_pairs(args: argparse.Namespace, folder: Path) -> list[Pair]:
    """Write the data of every pair asked for (Parquet files in ``folder``)."""
    con = duckdb.connect(":memory:")
    persons, heavy, rows = args.persons, args.heavy_rows, args.parquet_rows
    base = f"SELECT i // 2 AS pid, (i * 37) % 101 AS x, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS g FROM range({2 * persons}) r(i)"
    out = []
    wanted = set(args.pairs)
    if {"heavy", "control"} & wanted:
        d = _copy(con, base, folder / "heavy_d.parquet")
        if "heavy" in wanted:
            extra = f"SELECT -1 AS pid, i % 101 AS x, 'a' AS g FROM range({heavy}) r(i)"
            d2 = _copy(con, f"{base} UNION ALL {extra}", folder / "heavy_d2.parquet")
            out.append(
                Pair(
                    "heavy", 'SELECT COUNT(*) FROM "t"', CATALOG_HEAVY, (d, d2), 2 * persons + heavy
                )
            )
        if "control" in wanted:
            out.append(
                Pair(
                    "control",
                    'SELECT COUNT(*) FROM "t"',
                    CATALOG_HEAVY,
                    (d, d),
                    2 * persons,
                    delay=True,
                )
            )
    if "group" in wanted:
        d = _copy(con, base, folder / "group_d.parquet")
        d2 = _copy(con, f"{base} UNION ALL SELECT -1, 50, 'c'", folder / "group_d2.parquet")
        out.append(
            Pair(
                "group",
                'SELECT g, COUNT(*) FROM "t" GROUP BY g',
                CATALOG_HEAVY,
                (d, d2),
                2 * persons + 1,
            )
        )
    if "outlier" in wanted:
        flat = f"SELECT i AS pid, (i * 37) % 101 AS x, 'a' AS g FROM range({rows}) r(i)"
        d = _copy(con, flat, folder / "outlier_d.parquet")
        d2 = _copy(
            con, f"{flat} UNION ALL SELECT -1, 1000000000000, 'a'", folder / "outlier_d2.parquet"
        )
        out.append(Pair("outlier", 'SELECT SUM(x) FROM "t"', CATALOG_ROWS, (d, d2), rows + 1))
    con.close()
    return out


# -- sessions ---------------------------------------------------------------------------------


class FreshSession(Session):
    """A session that never answers from the ledger's cache (each release reads the data)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fresh = itertools.count()

    def _request_key(self, plan: ReleasePlan[Any]) -> str:
        return f"{super()._request_key(plan)}:{next(self._fresh)}"


class DelayedExecutor(DuckDBExecutor):
    """The positive control: every engine call of one side takes longer (busy wait)."""

    delay_ms = CONTROL_DELAY_MS

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        until = time.perf_counter() + self.delay_ms / 1000.0
        while time.perf_counter() < until:
            pass
        return super().fetch(sql)


def catalog_for(pair: Pair, side: int, mode: str, deadlines: Path) -> Catalog:
    extra = ""
    cap = ""
    if mode == "on":
        extra = f'constant_time = true\ndeadlines = "{deadlines}"\n'
        cap = f"max_row_count = {pair.max_rows}\n"
    text = pair.catalog.format(name=pair.name, extra=extra, cap=cap, source=pair.sources[side])
    return parse_catalog(text, base_dir=deadlines.parent)


def open_side(pair: Pair, side: int, mode: str, folder: Path) -> Session:
    catalog = catalog_for(pair, side, mode, folder / f"{pair.name}.deadlines.toml")
    optimizers = CONSTANT_TIME_DISABLED_OPTIMIZERS if mode == "off-noopt" else None
    kind = DelayedExecutor if pair.delay and side == 1 else DuckDBExecutor
    executor = kind(catalog, disabled_optimizers=optimizers)
    ledger = open_ledger(None)  # in memory: a file ledger's sync adds milliseconds of noise
    ledger.set_budget("analyst", catalog.name, PureDP(10**12))
    return FreshSession(catalog, ledger=ledger, executor=executor)


def calibrate_pair(pair: Pair, folder: Path, runs: int, margin: float = 2.0) -> float:
    """Calibrate the ``on`` catalog of a pair; returns the deadline of its query's class (ms)."""
    catalog = catalog_for(pair, 0, "on", folder / f"{pair.name}.deadlines.toml")
    deadlines, _ = calibrate(catalog, runs=runs, margin=margin, folder=folder, ledger="memory")
    assert catalog.deadlines_path is not None
    write_deadlines(deadlines, catalog.deadlines_path)
    session = open_side(pair, 0, "on", folder)
    try:
        return float(deadlines.deadlines_ms[_class_of(session, pair.sql)])
    finally:
        session.close()


def _class_of(session: Session, sql: str) -> str:
    return plan_class(session.prepare(sql, 1).plan)


@dataclass
class Run:
    pair: str
    mode: str
    a: list[float]
    b: list[float]
    misses: int


def run_pair(pair: Pair, mode: str, releases: int, folder: Path, seed: int) -> Run:
    """Time ``releases`` interleaved releases per side."""
    sides = [open_side(pair, 0, mode, folder), open_side(pair, 1, mode, folder)]
    times: list[list[float]] = [[], []]
    misses = 0
    try:
        for side in (0, 1):  # warm-up: plans cached, tables loaded
            for _ in range(3):
                _release(sides[side], pair.sql)
        order = [0] * releases + [1] * releases
        random.Random(seed).shuffle(order)
        for side in order:
            start = time.perf_counter()
            missed = _release(sides[side], pair.sql)
            times[side].append((time.perf_counter() - start) * 1000.0)
            misses += missed
    finally:
        for session in sides:
            session.close()
    return Run(pair.name, mode, times[0], times[1], misses)


def _release(session: Session, sql: str) -> int:
    try:
        session.query(sql, 1)
    except DeadlineError:
        return 1
    return 0


# -- report -----------------------------------------------------------------------------------

HEADER = (
    f"{'pair':8} {'mode':9} {'p50 ms':>8} {'p99 ms':>8} {'eps_hat':>7} {'KS p':>9} {'AD p':>6} "
    f"{'AUC':>5} {'AUC 95% CI':>13} {'misses':>6} {'cost p50':>8} {'cost p99':>8}"
)


def report(run: Run, baseline: Run | None, seed: int) -> str:
    both = np.array(run.a + run.b)
    eps = binned_epsilon(run.a, run.b, seed=seed)
    ks, ad = two_sample_p(run.a, run.b)
    auc, low, high = classifier_auc(run.a, run.b, seed=seed)
    cost50 = cost99 = "-"
    if baseline is not None:
        base = np.array(baseline.a + baseline.b)
        cost50 = f"{np.median(both) / np.median(base):.2f}x"
        cost99 = f"{np.quantile(both, 0.99) / np.quantile(base, 0.99):.2f}x"
    return (
        f"{run.pair:8} {run.mode:9} {np.median(both):8.3f} {np.quantile(both, 0.99):8.3f} "
        f"{eps:7.3f} {ks:9.2g} {ad:6.3f} {auc:5.3f} [{low:5.3f},{high:5.3f}] {run.misses:6d} "
        f"{cost50:>8} {cost99:>8}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=2000, help="releases per side (2000)")
    parser.add_argument("--persons", type=int, default=20000, help="persons of heavy/group (20000)")
    parser.add_argument("--heavy-rows", type=int, default=100000, help="the heavy person's rows")
    parser.add_argument(
        "--parquet-rows", type=int, default=1000000, help="rows of the outlier file"
    )
    parser.add_argument(
        "--pairs",
        nargs="+",
        default=["heavy", "outlier", "group", "control"],
        choices=["heavy", "outlier", "group", "control"],
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--calibration-runs", type=int, default=100, help="runs per class (100)")
    parser.add_argument("--margin", type=float, default=2.0, help="calibration's safety margin (2)")
    parser.add_argument(
        "--control-delay-ms", type=float, default=CONTROL_DELAY_MS, help="the control's delay (0.5)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the order and the splits")
    parser.add_argument(
        "--data", default=None, help="folder for the data (default: a temporary one)"
    )
    parser.add_argument(
        "--dump", default=None, help="write every latency (ms) per pair, mode and side to this JSON"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    DelayedExecutor.delay_ms = args.control_delay_ms
    print(f"bench/timing.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus: {os.cpu_count()}"
    )
    with tempfile.TemporaryDirectory(prefix="dalenius-timing-", dir=args.data) as tmp:
        folder = Path(tmp)
        pairs = make_pairs(args, folder)
        print(HEADER)
        dumped: dict[str, dict[str, Any]] = {}
        for pair in pairs:
            runs: dict[str, Run] = {}
            for mode in args.modes:
                if mode == "off-noopt" and pair.name != "outlier":
                    continue
                note = ""
                if mode == "on":
                    deadline = calibrate_pair(pair, folder, args.calibration_runs, args.margin)
                    note = f"  (deadline {deadline:.1f} ms)"
                runs[mode] = run_pair(pair, mode, args.releases, folder, args.seed)
                baseline = runs.get("off") if mode == "on" else None
                print(report(runs[mode], baseline, args.seed) + note, flush=True)
                dumped[f"{pair.name}/{mode}"] = {
                    "a": runs[mode].a,
                    "b": runs[mode].b,
                    "misses": runs[mode].misses,
                    "note": note.strip(),
                }
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
