"""The simulations report progress after each batch of clients, and the reports change nothing."""

from __future__ import annotations

import numpy as np

from dalenius.ldp.simulate import simulate, simulate_discovery


def test_simulate_reports_each_batch() -> None:
    calls: list[tuple[int, int]] = []
    seen = simulate(
        "oue",
        1,
        users=2500,
        domain=16,
        seed=5,
        block=1000,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(1000, 2500), (2000, 2500), (2500, 2500)]
    silent = simulate("oue", 1, users=2500, domain=16, seed=5, block=1000)
    assert np.array_equal(seen.estimates, silent.estimates)


def test_simulate_discovery_reports_each_batch() -> None:
    calls: list[tuple[int, int]] = []
    seen = simulate_discovery(
        4,
        users=1500,
        vocabulary=20,
        length=4,
        seed=5,
        block=1000,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(1000, 1500), (1500, 1500)]
    silent = simulate_discovery(4, users=1500, vocabulary=20, length=4, seed=5, block=1000)
    assert seen.discovery.words == silent.discovery.words
