"""The distinguishing game most attacks are scored by, and the bookkeeping of repeated trials.

The game (the one DP's guarantee is about): two neighbouring databases, ``worlds[0]`` and
``worlds[1]``, differ in one person. Each trial flips a fair coin with the OS generator, opens a
fresh target (a new analyst with a full budget) on the world it chose, and lets the attacker ask
questions and guess the coin. Against an ε-DP system no attacker, however clever, guesses right
with probability above ``e^ε/(1+e^ε)`` (:func:`dalenius.attacks.report.best_test_bound`); against
the raw database a good attacker is always right.

A refused question is not an answer: an attacker left without one guesses with a coin flip of its
own, which is what its knowledge allows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import pyarrow as pa

from dalenius.attacks.population import write_population
from dalenius.attacks.report import Advance, AttackReport, Rate, best_test_bound, progress_bar
from dalenius.attacks.targets import Database, Target, TargetSpec
from dalenius.core.errors import ConfigurationError, UserError
from dalenius.core.rng import system_random

Guess = Callable[[Target], int]
"""An attacker: asks a target questions and returns its guess of the hidden bit."""


def coin() -> int:
    """A fair bit from the OS generator (the game's coin; never seeded)."""
    return system_random().random_bytes(1)[0] & 1


@dataclass
class Tally:
    """What a series of trials added up to."""

    successes: int = 0
    trials: int = 0
    answered: int = 0
    refused: int = 0
    most_spent: Fraction | None = None
    budget: Fraction | None = None
    notes: list[str] = field(default_factory=list)

    def record(self, target: Target, refused: int = 0) -> None:
        """Add one finished attacker's questions and spending."""
        self.answered += target.queries_asked
        self.refused += refused
        self.budget = target.budget
        spent = target.epsilon_spent
        if spent is not None:
            self.most_spent = spent if self.most_spent is None else max(self.most_spent, spent)

    @property
    def rate(self) -> Rate:
        """Successes over trials."""
        return Rate(self.successes, self.trials)

    @property
    def queries(self) -> float:
        """Questions answered per attacker."""
        return self.answered / self.trials if self.trials else 0.0

    @property
    def refusals(self) -> float:
        """Questions refused per attacker."""
        return self.refused / self.trials if self.trials else 0.0


def play(
    spec: TargetSpec,
    worlds: Sequence[Database],
    guess: Guess,
    trials: int,
    *,
    advance: Advance | None = None,
) -> Tally:
    """Run ``trials`` rounds of the distinguishing game of ``guess`` against ``spec``'s target."""
    tally = Tally()
    for _ in range(trials):
        hidden = coin()
        target = spec.open(worlds[hidden])
        refused = 0
        try:
            answer = guess(target)
        except UserError:
            refused, answer = 1, coin()
        finally:
            target.close()
        tally.record(target, refused)
        tally.trials += 1
        tally.successes += int(answer == hidden)
        if advance is not None:
            advance(1)
    return tally


def game_report(
    attack: str,
    spec: TargetSpec,
    metric: str,
    tally: Tally,
    details: dict[str, object],
    *,
    target: str | None = None,
) -> AttackReport:
    """The report of a series of games: success, the ``e^ε/(1+e^ε)`` bound, questions, cost."""
    return AttackReport(
        attack=attack,
        target=target or spec.label,
        metric=metric,
        rate=tally.rate,
        bound=bound(spec, tally),
        bound_text="e^ε/(1+e^ε)",
        queries=tally.queries,
        refused=tally.refusals,
        epsilon_spent=tally.most_spent,
        budget=tally.budget,
        details=details,
    )


def bound(spec: TargetSpec, tally: Tally) -> float | None:
    """``e^ε/(1+e^ε)`` for the ε one attacker could spend (none for raw: no privacy claimed).

    For Dalenius ε is the budget. For the naive system it is what the answers really cost
    together — a bound that holds but that nobody enforces: it grows with every question.
    """
    if spec.kind == "raw":
        return None
    loss = spec.total_budget if spec.kind == "dalenius" else tally.most_spent
    return None if loss is None else best_test_bound(float(loss))


def success_vs_epsilon(
    worlds: Sequence[Database],
    guess: Guess,
    epsilons: Sequence[float],
    trials: int,
    *,
    questions: int,
    label: str,
    show_progress: bool = False,
) -> list[tuple[float, Rate]]:
    """The game's success against Dalenius for each total budget ε, split over ``questions``."""
    out: list[tuple[float, Rate]] = []
    with progress_bar(
        trials * len(epsilons), f"{label}: success vs ε", enabled=show_progress
    ) as step:
        for epsilon in epsilons:
            if not epsilon > 0:
                raise ConfigurationError(
                    f"every ε of the sweep must be > 0, got {epsilon}.", fix="use 0.25,0.5,1,2."
                )
            share = Fraction(epsilon).limit_denominator(10**6) / questions
            spec = TargetSpec("dalenius", epsilon=share, budget=share * questions)
            out.append((epsilon, play(spec, worlds, guess, trials, advance=step).rate))
    return out


@contextmanager
def written(tables: Sequence[pa.Table], directory: Path | None = None) -> Iterator[list[Database]]:
    """Write each table as its own database (in a temporary folder unless one is given)."""
    with tempfile.TemporaryDirectory(prefix="dalenius-attack-") as scratch:
        root = directory or Path(scratch)
        dbs = [
            Database(write_population(t, root / f"world{i}").catalog) for i, t in enumerate(tables)
        ]
        try:
            yield dbs
        finally:
            for db in dbs:
                db.close()


def checked_trials(trials: int, minimum: int = 1) -> int:
    """Refuse a number of trials that is not a whole number >= ``minimum``, before any work."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < minimum:
        raise ConfigurationError(
            f"trials must be a whole number >= {minimum}, got {trials!r}.",
            fix="use trials=200 (more trials give a narrower interval).",
        )
    return trials
