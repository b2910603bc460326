"""Reconstruction (Dinur–Nissim 2003): enough subset counts reveal every person's secret bit.

The course: Dinur and Nissim showed that answering arbitrary queries on a private database
reveals private information, and that the *whole* database can be reconstructed from the answers
to a surprisingly small number of random queries — unless noise of order √n is added. This "law
of information recovery" is what led to differential privacy.

The attack: the attacker knows the roster (``person_id`` 1..n) but not the secret bit column. It
asks ``SELECT SUM(secret) FROM people WHERE (person_id * a + b) % p < p/2`` for m random subsets
(a fresh (a, b) from the OS generator each time, p a prime above n: see :class:`Subsets`), then
decodes the bits that
best explain the answers: least squares (``lstsq``, numpy) or the linear program of the paper
(``lp``, minimising the total absolute error with 0 ≤ x ≤ 1; needs scipy) and rounds at 1/2.

Against exact answers, m = n·ln n queries recover every bit. Against the naive noisy system,
noise of scale 1/ε per answer is far below √n, so it also recovers nearly every bit — each
answer "is ε-DP", but nobody adds up the m·ε. Against Dalenius the budget B bounds what can be
asked: each bit is protected by B-DP, so no decoder recovers more than ``e^B/(1+e^B)`` of the bits
in expectation (the bits are independent fair coins), and in practice it stays near chance.

Example:
    >>> measured = measure(TargetSpec("raw"), people=40, queries=160)
    >>> measured.report.rate.estimate
    1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dalenius.attacks.game import written
from dalenius.attacks.plots import COLOURS, pyplot, save
from dalenius.attacks.population import TABLE, make_people
from dalenius.attacks.report import Advance, AttackReport, Rate, best_test_bound, progress_bar
from dalenius.attacks.targets import Target, TargetSpec
from dalenius.core.errors import ConfigurationError, MissingExtraError, UserError
from dalenius.core.rng import system_random

NAME = "reconstruction"
DECODERS = ("lstsq", "lp")
METRIC = "share of the secret bits recovered"

Matrix = npt.NDArray[np.float64]


def default_queries(people: int) -> int:
    """``ceil(n·ln n)``: enough exact subset counts to pin down every bit."""
    return math.ceil(people * math.log(people))


def _prime_above(n: int) -> int:
    candidate = n + 1
    while candidate < 3 or any(candidate % d == 0 for d in range(2, math.isqrt(candidate) + 1)):
        candidate += 1
    return candidate


@dataclass(frozen=True)
class Subsets:
    """Random subsets of the ids 1..n, each ``{id : (a·id + b) mod p < p/2}`` for one (a, b).

    A prime ``p > n`` makes ``id ↦ (a·id + b) mod p`` one-to-one, so each subset holds about half
    the people, and (a, b) drawn afresh for every query give a pairwise-independent family: as
    good as independent coin flips for the decoder, and a filter of a few characters that any SQL
    engine evaluates fast (a list of a hundred ids is slow to parse and to bind).
    """

    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    p: int
    people: int

    def __len__(self) -> int:
        return len(self.a)

    @property
    def matrix(self) -> Matrix:
        """The 0/1 ``queries × people`` membership matrix."""
        ids = np.arange(1, self.people + 1, dtype=np.int64)
        hashed = (self.a[:, None] * ids[None, :] + self.b[:, None]) % self.p
        return (hashed < self.p // 2).astype(np.float64)

    def question(self, j: int) -> str:
        """The SUM of the secret over subset ``j``."""
        return (
            f"SELECT SUM(secret) FROM {TABLE} "
            f"WHERE (person_id * {self.a[j]} + {self.b[j]}) % {self.p} < {self.p // 2}"
        )


def random_subsets(queries: int, people: int) -> Subsets:
    """``queries`` subsets of the ids 1..people, their (a, b) drawn from the OS generator."""
    p = _prime_above(people)
    if queries > p * (p - 1):
        raise ConfigurationError(
            f"only {p * (p - 1)} distinct subsets of this family exist for {people} people, "
            f"not {queries}.",
            fix="ask fewer queries or use more people.",
        )
    source = system_random()
    # Distinct (a, b) pairs: a repeated pair would be a repeated question, which Dalenius answers
    # from its record and which teaches nothing new. The modulo bias of a 64-bit draw reduced
    # mod p < 2**20 is below 2**-44: immaterial here.
    pairs: dict[tuple[int, int], None] = {}
    while len(pairs) < queries:
        need = queries - len(pairs)
        a = 1 + source.uint64(need) % np.uint64(p - 1)
        b = source.uint64(need) % np.uint64(p)
        pairs.update(dict.fromkeys(zip(a.tolist(), b.tolist(), strict=True)))
    chosen = np.array(list(pairs)[:queries], dtype=np.int64).reshape(queries, 2)
    return Subsets(chosen[:, 0], chosen[:, 1], p, people)


@dataclass(frozen=True)
class Asked:
    """The answers one attacker got (in order) and whether a refusal stopped it."""

    answers: tuple[float, ...]
    refused: int


def ask_all(target: Target, subsets: Subsets, advance: Advance | None = None) -> Asked:
    """Ask every subset's count; stop at the first refusal (a spent budget stays spent)."""
    answers: list[float] = []
    for j in range(len(subsets)):
        try:
            answers.append(target.ask(subsets.question(j)).value)
        except UserError:
            return Asked(tuple(answers), 1)
        if advance is not None:
            advance(1)
    return Asked(tuple(answers), 0)


