"""Benchmark of Dalenius's noise mechanisms: time for 10^6 draws, ratios, and the timing channel.

Run ``python bench/noise.py`` (or ``make bench``). One run prints one table:

* seconds for 10^6 draws of every mechanism (median of several repetitions, tables built first),
  beside numpy's floating-point ``Generator.laplace`` (fast but unsafe: not float-safe, seeded
  PRNG) and OpenDP's ``make_laplace`` (optional: ``pip install 'dalenius[bench]'``);
* the ratio of each time to numpy's and OpenDP's;
* the one-off setup time (certified tables) of each mechanism;
* a timing side-channel row: for single-value releases, the mean time of the calls whose noise was
  in the smallest tenth versus the largest tenth, and the rank correlation of time with |noise|.

This is a benchmark, not a test: it asserts nothing about wall-clock time.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dalenius.core.loss import ZCDP
from dalenius.mechanisms import (
    ExponentialMechanism,
    GridGaussian,
    GridLaplace,
    IntegerGaussian,
    IntegerLaplace,
    PermuteAndFlip,
    RandomizedResponse,
    RecordPerturbation,
    discrete_gaussian,
    discrete_laplace,
)
from dalenius.mechanisms._dgauss import gaussian_sampler
from dalenius.mechanisms._dlaplace import laplace_sampler

N = 1_000_000


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def setup_seconds(build: Callable[[], object]) -> float:
    """Time to construct a mechanism with empty table caches."""
    laplace_sampler.cache_clear()
    gaussian_sampler.cache_clear()
    start = time.perf_counter()
    build()
    return time.perf_counter() - start


def opendp_seconds(draws: int) -> tuple[float | None, str]:
    """Seconds for 10^6 OpenDP Laplace draws (measured on ``draws`` and scaled), or why not."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None, "OpenDP not measured: it is not installed (pip install 'dalenius[bench]')."
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    measurement = dp.m.make_laplace(*space, scale=1.0)
    data = [0.0] * draws
    seconds = median_seconds(lambda: measurement(data), 1) * (N / draws)
    note = f"OpenDP make_laplace measured on {draws:,} draws and scaled to 10^6."
    return seconds, note


