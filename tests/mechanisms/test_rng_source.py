"""Every production path draws from os.urandom; the seeded source cannot be switched on.

Each public sampler is called the way the engine calls it (no ``rng`` argument) while
``os.urandom`` is wrapped to count bytes and numpy's and Python's own generators are made to fail.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import dalenius.core.rng as core_rng
from dalenius.core.loss import ZCDP, ApproxDP
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
    quantile_from_bin_counts,
    report_noisy_max,
)

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "dalenius"

PRODUCTION_PATHS: dict[str, Callable[[], object]] = {
    "discrete_laplace": lambda: discrete_laplace(Fraction(3), 10),
    "IntegerLaplace.release": lambda: IntegerLaplace(1, Fraction(1)).release([1, 2, 3]),
    "GridLaplace.release": lambda: GridLaplace(Fraction(1), Fraction(1)).release([0.5]),
    "discrete_gaussian": lambda: discrete_gaussian(Fraction(4), 10),
    "IntegerGaussian.release": lambda: IntegerGaussian(1, ZCDP(Fraction(1))).release([1]),
    "GridGaussian.release": lambda: GridGaussian(
        Fraction(1), ApproxDP(Fraction(1), Fraction(1, 10**6))
    ).release([0.5]),
    "ExponentialMechanism.select": lambda: ExponentialMechanism(1, Fraction(1)).select([1, 2]),
    "PermuteAndFlip.select": lambda: PermuteAndFlip(1, Fraction(1)).select([1, 2]),
    "report_noisy_max": lambda: report_noisy_max([1, 2, 3], 1, Fraction(1)),
    "quantile_from_bin_counts": lambda: quantile_from_bin_counts([0, 1, 2], [3, 4], 0.5, 1),
    "RandomizedResponse.privatize": lambda: RandomizedResponse(3, epsilon=1).privatize([0, 2]),
    "RecordPerturbation.release": lambda: RecordPerturbation(0, 1, 1).release([0.5]),
}

BATCHED = {name for name in PRODUCTION_PATHS if "release" in name or name.startswith("discrete")}


@pytest.fixture
def urandom_counter(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counter = {"calls": 0, "bytes": 0}
    real = os.urandom

    def counting(n: int) -> bytes:
        counter["calls"] += 1
        counter["bytes"] += n
        return real(n)

    def forbidden(*args: object, **kwargs: object) -> object:
        raise AssertionError("a non-cryptographic generator was used")

    monkeypatch.setattr(os, "urandom", counting)
    monkeypatch.setattr(np.random, "default_rng", forbidden)
    for name in ("random", "randint", "getrandbits", "randrange", "choice", "shuffle"):
        monkeypatch.setattr(random, name, forbidden)
    for name in ("laplace", "normal", "random", "randint", "choice", "exponential"):
        monkeypatch.setattr(np.random, name, forbidden)
    return counter


@pytest.mark.parametrize("name", sorted(PRODUCTION_PATHS))
def test_production_paths_draw_from_os_urandom(name: str, urandom_counter: dict[str, int]) -> None:
    PRODUCTION_PATHS[name]()
    assert urandom_counter["calls"] >= 1
    if name in BATCHED:
        assert urandom_counter["bytes"] >= 4 * 1024  # at least one minimum batch of draws


def test_system_random_is_the_only_source_and_has_no_switch() -> None:
    source = core_rng.system_random()
    assert source.name == "os.urandom"
    assert source is core_rng.system_random()
    public = {name for name in dir(core_rng) if not name.startswith("_")}
    assert not any(re.match(r"(set|use|seed|configure)", name) for name in public)


@pytest.mark.parametrize("variable", ["DALENIUS_SEED", "DALENIUS_RNG", "DALENIUS_RANDOM"])
def test_environment_cannot_select_a_seeded_source(
    variable: str, monkeypatch: pytest.MonkeyPatch, urandom_counter: dict[str, int]
) -> None:
    monkeypatch.setenv(variable, "seeded:1")
    first = discrete_laplace(Fraction(10**6), 64)
    second = discrete_laplace(Fraction(10**6), 64)
    assert urandom_counter["calls"] >= 2
    assert not np.array_equal(first, second)


def test_package_source_contains_no_seeded_or_non_cryptographic_generator() -> None:
    pattern = re.compile(
        r"default_rng|PCG64|MT19937|Philox|np\.random\.|numpy\.random|^\s*import random\b"
        r"|^\s*from random import|SeededRandom|RANDOM\(\)",
        re.MULTILINE,
    )
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted((PACKAGE / "mechanisms").rglob("*.py"))
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
