"""What an attack reports: its success rate with a confidence interval, its cost, and its bound.

Every attack returns an :class:`AttackReport` per target: how often it succeeded (with an exact
Clopper–Pearson interval, so a reader can tell a measured 0.62 over 400 trials from one over 20),
the questions it asked and had refused, the privacy loss those answers cost, and — where DP
gives one — the bound no attacker can beat. :func:`render` prints reports side by side with rich;
:meth:`AttackReport.to_dict` is the JSON the CLI's ``--json`` prints.

Example:
    >>> rate = Rate(90, 100)
    >>> round(rate.estimate, 2), [round(x, 3) for x in rate.interval(0.95)]
    (0.9, [0.824, 0.951])
    >>> best_test_bound(1.0)  # e/(1+e)
    0.7310585786300049
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from dalenius.core.errors import ConfigurationError


def best_test_bound(epsilon: float) -> float:
    """``e^ε/(1+e^ε)``: the best success of any test telling two neighbours apart under ε-DP.

    With a fair coin choosing between neighbouring databases, an ε-DP answer lets the best test
    guess right with probability at most this (Kairouz, Oh & Viswanath 2015; it follows from
    ``P[guess 1 | D1] <= e^ε P[guess 1 | D0]``).
    """
    if epsilon < 0:
        raise ConfigurationError(f"epsilon must be >= 0, got {epsilon}.", fix="use epsilon=1.")
    return 1.0 / (1.0 + math.exp(-epsilon))


@dataclass(frozen=True)
class Rate:
    """``successes`` out of ``trials``."""

    successes: int
    trials: int

    def __post_init__(self) -> None:
        if not 0 <= self.successes <= self.trials:
            raise ConfigurationError(
                f"a rate needs 0 <= successes <= trials, got {self.successes}/{self.trials}.",
            )

    @property
    def estimate(self) -> float:
        """The observed share (0 when there were no trials)."""
        return self.successes / self.trials if self.trials else 0.0

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The exact Clopper–Pearson interval: it covers the true rate with at least ``confidence``.

        Example:
            >>> Rate(0, 10).interval(0.95)[0], round(Rate(0, 10).interval(0.95)[1], 4)
            (0.0, 0.3085)
        """
        return clopper_pearson(self.successes, self.trials, confidence)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided binomial interval for ``k`` successes in ``n`` trials.

    The bounds solve ``P[X >= k | p_low] = α/2`` and ``P[X <= k | p_high] = α/2`` by bisection on
    the binomial tail (summed in log space), so no statistics library is needed.
    """
    if not 0 < confidence < 1:
        raise ConfigurationError(
            f"confidence must be in (0, 1), got {confidence}.", fix="use 0.95."
        )
    if n == 0:
        return (0.0, 1.0)
    alpha = (1 - confidence) / 2
    low = 0.0 if k == 0 else _solve(lambda p: _upper_tail(k, n, p) - alpha)
    high = 1.0 if k == n else _solve(lambda p: alpha - _lower_tail(k, n, p))
    return (low, high)


def _log_pmf(i: int, n: int, p: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(i + 1)
        - math.lgamma(n - i + 1)
        + i * math.log(p)
        + (n - i) * math.log1p(-p)
    )


def _lower_tail(k: int, n: int, p: float) -> float:
    """``P[X <= k]`` for X ~ Binomial(n, p)."""
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1)))


def _upper_tail(k: int, n: int, p: float) -> float:
    """``P[X >= k]`` for X ~ Binomial(n, p)."""
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k, n + 1)))


def _solve(increasing: Any) -> float:
    """The root in (0, 1) of an increasing function, by bisection to 1e-10."""
    lo, hi = 1e-15, 1 - 1e-15
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2
        if increasing(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class AttackReport:
    """One attack against one target.

    Attributes:
        attack: the attack's name (``differencing``, ``reconstruction``, ...).
        target: how the target is described (``raw``, ``naive (ε=1 per query, no budget)``, ...).
        metric: what counts as a success, in words.
        rate: successes over trials (``None`` when the attack reports a measurement, not a rate).
        bound: the most any attacker can achieve against this target, if there is one: under DP,
            or under the release's syntactic model (k-anonymity's 1/k; see :func:`bound_kind`).
        bound_text: how the bound is computed (``e^ε/(1+e^ε)``), for the reader.
        queries: questions one attacker had answered (the mean over trials).
        refused: questions one attacker had refused (budget exhausted, not answerable privately;
            the mean over trials).
        epsilon_spent: privacy loss of one attacker's answers (``None`` for raw: no privacy
            claimed; the largest over trials); for a naive target nobody accounted for it.
        budget: the ε one attacker may spend (``None``: nothing stops the attacker).
        details: other measurements, by name (printed below the table, in the JSON as is).
        confidence: of the interval.
    """

    attack: str
    target: str
    metric: str
    rate: Rate | None
    bound: float | None = None
    bound_text: str = ""
    queries: float = 0
    refused: float = 0
    epsilon_spent: Fraction | None = None
    budget: Fraction | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    confidence: float = 0.95

    @property
    def within_bound(self) -> bool | None:
        """Whether the interval is consistent with the bound (its low end does not exceed it)."""
        if self.bound is None or self.rate is None:
            return None
        return self.rate.interval(self.confidence)[0] <= self.bound

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (fractions as ``"p/q"`` strings beside their float)."""
        doc: dict[str, Any] = {
            "attack": self.attack,
            "target": self.target,
            "metric": self.metric,
            "queries": self.queries,
            "refused": self.refused,
            "epsilon_spent": _fraction(self.epsilon_spent),
            "budget": _fraction(self.budget),
            "confidence": self.confidence,
            "details": dict(self.details),
        }
        if self.rate is not None:
            low, high = self.rate.interval(self.confidence)
            doc["success"] = {
                "successes": self.rate.successes,
                "trials": self.rate.trials,
                "rate": self.rate.estimate,
                "low": low,
                "high": high,
            }
        if self.bound is not None:
            doc["bound"] = {"value": self.bound, "formula": self.bound_text}
            doc["within_bound"] = self.within_bound
        return doc