def decode(subsets: Matrix, answers: npt.ArrayLike, method: str = "lstsq") -> npt.NDArray[np.int64]:
    """The 0/1 vector that best explains ``answers`` (all zeros when there are none)."""
    y = np.asarray(answers, dtype=np.float64)
    people = subsets.shape[1]
    if y.size == 0:
        return np.zeros(people, dtype=np.int64)
    a = subsets[: y.size]
    if method == "lstsq":
        x = np.linalg.lstsq(a, y, rcond=None)[0]
    elif method == "lp":
        x = _lp(a, y)
    else:
        raise ConfigurationError(
            f"unknown decoder {method!r}.", fix=f"use one of {', '.join(DECODERS)}."
        )
    return (x > 0.5).astype(np.int64)


def _lp(a: Matrix, y: Matrix) -> Matrix:
    """Minimise Σ|a·x − y| over 0 ≤ x ≤ 1 (Dinur–Nissim's decoder), with scipy's HiGHS."""
    try:
        from scipy.optimize import linprog
    except ImportError:
        raise MissingExtraError("scipy", "attacks", "The LP decoder") from None
    m, n = a.shape
    eye = np.eye(m)
    cost = np.concatenate([np.zeros(n), np.ones(m)])
    upper = np.block([[a, -eye], [-a, -eye]])
    bounds = [(0.0, 1.0)] * n + [(0.0, None)] * m
    solved = linprog(cost, A_ub=upper, b_ub=np.concatenate([y, -y]), bounds=bounds, method="highs")
    if not solved.success:
        raise ConfigurationError(
            f"the LP decoder failed: {solved.message}", fix="use --decoder lstsq."
        )
    return np.asarray(solved.x[:n], dtype=np.float64)


def checkpoints(total: int, people: int) -> list[int]:
    """Numbers of queries at which the accuracy curve is measured (about 8, up to ``total``)."""
    points = {max(1, round(total * k / 8)) for k in range(1, 9)} | {min(people, total), total}
    return sorted(points)


@dataclass(frozen=True)
class Measured:
    """The report and the accuracy after the first m answers, for each checkpoint m."""

    report: AttackReport
    curve: tuple[tuple[int, float], ...]


