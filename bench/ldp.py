"""Local-DP frequency oracles: Dalenius vs pure-ldp and multi-freq-ldpy, time and mean squared error.

Run ``python bench/ldp.py`` (small machine: ``--users 2e5``). One run prints one table:

* for ε = 1 and 4, each protocol (GRR, OUE, OLH, HR), **encode + aggregate** of ``--users``
  simulated clients over a domain of ``--domain`` values drawn from a Zipf(1.1) distribution:
  seconds, MSE of the estimated counts, the closed-form MSE (mean of the exact variances) and
  their ratio. Dalenius runs its vectorised encoders with the simulation generator (numpy's PCG64,
  the simulation path: production clients use the OS generator, timed separately in the
  ``os`` column for one batch of clients);
* the same settings through pure-ldp and multi-freq-ldpy, each in its own virtualenv (their pins
  conflict with ours: ``xxhash==3.8.2``, ``numpy<2`` for pure-ldp's sketches), called through a
  subprocess on the same data. Every implementation is **warmed up** before its clock starts: the
  same calls on 1,000 clients first, so multi-freq-ldpy's numba functions are compiled outside
  the timed region and every time is steady state. A peer runs at the full size unless a probe
  on 5,000 clients projects more than ``--peer-budget`` seconds (default 300); such a peer is
  **not** timed at the full size and the table says so (``>300``, and on stderr the projection),
  with its MSE ratio measured on the probe (marked ``*``; the ratio to the closed form does not
  depend on ``n`` for an unbiased estimator). multi-freq-ldpy's aggregators clip and renormalise,
  so its estimates are biased: its ratio measures that bias, not noise;
* ``--repeats R`` averages Dalenius's MSE ratio over ``R`` runs (one run's ratio has a standard
  deviation of about 0.045 at ``d = 1000``, so "within 5%" needs several); the time stays the
  first run's;
* OLH at ``--big`` clients (default 10^7): seconds and peak resident memory, in a subprocess.

``--clock cpu`` reports each process's CPU time instead of wall time (every implementation here is
single-threaded): on a machine shared with other jobs wall times swing with their load, between
our run and the peers' runs minutes later, and the ratio with them; CPU time is much steadier.
With ``--clock cpu`` the OLH scale row includes drawing the simulated data.

Set the peers' interpreter with ``--peers-python`` (default ``/tmp/ldp-peers/bin/python``); when
it is missing the table says so and shows Dalenius alone. This is a benchmark, not a test: it
asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dalenius.ldp import make_oracle
from dalenius.ldp._draws import SimulationDraws, SystemDraws
from dalenius.ldp.simulate import distribution

PROTOCOLS = ("grr", "oue", "olh", "hr")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
CHOSEN = {"clock": "wall"}
"""What the table's seconds measure (``--clock``): wall time, or each process's CPU time."""


def clock() -> float:
    """The chosen clock's reading."""
    return CLOCKS[CHOSEN["clock"]]()


PEER_SCRIPT = r"""
import json, sys, time
import numpy as np
library, protocol, eps, d, path = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
clock = time.process_time if sys.argv[6] == "cpu" else time.perf_counter
values = np.load(path)
if library == "pure-ldp":
    import pure_ldp.frequency_oracles as fo
else:
    from multi_freq_ldpy.pure_frequency_oracles import GRR, UE, LH


def run(values):
    if library == "pure-ldp":
        if protocol == "grr":
            client, server = fo.DEClient(eps, d), fo.DEServer(eps, d)
        elif protocol == "oue":
            client, server = fo.UEClient(eps, d, use_oue=True), fo.UEServer(eps, d, use_oue=True)
        elif protocol == "olh":
            client, server = fo.LHClient(eps, d, use_olh=True), fo.LHServer(eps, d, use_olh=True)
        elif protocol == "hr":
            server = fo.HadamardResponseServer(eps, d)
            client = fo.HadamardResponseClient(eps, d, server.get_hash_funcs())
        for v in values:
            server.aggregate(client.privatise(int(v) + 1))
        return [server.estimate(i + 1, suppress_warnings=True) for i in range(d)]
    if protocol == "grr":
        reports = [GRR.GRR_Client(int(v), d, eps) for v in values]
        freq = GRR.GRR_Aggregator_MI(reports, d, eps)
    elif protocol == "oue":
        reports = [UE.UE_Client(int(v), d, eps, True) for v in values]
        freq = UE.UE_Aggregator_MI(reports, eps, True)
    elif protocol == "olh":
        reports = [LH.LH_Client(int(v), d, eps, True) for v in values]
        freq = LH.LH_Aggregator_MI(reports, d, eps, True)
    else:
        raise SystemExit("unsupported")
    return list(np.asarray(freq, dtype=float) * len(values))


# Warm-up, outside the clock: the same calls on a few clients first, so numba compiles
# multi-freq-ldpy's jitted clients and aggregators (and every import and cache is loaded) before
# the timed run, which is then steady state.
run(values[: min(values.size, 1000)])
started = clock()
est = run(values)
print(json.dumps({"seconds": clock() - started, "estimates": [float(x) for x in est]}))
"""


