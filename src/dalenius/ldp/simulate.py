"""Simulating a frequency oracle over many clients: true vs estimated counts, error vs theory.

The simulation is the one place a seeded generator may randomise reports
(:class:`~dalenius.ldp._draws.SimulationDraws`, numpy's PCG64): it measures accuracy and speed
and its reports never leave the process. Clients are processed in blocks of ``block`` so memory
stays bounded (the servers' support counts add up across blocks), and a callback reports progress.

Example:
    >>> result = simulate("grr", 1, users=20_000, domain=5, dist="uniform", seed=1)
    >>> int(result.true_counts.sum())
    20000
    >>> 0.5 < result.mse / result.theory_mse < 2
    True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number
from dalenius.ldp._base import FrequencyOracle, check_domain
from dalenius.ldp._draws import SimulationDraws
from dalenius.ldp.choose import best_oracle, make_oracle
from dalenius.ldp.sfp import Discovery, FragmentPuzzles, PuzzleSketches

DISTRIBUTIONS = ("zipf", "uniform", "geometric")
BLOCK = 1 << 20


def distribution(name: str, domain: int, *, zipf_s: float = 1.1) -> npt.NDArray[np.float64]:
    """The probabilities of the values ``0 .. d−1`` under ``zipf`` (``∝ 1/(i+1)^s``),
    ``uniform`` or ``geometric`` (``∝ 0.9^i``).

    Example:
        >>> distribution("uniform", 4).tolist()
        [0.25, 0.25, 0.25, 0.25]
    """
    i = np.arange(domain, dtype=np.float64)
    if name == "zipf":
        w = (i + 1) ** -zipf_s
    elif name == "uniform":
        w = np.ones(domain)
    elif name == "geometric":
        w = 0.9**i
    else:
        raise ConfigurationError(
            f"unknown distribution {name!r}.", fix=f"use one of {', '.join(DISTRIBUTIONS)}."
        )
    probabilities: npt.NDArray[np.float64] = w / w.sum()
    return probabilities


@dataclass(frozen=True)
class SimulationResult:
    """True and estimated counts of one simulated collection."""

    protocol: str
    epsilon: float
    users: int
    domain: int
    true_counts: npt.NDArray[np.int64]
    estimates: npt.NDArray[np.float64]
    half_width: npt.NDArray[np.float64]
    confidence: float
    mse: float
    theory_mse: float
    seconds: float

    def summary(self) -> dict[str, object]:
        """JSON-ready summary (without the full vectors)."""
        return {
            "protocol": self.protocol,
            "epsilon": self.epsilon,
            "users": self.users,
            "domain": self.domain,
            "mse": self.mse,
            "theory_mse": self.theory_mse,
            "mse_ratio": self.mse / self.theory_mse if self.theory_mse else None,
            "max_abs_error": float(np.abs(self.estimates - self.true_counts).max()),
            "coverage": float(
                np.mean(np.abs(self.estimates - self.true_counts) <= self.half_width)
            ),
            "confidence": self.confidence,
            "seconds": self.seconds,
        }


def simulate(
    protocol: str,
    epsilon: Number,
    *,
    users: int,
    domain: int,
    dist: str = "zipf",
    seed: int | None = None,
    confidence: float = 0.95,
    progress: Callable[[int, int], None] | None = None,
    block: int = BLOCK,
) -> SimulationResult:
    """Encode ``users`` simulated clients with ``protocol`` (or ``best``) and estimate.

    Args:
        protocol: a frequency oracle's name, or ``best`` for :func:`best_oracle`'s choice.
        epsilon: ε of one report.
        users: the number of simulated clients.
        domain: the domain size ``d``.
        dist: the true distribution (``zipf``, ``uniform``, ``geometric``).
        seed: seeds both the data and the simulated reports (``None``: from the OS).
        confidence: the confidence of the error bars.
        progress: called with ``(clients done, clients)`` after each block.
        block: clients encoded per block.
    """
    domain = check_domain(domain)
    if isinstance(users, bool) or not isinstance(users, int) or users < 1:
        raise ConfigurationError(f"users must be a positive integer, got {users!r}.")
    oracle: FrequencyOracle = (
        best_oracle(domain, epsilon)
        if protocol == "best"
        else make_oracle(protocol, domain, epsilon)
    )
    data_rng = np.random.default_rng(seed)
    true_counts = data_rng.multinomial(users, distribution(dist, domain)).astype(np.int64)
    values = np.repeat(np.arange(domain, dtype=np.int64), true_counts)
    draws = SimulationDraws(None if seed is None else seed + 1)
    started = time.perf_counter()
    server = oracle.accumulator(users)
    for start in range(0, users, block):
        server.add(oracle._simulated_reports(values[start : start + block], draws))
        if progress is not None:
            progress(min(start + block, users), users)
    estimate = oracle.estimate_from_support(server.support(), users, confidence)
    seconds = time.perf_counter() - started
    mse = float(np.mean((estimate.counts - true_counts) ** 2))
    theory = float(np.mean(oracle.variance(true_counts, users)))
    return SimulationResult(
        oracle.name,
        float(oracle.epsilon),
        users,
        domain,
        true_counts,
        estimate.counts,
        estimate.half_width,
        confidence,
        mse,
        theory,
        seconds,
    )


@dataclass(frozen=True)
class DiscoveryResult:
    """A simulated sequence-fragment-puzzle collection: the vocabulary and what was found."""

    epsilon: float
    users: int
    vocabulary: list[str]
    true_counts: npt.NDArray[np.int64]
    discovery: Discovery
    seconds: float

    def found_of_top(self, top: int) -> int:
        """How many of the ``top`` most frequent words were discovered."""
        order = np.argsort(-self.true_counts, kind="stable")[:top]
        found = set(self.discovery.words)
        return sum(self.vocabulary[i] in found for i in order)

    def false_discoveries(self) -> list[str]:
        """Discovered words no simulated client held."""
        held = {w for w, c in zip(self.vocabulary, self.true_counts, strict=True) if c > 0}
        return [w for w in self.discovery.words if w not in held]

    def summary(self, top: int = 10) -> dict[str, object]:
        """JSON-ready summary."""
        truth = dict(zip(self.vocabulary, self.true_counts.tolist(), strict=True))
        d = self.discovery
        return {
            "protocol": "sfp",
            "epsilon": self.epsilon,
            "users": self.users,
            "vocabulary": len(self.vocabulary),
            "candidates": d.candidates,
            "fragments_kept": d.fragments_kept,
            "fragment_threshold": d.fragment_threshold,
            "word_threshold": d.word_threshold if math.isfinite(d.word_threshold) else None,
            "found": [
                {
                    "word": w,
                    "true": int(truth.get(w, 0)),
                    "estimate": float(c),
                    "half_width": float(h),
                }
                for w, c, h in zip(d.words, d.counts, d.half_width, strict=True)
            ],
            "found_of_top": {"top": top, "found": self.found_of_top(top)},
            "false_discoveries": self.false_discoveries(),
            "confidence": d.confidence,
            "seconds": self.seconds,
        }


def simulate_discovery(
    epsilon: Number,
    *,
    users: int,
    vocabulary: int = 1000,
    dist: str = "zipf",
    alphabet: str = "abcdefghijklmnopqrstuvwxyz",
    length: int = 8,
    seed: int | None = None,
    confidence: float = 0.95,
    alpha: float = 0.05,
    progress: Callable[[int, int], None] | None = None,
    block: int = BLOCK,
    **settings: Any,
) -> DiscoveryResult:
    """Simulate an SFP collection over a random vocabulary and discover its frequent words.

    The vocabulary is ``vocabulary`` distinct random words (lengths uniform in ``2..length``,
    characters uniform in ``alphabet``), ranked for ``dist``; the deployment's salt comes from
    the seed so a seeded run repeats exactly. ``settings`` go to
    :class:`~dalenius.ldp.sfp.FragmentPuzzles` (``tag_bits``, ``hashes``, ``width``, …).
    """
    if isinstance(users, bool) or not isinstance(users, int) or users < 1:
        raise ConfigurationError(f"users must be a positive integer, got {users!r}.")
    if isinstance(vocabulary, bool) or not isinstance(vocabulary, int) or vocabulary < 2:
        raise ConfigurationError(f"the vocabulary needs at least 2 words, got {vocabulary!r}.")
    data_rng = np.random.default_rng(seed)
    salt = data_rng.bytes(32) if seed is not None else None
    puzzle = FragmentPuzzles(
        epsilon=epsilon, alphabet=alphabet, length=length, salt=salt, **settings
    )
    possible = sum(len(alphabet) ** k for k in range(2, length + 1))
    if vocabulary > possible // 2:
        raise ConfigurationError(
            f"{vocabulary:,} distinct words do not fit comfortably in {possible:,} possible ones.",
            fix="use a smaller --domain, a longer --length or a larger --alphabet.",
        )
    words: dict[str, None] = {}
    letters = np.array(list(alphabet))
    while len(words) < vocabulary:
        size = int(data_rng.integers(2, length + 1))
        words.setdefault("".join(data_rng.choice(letters, size)), None)
    vocab = list(words)
    true_counts = data_rng.multinomial(users, distribution(dist, vocabulary)).astype(np.int64)
    codes = data_rng.permutation(np.repeat(np.arange(vocabulary, dtype=np.int64), true_counts))
    padded = [puzzle.pad(w) for w in vocab]
    if not puzzle.hadamard:  # CMS reports are `width` signs each: smaller blocks
        block = min(block, max(1, (1 << 26) // puzzle.word.width))
    draws = SimulationDraws(None if seed is None else seed + 1)
    started = time.perf_counter()
    sketches: PuzzleSketches | None = None
    for start in range(0, users, block):
        part = puzzle.aggregate(puzzle._perturb(padded, codes[start : start + block], draws))
        sketches = part if sketches is None else sketches + part
        if progress is not None:
            progress(min(start + block, users), users)
    assert sketches is not None
    found = puzzle.discover(sketches, alpha=alpha, confidence=confidence)
    seconds = time.perf_counter() - started
    return DiscoveryResult(float(puzzle.epsilon), users, vocab, true_counts, found, seconds)
