"""How ``dalenius query`` prints an answer: a rich table, JSON or CSV (``--format``).

The table is drawn with ``rich``: columns aligned (numbers to the right), each aggregate followed
by its interval in a dimmer style, then the accounting. Colours and styles appear only on a
terminal (and never with ``NO_COLOR`` set); piped into a file the same table is plain text, as
wide as it needs to be rather than wrapped at 80 columns. CSV has the columns of
``Result.to_pandas()``: each aggregate, then ``<name>_low`` and ``<name>_high``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dalenius.cli.common import emit_json
from dalenius.engine.display import percent, spent_text

if TYPE_CHECKING:
    from dalenius.engine.result import Result

FORMATS = ("table", "json", "csv")


def print_result(result: Result, fmt: str) -> None:
    """Print ``result`` on stdout in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        emit_json(result.to_dict())
    elif fmt == "csv":
        result.to_pandas().to_csv(sys.stdout, index=False, lineterminator="\n")
    else:
        print_table(result)


def print_table(result: Result) -> None:
    """The answer as a rich table: value, then the interval dimmed; then what was spent."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from dalenius.engine.result import format_cell

    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    ranks = result.rank_errors or (None,) * len(result.columns)
    spread = [
        kind != "key" and (rank is not None or any(low[i] is not None for low in result.lows))
        for i, (kind, rank) in enumerate(zip(result.kinds, ranks, strict=True))
    ]
    for name, kind, wide in zip(result.columns, result.kinds, spread, strict=True):
        table.add_column(name, justify="left" if kind == "key" else "right", no_wrap=True)
        if wide:  # the interval in its own column, so that the values line up
            table.add_column("", justify="left", no_wrap=True, style="dim")
    for values, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        cells = []
        for value, low, high, rank, wide in zip(values, lows, highs, ranks, spread, strict=True):
            cells.append(format_cell(value))
            if not wide:
                continue
            if rank is not None:
                cells.append(f"(rank ±{rank:,})")
            elif low is not None:
                cells.append(f"[{format_cell(low)}, {format_cell(high)}]")
            else:
                cells.append("")
        table.add_row(*cells)
    console = Console(highlight=False)
    if not console.is_terminal:
        unbounded = console.options.update_width(10_000)
        console.width = max(80, console.measure(table, options=unbounded).maximum)
    console.print(table)
    console.print()
    pct = percent(result.confidence)
    if not result.rows:
        console.print("(no groups released)")
    console.print(
        f"[low, high]: {pct} interval for the noise (not for clipping bias).",
        style="dim",
        markup=False,
    )
    if any(r is not None for r in ranks):
        console.print(
            f"(rank ±r): with {pct} confidence the value's rank is within r of its target.",
            style="dim",
            markup=False,
        )
    line = Text("spent: ", style="bold")
    line.append(spent_text(result), style="")
    line.append("    remaining: ", style="bold")
    line.append(str(result.remaining), style="")
    console.print(line)


@contextmanager
def progress(label: str, total: int, unit: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for a long step, advanced by calling ``update(done)``.

    Drawn only when stderr is a terminal (and removed when the step ends); elsewhere ``update``
    does nothing, so logs and pipes stay clean.
    """
    if not sys.stderr.isatty():
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn(f"{{task.completed:,}}/{{task.total:,}} {unit}"),
        TimeElapsedColumn(),
        transient=True,
        console=Console(stderr=True),
    )
    with bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=done)