def measure(
    spec: TargetSpec,
    *,
    people: int = 200,
    queries: int | None = None,
    decoder: str = "lstsq",
    seed: int = 1994,
    show_progress: bool = False,
) -> Measured:
    """Reconstruct ``people`` secret bits from up to ``queries`` subset counts (n·ln n by default)."""
    if decoder not in DECODERS:
        raise ConfigurationError(
            f"unknown decoder {decoder!r}.", fix=f"use one of {', '.join(DECODERS)}."
        )
    if isinstance(people, bool) or not isinstance(people, int) or people < 2:
        raise ConfigurationError(
            f"people must be a whole number >= 2, got {people!r}.", fix="use 200."
        )
    total = default_queries(people) if queries is None else queries
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise ConfigurationError(
            f"queries must be a whole number >= 1, got {total!r}.", fix="omit it for n·ln n."
        )
    if decoder == "lp":
        _require_scipy()
    table = make_people(people, seed=seed)
    truth = np.asarray(table.column("secret").to_numpy(), dtype=np.int64)
    subsets = random_subsets(total, people)
    matrix = subsets.matrix
    with (
        written([table]) as dbs,
        progress_bar(total, f"reconstruction vs {spec.kind}", enabled=show_progress) as step,
    ):
        target = spec.open(dbs[0])
        try:
            asked = ask_all(target, subsets, step)
        finally:
            target.close()
    # A refused attacker has no answers past its last one: decode each distinct prefix once.
    decoded: dict[int, npt.NDArray[np.int64]] = {}
    for m in [*checkpoints(total, people), len(asked.answers)]:
        used = min(m, len(asked.answers))
        if used not in decoded:
            decoded[used] = decode(matrix, asked.answers[:used], decoder)
    curve = tuple(
        (m, float(np.mean(decoded[min(m, len(asked.answers))] == truth)))
        for m in checkpoints(total, people)
    )
    recovered = int(np.sum(decoded[len(asked.answers)] == truth))
    report = AttackReport(
        attack=NAME,
        target=spec.label,
        metric=METRIC,
        rate=Rate(recovered, people),
        bound=None if spec.kind == "raw" else best_test_bound(float(_loss(spec, target))),
        bound_text="e^ε/(1+e^ε) per bit",
        queries=target.queries_asked,
        refused=asked.refused,
        epsilon_spent=target.epsilon_spent,
        budget=target.budget,
        details={
            "subset queries planned (n·ln n)"
            if queries is None
            else "subset queries planned": total,
            "decoder": decoder,
            "share of 1s (guessing all 0 scores 1 − this)": float(truth.mean()),
        },
    )
    return Measured(report, curve)


def run(spec: TargetSpec, **options: object) -> AttackReport:
    """:func:`measure`'s report only (same options)."""
    return measure(spec, **options).report  # type: ignore[arg-type]


def _loss(spec: TargetSpec, target: Target) -> Fraction:
    if spec.kind == "dalenius":
        return spec.total_budget
    return target.epsilon_spent or Fraction(0)


def _require_scipy() -> None:
    try:
        import scipy.optimize  # noqa: F401
    except ImportError:
        raise MissingExtraError("scipy", "attacks", "The LP decoder") from None


def plot(curves: dict[str, tuple[tuple[int, float], ...]], people: int, path: Path) -> Path:
    """Share of bits recovered vs number of subset queries, one line per target."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, curve in curves.items():
        kind = label.split()[0]
        ax.plot(
            [m for m, _ in curve],
            [a for _, a in curve],
            marker="o",
            markersize=3,
            color=COLOURS.get(kind, "#555555"),
            label=label,
        )
    ax.axhline(0.5, color="#999999", linestyle=":", label="chance")
    ax.axvline(
        default_queries(people),
        color=COLOURS["bound"],
        linestyle="--",
        linewidth=0.8,
        label=f"n·ln n = {default_queries(people)}",
    )
    ax.set_xlabel(f"subset-count queries asked (n = {people} people)")
    ax.set_ylabel("share of secret bits recovered")
    ax.set_title("Reconstruction attack (Dinur–Nissim)")
    ax.set_ylim(0.3, 1.02)
    ax.legend(loc="center right", fontsize=8)
    return save(fig, path)
