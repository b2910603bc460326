"""Membership inference from exact counts: is John in the (sensitive) database at all?

Being in some databases is the secret — a clinic's patients, a study's participants. The course
shows that three quasi-identifiers, ZIP code, date of birth and sex, single out most people (87%
of the US). An attacker who knows John's three values from a public voter roll asks one harmless
looking count::

    SELECT COUNT(*) FROM people WHERE zip = '…' AND date_of_birth = '…' AND sex = '…'

and reads John's membership off the answer: 1 means he is in, 0 means he is not.

Measured in the distinguishing game (:mod:`dalenius.attacks.game`): the two databases are the
same people with and without John — exactly the neighbouring databases of DP's definition — so
against Dalenius with a budget ε the attacker's guess is right with probability at most
``e^ε/(1+e^ε)``. The report also gives the share of the experiment's people that are unique on
(ZIP, date of birth, sex), to set beside the course's 87%.

Example:
    >>> report = run(TargetSpec("raw"), people=50, trials=5)
    >>> report.rate.estimate
    1.0
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa

from dalenius.attacks.game import (
    Guess,
    checked_trials,
    game_report,
    play,
    success_vs_epsilon,
    written,
)
from dalenius.attacks.plots import plot_success
from dalenius.attacks.population import TABLE, make_people
from dalenius.attacks.report import AttackReport, Rate, progress_bar
from dalenius.attacks.targets import Target, TargetSpec
from dalenius.core.errors import ConfigurationError

NAME = "membership"
QUASI_IDENTIFIERS = ("zip", "date_of_birth", "sex")
METRIC = "John's membership guessed right"


def unique_share(table: pa.Table, columns: tuple[str, ...] = QUASI_IDENTIFIERS) -> float:
    """The share of rows whose values on ``columns`` no other row shares."""
    keys = list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
    counts = Counter(keys)
    return sum(1 for k in keys if counts[k] == 1) / len(keys) if keys else 0.0


def count_question(john: dict[str, object]) -> str:
    """The count of people with John's quasi-identifiers (his values, as a voter roll lists them)."""
    where = " AND ".join(f"{c} = '{john[c]}'" for c in QUASI_IDENTIFIERS)
    return f"SELECT COUNT(*) FROM {TABLE} WHERE {where}"


def attacker(john: dict[str, object]) -> Guess:
    """An attacker who knows John's quasi-identifiers: 'in' when the count is above 1/2."""

    def guess(target: Target) -> int:
        return int(target.ask(count_question(john)).value > 0.5)

    return guess


def worlds(people: int, seed: int) -> tuple[list[pa.Table], dict[str, object], float]:
    """The databases without and with John, John's quasi-identifiers, and the unique share.

    John is the first person unique on (ZIP, date of birth, sex).
    """
    table = make_people(people, seed=seed)
    keys = list(zip(*(table.column(c).to_pylist() for c in QUASI_IDENTIFIERS), strict=True))
    counts = Counter(keys)
    unique = [i for i, k in enumerate(keys) if counts[k] == 1]
    if not unique:
        raise ConfigurationError(
            f"no one among {people} people is unique on (ZIP, date of birth, sex).",
            fix="use more people (the default 1000).",
        )
    index = unique[0]
    john = {c: table.column(c)[index].as_py() for c in QUASI_IDENTIFIERS}
    without = pa.concat_tables([table.slice(0, index), table.slice(index + 1)])
    return [without, table], john, len(unique) / len(keys)


def run(
    spec: TargetSpec,
    *,
    people: int = 1000,
    trials: int = 400,
    seed: int = 1994,
    show_progress: bool = False,
) -> AttackReport:
    """Play the membership game ``trials`` times against ``spec``'s target."""
    checked_trials(trials)
    tables, john, unique = worlds(people, seed)
    with (
        written(tables) as dbs,
        progress_bar(trials, f"membership vs {spec.kind}", enabled=show_progress) as step,
    ):
        tally = play(spec, dbs, attacker(john), trials, advance=step)
    return game_report(
        NAME,
        spec,
        METRIC,
        tally,
        {
            "people unique on (ZIP, date of birth, sex) — the course: 87% of the US": f"{unique:.1%}",
        },
    )


def sweep(
    epsilons: list[float],
    *,
    people: int = 1000,
    trials: int = 200,
    seed: int = 1994,
    show_progress: bool = False,
) -> list[tuple[float, Rate]]:
    """Success against Dalenius for each budget ε (one count question spends it all)."""
    checked_trials(trials)
    tables, john, _ = worlds(people, seed)
    with written(tables) as dbs:
        return success_vs_epsilon(
            dbs,
            attacker(john),
            epsilons,
            trials,
            questions=1,
            label=NAME,
            show_progress=show_progress,
        )


def plot(points: list[tuple[float, Rate]], path: Path) -> Path:
    """Measured success against Dalenius with its interval, beside the ``e^ε/(1+e^ε)`` curve."""
    return plot_success(
        points,
        path,
        title="Membership inference: success vs ε",
        ylabel="P(attacker guesses John's membership)",
    )