def timing_channel(release: Callable[[], float], calls: int) -> tuple[float, float, float]:
    """Mean µs per single-value call for the smallest and largest tenth of |noise|, and Spearman ρ."""
    for _ in range(200):
        release()
    durations = np.empty(calls)
    magnitudes = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter_ns()
        noise = release()
        durations[i] = (time.perf_counter_ns() - start) / 1000
        magnitudes[i] = abs(noise)
    order = np.argsort(magnitudes, kind="stable")
    tenth = calls // 10
    small = float(np.mean(durations[order[:tenth]]))
    large = float(np.mean(durations[order[-tenth:]]))
    ranks_t = np.argsort(np.argsort(durations))
    ranks_m = np.argsort(np.argsort(magnitudes + np.arange(calls) * 1e-12))
    rho = float(np.corrcoef(ranks_t, ranks_m)[0, 1])
    return small, large, rho


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per row")
    parser.add_argument("--opendp-draws", type=int, default=100_000, help="OpenDP sample size")
    parser.add_argument("--channel-calls", type=int, default=20_000, help="single-value calls")
    args = parser.parse_args()

    zeros = np.zeros(N)
    int_zeros = np.zeros(N, dtype=np.int64)
    codes = np.arange(N) % 5
    generator = np.random.default_rng()
    scores = list(range(10))

    rows: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "GridLaplace.release_each (Δ=1, ε=1; float-safe)",
            lambda: GridLaplace(1, Fraction(1)),
            # N one-value releases, each its own loss: a release of N values at once is
            # calibrated for N answers (answers=N), a different mechanism.
            lambda: grid_laplace.release_each(zeros),
        ),
        (
            "IntegerLaplace.release (Δ=1, ε=1/10)",
            lambda: IntegerLaplace(1, Fraction(1, 10)),
            lambda: int_laplace.release(int_zeros),
        ),
        (
            "discrete_laplace (scale 10^6, 4 digit tables)",
            lambda: discrete_laplace(Fraction(10**6), 1),
            lambda: discrete_laplace(Fraction(10**6), N),
        ),
        (
            "GridGaussian.release_each (Δ=1, ρ=1/2)",
            lambda: GridGaussian(1, ZCDP(Fraction(1, 2))),
            lambda: grid_gauss.release_each(zeros),
        ),
        (
            "IntegerGaussian.release (Δ=1, ρ=1/200)",
            lambda: IntegerGaussian(1, ZCDP(Fraction(1, 200))),
            lambda: int_gauss.release(int_zeros),
        ),
        (
            "discrete_gaussian (σ²=1500²)",
            lambda: discrete_gaussian(Fraction(1500**2), 1),
            lambda: discrete_gaussian(Fraction(1500**2), N),
        ),
        (
            "RandomizedResponse.privatize (k=5, ε=1)",
            lambda: RandomizedResponse(5, epsilon=1),
            lambda: rr.privatize(codes),
        ),
        (
            "RecordPerturbation.release (D=[0,100], ε=1, δ=1e-3)",
            lambda: RecordPerturbation(0, 100, 1, Fraction(1, 1000)),
            lambda: perturb.release(zeros),
        ),
        (
            "ExponentialMechanism.sample (10 candidates)",
            lambda: ExponentialMechanism(1, Fraction(1)),
            lambda: expo.sample(scores, N),
        ),
        (
            "PermuteAndFlip.sample (10 candidates, 10^7 coins)",
            lambda: PermuteAndFlip(1, Fraction(1)),
            lambda: pf.sample(scores, N),
        ),
    ]

    setups = {name: setup_seconds(build) for name, build, _ in rows}
    grid_laplace = GridLaplace(1, Fraction(1))
    int_laplace = IntegerLaplace(1, Fraction(1, 10))
    grid_gauss = GridGaussian(1, ZCDP(Fraction(1, 2)))
    int_gauss = IntegerGaussian(1, ZCDP(Fraction(1, 200)))
    rr = RandomizedResponse(5, epsilon=1)
    perturb = RecordPerturbation(0, 100, 1, Fraction(1, 1000))
    expo = ExponentialMechanism(1, Fraction(1))
    pf = PermuteAndFlip(1, Fraction(1))

    numpy_s = median_seconds(lambda: generator.laplace(scale=1.0, size=N), args.repeats)
    opendp_s, opendp_note = opendp_seconds(args.opendp_draws)

    def times(a: float | None, b: float | None) -> str:
        return "—" if a is None or b is None else f"{a / b:8.2f}x"

    header = (
        f"{'mechanism (10^6 draws)':<54} {'seconds':>9} {'setup s':>8} "
        f"{'vs numpy':>9} {'OpenDP/this':>12}"
    )
    print(header)
    print("-" * len(header))
    baseline = "numpy Generator.laplace (unsafe baseline)"
    print(
        f"{baseline:<54} {numpy_s:9.4f} {'':>8} {times(numpy_s, numpy_s):>9} {times(opendp_s, numpy_s):>12}"
    )
    if opendp_s is not None:
        label = "OpenDP make_laplace (float vector, scale 1)"
        print(
            f"{label:<54} {opendp_s:9.4f} {'':>8} {times(opendp_s, numpy_s):>9} {times(1.0, 1.0):>12}"
        )
    for name, _, run in rows:
        seconds = median_seconds(run, args.repeats)
        print(
            f"{name:<54} {seconds:9.4f} {setups[name]:8.3f} "
            f"{times(seconds, numpy_s):>9} {times(opendp_s, seconds):>12}"
        )
    print()
    print(opendp_note)
    print("'vs numpy' = seconds / numpy's; 'OpenDP/this' = how many times faster than OpenDP.")
    print("GridLaplace target: <= 0.2 s, <= 10x numpy, >= 100x faster than OpenDP.")
    print()

    print(f"timing side channel ({args.channel_calls:,} single-value releases each)")
    print(f"{'mechanism':<40} {'µs small |noise|':>17} {'µs large |noise|':>17} {'Spearman ρ':>11}")
    channel_rows: list[tuple[str, Callable[[], float]]] = [
        ("GridLaplace (Δ=1, ε=1/10)", lambda: float(slow_laplace.release([0.0])[0])),
        ("IntegerGaussian (Δ=1, ρ=1/200)", lambda: float(int_gauss.release([0])[0])),
    ]
    slow_laplace = GridLaplace(1, Fraction(1, 10))
    for name, release in channel_rows:
        small, large, rho = timing_channel(release, args.channel_calls)
        print(f"{name:<40} {small:17.1f} {large:17.1f} {rho:11.3f}")
    print("(each call draws a full batch of 1024, so one draw costs the same whatever its size)")


if __name__ == "__main__":
    main()
