"""How ``dalenius query`` prints an answer: a rich table, JSON or CSV (``--format``).

The table is drawn with ``rich``: columns aligned (numbers to the right), each aggregate followed
by its interval in a dimmer style, then the accounting. Colours and styles appear only on a
terminal (and never with ``NO_COLOR`` set); piped into a file the same table is plain text, as
wide as it needs to be rather than wrapped at 80 columns. CSV has the columns of
``Result.to_pandas()``: each aggregate, then ``<name>_low`` and ``<name>_high``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from dalenius.cli.common import emit_json
from dalenius.engine.display import has_intervals, percent, spent_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

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


def print_table(result: Result, console: Console | None = None) -> None:
    """The answer as a rich table: value, then the interval dimmed; then what was spent.

    On a terminal too narrow for it, the table is never cut (rich would end a released number
    with "…"): each interval goes under its value instead, and if that is still too wide each
    group is printed as a record, one output per line.
    """
    from rich.console import Console
    from rich.text import Text

    console = console or Console(highlight=False)
    ranks = result.rank_errors or (None,) * len(result.columns)
    # An exact answer (public tables alone) has intervals [v, v]: they are not printed.
    noisy = has_intervals(result)
    spread = [
        kind != "key"
        and (rank is not None or (noisy and any(low[i] is not None for low in result.lows)))
        for i, (kind, rank) in enumerate(zip(result.kinds, ranks, strict=True))
    ]
    none = (None,) * len(result.columns)
    cells = [
        _cells(values, lows if noisy else none, highs, ranks)
        for values, lows, highs in _rows(result)
    ]
    table = _table(result, spread, cells, stacked=False)
    if not console.is_terminal:
        unbounded = console.options.update_width(10_000)
        console.width = max(80, console.measure(table, options=unbounded).maximum)
        console.print(table)
    elif _fits(console, table):
        console.print(table)
    elif _fits(console, stacked := _table(result, spread, cells, stacked=True)):
        console.print(stacked)
    else:
        _print_records(console, result, cells)
    console.print()
    pct = percent(result.confidence)
    if not result.rows:
        console.print("(no groups released)")
    if has_intervals(result):
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


Cell = tuple[str, str | None]
"""A released value as text, and its interval's text (``None``: it has none)."""


def _rows(result: Result) -> Iterator[tuple[Any, Any, Any]]:
    return iter(zip(result.rows, result.lows, result.highs, strict=True))


def _cells(values: Any, lows: Any, highs: Any, ranks: Any) -> list[Cell]:
    from dalenius.engine.result import format_cell

    out: list[Cell] = []
    for value, low, high, rank in zip(values, lows, highs, ranks, strict=True):
        if rank is not None:
            interval: str | None = f"(rank ±{rank:,})"
        elif low is not None:
            interval = f"[{format_cell(low)}, {format_cell(high)}]"
        else:
            interval = None
        out.append((format_cell(value), interval))
    return out


def _table(result: Result, spread: list[bool], cells: list[list[Cell]], *, stacked: bool) -> Table:
    """The answer's table: each interval in a column of its own, or (``stacked``) under its
    value in the value's cell.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for name, kind, wide in zip(result.columns, result.kinds, spread, strict=True):
        table.add_column(name, justify="left" if kind == "key" else "right", no_wrap=True)
        if wide and not stacked:  # the interval in its own column, so that the values line up
            table.add_column("", justify="left", no_wrap=True, style="dim")
    for row in cells:
        shown: list[Text | str] = []
        for (value, interval), wide in zip(row, spread, strict=True):
            if stacked:
                text = Text(value)
                if interval is not None:
                    text.append("\n" + interval, style="dim")
                shown.append(text)
                continue
            shown.append(value)
            if wide:
                shown.append(interval or "")
        table.add_row(*shown)
    return table


def _fits(console: Console, table: Table) -> bool:
    unbounded = console.options.update_width(10_000)
    return console.measure(table, options=unbounded).maximum <= console.width


def _print_records(console: Console, result: Result, cells: list[list[Cell]]) -> None:
    """One record per group, one output per line: nothing is cut at any width (a long key
    wraps; a number is never split).
    """
    from rich.text import Text

    for index, row in enumerate(cells):
        if index:
            console.print()
        for name, (value, interval) in zip(result.columns, row, strict=True):
            line = Text(f"{name}: ", style="bold")
            line.append(value)
            if interval is not None:
                fits = len(name) + len(value) + len(interval) + 3 <= console.width
                line.append((" " if fits else "\n    ") + interval, style="dim")
            console.print(line, overflow="fold")


class Update(Protocol):
    """Advance a bar: ``update(done)``, or ``update(done, total)`` when the total is learnt late;
    ``note`` replaces the short text drawn after the count (what the step is doing now).
    """

    def __call__(self, done: int, total: int | None = None, note: str | None = None) -> None:
        """``done`` units of work finished (of ``total``, if given)."""


def _ignore(done: int, total: int | None = None, note: str | None = None) -> None:
    """The update of a bar that is not drawn."""


@contextmanager
def progress(label: str, total: int | None, unit: str, *, enabled: bool = True) -> Iterator[Update]:
    """A progress bar on stderr for a long step, advanced by calling ``update(done)``.

    Every long step of the CLI draws its bar with this one helper (demo data, the anonymisation
    lattice, LDP simulations, CSV loads), so they look alike. Drawn only when stderr is a terminal
    (and removed when the step ends); elsewhere ``update`` does nothing, so logs, pipes and the
    step's output stay exactly as they are. ``total=None`` draws an indeterminate (pulsing) bar
    with the time elapsed, for a step that cannot count its work or learns its total late.
    ``enabled=False`` (``--quiet``, ``--json`` ...) draws nothing either.
    """
    if not enabled or not sys.stderr.isatty():
        yield _ignore
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class Count(ProgressColumn):
        """``done/total unit``; only ``unit`` while the total is unknown."""

        def render(self, task: Task) -> Text:
            if task.total is None:
                return Text(unit)
            return Text(f"{int(task.completed):,}/{int(task.total):,} {unit}")

    bar = Progress(
        TextColumn(label, markup=False),
        BarColumn(),
        Count(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[note]}", markup=False),
        transient=True,
        console=Console(stderr=True),
    )
    with bar:
        task = bar.add_task(label, total=total, note="")

        def update(done: int, total: int | None = None, note: str | None = None) -> None:
            fields: dict[str, Any] = {} if note is None else {"note": note}
            if total is None:
                bar.update(task, completed=done, **fields)
            else:
                bar.update(task, completed=done, total=total, **fields)

        yield update


@contextmanager
def table_loads() -> Iterator[None]:
    """While the block runs, each table the embedded engine loads into memory (a CSV file)
    shows an indeterminate bar with its name and the time elapsed, on a terminal only.

    DuckDB reports no progress within one statement, so the bar cannot count rows; it tells the
    user that the wait is a load, and of which table. The engine calls the hook of
    :func:`dalenius.executors.base.observe_loads`; the library itself stays silent.
    """
    if not sys.stderr.isatty():
        yield
        return
    from dalenius.executors.base import observe_loads

    def loading(table: str) -> AbstractContextManager[object]:
        return progress("loading", None, f"table {table}")

    with observe_loads(loading):
        yield