def dalenius_run(protocol: str, eps: float, values: np.ndarray, d: int) -> tuple[float, np.ndarray]:
    oracle = make_oracle(protocol, d, eps)
    draws = SimulationDraws()
    started = clock()
    server = oracle.accumulator(values.size)
    for start in range(0, values.size, 1 << 20):
        server.add(oracle._simulated_reports(values[start : start + (1 << 20)], draws))
    est = oracle.estimate_from_support(server.support(), values.size).counts
    return clock() - started, est


def os_rate(protocol: str, eps: float, d: int, clients: int = 100_000) -> float:
    """Seconds per 10^6 clients through the production encoder's generator (os.urandom)."""
    oracle = make_oracle(protocol, d, eps)
    values = np.arange(clients) % d
    started = clock()
    oracle._perturb(values, SystemDraws())
    return (clock() - started) * 1e6 / clients


def peer_run(
    python: str, library: str, protocol: str, eps: float, values: np.ndarray, d: int, budget: float
) -> dict[str, object] | None:
    """Run a peer at the full size, warmed up; one whose probe projects past ``budget`` is not.

    A probe on 5,000 clients (warmed up like every run) projects the full run's time. At or under
    ``budget`` seconds the full run follows, with a timeout of twice the budget; over it, or on a
    timeout, the answer says so (``"over"``) and carries the probe's figures, which the table
    shows as such — never as a time at the full size.
    """
    with tempfile.TemporaryDirectory() as tmp:

        def once(n: int, timeout: float) -> dict[str, object]:
            path = Path(tmp) / "values.npy"
            np.save(path, values[:n])
            done = subprocess.run(
                [
                    python,
                    "-c",
                    PEER_SCRIPT,
                    library,
                    protocol,
                    str(eps),
                    str(d),
                    str(path),
                    CHOSEN["clock"],
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            if done.returncode != 0:
                return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1][:80]}
            out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
            out["n"] = n
            return out

        probe_n = min(values.size, 5_000)
        try:
            probe = once(probe_n, max(budget, 120))
        except subprocess.TimeoutExpired:
            return {"error": f"timed out on {probe_n:,} clients"}
        if "error" in probe or probe_n == values.size:
            return probe
        projected = float(probe["seconds"]) * values.size / probe_n  # type: ignore[arg-type]
        if projected <= budget:
            try:
                full = once(values.size, 2 * budget + 60)
            except subprocess.TimeoutExpired:
                return {**probe, "over": 2 * budget + 60}
            return full
        return {**probe, "over": budget, "projected": projected}


def _projection(out: dict[str, object]) -> str:
    if "projected" not in out:
        return ", timed out at the full size"
    return f": {float(out['projected']):.0f} s projected from {int(out['n']):,} clients"  # type: ignore[arg-type]


