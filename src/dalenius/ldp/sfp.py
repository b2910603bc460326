"""Apple's sequence-fragment puzzles (SFP): discovering frequent strings without a dictionary.

(Apple Differential Privacy Team, *Learning with Privacy at Scale*, 2017.) A count-mean sketch
estimates the frequency of a string the server already thought of; to find *new* words the server
needs candidates. With SFP every client sends, besides a sketch report of its whole word, a
sketch report of one *fragment* of it, tagged with a short hash of the whole word (the puzzle
piece):

* the word is padded to ``2·P`` characters (``P = ⌈length/2⌉`` fragment positions);
* the client picks a position ``l`` uniformly in ``[P]`` (sent in the clear: it does not depend
  on the word) and privatises ``tag(x) ‖ x[2l : 2l+2]`` with the fragment sketch, where ``tag`` is
  ``tag_bits`` bits of a keyed SHA-256 of the whole padded word;
* it privatises the whole word with the word sketch.

The server keeps one fragment sketch per position. For every position it estimates every
``tag ‖ fragment`` (``2^tag_bits·(|alphabet|+1)²`` values), keeps those significantly above zero,
joins, for each tag, the kept fragments of every position into candidate words, drops candidates
whose own tag differs from the one they were assembled under (the puzzle check: fragments of
different words rarely fit) or whose padding is not a suffix, and estimates the survivors with the
word sketch; the words significantly above zero are *discovered*, with error bars.

Privacy of one report ``R = (W, L, F)``. Given the word ``x``, ``W`` and ``F`` use independent
coins and ``L`` is uniform, so ``P[R | x] = P_W[W | x]·(1/P)·P_F[F | v(x, L)]`` and for any two
words the ratio is at most ``r_W·r_F``, the product of the two sketches' exact ratios — hence
``ε = ln(r_W·r_F) <= ε_W + ε_F``, the ε requested, split between the two reports by
``word_share``. The tag sits inside the randomised fragment report; nothing else leaves the
device. The ratios are exact rationals and ε is rounded up.

Example:
    >>> puzzle = FragmentPuzzles(epsilon=8, alphabet="abc", length=4, salt=bytes(32))
    >>> puzzle.positions, float(puzzle.word.requested_epsilon)
    (2, 4.0)
    >>> sorted(puzzle.encode("cab"))
    ['fragment', 'position', 'word']
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Number, PureDP, as_fraction
from dalenius.ldp._base import check_epsilon, z_for
from dalenius.ldp._draws import Draws, client_draws
from dalenius.ldp._grid import epsilon_up
from dalenius.ldp.apple import CountMeanSketch

PAD = "\x00"
"""Pads words to whole fragments; never part of an alphabet."""
MAX_FRAGMENT_VALUES = 1 << 20
"""The most ``tag ‖ fragment`` values the server enumerates at each position."""
MAX_FRAGMENT_HASHES = 1 << 24
"""The most hash evaluations (values × fragment rows) the server's enumeration may take."""
MAX_ASSEMBLIES = 4096
"""The most words assembled from fragments under one tag (each costs one tag hash)."""

_TABLES: dict[tuple[bytes, int, int, str, int], npt.NDArray[np.int64]] = {}
"""Hashes of every fragment value for recent fragment families: a server estimates each
collection again and again, and hashing ``2^tag_bits·(|alphabet|+1)²`` values takes seconds."""

Arrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int8]]


def _derive(salt: bytes, purpose: bytes) -> bytes:
    return hashlib.sha256(b"dalenius-sfp-" + purpose + salt).digest()


@dataclass(frozen=True)
class PuzzleReports:
    """A batch of reports as arrays: the word sketch's, the positions, the fragment sketch's."""

    word: Arrays
    positions: npt.NDArray[np.int64]
    fragment: Arrays

    def __len__(self) -> int:
        return int(self.positions.size)


@dataclass(frozen=True)
class PuzzleSketches:
    """The server's state: the word sketch, one fragment sketch per position, report counts.

    Sketches are linear in the reports, so batches add up (``a + b``).
    """

    word: npt.NDArray[np.float64]
    fragments: npt.NDArray[np.float64]
    per_position: npt.NDArray[np.int64]

    @property
    def reports(self) -> int:
        """The number of reports aggregated."""
        return int(self.per_position.sum())

    def __add__(self, other: PuzzleSketches) -> PuzzleSketches:
        return PuzzleSketches(
            self.word + other.word,
            self.fragments + other.fragments,
            self.per_position + other.per_position,
        )


