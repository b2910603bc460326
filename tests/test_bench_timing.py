"""The timing benchmark's statistics, on synthetic latencies, and a tiny run of its command.

No test here asserts how long anything took: the statistics are checked on latencies drawn from
known distributions (a seeded generator, for the data only), and the command on what it prints.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_timing", ROOT / "bench" / "timing.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_timing"] = module
    spec.loader.exec_module(module)
    return module


bench = load_bench()
N = 2000


def latencies(seed: int, shift: float = 0.0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(8.0 + shift + rng.gamma(4.0, 0.25, N))


def test_identical_latency_distributions_give_a_small_epsilon_and_auc_near_half() -> None:
    a, b = latencies(1), latencies(2)
    assert bench.binned_epsilon(a, b) < 0.2
    _, low, high = bench.classifier_auc(a, b)
    assert low < 0.5 < high
    ks, ad = bench.two_sample_p(a, b)
    assert ks > 1e-3 and ad > 1e-3


def test_a_shift_of_half_the_spread_is_detected() -> None:
    a, b = latencies(3), latencies(4, shift=0.5)
    assert bench.binned_epsilon(a, b) > 0.5
    _, low, _ = bench.classifier_auc(a, b)
    assert low > 0.52
    ks, ad = bench.two_sample_p(a, b)
    assert ks < 0.01 and ad < 0.01


def test_a_large_shift_gives_a_large_epsilon_in_both_directions() -> None:
    a, b = latencies(5), latencies(6, shift=3.0)
    assert bench.binned_epsilon(a, b) > 2.0
    assert bench.binned_epsilon(b, a) > 2.0


def test_a_half_millisecond_delay_over_a_noisy_floor_is_detected_through_a_tail() -> None:
    rng = np.random.default_rng(7)
    a = 8.0 + rng.normal(0.0, 0.4, N) + rng.exponential(1.0, N)
    b = 8.5 + rng.normal(0.0, 0.4, N) + rng.exponential(1.0, N)
    assert bench.binned_epsilon(list(a), list(b)) > 0.5


def test_the_bound_stays_at_zero_on_identical_skewed_distributions() -> None:
    rng = np.random.default_rng(8)
    for seed in range(20):
        a, b = (list(8.0 + rng.lognormal(0.0, 0.5, N)) for _ in range(2))
        assert bench.binned_epsilon(a, b, seed=seed) == 0.0


@pytest.mark.slow
def test_the_benchmark_prints_every_pair_and_mode(tmp_path: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "bench" / "timing.py"),
        *("--releases", "20", "--persons", "100", "--heavy-rows", "500"),
        *("--parquet-rows", "1000", "--calibration-runs", "2", "--data", str(tmp_path)),
        *("--pairs", "heavy", "outlier", "--modes", "off", "off-noopt", "on"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    number = r"[-\d.e+]+"
    for pair, mode in [("heavy", "off"), ("heavy", "on"), ("outlier", "off-noopt")]:
        assert re.search(rf"^{pair} +{mode} +({number} +){{5}}{number} \[", done.stdout, re.M), (
            pair,
            mode,
            done.stdout,
        )
    assert re.search(
        r"^heavy +on .* \d+ +[\d.]+x +[\d.]+x +\(deadline [\d.]+ ms\)$", done.stdout, re.M
    )
    assert "heavy    off-noopt" not in done.stdout
