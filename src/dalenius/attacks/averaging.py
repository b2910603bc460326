"""Averaging: ask the same noisy question many times and average the noise away.

The course's example: a malicious, very selective query — ``SELECT count(*) FROM person WHERE
name = 'Alan Brito' AND target = '<=50k'`` — gets a noisy answer (18.47, −2.11, 13.17, ...) that
says little. "What if we repeat the query many times?" Against a system that draws fresh noise
for every answer and keeps no budget, the mean of n answers has error shrinking like 1/√n, and
Alan's value comes out.

Dalenius answers an identical question from the ledger's record: the same number, at no cost, so
repeating it teaches nothing new. Rewording it to dodge the cache (``... AND age <> -1``,
``... AND age <> -2``) makes each a new release that spends ε, and the budget stops them. The
attacker's best guess is then bounded by ``e^B/(1+e^B)`` for a budget B.

Two strategies are measured: ``repeat`` (the identical question n times) and ``reword`` (n
different wordings of it). An attacker that sees a repeat come back from the record, or a refusal,
stops asking: more of the same cannot help.

Example:
    >>> report = run(TargetSpec("raw"), people=50, trials=5, asks=3)
    >>> report.rate.estimate
    1.0
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dalenius.attacks.differencing import VICTIM, worlds
from dalenius.attacks.game import Tally, checked_trials, coin, game_report, written
from dalenius.attacks.plots import COLOURS, pyplot, save
from dalenius.attacks.population import TABLE
from dalenius.attacks.report import AttackReport, progress_bar
from dalenius.attacks.targets import Target, TargetSpec
from dalenius.core.errors import ConfigurationError, UserError

NAME = "averaging"
STRATEGIES = ("repeat", "reword")
METRIC = "Alan's 0/1 diagnosis = the rounded mean of the answers"


def question(k: int, strategy: str) -> str:
    """The k-th question: always the same for ``repeat``, a new wording each time for ``reword``."""
    where = f"name = '{VICTIM}'"
    if strategy == "reword" and k:
        where += f" AND age <> {-k}"
    return f"SELECT SUM(secret) FROM {TABLE} WHERE {where}"


@dataclass(frozen=True)
class Run:
    """One attacker's answers, in order (it may stop early), and the refusals it met."""

    answers: tuple[float, ...]
    refused: int


def ask_many(target: Target, asks: int, strategy: str) -> Run:
    """Ask up to ``asks`` questions; stop at a cached repeat or a refusal (nothing new to learn)."""
    answers: list[float] = []
    for k in range(asks):
        try:
            answer = target.ask(question(k, strategy))
        except UserError:
            return Run(tuple(answers), 1)
        answers.append(answer.value)
        if answer.cached:
            break
    return Run(tuple(answers), 0)


def guess(run: Run) -> int:
    """1 if the mean answer is above 1/2; a coin flip when nothing was answered."""
    return int(float(np.mean(run.answers)) > 0.5) if run.answers else coin()


def running_errors(run: Run, truth: int, asks: int) -> list[float]:
    """|mean of the first k answers − truth| for k = 1..asks (a stopped attacker keeps its mean)."""
    if not run.answers:
        return [0.5] * asks
    means = np.cumsum(run.answers) / np.arange(1, len(run.answers) + 1)
    errors: list[float] = [float(e) for e in np.abs(means - truth)]
    return errors + [errors[-1]] * (asks - len(errors))


@dataclass(frozen=True)
class Measured:
    """The report and the root-mean-square error of the running mean after each ask."""

    report: AttackReport
    rms_error: tuple[float, ...]


def measure(
    spec: TargetSpec,
    *,
    strategy: str = "repeat",
    people: int = 200,
    trials: int = 60,
    asks: int = 100,
    seed: int = 1994,
    show_progress: bool = False,
) -> Measured:
    """Run ``trials`` attackers, each asking up to ``asks`` times, against ``spec``'s target."""
    if strategy not in STRATEGIES:
        raise ConfigurationError(
            f"unknown strategy {strategy!r}.", fix=f"use one of {', '.join(STRATEGIES)}."
        )
    checked_trials(trials)
    checked_trials(asks)
    tally = Tally()
    squared = np.zeros(asks)
    with (
        written(worlds(people, seed)) as dbs,
        progress_bar(trials, f"averaging vs {spec.kind}", enabled=show_progress) as step,
    ):
        for _ in range(trials):
            hidden = coin()
            target = spec.open(dbs[hidden])
            try:
                run_ = ask_many(target, asks, strategy)
            finally:
                target.close()
            tally.record(target, run_.refused)
            tally.trials += 1
            tally.successes += int(guess(run_) == hidden)
            squared += np.square(running_errors(run_, hidden, asks))
            step(1)
    report = game_report(
        NAME,
        spec,
        METRIC,
        tally,
        {
            f"RMS error of the mean after {asks} asks": float(np.sqrt(squared[-1] / trials)),
            "RMS error after 1 ask": float(np.sqrt(squared[0] / trials)),
        },
        target=f"{spec.label}, {strategy}",
    )
    return Measured(report, tuple(float(x) for x in np.sqrt(squared / trials)))


def run(spec: TargetSpec, **options: object) -> AttackReport:
    """:func:`measure`'s report only (same options)."""
    return measure(spec, **options).report  # type: ignore[arg-type]


def plot(curves: dict[str, tuple[float, ...]], path: Path) -> Path:
    """RMS error of the running mean vs number of asks, per target, with the 1/√n slope."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {"repeat": "-", "reword": "--"}
    exact = [label for label, errors in curves.items() if max(errors) == 0]
    for label, errors in curves.items():
        kind, strategy = label.split()[0], label.split()[-1]
        if label in exact:  # no error to draw on a log scale
            continue
        ax.plot(
            range(1, len(errors) + 1),
            errors,
            color=COLOURS.get(kind, "#555555"),
            linestyle=styles.get(strategy, "-"),
            label=label,
        )
    naive = [e for label, e in curves.items() if label.startswith("naive")]
    if naive:
        n = np.arange(1, len(naive[0]) + 1)
        ax.plot(n, naive[0][0] / np.sqrt(n), color=COLOURS["bound"], linestyle=":", label="1/√n")
    ax.axhline(0.5, color="#999999", linestyle="--", linewidth=0.8, label="error 1/2: guess flips")
    for label in exact:  # a legend entry only: the error is 0 from the first ask
        ax.plot([], [], color=COLOURS["raw"], label=f"{label}: exact from the first ask (error 0)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of times the question was asked")
    ax.set_ylabel("RMS error of the mean answer")
    ax.set_title("Averaging attack: repeating one question")
    ax.legend(fontsize=8)
    return save(fig, path)
