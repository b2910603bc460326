"""Run any query attack by name against one or more targets, with its plot: the Python API.

``dalenius attack <name>`` is a thin shell over :func:`compare`. Each attack has defaults chosen
so that it finishes in seconds and makes its point: the ε per query of the naive and Dalenius
targets, and Dalenius's budget (see :data:`ATTACKS`).

The experiments write their own seeded databases, so the Dalenius target here is an in-process
session on them. To attack a running gateway, register an experiment's catalog there and open a
:class:`~dalenius.attacks.targets.TargetSpec` with ``url`` and ``token`` on it.

Example:
    >>> reports = compare("differencing", against=["raw"], trials=5, people=50)
    >>> [(r.target, r.rate.estimate) for r in reports]
    [('raw', 1.0)]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from dalenius.attacks import auxiliary, averaging, differencing, membership, reconstruction
from dalenius.attacks.plots import pyplot
from dalenius.attacks.report import AttackReport
from dalenius.attacks.targets import KINDS, TargetSpec
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import as_fraction

SWEEP = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0)
"""The total budgets of the success-vs-ε plot."""


@dataclass(frozen=True)
class Defaults:
    """An attack's default ε per query (naive, Dalenius) and Dalenius budget."""

    naive_epsilon: Fraction
    dalenius_epsilon: Fraction
    budget: Fraction
    plot: str | None
    """What the plot shows (``None``: the attack has no plot)."""


ATTACKS: dict[str, Defaults] = {
    "differencing": Defaults(Fraction(1, 2), Fraction(1, 2), Fraction(1), "success vs ε"),
    "averaging": Defaults(Fraction(1, 2), Fraction(1, 2), Fraction(1), "error vs asks"),
    "reconstruction": Defaults(Fraction(1), Fraction(1, 100), Fraction(1), "bits vs queries"),
    "membership": Defaults(Fraction(1), Fraction(1), Fraction(1), "success vs ε"),
    "auxiliary": Defaults(Fraction(1), Fraction(1), Fraction(1), None),
}
"""Every query attack by name, with its defaults."""

_OPTIONS = {
    "differencing": {"people", "trials", "seed"},
    "averaging": {"people", "trials", "seed", "asks", "strategy"},
    "reconstruction": {"people", "seed", "queries", "decoder"},
    "membership": {"people", "trials", "seed"},
    "auxiliary": {"people", "trials", "seed", "tolerance"},
}
"""Which options each attack takes (others are refused by name, before any work)."""


def option_defaults(name: str) -> dict[str, Any]:
    """The default of every option of attack ``name`` (read from its function's signature)."""
    entries: dict[str, Callable[..., Any]] = {
        "differencing": differencing.run,
        "averaging": averaging.measure,
        "reconstruction": reconstruction.measure,
        "membership": membership.run,
        "auxiliary": auxiliary.measure,
    }
    found = inspect.signature(entries[name]).parameters
    return {k: found[k].default for k in _OPTIONS[name] if k in found}


def spec_for(
    name: str,
    kind: str,
    *,
    epsilon: Any = None,
    budget: Any = None,
) -> TargetSpec:
    """The target ``kind`` with the attack's defaults for whatever is not given.

    Dalenius's budget defaults to the attack's default, raised to ``epsilon`` when one query
    would not fit.
    """
    defaults = _defaults(name)
    if kind == "raw":
        return TargetSpec("raw")
    if kind == "naive":
        return TargetSpec(
            "naive", epsilon=epsilon if epsilon is not None else defaults.naive_epsilon
        )
    eps = as_fraction(epsilon, "epsilon") if epsilon is not None else defaults.dalenius_epsilon
    cap = as_fraction(budget, "budget") if budget is not None else max(defaults.budget, eps)
    return TargetSpec("dalenius", epsilon=eps, budget=cap)


def compare(
    name: str,
    *,
    against: Sequence[str] = KINDS,
    epsilon: Any = None,
    budget: Any = None,
    plot: str | Path | None = None,
    show_progress: bool = False,
    **options: Any,
) -> list[AttackReport]:
    """Run attack ``name`` against each target kind in ``against``; write its plot if asked.

    Every argument is checked before any data is written or read: unknown attack, target or
    option; a plot without matplotlib.
    """
    defaults = _defaults(name)
    unknown = sorted(set(options) - _OPTIONS[name])
    if unknown:
        raise ConfigurationError(
            f"the {name} attack takes no option {', '.join(unknown)}.",
            fix=f"its options are {', '.join(sorted(_OPTIONS[name]))}.",
        )
    for kind in against:
        if kind not in KINDS:
            raise ConfigurationError(f"unknown target {kind!r}.", fix=f"use {', '.join(KINDS)}.")
    if plot is not None:
        if defaults.plot is None:
            raise ConfigurationError(
                f"the {name} attack has no plot: its table says it all.", fix="drop --plot."
            )
        pyplot()  # refuse before the run, not after
    specs = [spec_for(name, kind, epsilon=epsilon, budget=budget) for kind in against]
    reports: list[AttackReport] = []
    if name == "averaging":
        strategy = options.pop("strategy", None)
        curves: dict[str, tuple[float, ...]] = {}
        for spec in specs:
            for chosen in _strategies(spec, strategy):
                measured = averaging.measure(
                    spec, strategy=chosen, show_progress=show_progress, **options
                )
                reports.append(measured.report)
                curves[f"{spec.label} {chosen}"] = measured.rms_error
        if plot is not None:
            averaging.plot(curves, Path(plot))
        return reports
    if name == "reconstruction":
        lines: dict[str, tuple[tuple[int, float], ...]] = {}
        for spec in specs:
            found = reconstruction.measure(spec, show_progress=show_progress, **options)
            reports.append(found.report)
            lines[spec.label] = found.curve
        if plot is not None:
            reconstruction.plot(lines, options.get("people", 200), Path(plot))
        return reports
    module = {"differencing": differencing, "membership": membership, "auxiliary": auxiliary}[name]
    reports = [module.run(spec, show_progress=show_progress, **options) for spec in specs]
    if plot is not None:
        sweeper = differencing if name == "differencing" else membership
        points = sweeper.sweep(list(SWEEP), show_progress=show_progress, **options)
        sweeper.plot(points, Path(plot))
    return reports


def _strategies(spec: TargetSpec, strategy: str | None) -> list[str]:
    if strategy is not None:
        return [strategy]
    # Rewording only matters where repeats are cached: against Dalenius, show both.
    return ["repeat", "reword"] if spec.kind == "dalenius" else ["repeat"]


def _defaults(name: str) -> Defaults:
    if name not in ATTACKS:
        raise ConfigurationError(
            f"unknown attack {name!r}.", fix=f"use one of {', '.join(ATTACKS)}."
        )
    return ATTACKS[name]
