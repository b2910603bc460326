"""What a continual release publishes: per period and running totals, each with its interval.

Post-processing only: from the noisy nodes of the tree (:mod:`dalenius.releases._dyadic`) and the
public combination of them, every closed period's estimate is ``Σ_u A[p, u]·noisy_u`` and each
running total the sum of the periods' estimates up to it. Both are linear in independent discrete
Laplace noises with public coefficients, so

* their **variance is exact**: ``Var(noise) · Σ_u a_u²`` (reported as a standard error);
* their **interval** is a Chernoff bound on that exact sum, with the discrete Laplace's exact
  moment generating function (:func:`~dalenius.releases._intervals.chernoff_half_widths`): a
  conservative bound — any λ gives a valid one and a grid of λ is searched, in double precision —
  not a normal approximation. It covers the kept rows' count (or clipped sum) with probability
  at least the confidence asked.

A quantity that cannot be negative (a count, a sum of values clipped at a non-negative lower
bound) has its interval's lower end raised to 0, never above its estimate: every estimate lies
inside its interval.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dalenius.core.loss import Loss
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.releases._dyadic import DyadicTree
from dalenius.releases._intervals import chernoff_half_widths, noise_variance


@dataclass(frozen=True)
class Estimates:
    """One measure (counts, or clipped sums) per closed period and as running totals."""

    per_period: npt.NDArray[np.float64]
    per_period_low: npt.NDArray[np.float64]
    per_period_high: npt.NDArray[np.float64]
    per_period_se: npt.NDArray[np.float64]
    total: npt.NDArray[np.float64]
    total_low: npt.NDArray[np.float64]
    total_high: npt.NDArray[np.float64]
    total_se: npt.NDArray[np.float64]


def estimate(
    tree: DyadicTree,
    closed: int,
    noisy: npt.NDArray[np.int64],
    mechanism: IntegerLaplace,
    confidence: float,
    *,
    nonnegative: bool,
) -> Estimates:
    """Every closed period's estimate and running total, with exact standard errors and
    conservative intervals at ``confidence``, from the noisy nodes (unmeasured ones are ignored).
    """
    if closed == 0:
        empty = np.zeros(0)
        return Estimates(*(empty for _ in range(8)))
    a, running, se, half = _public_parts(
        tree.horizon, tree.height, closed, mechanism.sensitivity, mechanism.epsilon, confidence
    )
    values = np.where(tree.measured(closed), noisy, 0).astype(np.float64)
    per_period = a @ values
    total = running @ values

    def interval(
        center: npt.NDArray[np.float64], width: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        low = center - width
        if nonnegative:
            low = np.minimum(np.maximum(low, 0.0), center)
        return low, center + width

    low, high = interval(per_period, half[:closed])
    total_low, total_high = interval(total, half[closed:])
    return Estimates(
        per_period=per_period,
        per_period_low=low,
        per_period_high=high,
        per_period_se=se[:closed],
        total=total,
        total_low=total_low,
        total_high=total_high,
        total_se=se[closed:],
    )


@functools.lru_cache(maxsize=32)
def _public_parts(
    horizon: int,
    height: int | None,
    closed: int,
    sensitivity: Fraction,
    epsilon: Fraction,
    confidence: float,
) -> tuple[npt.NDArray[np.float64], ...]:
    """The combination, its running sums, their standard errors and interval half-widths: all
    public (the horizon, the periods closed, the noise), so computed once per publication shape.
    """
    tree = DyadicTree(horizon, height)
    mechanism = IntegerLaplace(sensitivity, epsilon)
    a = tree.combination(closed)
    running = np.cumsum(a, axis=0)
    both = np.vstack([a, running])
    se = np.sqrt(noise_variance(mechanism) * (both * both).sum(axis=1))
    half = chernoff_half_widths(
        both, np.zeros(tree.size, dtype=np.int64), [mechanism], 1 - confidence
    )
    for part in (a, running, se, half):
        part.flags.writeable = False  # shared by every publication of this shape
    return a, running, se, half


@dataclass(frozen=True)
class ContinualRelease:
    """One publication of a series: every closed period, its count (and clipped sum), running
    totals, each with its standard error and interval at ``confidence``.

    Attributes:
        periods: the first day of each closed period.
        counts: the kept rows' counts.
        sums: the clipped values' sums, when the series sums a column.
        horizon: the periods the series will ever publish (its tree is built for them).
        nodes_measured: how many of the tree's nodes have been measured so far.
        epsilon: the series' lifetime loss (charged once, at its first publication).
        loss: what this publication charged (the lifetime loss at the first, nothing after).
    """

    table: str
    period: str
    periods: tuple[date, ...]
    counts: Estimates
    sums: Estimates | None
    value: str | None
    horizon: int
    levels: int
    max_rows: int
    nodes_measured: int
    nodes: int
    epsilon: float
    generation: int
    confidence: float
    loss: Loss = field(repr=False)

    def to_pandas(self) -> Any:
        """One row per closed period: its first day, the counts and (if any) sums columns."""
        import pandas as pd

        data: dict[str, Any] = {"period": [p.isoformat() for p in self.periods]}
        for prefix, est in (("count", self.counts), ("sum", self.sums)):
            if est is None:
                continue
            data[prefix] = est.per_period
            data[f"{prefix}_low"] = est.per_period_low
            data[f"{prefix}_high"] = est.per_period_high
            data[f"{prefix}_se"] = est.per_period_se
            data[f"running_{prefix}"] = est.total
            data[f"running_{prefix}_low"] = est.total_low
            data[f"running_{prefix}_high"] = est.total_high
            data[f"running_{prefix}_se"] = est.total_se
        return pd.DataFrame(data)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record: the series' shape and one object per closed period."""
        frame = self.to_pandas()
        return {
            "table": self.table,
            "period": self.period,
            "value": self.value,
            "horizon": self.horizon,
            "levels": self.levels,
            "max_rows": self.max_rows,
            "closed": len(self.periods),
            "nodes_measured": self.nodes_measured,
            "nodes": self.nodes,
            "lifetime_epsilon": self.epsilon,
            "generation": self.generation,
            "confidence": self.confidence,
            "periods": [
                {k: (v if isinstance(v, str) else float(v)) for k, v in row.items()}
                for row in frame.to_dict(orient="records")
            ],
        }

    def __str__(self) -> str:
        pct = f"{round(self.confidence * 100)}%"
        lines = [
            f"Continual {_ADVERB[self.period]} series of {self.table}: {len(self.periods)} of "
            f"{self.horizon} periods closed, {self.nodes_measured} of {self.nodes} tree nodes "
            f"measured ({self.levels} levels, at most {self.max_rows} row(s) per unit over the "
            f"horizon). Lifetime loss ε = {self.epsilon:g}, charged once; {pct} intervals.",
            f"  {'period':<12}{'count':>10}   {'interval':<22}{'running total':>14}   interval",
        ]
        c = self.counts
        shown = range(max(0, len(self.periods) - 12), len(self.periods))
        if shown.start:
            lines.append(f"  … {shown.start} earlier periods (to_pandas(), --csv or --json)")
        for i in shown:
            lines.append(
                f"  {self.periods[i].isoformat():<12}{c.per_period[i]:>10.1f}   "
                f"{_span(c.per_period_low[i], c.per_period_high[i]):<22}{c.total[i]:>14.1f}   "
                f"{_span(c.total_low[i], c.total_high[i])}"
            )
        if self.sums is not None and self.periods:
            s = self.sums
            lines.append(
                f"  sum of {self.value} (clipped) to date: {s.total[-1]:.1f} "
                f"{_span(s.total_low[-1], s.total_high[-1])}"
            )
        return "\n".join(lines)


_ADVERB = {"day": "daily", "week": "weekly", "month": "monthly"}


def _span(low: float, high: float) -> str:
    return f"[{low:.1f}, {high:.1f}]" if math.isfinite(high) else "[—]"
