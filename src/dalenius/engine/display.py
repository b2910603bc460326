"""A released answer shown to a data scientist: an HTML table for notebooks and a bar chart.

The notebook display (``Result._repr_html_``) is the text table's content — each value with its
interval, the loss spent and the budget left — as HTML. Every string in it is escaped: group keys
come from the data, and a key such as ``<script>`` must show as text, never run.

The chart (``Result.plot()``) draws what the web console draws for a GROUP BY answer: one
horizontal bar per group, in the answer's order from top to bottom, with the interval as a whisker
and the value at its end, in the console's colours. It needs matplotlib, the optional ``plot``
extra, imported only when a chart is asked for.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from dalenius.core.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from dalenius.engine.result import Result

BAR_COLOUR = "#4c6ef5"
WHISKER_COLOUR = "#1b2330"
GRID_COLOUR = "#dfe4ec"
"""The console's colours (``--bar``, ``--whisker`` and ``--line`` in console.css)."""

_CELL = "padding:2px 10px;text-align:{align};white-space:nowrap"
_DIM = "opacity:0.6;font-size:0.9em"


def percent(confidence: float) -> str:
    """``0.95`` as ``95%``, ``0.975`` as ``97.5%``."""
    return f"{confidence:.0%}" if (confidence * 100).is_integer() else f"{confidence:.1%}"


def has_intervals(result: Result) -> bool:
    """Whether some released value has an interval wider than itself (an exact answer over
    public tables has none, so no footer about noise is printed for it).
    """
    return any(
        kind != "key" and low is not None and low != high
        for row_lows, row_highs in zip(result.lows, result.highs, strict=True)
        for kind, low, high in zip(result.kinds, row_lows, row_highs, strict=True)
    )


def spent_text(result: Result) -> str:
    """What the query cost, in words (a repeat of the analyst's own query is free)."""
    if result.shared:
        return f"{result.loss} (the dataset's shared answer to this query, released once)"
    if result.cached:
        return "nothing (identical query answered from the ledger)"
    return str(result.loss)


def result_html(result: Result, cell: Any) -> str:
    """The notebook display of ``result``: a table with intervals, then the accounting.

    ``cell`` formats one value as text (the text table's formatter), so both displays agree.
    """
    ranks = result.rank_errors or (None,) * len(result.columns)
    numeric = [kind != "key" for kind in result.kinds]
    head = "".join(
        f'<th style="{_CELL.format(align="right" if num else "left")}">{escape(name)}</th>'
        for name, num in zip(result.columns, numeric, strict=True)
    )
    body = []
    for values, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        cells = []
        for v, lo, hi, rank, num in zip(values, lows, highs, ranks, numeric, strict=True):
            text = escape(cell(v))
            if rank is not None:
                text += f' <span style="{_DIM}">(rank ±{rank:,})</span>'
            elif lo is not None:
                text += f' <span style="{_DIM}">[{escape(cell(lo))}, {escape(cell(hi))}]</span>'
            cells.append(
                f'<td style="{_CELL.format(align="right" if num else "left")}">{text}</td>'
            )
        body.append(f"<tr>{''.join(cells)}</tr>")
    if not body:
        span = len(result.columns)
        body.append(f'<tr><td colspan="{span}" style="{_DIM}">(no groups released)</td></tr>')
    pct = percent(result.confidence)
    notes = []
    if has_intervals(result):
        notes.append(f"[low, high]: {pct} interval for the noise (not for clipping bias).")
    if any(r is not None for r in ranks):
        notes.append(
            f"(rank ±r): with {pct} confidence the value's rank is within r of its target."
        )
    notes += [f"note: {escape(note)}" for note in result.notes]
    notes.append(
        f"<b>spent:</b> {escape(spent_text(result))} &nbsp; "
        f"<b>remaining:</b> {escape(str(result.remaining))}"
    )
    footer = "".join(
        f'<div style="{_DIM if i < len(notes) - 1 else ""}">{n}</div>' for i, n in enumerate(notes)
    )
    return (
        '<div class="dalenius-result">'
        f'<table style="border-collapse:collapse"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{footer}</div>"
    )