@dataclass(frozen=True)
class Discovery:
    """Discovered words with their estimated counts (from the word sketch) and error bars.

    Attributes:
        words: the discovered words, most frequent first.
        counts: their unbiased count estimates.
        stderr: the plug-in standard errors.
        half_width: ``z·stderr`` at ``confidence``.
        confidence: the confidence of the error bars.
        reports: the number of reports.
        candidates: how many assembled words passed the puzzle check and were estimated.
        fragments_kept: significant ``tag ‖ fragment`` values at each position.
        fragment_threshold: the count per position a fragment had to exceed, at each position.
        word_threshold: the count a candidate word had to exceed.
    """

    words: list[str]
    counts: npt.NDArray[np.float64]
    stderr: npt.NDArray[np.float64]
    half_width: npt.NDArray[np.float64]
    confidence: float
    reports: int
    candidates: int
    fragments_kept: list[int]
    fragment_threshold: list[float]
    word_threshold: float


def _int_in(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"{name} must be an integer in [{low}, {high}], got {value!r}.")
    return value


class FragmentPuzzles:
    """An SFP deployment: parameters, its two sketches, client and server.

    Args:
        epsilon: the privacy loss of one report (word and fragment together).
        word_share: the part of ``epsilon`` given to the word sketch (the rest to the fragment).
        alphabet: the characters words may use (distinct; the padding character is added).
        length: the longest word.
        tag_bits: bits of the whole-word hash attached to each fragment (the puzzle piece).
        hashes, width: rows and columns of the word sketch.
        fragment_hashes, fragment_width: rows and columns of each fragment sketch.
        hadamard: HCMS reports (one sign) instead of CMS (``width`` signs).
        salt: the deployment's 32-byte salt, shared with its clients, from which both hash
            families and the tag hash derive (drawn from the OS when ``None``).
    """

    def __init__(
        self,
        *,
        epsilon: Number,
        word_share: Number = Fraction(1, 2),
        alphabet: str = "abcdefghijklmnopqrstuvwxyz",
        length: int = 8,
        tag_bits: int = 8,
        hashes: int = 64,
        width: int = 1024,
        fragment_hashes: int = 16,
        fragment_width: int = 1024,
        hadamard: bool = True,
        salt: bytes | None = None,
    ) -> None:
        self.requested_epsilon = check_epsilon(epsilon)
        share = as_fraction(word_share, "word_share")
        if not 0 < share < 1:
            raise ConfigurationError(
                f"word_share must be strictly between 0 and 1, got {word_share!r}.",
                why="both the word and the fragment report need some of ε.",
                fix="use 1/2 (the default).",
            )
        if (
            not isinstance(alphabet, str)
            or len(alphabet) < 2
            or len(set(alphabet)) != len(alphabet)
            or PAD in alphabet
        ):
            raise ConfigurationError(
                "alphabet must be a string of at least 2 distinct characters (no NUL).",
                fix='pass the characters words may use, such as "abcdefghijklmnopqrstuvwxyz".',
            )
        self.length = _int_in(length, "length", 2, 64)
        self.tag_bits = _int_in(tag_bits, "tag_bits", 1, 16)
        self.alphabet = alphabet
        self.symbols = alphabet + PAD
        values = (len(self.symbols) ** 2) << self.tag_bits
        if values > MAX_FRAGMENT_VALUES:
            raise ConfigurationError(
                f"{len(alphabet)} characters and {tag_bits} tag bits give {values:,} fragment "
                f"values per position; the server enumerates at most {MAX_FRAGMENT_VALUES:,}.",
                fix="use a smaller alphabet or fewer tag_bits.",
            )
        if isinstance(fragment_hashes, int) and values * fragment_hashes > MAX_FRAGMENT_HASHES:
            raise ConfigurationError(
                f"{values:,} fragment values × {fragment_hashes} fragment rows is "
                f"{values * fragment_hashes:,} hashes for the server; the limit is "
                f"{MAX_FRAGMENT_HASHES:,}.",
                fix="use fewer fragment_hashes (16 is plenty), a smaller alphabet or fewer tag_bits.",
            )
        self.positions = -(-self.length // 2)
        self.hadamard = hadamard
        self.salt = salt if salt is not None else os.urandom(32)
        if not isinstance(self.salt, bytes) or len(self.salt) != 32:
            raise ConfigurationError("salt must be 32 bytes.", fix="leave it out to draw one.")
        eps_word = self.requested_epsilon * share
        self.word = CountMeanSketch(
            epsilon=eps_word,
            hashes=hashes,
            width=width,
            hadamard=hadamard,
            salt=_derive(self.salt, b"word"),
        )
        self.fragment = CountMeanSketch(
            epsilon=self.requested_epsilon - eps_word,
            hashes=fragment_hashes,
            width=fragment_width,
            hadamard=hadamard,
            salt=_derive(self.salt, b"fragment"),
        )
        self._tag_salt = _derive(self.salt, b"tag")

    # -- privacy ----------------------------------------------------------------------------

    @property
    def ratio(self) -> Fraction:
        """The largest ratio of report probabilities between two words: ``r_W·r_F``."""
        return self.word.ratio * self.fragment.ratio

    @property
    def epsilon(self) -> Fraction:
        """The guaranteed ε of one report (rounded up, at most the one asked for)."""
        return min(epsilon_up(self.ratio), self.requested_epsilon)

    @property
    def loss(self) -> PureDP:
        """The privacy loss of one report."""
        return PureDP(self.epsilon)

    # -- words, tags, fragments -----------------------------------------------------------

    def pad(self, word: str) -> str:
        """``word`` padded to ``2·positions`` characters, or a clear error."""
        if not isinstance(word, str) or not 1 <= len(word) <= self.length:
            raise ConfigurationError(
                f"a word must be a string of 1 to {self.length} characters, got {word!r}.",
                fix="truncate long words or raise the deployment's length.",
            )
        outside = sorted(set(word) - set(self.alphabet))
        if outside:
            raise ConfigurationError(
                f"word {word!r} uses characters outside the alphabet: {''.join(outside)!r}.",
                fix="map the word into the deployment's alphabet first.",
            )
        return word.ljust(2 * self.positions, PAD)

    def tag(self, padded: str) -> int:
        """The puzzle piece: ``tag_bits`` bits of a keyed SHA-256 of the padded word."""
        digest = hashlib.sha256(self._tag_salt + padded.encode()).digest()
        return int.from_bytes(digest[:4], "big") >> (32 - self.tag_bits)

    def fragment_value(self, tag: int, fragment: str) -> str:
        """The string the fragment sketch hashes: the tag in fixed-width hex, then two characters."""
        return f"{tag:0{-(-self.tag_bits // 4)}x}{fragment}"

    def _fragment_values(self) -> list[str]:
        """Every ``tag ‖ fragment`` value, tag-major (index ``tag·S² + i·S + j``)."""
        pairs = [a + b for a, b in itertools.product(self.symbols, repeat=2)]
        return [self.fragment_value(t, f) for t in range(1 << self.tag_bits) for f in pairs]

    # -- client -----------------------------------------------------------------------------

    def encode(self, word: str) -> dict[str, Any]:
        """One client's report of ``word`` (OS generator)."""
        r = self._perturb([self.pad(word)], np.zeros(1, dtype=np.int64), client_draws())
        return {
            "word": _report(r.word, 0, self.hadamard),
            "position": int(r.positions[0]),
            "fragment": _report(r.fragment, 0, self.hadamard),
        }

    def encode_many(self, words: Sequence[str]) -> PuzzleReports:
        """Reports of many clients as arrays (OS generator), one per word."""
        distinct = sorted(set(words))
        index = {w: i for i, w in enumerate(distinct)}
        codes = np.asarray([index[w] for w in words], dtype=np.int64)
        return self._perturb([self.pad(w) for w in distinct], codes, client_draws())

    def _perturb(
        self, padded: Sequence[str], codes: npt.NDArray[np.int64], draws: Draws
    ) -> PuzzleReports:
        """Vectorised encoder: ``padded`` are the distinct padded words, ``codes`` the clients'."""
        n, width = codes.size, 2 * self.positions
        word = self.word._perturb(self.word.hash_rows(list(padded)), codes, draws)
        positions = draws.below(self.positions, n)
        values: dict[str, int] = {}
        table = np.empty((len(padded), self.positions), dtype=np.int64)
        for i, w in enumerate(padded):
            tag = self.tag(w)
            for pos, start in enumerate(range(0, width, 2)):
                value = self.fragment_value(tag, w[start : start + 2])
                table[i, pos] = values.setdefault(value, len(values))
        buckets = self.fragment.hash_rows(list(values))
        fragment = self.fragment._perturb(buckets, table[codes, positions], draws)
        return PuzzleReports(word, positions, fragment)

    def report_probability(self, report: dict[str, Any], word: str) -> Fraction:
        """The exact probability that a client holding ``word`` sends ``report``."""
        padded = self.pad(word)
        pos = int(report["position"])
        value = self.fragment_value(self.tag(padded), padded[2 * pos : 2 * pos + 2])
        return (
            self.word.report_probability(report["word"], padded)
            * Fraction(1, self.positions)
            * self.fragment.report_probability(report["fragment"], value)
        )

    # -- server -----------------------------------------------------------------------------

    def check_reports(self, reports: PuzzleReports) -> PuzzleReports:
        """Validated report arrays, or a :class:`ConfigurationError` naming the problem."""
        pos = np.asarray(reports.positions)
        if (
            pos.ndim != 1
            or (pos.size and not np.issubdtype(pos.dtype, np.integer))
            or (pos.size and (pos.min() < 0 or pos.max() >= self.positions))
        ):
            raise ConfigurationError(
                f"an sfp report's position is an integer in 0..{self.positions - 1}.",
                fix="send what the client's encoder produced.",
            )
        word = self.word.check_reports(*reports.word)
        fragment = self.fragment.check_reports(*reports.fragment)
        if not word[0].size == fragment[0].size == pos.size:
            raise ConfigurationError("every sfp report needs a word, a position and a fragment.")
        return PuzzleReports(word, pos.astype(np.int64), fragment)

    def aggregate(self, reports: PuzzleReports) -> PuzzleSketches:
        """The word sketch and one fragment sketch per position from validated reports."""
        word = self.word.sketch(*reports.word)
        rows, cols, signs = reports.fragment
        fragments = np.stack(
            [
                self.fragment.sketch(rows[at], cols[at], signs[at])
                for at in (reports.positions == p for p in range(self.positions))
            ]
        )
        per_position = np.bincount(reports.positions, minlength=self.positions).astype(np.int64)
        return PuzzleSketches(word, fragments, per_position)

    def fragment_estimates(
        self, sketches: PuzzleSketches, position: int
    ) -> npt.NDArray[np.float64]:
        """Estimated counts of every ``tag ‖ fragment`` at ``position``, shape ``(2^tag_bits, S²)``.

        Counts are among the clients who sent that position (about ``n/P`` of them).
        """
        k, m = self.fragment.hashes, self.fragment.width
        key = (self.fragment.salt, k, m, self.symbols, self.tag_bits)
        buckets = _TABLES.get(key)
        if buckets is None:
            buckets = self.fragment.hash_rows(self._fragment_values())
            buckets.flags.writeable = False
            while len(_TABLES) >= 8:
                _TABLES.pop(next(iter(_TABLES)))
            _TABLES[key] = buckets
        sketch = sketches.fragments[position]
        raw = sketch[np.arange(k)[:, None], buckets].mean(axis=0)
        counts: npt.NDArray[np.float64] = m / (m - 1) * (raw - sketches.per_position[position] / m)
        return counts.reshape(1 << self.tag_bits, len(self.symbols) ** 2)

    def _kept(
        self, estimates: npt.NDArray[np.float64], threshold: float, per_tag: int
    ) -> dict[int, list[str]]:
        """The fragments above ``threshold`` by tag, at most ``per_tag`` (the largest) each."""
        size = len(self.symbols)
        by_tag: dict[int, list[int]] = {}
        for tag, index in zip(*np.nonzero(estimates > threshold), strict=True):
            by_tag.setdefault(int(tag), []).append(int(index))
        return {
            tag: [
                self.symbols[i // size] + self.symbols[i % size]
                for i in sorted(found, key=lambda j: -float(estimates[tag, j]))[:per_tag]
            ]
            for tag, found in by_tag.items()
        }

    def discover(
        self,
        sketches: PuzzleSketches,
        *,
        alpha: float = 0.05,
        per_tag: int = 8,
        confidence: float = 0.95,
    ) -> Discovery:
        """Frequent words assembled from fragments and confirmed by the word sketch.

        Args:
            sketches: the aggregated reports (:meth:`aggregate`, batches added together).
            alpha: the chance, when no word is frequent, that any fragment passes (Bonferroni
                over every fragment value at every position), and again that any candidate
                word passes the word sketch's test.
            per_tag: at most this many fragments per tag and position are combined (the
                largest estimates); and at most :data:`MAX_ASSEMBLIES` combinations per tag
                (the position with the most fragments loses its smallest first).
            confidence: the confidence of the error bars.
        """
        if not 0 < alpha < 1:
            raise ConfigurationError(f"alpha must be in (0, 1), got {alpha!r}.")
        _int_in(per_tag, "per_tag", 1, 1 << 10)
        z_interval = z_for(confidence)
        s2 = len(self.symbols) ** 2
        tests = self.positions * (s2 << self.tag_bits)
        z_fragment = NormalDist().inv_cdf(1 - alpha / tests)
        kept: list[dict[int, list[str]]] = []
        thresholds = []
        for pos in range(self.positions):
            n_l = int(sketches.per_position[pos])
            threshold = z_fragment * math.sqrt(float(self.fragment.variance([0], n_l)[0]))
            kept.append(self._kept(self.fragment_estimates(sketches, pos), threshold, per_tag))
            thresholds.append(threshold)
        candidates: list[str] = []
        for tag in set.intersection(*(set(k) for k in kept)):
            for parts in itertools.product(*_trimmed([k[tag] for k in kept])):
                padded = "".join(parts)
                stripped = padded.rstrip(PAD)
                if stripped and PAD not in stripped and self.tag(padded) == tag:
                    candidates.append(padded)
        n = sketches.reports
        word_threshold = math.inf
        words: list[str] = []
        counts = stderr = np.zeros(0)
        if candidates:
            candidates.sort()
            z_word = NormalDist().inv_cdf(1 - alpha / len(candidates))
            found = self.word.estimate(sketches.word, n, candidates, confidence)
            # The spread of a zero count, collisions with the candidates' own (estimated) counts
            # included: a heavy word shares a cell with any other in 1/m of the rows.
            others = np.clip(found.counts, 0, n)
            zero = float(self.word.variance(np.r_[0.0, others], n)[0])
            word_threshold = z_word * math.sqrt(zero)
            order = [
                i
                for i in np.argsort(-found.counts, kind="stable")
                if found.counts[i] > word_threshold
            ]
            words = [candidates[i].rstrip(PAD) for i in order]
            counts = found.counts[order]
            stderr = np.sqrt(found.variance[order])
        return Discovery(
            words,
            counts,
            stderr,
            z_interval * stderr,
            confidence,
            n,
            len(candidates),
            [sum(len(v) for v in k.values()) for k in kept],
            thresholds,
            word_threshold,
        )

    def describe(self) -> dict[str, Any]:
        """Public parameters as JSON-ready values."""
        return {
            "protocol": "sfp",
            "epsilon": float(self.epsilon),
            "epsilon_word": float(self.word.epsilon),
            "epsilon_fragment": float(self.fragment.epsilon),
            "alphabet": self.alphabet,
            "length": self.length,
            "positions": self.positions,
            "tag_bits": self.tag_bits,
            "hashes": self.word.hashes,
            "width": self.word.width,
            "fragment_hashes": self.fragment.hashes,
            "fragment_width": self.fragment.width,
            "sketch": "hcms" if self.hadamard else "cms",
        }


def _trimmed(lists: list[list[str]]) -> list[list[str]]:
    """The lists, shortened until their product has at most :data:`MAX_ASSEMBLIES` combinations.

    Each list is sorted by estimate, largest first; the longest list loses its last entry first.
    """
    lists = [list(found) for found in lists]
    while math.prod(len(found) for found in lists) > MAX_ASSEMBLIES:
        max(lists, key=len).pop()
    return lists


def _report(arrays: Arrays, i: int, hadamard: bool) -> dict[str, Any]:
    rows, cols, signs = arrays
    if hadamard:
        return {"row": int(rows[i]), "column": int(cols[i]), "sign": int(signs[i])}
    return {"row": int(rows[i]), "signs": signs[i].tolist()}
