"""Query results: noisy values with their error bars, the loss spent and the budget left."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dalenius.core.errors import MissingExtraError
from dalenius.core.loss import Loss, PureDP
from dalenius.engine.display import has_intervals, percent, plot_result, result_html, spent_text
from dalenius.engine.postprocess import Answer
from dalenius.releases.bounds import BoundsRelease
from dalenius.releases.continual_estimates import ContinualRelease
from dalenius.releases.contributions import ContributionsRelease
from dalenius.releases.density import DensityRelease
from dalenius.releases.hierarchy import HierarchyRelease
from dalenius.releases.onthemap import OnTheMapRelease
from dalenius.releases.perturbation import PerturbationRelease
from dalenius.releases.synth_table import SyntheticRelease

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    from matplotlib.axes import Axes


def loss_dict(loss: Loss) -> dict[str, Any]:
    """A loss as JSON: float values for people, exact fractions for machines."""
    out: dict[str, Any] = {}
    for name in ("epsilon", "delta", "rho"):
        value = getattr(loss, name, None)
        if value is not None:
            out[name] = float(value)
            out[f"{name}_exact"] = f"{value.numerator}/{value.denominator}"
    return out


@dataclass(frozen=True)
class Result:
    """A released answer.

    Attributes:
        columns: output column names, in SELECT order.
        rows: one tuple of values per group (group keys, then noisy aggregates).
        lows, highs: the interval of each value at ``confidence`` (``None`` for group keys). It
            covers the noise only, not the bias that clipping to the public bounds may add.
        kinds: per column, ``key``, ``count``, ``sum``, ``avg``, ``var``, ``quantile`` or
            ``derived`` (an expression around one aggregate, e.g. ``ROUND(AVG(x), 1)``).
        loss: the privacy loss this query spent (zero when answered from the ledger's record).
        remaining: the budget left after it.
        confidence: the confidence level of the intervals.
        cached: whether it was answered from the ledger's record of an identical earlier query.
        shared: whether that record was another analyst's release of the same query, served again
            (the dataset's shared answer cache): the same value, charged to this analyst's budget.
        entry_id: the ledger entry that recorded the release.
        rank_errors: per column, for quantiles, MEDIAN, MIN and MAX: with probability at least
            ``confidence`` the released value's rank among the rows is within this many of its
            target (their error is a rank, not an interval); ``None`` elsewhere.
        accuracy: for a query asked with an error target, how its ε was chosen (the targets,
            each measurement's share and error bar); ``None`` otherwise.
        notes: hints from the catalog about the query, e.g. a literal compared with a keyed
            column that is not among its keys (:mod:`dalenius.plan.hints`).
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    lows: tuple[tuple[Any, ...], ...]
    highs: tuple[tuple[Any, ...], ...]
    kinds: tuple[str, ...]
    loss: Loss
    remaining: Loss
    confidence: float
    cached: bool
    entry_id: str | None
    rank_errors: tuple[int | None, ...] = ()
    shared: bool = False
    accuracy: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_answer(
        cls,
        answer: Answer,
        *,
        loss: Loss,
        remaining: Loss,
        confidence: float,
        cached: bool,
        entry_id: str | None,
        shared: bool = False,
        accuracy: Mapping[str, Any] | None = None,
    ) -> Result:
        """Wrap a post-processed answer with its accounting."""
        return cls(
            columns=answer.columns,
            rows=answer.rows,
            lows=answer.lows,
            highs=answer.highs,
            kinds=answer.kinds,
            loss=loss,
            remaining=remaining,
            confidence=confidence,
            cached=cached,
            entry_id=entry_id,
            rank_errors=answer.rank_errors,
            shared=shared,
            accuracy=accuracy,
            notes=answer.notes,
        )

    @property
    def spent(self) -> Loss:
        """What this call charged: zero for the analyst's own repeated query, else the loss."""
        return PureDP(Fraction(0)) if self.cached and not self.shared else self.loss

    def column(self, name: str) -> list[Any]:
        """The values of one output column."""
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def interval(self, row: int, column: str) -> tuple[Any, Any]:
        """The ``(low, high)`` error bar of one cell."""
        i = self.columns.index(column)
        return self.lows[row][i], self.highs[row][i]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``columns``, ``rows`` of ``{value, low, high}`` cells, ``loss``, ``remaining``."""
        ranks = self.rank_errors or (None,) * len(self.columns)
        rows = [
            [
                {"value": v, "low": lo, "high": hi} | ({"rank_error": r} if r is not None else {})
                for v, lo, hi, r in zip(values, lows, highs, ranks, strict=True)
            ]
            for values, lows, highs in zip(self.rows, self.lows, self.highs, strict=True)
        ]
        return {
            "columns": list(self.columns),
            "kinds": list(self.kinds),
            "rows": rows,
            "confidence": self.confidence,
            "loss": loss_dict(self.loss),
            "spent": loss_dict(self.spent),
            "remaining": loss_dict(self.remaining),
            "cached": self.cached,
            "shared": self.shared,
            "notes": list(self.notes),
            "entry_id": self.entry_id,
            **({"accuracy": dict(self.accuracy)} if self.accuracy is not None else {}),
        }

    def to_pandas(self) -> pd.DataFrame:
        """A DataFrame with each aggregate column followed by ``<name>_low`` and ``<name>_high``."""
        import pandas as pd

        return pd.DataFrame(self._flat())

    def to_arrow(self) -> pa.Table:
        """An Arrow table with the same columns as :meth:`to_pandas`."""
        import pyarrow as pa

        return pa.table(self._flat())

    def to_polars(self) -> pl.DataFrame:
        """A Polars DataFrame with the same columns as :meth:`to_pandas` (needs ``polars``)."""
        try:
            import polars as pl
        except ImportError:
            raise MissingExtraError("polars", "polars", "Result.to_polars()") from None
        frame = pl.from_arrow(self.to_arrow())
        assert isinstance(frame, pl.DataFrame)  # a Table gives a DataFrame, never a Series
        return frame

    def plot(self, column: str | None = None, *, ax: Axes | None = None) -> Axes:
        """A bar chart of a GROUP BY answer with its error bars, as the console draws it.

        ``column`` picks the aggregate (default: the first); ``ax`` draws into existing axes.
        Needs matplotlib (``pip install 'dalenius[plot]'``); returns the matplotlib Axes.
        """
        return plot_result(self, column, ax=ax)

    def _repr_html_(self) -> str:
        """The notebook display: the table with intervals, the loss spent and the budget left."""
        return result_html(self, format_cell)

    def _flat(self) -> dict[str, list[Any]]:
        data: dict[str, list[Any]] = {}
        for i, (name, kind) in enumerate(zip(self.columns, self.kinds, strict=True)):
            data[name] = [row[i] for row in self.rows]
            if kind not in ("key", "quantile"):
                data[f"{name}_low"] = [row[i] for row in self.lows]
                data[f"{name}_high"] = [row[i] for row in self.highs]
        return data

    def __str__(self) -> str:
        return format_table(self)


def format_cell(value: Any) -> str:
    """One value as the tables show it: thousands separated, floats to two decimals."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e15 else f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def format_table(result: Result) -> str:
    """A readable text table: each aggregate as ``value ± half-width``, then the accounting."""
    headers = list(result.columns)
    body = []
    ranks = result.rank_errors or (None,) * len(result.columns)
    for values, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        cells = []
        for v, lo, hi, rank in zip(values, lows, highs, ranks, strict=True):
            if rank is not None:
                cells.append(f"{format_cell(v)}  (rank ±{rank:,})")
            elif lo is None:
                cells.append(format_cell(v))
            else:
                cells.append(f"{format_cell(v)}  [{format_cell(lo)}, {format_cell(hi)}]")
        body.append(cells)
    widths = [
        max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)
    ]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    pct = percent(result.confidence)
    lines.append("")
    if not body:
        lines.append("(no groups released)")
    if has_intervals(result):
        lines.append(f"[low, high]: {pct} interval for the noise (not for clipping bias).")
    if any(r is not None for r in ranks):
        lines.append(
            f"(rank ±r): with {pct} confidence the value's rank is within r of its target."
        )
    spent = spent_text(result)
    lines.append(f"spent: {spent}    remaining: {result.remaining}")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


class _Tabular(Protocol):
    def to_pandas(self) -> pd.DataFrame: ...


R = TypeVar("R", bound=_Tabular)

_FROM_RECORD = " (from the ledger's record, no new cost)"
_SAME_ROWS = " (the same rows, from the ledger's record, no new cost)"


@dataclass(frozen=True)
class ReleaseResult(Generic[R]):
    """What every release returns: the release, the loss it spent and the budget left.

    Attributes:
        release: the released object (a curve, a hierarchy of counts, synthetic rows).
        loss: the loss charged (nothing new when ``cached``).
        remaining: the budget left after it.
        cached: answered from the ledger's record of an identical earlier release, at no cost.
        entry_id: the ledger entry that records it.
    """

    release: R
    loss: Loss
    remaining: Loss
    cached: bool
    entry_id: str | None

    def accounting(self) -> dict[str, Any]:
        """The loss, the budget left, whether cached and the entry id, as JSON."""
        return {
            "loss": loss_dict(self.loss),
            "remaining": loss_dict(self.remaining),
            "cached": self.cached,
            "entry_id": self.entry_id,
        }

    def footer(self, cached: str = _FROM_RECORD, detail: str = "") -> str:
        """The last line of the text form: the loss (with ``detail``) and the budget left."""
        return f"Loss: {self.loss}{detail}{cached if self.cached else ''}. Remaining: {self.remaining}."

    def to_pandas(self) -> pd.DataFrame:
        """The release as a table (see each release's ``to_pandas``)."""
        return self.release.to_pandas()

    def to_dict(self) -> dict[str, Any]:
        """The JSON document the CLI and the HTTP API return: the release's own JSON (its
        ``to_json``, or its table's records) and the accounting.
        """
        to_json = getattr(self.release, "to_json", None)
        body = to_json() if callable(to_json) else {"rows": self.to_pandas().to_dict("records")}
        return {**body, **self.accounting()}


@dataclass(frozen=True)
class DensityResult(ReleaseResult[DensityRelease]):
    """A released density curve (or surface), the loss it spent and the budget left.

    Attributes:
        release: the curve on its grid with pointwise and simultaneous bands
            (:class:`~dalenius.releases.density.DensityRelease`).

    The loss, the budget left, ``cached`` and ``entry_id`` are :class:`ReleaseResult`'s.
    """

    def to_dict(self) -> dict[str, Any]:
        """The JSON document the CLI and the HTTP API return."""
        return {
            **self.release.to_json(),
            **self.accounting(),
        }

    def __str__(self) -> str:
        r = self.release
        grid = " × ".join(f"{g.size} points on [{g[0]:g}, {g[-1]:g}]" for g in r.grid)
        peak = float(r.density.max()) if r.density.size else 0.0
        return (
            f"Density of {', '.join(r.columns)}: {grid}; peak {peak:.4g}; "
            f"noisy count {r.count}; {round(r.confidence * 100)}% bands.\n" + self.footer()
        )


@dataclass(frozen=True)
class BoundsResult(ReleaseResult[BoundsRelease]):
    """Privately chosen clipping bounds with the noisy histogram they were read from, the loss
    spent and the budget left.

    Attributes:
        release: the bounds and the bins (:class:`~dalenius.releases.bounds.BoundsRelease`).
    """

    def __str__(self) -> str:
        return f"{self.release}\n{self.footer()}"


@dataclass(frozen=True)
class ContributionsResult(ReleaseResult[ContributionsRelease]):
    """Suggested per-unit caps with the noisy histograms they come from, the loss spent and the
    budget left.

    Attributes:
        release: the suggestions (:class:`~dalenius.releases.contributions.ContributionsRelease`).
    """

    def __str__(self) -> str:
        return f"{self.release}\n{self.footer()}"


class ContinualResult(ReleaseResult[ContinualRelease]):
    """One publication of a continual series, what it charged and the budget left.

    Attributes:
        release: every closed period's estimate and running total with intervals
            (:class:`~dalenius.releases.continual_estimates.ContinualRelease`).

    ``loss`` is the series' lifetime loss at its first publication and nothing at a later one;
    ``cached`` means no period closed since the last publication, which is shown again.
    """

    def to_dict(self) -> dict[str, Any]:
        """The JSON document the CLI and the HTTP API return."""
        return {**self.release.to_json(), **self.accounting()}

    def __str__(self) -> str:
        lifetime = (
            "" if self.loss != PureDP(Fraction(0)) else " (covered by the series' lifetime loss)"
        )
        return f"{self.release}\n{self.footer(detail=lifetime)}"


@dataclass(frozen=True)
class PerturbationResult(ReleaseResult[PerturbationRelease]):
    """Perturbed rows with their error table, the loss spent and the budget left.

    Attributes:
        release: the rows and the error table
            (:class:`~dalenius.releases.perturbation.PerturbationRelease`).
    """

    def __str__(self) -> str:
        return f"{self.release}\n{self.footer()}"


@dataclass(frozen=True)
class HierarchyResult(ReleaseResult[HierarchyRelease]):
    """A released hierarchy of counts, the loss it spent and the budget left.

    Attributes:
        release: every node's noisy, consistent and final count with intervals
            (:class:`~dalenius.releases.hierarchy.HierarchyRelease`).

    The loss, the budget left, ``cached`` and ``entry_id`` are :class:`ReleaseResult`'s.
    """

    def to_dict(self) -> dict[str, Any]:
        """The JSON document the CLI and the HTTP API return."""
        return {
            **self.release.to_json(),
            **self.accounting(),
        }

    def __str__(self) -> str:
        r = self.release
        frame = r.to_pandas()
        counts = frame.groupby("level").size().tolist()
        head = (
            f"Hierarchy {' > '.join(r.levels)}: {len(frame)} nodes ({', '.join(map(str, counts))} per level), "
            f"{round(r.confidence * 100)}% intervals.\n"
        )
        shown = frame[frame.level <= 1].head(13)
        lines = [f"  {'node':<16} {'count':>10}   interval"]
        for _, row in shown.iterrows():
            name = "(total)" if row["level"] == 0 else str(row[r.levels[0]])
            lines.append(
                f"  {name:<16} {int(row['final']):>10}   [{row['final_low']:.1f}, {row['final_high']:.1f}]"
            )
        if len(frame) > len(shown):
            lines.append(
                f"  … {len(frame) - len(shown)} more nodes (to_pandas(), --csv or --json for all)"
            )
        table = "\n".join(lines)
        return head + table + "\n" + self.footer()


@dataclass(frozen=True)
class SyntheticResult(ReleaseResult[SyntheticRelease]):
    """Released synthetic rows, the loss spent and the budget left.

    Attributes:
        release: the rows and the column sets the model keeps — MST's tree of pairs, AIM's
            cliques (:class:`~dalenius.releases.synth_table.SyntheticRelease`).

    The loss, the budget left, ``cached`` (the same rows) and ``entry_id`` are
    :class:`ReleaseResult`'s.
    """

    def to_dict(self) -> dict[str, Any]:
        """A summary for JSON output (the rows themselves go to a file)."""
        return {
            "method": self.release.method,
            "columns": list(self.release.columns),
            "rows": self.release.rows,
            "edges": [list(e) for e in self.release.edges],
            **self.accounting(),
        }

    def __str__(self) -> str:
        r = self.release
        sets = ", ".join("–".join(e) for e in r.edges)
        kept = "Cliques of the model" if r.method == "aim" else "Pairs kept"
        return (
            f"Synthetic {len(r.columns)}-column table ({r.method.upper()}), {r.rows} rows. "
            f"{kept}: {sets}.\n" + self.footer(_SAME_ROWS)
        )


@dataclass(frozen=True)
class OnTheMapResult(ReleaseResult[OnTheMapRelease]):
    """Released synthetic origin–destination rows, the loss spent and the budget left.

    Attributes:
        release: the synthetic counts per (destination, origin), the prior and sizes used
            (:class:`~dalenius.releases.onthemap.OnTheMapRelease`).

    The loss, the budget left, ``cached`` (the same rows) and ``entry_id`` are
    :class:`ReleaseResult`'s.
    """

    def to_dict(self) -> dict[str, Any]:
        """A summary and the flows (origin, destination, count) for JSON output."""
        r = self.release
        flows = r.flows()
        return {
            "origin": r.origin,
            "destination": r.destination,
            "rows": r.rows,
            "prior": str(r.prior),
            "per_destination": r.per_destination,
            "count_epsilon": float(r.count_epsilon),
            "sample_epsilon": float(r.sample_epsilon),
            "flows": [
                [_plain(a), _plain(b), int(c)]
                for a, b, c in zip(
                    flows[r.origin], flows[r.destination], flows["count"], strict=True
                )
            ],
            **self.accounting(),
        }

    def __str__(self) -> str:
        r = self.release
        detail = (
            f" (ε {float(r.count_epsilon):.4g} for the destination sizes, "
            f"{float(r.sample_epsilon):.4g} for the origins)"
        )
        return (
            f"Synthetic {r.origin} -> {r.destination} table, {r.rows} rows over "
            f"{len(r.destinations)} destinations (at most {r.per_destination} each), "
            f"prior {float(r.prior):g} pseudo-counts per origin.\n"
            + self.footer(_SAME_ROWS, detail)
        )


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)
