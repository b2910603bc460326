"""Differencing: two aggregates that differ by one person reveal that person's value.

The course's example: ``SELECT SUM(age) FROM person`` returns 1256257, ``SELECT SUM(age) FROM
person WHERE name <> 'Alan Brito'`` returns 1256218, so Alan is 39. Neither query looks like it
is about Alan; their difference is. Against exact answers the attack always works.

The measured version asks about Alan's sensitive 0/1 attribute (a diagnosis) in the
distinguishing game (:mod:`dalenius.attacks.game`): two databases that differ only in Alan's
value, a fair coin picks one, the attacker asks the two sums and guesses 1 if their difference is
above 1/2 — the best test for this pair of answers, whose noise is symmetric. Against Dalenius
with a budget ε, no test can be right with probability above ``e^ε/(1+e^ε)``.

(Why that bound holds although the two databases differ by a *change* of Alan's value, not by
adding or removing him: each question is a SUM of a column with public bounds [0, 1], which a
change of one value moves by at most 1 — the add/remove sensitivity that Dalenius calibrates its
noise to. So every answer is ε_q-DP for this pair too, and the ε_q add up to at most the budget.)

Example:
    >>> report = run(TargetSpec("raw"), people=50, trials=5)
    >>> report.rate.estimate
    1.0
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dalenius.attacks.game import checked_trials, game_report, play, success_vs_epsilon, written
from dalenius.attacks.plots import plot_success
from dalenius.attacks.population import TABLE, make_people
from dalenius.attacks.report import AttackReport, Rate, progress_bar
from dalenius.attacks.targets import Target, TargetSpec

NAME = "differencing"
VICTIM = "Alan Brito"
"""The course's victim; the experiment renames its first person to him."""
VICTIM_AGE = 39

METRIC = "Alan's 0/1 diagnosis guessed right"


def difference(target: Target, column: str = "secret", victim: str = VICTIM) -> float:
    """``SUM(column)`` over everyone minus ``SUM(column)`` over everyone but ``victim``."""
    everyone = target.ask(f"SELECT SUM({column}) FROM {TABLE}").value
    others = target.ask(f"SELECT SUM({column}) FROM {TABLE} WHERE name <> '{victim}'").value
    return everyone - others


def guess(target: Target) -> int:
    """The attacker: 1 if the difference of the two sums is above 1/2."""
    return int(difference(target) > 0.5)


def worlds(people: int, seed: int) -> list[pa.Table]:
    """Two databases that differ only in Alan's diagnosis (0, then 1); Alan is 39."""
    table = make_people(people, seed=seed)
    first = pc.equal(pa.array(range(table.num_rows)), 0)
    table = table.set_column(
        table.column_names.index("name"), "name", pc.if_else(first, VICTIM, table.column("name"))
    )
    table = table.set_column(
        table.column_names.index("age"), "age", pc.if_else(first, VICTIM_AGE, table.column("age"))
    )
    index = table.column_names.index("secret")
    return [
        table.set_column(index, "secret", pc.if_else(first, value, table.column("secret")))
        for value in (0, 1)
    ]


def run(
    spec: TargetSpec,
    *,
    people: int = 200,
    trials: int = 300,
    seed: int = 1994,
    show_progress: bool = False,
) -> AttackReport:
    """Play the differencing game ``trials`` times against ``spec``'s target.

    Also runs the course's own two SUM(age) queries once (on a fresh target) and reports the age
    they give for Alan beside his true age.
    """
    checked_trials(trials)
    with written(worlds(people, seed)) as dbs:
        with progress_bar(trials, f"differencing vs {spec.kind}", enabled=show_progress) as step:
            tally = play(spec, dbs, guess, trials, advance=step)
        course = spec.open(dbs[1])
        try:
            learned = f"{difference(course, 'age'):.4g} (true {VICTIM_AGE})"
        except Exception as exc:  # a refusal is the story's answer too
            learned = f"refused: {str(exc).splitlines()[0]}"
        finally:
            course.close()
    return game_report(
        NAME, spec, METRIC, tally, {"Alan's age from the course's two SUM(age) queries": learned}
    )


def sweep(
    epsilons: list[float],
    *,
    people: int = 200,
    trials: int = 200,
    seed: int = 1994,
    show_progress: bool = False,
) -> list[tuple[float, Rate]]:
    """Success against Dalenius for each total budget ε (each of the two sums spends ε/2)."""
    checked_trials(trials)
    with written(worlds(people, seed)) as dbs:
        return success_vs_epsilon(
            dbs, guess, epsilons, trials, questions=2, label=NAME, show_progress=show_progress
        )


def plot(points: list[tuple[float, Rate]], path: Path) -> Path:
    """Measured success against Dalenius with its interval, beside the ``e^ε/(1+e^ε)`` curve."""
    return plot_success(
        points,
        path,
        title="Differencing attack: success vs ε",
        ylabel="P(attacker guesses Alan's diagnosis)",
    )