def plot_result(result: Result, column: str | None = None, *, ax: Axes | None = None) -> Axes:
    """Draw a GROUP BY answer as horizontal bars with error bars; returns the matplotlib Axes.

    Args:
        result: a released answer with at least one group key column.
        column: the aggregate to draw (default: the first one, as in the console).
        ax: draw into these axes (default: a new figure sized to the number of groups).

    Raises:
        MissingExtraError: matplotlib is not installed (``pip install 'dalenius[plot]'``).
        ConfigurationError: the answer has no group key, or ``column`` is not an aggregate of it.

    Long because it is one straight sequence of matplotlib calls drawing one chart (bars, whiskers,
    labels, axes); split, the parts would only pass the axes and the columns around.
    """
    keys = [i for i, kind in enumerate(result.kinds) if kind == "key"]
    measures = [i for i, kind in enumerate(result.kinds) if kind != "key"]
    if not keys:
        raise ConfigurationError(
            "plot() draws one bar per group, and this answer has no GROUP BY key column.",
            fix="print the result, or ask a GROUP BY query (e.g. SELECT sex, COUNT(*) ... GROUP BY sex).",
        )
    if column is None:
        index = measures[0]
    elif column in result.columns and result.columns.index(column) in measures:
        index = result.columns.index(column)
    else:
        names = ", ".join(repr(result.columns[i]) for i in measures)
        raise ConfigurationError(
            f"column={column!r} is not an aggregate of this answer.",
            fix=f"pass one of {names}.",
        )
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError("matplotlib", "plot", "Result.plot()") from None

    labels = [" / ".join(str(row[i]) for i in keys) for row in result.rows]
    values = [_number(row[index]) for row in result.rows]
    lows = [_number(row[index]) for row in result.lows]
    highs = [_number(row[index]) for row in result.highs]
    if ax is None:
        height = 1.2 + 0.32 * max(len(labels), 1)
        _, ax = plt.subplots(figsize=(7.6, height), layout="constrained")
    positions = list(range(len(labels)))
    drawn = [v if v is not None else 0.0 for v in values]
    ax.barh(positions, drawn, height=0.64, color=BAR_COLOUR, zorder=2)
    whiskers = [
        (p, v, lo, hi)
        for p, v, lo, hi in zip(positions, drawn, lows, highs, strict=True)
        if lo is not None and hi is not None
    ]
    if whiskers:
        ax.errorbar(
            [v for _, v, _, _ in whiskers],
            [p for p, _, _, _ in whiskers],
            xerr=[[v - lo for _, v, lo, _ in whiskers], [hi - v for _, v, _, hi in whiskers]],
            fmt="none",
            ecolor=WHISKER_COLOUR,
            elinewidth=1.4,
            capsize=4,
            zorder=3,
        )
    for p, v, hi in zip(positions, values, highs, strict=True):
        if v is not None:
            ax.annotate(
                _label(v),
                (max(hi if hi is not None else v, v, 0.0), p),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=9,
                color=WHISKER_COLOUR,
            )
    ax.set_yticks(positions, [_shorten(label) for label in labels])
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(lambda x, _: _label(x))
    ax.axvline(0, color=WHISKER_COLOUR, linewidth=0.8, zorder=1)
    ax.grid(axis="x", color=GRID_COLOUR, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.margins(x=0.12)
    ax.set_title(result.columns[index], loc="left", fontsize=11)
    ax.set_xlabel(
        f"bars: noisy value; whiskers: {percent(result.confidence)} interval for the noise "
        "(not for clipping bias)",
        fontsize=8,
        color="#536072",
    )
    return ax


def _label(value: float) -> str:
    """A bar's value as the console writes it: three significant digits, thousands separated."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _shorten(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
