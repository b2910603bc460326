"""Auxiliary information: "John is 10 cm taller than the average woman" — what DP cannot promise.

Tore Dalenius asked in 1977 that "everything that can be learned about an individual from the
database can be learned without access to the database". The course's counter-example: an
adversary knows that John is 10 cm taller than the average woman. Height is sensitive. With
access to the database, the adversary computes the average height of women and adds 10 cm —
and learns John's height, which it could not have learned without the database.

No useful statistics can meet Dalenius's wish (Dwork 2006): here the harm comes from a true
fact about the population plus the auxiliary knowledge, and John need not even be in the
database. Differential privacy promises something else: the attacker learns (almost) the same
thing *whether or not John's data are used*. This demonstration measures exactly that: the
attacker's success (its guess of John's height within ``tolerance`` cm) in a database with John
and in the same database without him. For an ε-DP target the two rates satisfy
``P(with) <= e^ε · P(without)``; here they are equal, because John (a man) does not enter the
women's average at all, and the attacker succeeds against every target — raw, naive and
Dalenius alike. That is not a failure of DP: the average height of women is the kind of
statistic a DP system exists to publish.

Example:
    >>> report = run(TargetSpec("raw"), people=200, trials=6)
    >>> report.rate.estimate
    1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa

from dalenius.attacks.game import checked_trials, coin, written
from dalenius.attacks.population import TABLE, make_people
from dalenius.attacks.report import AttackReport, Rate, progress_bar
from dalenius.attacks.targets import Target, TargetSpec
from dalenius.core.errors import UserError

NAME = "auxiliary"
TALLER = 10
"""What the attacker knows: John is this many cm taller than the average woman."""
METRIC = "John's height guessed within the tolerance"


def guess_height(target: Target) -> float:
    """The average height of women, plus the 10 cm the attacker knows."""
    return target.ask(f"SELECT AVG(height_cm) FROM {TABLE} WHERE sex = 'Female'").value + TALLER


def worlds(people: int, seed: int) -> tuple[list[pa.Table], int]:
    """The people without John and with John appended; John's height (women's mean + 10)."""
    table = make_people(people, seed=seed)
    women = [
        h
        for h, s in zip(
            table.column("height_cm").to_pylist(), table.column("sex").to_pylist(), strict=True
        )
        if s == "Female"
    ]
    height = round(sum(women) / len(women)) + TALLER
    john = {name: [table.column(name)[0].as_py()] for name in table.column_names}
    john.update(person_id=[people + 1], name=["John Doe"], sex=["Male"], height_cm=[height])
    with_john = pa.concat_tables([table, pa.table(john, schema=table.schema)])
    return [table, with_john], height


@dataclass(frozen=True)
class Measured:
    """The report, and the success rates with and without John in the database."""

    report: AttackReport
    with_john: Rate
    without_john: Rate


def run(spec: TargetSpec, **options: object) -> AttackReport:
    """:func:`measure`'s report only (same options)."""
    return measure(spec, **options).report  # type: ignore[arg-type]


def measure(
    spec: TargetSpec,
    *,
    people: int = 2000,
    trials: int = 100,
    tolerance: float = 2.0,
    seed: int = 1994,
    show_progress: bool = False,
) -> Measured:
    """Guess John's height ``trials`` times, half of them (by a fair coin) with John in the data."""
    checked_trials(trials, minimum=2)
    tables, height = worlds(people, seed)
    hits = [0, 0]
    seen = [0, 0]
    answered = refused = 0
    spent = None
    budget = None
    with (
        written(tables) as dbs,
        progress_bar(trials, f"auxiliary vs {spec.kind}", enabled=show_progress) as step,
    ):
        for _ in range(trials):
            world = coin()
            target = spec.open(dbs[world])
            try:
                hit = abs(guess_height(target) - height) <= tolerance
            except UserError:
                hit, refused = False, refused + 1
            finally:
                target.close()
            answered += target.queries_asked
            spent, budget = target.epsilon_spent, target.budget
            seen[world] += 1
            hits[world] += int(hit)
            step(1)
    without, with_ = Rate(hits[0], seen[0]), Rate(hits[1], seen[1])
    details: dict[str, object] = {
        "John's true height (cm)": height,
        "success with John in the database": _shown(with_),
        "success without John in the database": _shown(without),
    }
    if spec.kind != "raw" and spent is not None:
        factor = math.exp(float(spec.total_budget if spec.kind == "dalenius" else spent))
        details["DP bound"] = f"P(with) ≤ e^ε·P(without) = {factor:.3g} × P(without)"
    report = AttackReport(
        attack=NAME,
        target=spec.label,
        metric=f"{METRIC} (±{tolerance:g} cm)",
        rate=Rate(hits[0] + hits[1], trials),
        bound_text="P(with John) ≤ e^ε·P(without John)" if spec.kind != "raw" else "",
        queries=answered / trials,
        refused=refused / trials,
        epsilon_spent=spent,
        budget=budget,
        details=details,
    )
    return Measured(report, with_, without)


def _shown(rate: Rate) -> str:
    low, high = rate.interval()
    return f"{rate.estimate:.1%} [{low:.1%}, {high:.1%}] ({rate.successes}/{rate.trials})"