def _fraction(value: Fraction | None) -> dict[str, Any] | None:
    if value is None:
        return None
    return {"value": float(value), "exact": f"{value.numerator}/{value.denominator}"}


def _spent(report: AttackReport) -> str:
    if report.epsilon_spent is None:
        return "— (exact answers)"
    text = f"{float(report.epsilon_spent):.4g}"
    if report.budget is None:
        return text + " (unaccounted)"
    return text + f" of {float(report.budget):.4g}"


def render(reports: Sequence[AttackReport], console: Console | None = None) -> None:
    """Print reports side by side: success with its interval, the bound, questions, ε spent."""
    if not reports:
        return
    out = console or _console()
    first = reports[0]
    pct = round(first.confidence * 100)
    table = Table(
        title=f"{first.attack} attack — success: {first.metric}",
        title_justify="left",
        caption=_caption(reports),
        caption_justify="left",
    )
    table.add_column("target")
    table.add_column("success", justify="right")
    table.add_column(f"{pct}% interval", justify="right")
    # "DP bound" only when every bound shown is one; else each cell says what its bound is.
    only_dp = all(bound_kind(r.bound_text) == "DP" for r in reports if r.bound is not None)
    table.add_column("DP bound" if only_dp else "bound", justify="right")
    table.add_column("questions", justify="right")
    table.add_column("refused", justify="right")
    table.add_column("ε spent", justify="right")
    for report in reports:
        if report.rate is None:
            success, interval = "—", ""
        else:
            low, high = report.rate.interval(report.confidence)
            success = f"{report.rate.estimate:.1%} ({report.rate.successes}/{report.rate.trials})"
            interval = f"[{low:.1%}, {high:.1%}]"
        table.add_row(
            report.target,
            success,
            interval,
            _bound_cell(report, only_dp),
            f"{report.queries:,.4g}",
            f"{report.refused:,.4g}",
            _spent(report),
        )
    out.print(table)
    out.print("[dim]questions, refused and ε spent are per attacker (one trial)[/dim]")
    for report in reports:
        if report.details:
            out.print(f"[bold]{report.target}[/bold]", highlight=False)
            for name, value in report.details.items():
                shown = f"{value:.4g}" if isinstance(value, float) else str(value)
                out.print(f"  {name}: {shown}", highlight=False)


def bound_kind(formula: str) -> str:
    """What a bound rests on, from its formula: ``"DP"``, or the syntactic model that gives it.

    k-anonymity's 1/k and ℓ-diversity's "values left" hold for one released file against one
    kind of attacker; calling them DP bounds would teach the wrong lesson.

    Example:
        >>> bound_kind("e^ε/(1+e^ε)"), bound_kind("1/k = 1/5"), bound_kind("ℓ-diversity: ≥ 2 values left")
        ('DP', 'k-anonymity bound', 'ℓ-diversity bound')
    """
    if "e^ε" in formula:
        return "DP"
    if formula.startswith("1/k"):
        return "k-anonymity bound"
    if formula.startswith("ℓ-diversity"):
        return "ℓ-diversity bound"
    if "no released row" in formula:
        return "synthetic rows"
    return "bound"


def _caption(reports: Sequence[AttackReport]) -> str | None:
    """The table's caption: the DP formulas apart from the syntactic bounds (not DP)."""
    formulas = sorted(
        {
            r.bound_text
            for r in reports
            if r.bound_text and r.epsilon_spent is not None and bound_kind(r.bound_text) == "DP"
        }
    )
    others = sorted(
        {
            r.bound_text
            if r.bound_text.startswith(bound_kind(r.bound_text).split(" ")[0])
            else f"{bound_kind(r.bound_text)}: {r.bound_text}"
            for r in reports
            if r.bound_text and bound_kind(r.bound_text) != "DP"
        }
    )
    caption = []
    if formulas:
        caption.append("DP bound: " + "; ".join(formulas) + ", ε = what one attacker may spend")
    if others:
        what = (
            "properties of the released file, not DP bounds"
            if len(others) > 1
            else "a property of the released file, not a DP bound"
        )
        caption.append("; ".join(others) + " — " + what)
    return "\n".join(caption) or None


def _bound_cell(report: AttackReport, only_dp: bool = True) -> str:
    if report.bound is not None:
        kind = bound_kind(report.bound_text)
        if kind == "DP":
            return f"≤ {report.bound:.1%}" + ("" if only_dp else " (DP)")
        label = "k-anonymity 1/k" if kind == "k-anonymity bound" else kind
        return f"≤ {report.bound:.1%} ({label})"
    # Raw answers claim no privacy; a relative bound (with vs without someone) is in the details.
    return "below" if report.bound_text and report.epsilon_spent is not None else "none"


def _console() -> Console:
    """Standard output, at least 110 columns wide when it is not a terminal (pipes, files)."""
    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 110))


Advance = Callable[[int], None]
"""Called with how many steps of a long run just finished."""


@contextmanager
def progress_bar(total: int, description: str, *, enabled: bool) -> Iterator[Advance]:
    """A rich progress bar on standard error while a long run goes on (a no-op when disabled).

    Drawn only when standard error is a terminal: elsewhere (a log, a pipe) rich would still end
    the bar with an empty line.

    Example:
        >>> with progress_bar(3, "trials", enabled=False) as advance:
        ...     advance(3)
    """
    if not enabled or not sys.stderr.isatty():
        yield lambda n: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
