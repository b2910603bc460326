"""Apple's sequence-fragment puzzles: exact ε of the combined report, its distribution, discovery.

The ε test enumerates every report of a tiny deployment with rational probabilities; the
distribution test draws reports from the OS generator and checks them against those exact
probabilities (chi-square, rejecting at ``tests.statistical.stats.ALPHA``); the discovery test is
a seeded simulation with planted frequent words among a tail of rare ones.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.statistical.stats import ALPHA

from dalenius.core.errors import ConfigurationError
from dalenius.core.exact import exp_bounds
from dalenius.ldp._draws import SimulationDraws
from dalenius.ldp._grid import epsilon_up
from dalenius.ldp.sfp import FragmentPuzzles

TINY = {"alphabet": "ab", "length": 4, "tag_bits": 1, "hashes": 2, "width": 2}
WORDS = ["a", "b", "ab", "ba", "aab", "abba", "bbbb"]


def _tiny(hadamard: bool) -> FragmentPuzzles:
    return FragmentPuzzles(
        epsilon=2, **TINY, fragment_hashes=2, fragment_width=2, hadamard=hadamard, salt=bytes(32)
    )


def _all_reports(puzzle: FragmentPuzzles) -> list[dict[str, object]]:
    def sketch_reports(hashes: int, width: int) -> list[dict[str, object]]:
        if puzzle.hadamard:
            return [
                {"row": r, "column": c, "sign": s}
                for r, c, s in itertools.product(range(hashes), range(width), (-1, 1))
            ]
        return [
            {"row": r, "signs": list(s)}
            for r in range(hashes)
            for s in itertools.product((-1, 1), repeat=width)
        ]

    return [
        {"word": w, "position": p, "fragment": f}
        for w in sketch_reports(2, 2)
        for p in range(puzzle.positions)
        for f in sketch_reports(2, 2)
    ]


@pytest.mark.parametrize("hadamard", [True, False])
def test_epsilon_of_the_combined_report_from_its_exact_distribution(hadamard: bool) -> None:
    puzzle = _tiny(hadamard)
    reports = _all_reports(puzzle)
    table = [[puzzle.report_probability(r, w) for w in WORDS] for r in reports]
    for column in zip(*table, strict=True):
        assert sum(column) == 1  # a distribution for every word
    worst = max(max(row) / min(row) for row in table)
    e_lo, _ = exp_bounds(Fraction(2))
    # the product of the two sketches' ratios bounds every pair; ε_W + ε_F = 2
    assert worst <= puzzle.ratio <= e_lo
    assert puzzle.word.requested_epsilon == puzzle.fragment.requested_epsilon == 1
    assert puzzle.epsilon == epsilon_up(puzzle.ratio) <= 2
    assert puzzle.epsilon <= puzzle.word.epsilon + puzzle.fragment.epsilon


@pytest.mark.statistical
def test_reports_follow_their_exact_distribution() -> None:
    puzzle = _tiny(True)
    reports = _all_reports(puzzle)
    probs = np.array([float(puzzle.report_probability(r, "aab")) for r in reports])
    drawn = puzzle.encode_many(["aab"] * 40_000)  # the OS generator, as a device would
    (wr, wc, ws), pos, (fr, fc, fs) = drawn.word, drawn.positions, drawn.fragment
    # index of each report in the enumeration order of _all_reports
    index = ((((wr * 2 + wc) * 2 + (ws > 0)) * 2 + pos) * 2 + fr) * 2 + fc
    index = index * 2 + (fs > 0)
    observed = np.bincount(index, minlength=len(reports))
    assert stats.chisquare(observed, probs * observed.sum()).pvalue > ALPHA
    one = puzzle.encode("aab")
    assert puzzle.report_probability(one, "aab") > 0


@pytest.mark.statistical
def test_discovers_the_planted_frequent_words() -> None:
    puzzle = FragmentPuzzles(
        epsilon=8, alphabet="abcdefgh", length=6, fragment_hashes=4, salt=bytes(range(32))
    )
    rng = np.random.default_rng(11)
    planted = ["bead", "faced", "cab", "deaf", "hh"]
    tail = sorted(
        {"".join(rng.choice(list("abcdefgh"), rng.integers(2, 7))) for _ in range(600)}
        - set(planted)
    )
    vocabulary = planted + tail
    counts = np.r_[
        [12_000, 9_000, 7_000, 6_000, 5_000], rng.multinomial(30_000, [1 / len(tail)] * len(tail))
    ]
    codes = rng.permutation(np.repeat(np.arange(len(vocabulary)), counts))
    reports = puzzle._perturb([puzzle.pad(w) for w in vocabulary], codes, SimulationDraws(5))
    found = puzzle.discover(puzzle.aggregate(puzzle.check_reports(reports)))
    assert set(found.words) == set(planted)  # every planted word, and nothing from the tail
    truth = dict(zip(vocabulary, counts, strict=True))
    for word, count, sd in zip(found.words, found.counts, found.stderr, strict=True):
        assert abs(count - truth[word]) <= 5 * sd
    assert found.candidates >= len(planted)


def test_bad_words_and_settings_are_refused() -> None:
    puzzle = FragmentPuzzles(epsilon=2, alphabet="abc", length=4, salt=bytes(32))
    with pytest.raises(ConfigurationError, match="outside the alphabet"):
        puzzle.encode("abd")
    with pytest.raises(ConfigurationError, match="1 to 4 characters"):
        puzzle.encode("abcab")
    with pytest.raises(ConfigurationError, match="word_share"):
        FragmentPuzzles(epsilon=2, word_share=1)
    with pytest.raises(ConfigurationError, match="epsilon"):
        FragmentPuzzles(epsilon=0)
    with pytest.raises(ConfigurationError, match="fragment values"):
        FragmentPuzzles(epsilon=1, alphabet="".join(map(chr, range(65, 65 + 200))), tag_bits=8)


def test_the_servers_work_is_bounded() -> None:
    from dalenius.ldp.sfp import MAX_ASSEMBLIES, _trimmed

    with pytest.raises(ConfigurationError, match="fragment_hashes"):
        FragmentPuzzles(epsilon=1, tag_bits=10, fragment_hashes=1024)
    lists = [[f"{p}{i}" for i in range(8)] for p in range(6)]  # 8^6 combinations
    trimmed = _trimmed(lists)
    assert np.prod([len(t) for t in trimmed]) <= MAX_ASSEMBLIES
    assert all(t == full[: len(t)] for t, full in zip(trimmed, lists, strict=True))
