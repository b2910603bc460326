"""Error bars of memoised collections count devices, not repeats (a marked simulation).

Ten reports per device of one memoised 1BitMean response are one observation: estimated from
every report, the 95% interval covers the true mean about half the time; from the independent
observations, at its stated rate.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dalenius.ldp.collection import CollectionSpec, independent
from dalenius.ldp.microsoft import OneBitMean, OneBitMeanClient

DEVICES, REPEATS, TRIALS = 150, 10, 200


def _coverage(rng: np.random.Generator) -> tuple[int, int]:
    spec = CollectionSpec({"protocol": "1bitmean", "epsilon": 1, "bound": 10})
    mechanism = OneBitMean(epsilon=1, bound=10)
    covered_all = covered_independent = 0
    for _ in range(TRIALS):
        values = rng.integers(0, 11, DEVICES)
        rows = []
        for d, value in enumerate(values):
            client = OneBitMeanClient(mechanism, secret=rng.bytes(32))
            point, bit = client.report(float(value))
            rows += [(f"d{d}", f"p{point}", bit)] * REPEATS
        truth = float(values.mean())
        for kept, name in (
            (independent("report", rows), "all"),
            (independent("response", rows), "ind"),
        ):
            out = spec.estimate(kept, 0.95)
            inside = out["lower"] <= truth <= out["upper"]
            if name == "all":
                covered_all += inside
            else:
                covered_independent += inside
    return covered_all, covered_independent


def test_memoised_repeats_are_one_observation_and_intervals_keep_their_coverage() -> None:
    # Simulation: seeded device secrets (tests only); the α of each client is the OS's.
    rng = np.random.Generator(np.random.PCG64(20261128))
    covered_all, covered_independent = _coverage(rng)
    # At the stated 95%, fewer than 176 of 200 has probability below 1e-4.
    assert stats.binom.cdf(covered_independent - 1, TRIALS, 0.95) < 1 - 1e-4
    assert covered_independent >= 176
    # The same reports counted as independent: far below the stated rate.
    assert covered_all < 150