def big_olh(users: int, d: int) -> tuple[float, float]:
    code = (
        "import resource, sys, time\n"
        "from dalenius.ldp.simulate import simulate\n"
        "cpu = time.process_time()\n"
        f"r = simulate('olh', 1, users={users}, domain={d}, dist='zipf', seed=7)\n"
        "cpu = time.process_time() - cpu\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20\n"
        f"print(cpu if {CHOSEN['clock'] == 'cpu'} else r.seconds, peak, r.mse / r.theory_mse)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, peak, ratio = (float(x) for x in done.stdout.split())
    print(
        f"OLH, ε = 1, {users:,} clients, d = {d}: {seconds:.2f} s encode + aggregate, peak RSS {peak:.2f} GiB, MSE/theory {ratio:.3f}"
    )
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=float, default=1e6)
    parser.add_argument("--domain", type=int, default=1000)
    parser.add_argument("--epsilons", default="1,4")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--peers-python", default="/tmp/ldp-peers/bin/python")
    parser.add_argument(
        "--peer-budget",
        type=float,
        default=300.0,
        help="seconds a peer may project for the full size; past it, it is not run there",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="Dalenius runs per row; the MSE ratio is their mean (its standard error to stderr)",
    )
    parser.add_argument(
        "--clock",
        choices=tuple(CLOCKS),
        default="wall",
        help="wall time, or each process's CPU time (steadier on a shared machine; every "
        "implementation here is single-threaded)",
    )
    parser.add_argument(
        "--big", type=float, default=1e7, help="OLH clients for the scale row (0: skip)"
    )
    args = parser.parse_args()
    CHOSEN["clock"] = args.clock
    n, d = int(args.users), args.domain
    rng = np.random.default_rng(2026)  # data only
    true_counts = rng.multinomial(n, distribution("zipf", d))
    values = rng.permutation(np.repeat(np.arange(d), true_counts))
    peers = Path(args.peers_python).exists()
    if not peers:
        print(
            f"note: no peer interpreter at {args.peers_python}: pure-ldp and multi-freq-ldpy are not run"
        )
        print(
            "      (python -m venv /tmp/ldp-peers && /tmp/ldp-peers/bin/pip install pure-ldp multi-freq-ldpy xxhash==3.8.2 'numpy<2' scipy scikit-learn statsmodels)"
        )
    print(
        f"encode + aggregate, {n:,} clients, d = {d}, Zipf(1.1); {args.clock} seconds; "
        "MSE of counts; ratio = MSE / closed form"
    )
    header = f"{'ε':>3} {'protocol':8} {'dalenius s':>10} {'os s/1e6':>9} {'ratio':>7} | {'pure-ldp s':>11} {'ratio':>7} | {'mfl s':>9} {'ratio':>7} | {'speed-up':>8}"
    print(header)
    print("-" * len(header))
    for eps in (float(e) for e in args.epsilons.split(",")):
        for protocol in args.protocols.split(","):
            oracle = make_oracle(protocol, d, eps)
            theory = float(np.mean(oracle.variance(true_counts, n)))
            dalenius_run(protocol, eps, values[:1000], d)  # warm-up, like the peers'
            seconds, est = dalenius_run(protocol, eps, values, d)
            ratios = [float(np.mean((est - true_counts) ** 2)) / theory]
            for _ in range(args.repeats - 1):  # the time is the first run's
                ratios.append(
                    float(np.mean((dalenius_run(protocol, eps, values, d)[1] - true_counts) ** 2))
                    / theory
                )
            ratio = float(np.mean(ratios))
            if args.repeats > 1:
                spread = float(np.std(ratios, ddof=1)) / len(ratios) ** 0.5
                print(
                    f"    {protocol} ε = {eps:g}: MSE/theory {ratio:.4f} ± {spread:.4f} over {args.repeats} runs",
                    file=sys.stderr,
                )
            cells, best_peer, slowest = [], None, None
            for library in ("pure-ldp", "multi-freq-ldpy"):
                if not peers or (library == "multi-freq-ldpy" and protocol == "hr"):
                    cells.append(
                        (f"{'—':>11}" if library == "pure-ldp" else f"{'—':>9}", f"{'—':>7}")
                    )
                    continue
                out = peer_run(
                    args.peers_python, library, protocol, eps, values, d, args.peer_budget
                )
                width = 11 if library == "pure-ldp" else 9
                if out is None or "error" in out:
                    cells.append((f"{'failed':>{width}}", f"{'':>7}"))
                    print(
                        f"    {library} {protocol}: {out.get('error') if out else 'failed'}",
                        file=sys.stderr,
                    )
                    continue
                m = int(out["n"])  # type: ignore[arg-type]
                truth = np.bincount(values[:m], minlength=d)
                peer_theory = float(np.mean(oracle.variance(truth, m)))
                peer_ratio = (
                    float(np.mean((np.asarray(out["estimates"]) - truth) ** 2)) / peer_theory
                )
                if "over" in out:  # not run at the full size: its time there is unknown
                    over = float(out["over"])  # type: ignore[arg-type]
                    cells.append((f"{'>' + format(over, '.0f'):>{width}}", f"{peer_ratio:>6.3f}*"))
                    print(
                        f"    {library} {protocol} ε = {eps:g}: not run at {n:,} clients (over "
                        f"{over:.0f} s{_projection(out)}); ratio* measured on {m:,} clients",
                        file=sys.stderr,
                    )
                    slowest = over if slowest is None else max(slowest, over)
                    continue
                t = float(out["seconds"])  # type: ignore[arg-type]
                cells.append((f"{t:>{width}.2f}", f"{peer_ratio:>7.3f}"))
                best_peer = t if best_peer is None else min(best_peer, t)
            if best_peer:
                speed = f"{best_peer / seconds:>7.0f}×"
            elif slowest:  # every peer ran over its budget: a lower bound
                speed = f"{'>' + format(slowest / seconds, '.0f'):>7}×"
            else:
                speed = f"{'—':>8}"
            print(
                f"{eps:>3g} {protocol:8} {seconds:>10.3f} {os_rate(protocol, eps, d):>9.2f} {ratio:>7.3f} | "
                f"{cells[0][0]} {cells[0][1]} | {cells[1][0]} {cells[1][1]} | {speed}"
            )
    if args.big:
        big_olh(int(args.big), d)


if __name__ == "__main__":
    main()
