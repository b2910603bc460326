"""RAPPOR at 10^6 clients with the published regression-test settings.

Run ``python bench/rappor.py`` (needs the ``ldp`` extra for scikit-learn). It reproduces RAPPOR's
``small`` regression cases: 100 values ``v1..v100``, 10^6 clients with one report each, Bloom
filter ``8x128`` (k = 8 bits, h = 2 hashes, m = 128 cohorts), privacy ``eps_1_1`` (p = 0.39,
q = 0.61, f = 0.45: ε₁ = 0.973, ε∞ = 4.947) and two candidate configurations:

* ``typical``: 20 extra candidates ``v101..v120`` that nobody holds, and every value matching
  ``v…9`` missing from the candidate list (10 values);
* ``sharp``: exactly the 100 true values.

Distributions over the 100 values (weights before normalising, value ``i`` = 1..100): ``unif``
constant; ``exp`` ``exp(−i/10)``; ``gauss`` ``exp(−(i − 50)²/(2·15²))``; ``zipf1`` ``1/i``;
``zipf1.5`` ``i^−1.5``.

Clients are simulated with the seeded simulation generator (vectorised); the decoder is the
production one. Printed per case: detected values, false positives among the extras, the true
mass of the detected values, and the total variation distance between the true distribution and
the decoded one (undetected values count as 0). ``--clients`` and ``--cases`` shrink the run.
"""

from __future__ import annotations

import argparse
import re
import time
import zlib

import numpy as np

from dalenius.ldp._draws import SimulationDraws
from dalenius.ldp.rappor import RapporParams, bit_counts, simulate_reports
from dalenius.ldp.rappor_decode import decode

VALUES = [f"v{i}" for i in range(1, 101)]
EXTRA = [f"v{i}" for i in range(101, 121)]
MISSING = re.compile(r"v[0-9]*9$")


def weights(name: str) -> np.ndarray:
    i = np.arange(1, 101, dtype=np.float64)
    table = {
        "unif": np.ones_like(i),
        "exp": np.exp(-i / 10),
        "gauss": np.exp(-((i - 50) ** 2) / (2 * 15**2)),
        "zipf1": 1 / i,
        "zipf1.5": i**-1.5,
    }
    w = table[name]
    return w / w.sum()


def run_case(dist: str, config: str, clients: int, params: RapporParams) -> dict[str, float]:
    rng = np.random.default_rng(zlib.crc32(f"{dist}:{config}".encode()))  # data only
    values = rng.choice(100, size=clients, p=weights(dist))
    truth = np.bincount(values, minlength=100) / clients
    started = time.perf_counter()
    cohorts, bits = simulate_reports(values, VALUES, params, SimulationDraws())
    counts, totals = bit_counts(cohorts, bits, params)
    simulated = time.perf_counter() - started
    if config == "typical":
        candidates = [v for v in VALUES if not MISSING.match(v)] + EXTRA
    else:
        candidates = list(VALUES)
    started = time.perf_counter()
    result = decode(counts, totals, candidates, params)
    decoded = time.perf_counter() - started
    estimate = np.zeros(100)
    detected_true = false_pos = 0
    for name, count, hit in zip(result.candidates, result.counts, result.detected, strict=True):
        index = int(name[1:]) - 1
        if not hit:
            continue
        if index >= 100:
            false_pos += 1
        else:
            detected_true += 1
            estimate[index] = count / clients
    return {
        "detected": detected_true,
        "false_pos": false_pos,
        "mass": float(truth[estimate > 0].sum()),
        "tvd": 0.5 * float(np.abs(truth - estimate).sum()),
        "sim_s": simulated,
        "decode_s": decoded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=float, default=1e6)
    parser.add_argument("--cases", default="unif,exp,gauss,zipf1,zipf1.5")
    parser.add_argument("--configs", default="typical,sharp")
    args = parser.parse_args()
    params = RapporParams(bits=8, hashes=2, cohorts=128, f=0.45, p=0.39, q=0.61)
    print(
        f"RAPPOR regression settings: k=8 h=2 m=128 p=0.39 q=0.61 f=0.45 "
        f"(ε₁={float(params.epsilon_one):.3f}, ε∞={float(params.epsilon_inf):.3f}), "
        f"{int(args.clients):,} clients"
    )
    print(
        f"{'case':28} {'detected':>8} {'false+':>6} {'mass':>6} {'TVD':>6} {'sim s':>6} {'dec s':>6}"
    )
    for dist in args.cases.split(","):
        for config in args.configs.split(","):
            row = run_case(dist, config, int(args.clients), params)
            print(
                f"r-{dist}-small-{config:10} {row['detected']:>8} {row['false_pos']:>6} "
                f"{row['mass']:>6.3f} {row['tvd']:>6.3f} {row['sim_s']:>6.1f} {row['decode_s']:>6.1f}"
            )


if __name__ == "__main__":
    main()
