"""``dalenius catalog check``: the custodian's profile of the data against the catalog.

It reads every table (as the custodian, without noise) and prints what the declarations will do
to the data: values clipped to bounds, rows left out of key lists (a key list in the wrong case
drops them all), NULL shares, values that do not parse, people over the privacy unit's caps. It
spends no budget and has no gateway endpoint: its output describes the data, so it is for the
custodian's eyes only (see :mod:`dalenius.engine.profile`).
"""

from __future__ import annotations

import argparse
from typing import Any

from dalenius.cli.common import EXIT_OK, EXIT_USER, add_json_option, emit_json
from dalenius.core.catalog import load_catalog
from dalenius.engine.profile import TableProfile, profile_catalog


def register(sub: Any) -> None:
    """Add ``dalenius catalog check``."""
    parser = sub.add_parser(
        "catalog",
        help="custodian tools for a catalog (check it against the data)",
        description="Custodian tools for a catalog file.",
    )
    actions = parser.add_subparsers(dest="catalog_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="profile each table against its declarations: what will be clipped or dropped",
        description=(
            "Read every table of the catalog (as the custodian: exact, without noise, spending no "
            "budget) and print what its declarations will do to the data: values outside the "
            "bounds (clipped), values outside the key lists (left out of GROUP BY), NULL shares, "
            "values that do not parse as the declared type, and people with more rows or groups "
            "than the privacy unit's caps. The output describes the data: keep it to the "
            "custodian. Example:\n  dalenius catalog check adult.toml"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("catalog", help="the catalog TOML file")
    check.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 2 when anything will be clipped, dropped or misread (for CI)",
    )
    add_json_option(check)
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Run ``dalenius catalog check``."""
    catalog = load_catalog(args.catalog)
    profiles = profile_catalog(catalog)
    if args.json:
        emit_json({"dataset": catalog.name, "tables": [p.to_dict() for p in profiles]})
    else:
        render(catalog.name, profiles)
    found = any(p.findings for p in profiles)
    return EXIT_USER if args.strict and found else EXIT_OK


def render(dataset: str, profiles: list[TableProfile]) -> None:
    """Print one table of column facts per catalog table, then its findings in sentences."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    console.print(
        f"[bold]Dataset {dataset}[/bold] — custodian's check (exact values, keep private)"
    )
    for profile in profiles:
        grid = Table(title=None, box=None, header_style="bold", pad_edge=False)
        for name, justify in (
            ("column", "left"),
            ("type", "left"),
            ("NULL", "right"),
            ("unreadable", "right"),
            ("< low", "right"),
            ("> high", "right"),
            ("outside keys", "right"),
        ):
            grid.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
        for column in profile.columns:
            grid.add_row(
                column.name,
                column.type,
                _share(column.nulls, profile.rows),
                _count(column.unreadable),
                _count(column.below),
                _count(column.above),
                _count(column.outside_keys),
            )
        console.print()
        console.print(f"[bold]Table {profile.name}[/bold]: {profile.rows:,} rows")
        console.print(grid)
        if profile.findings:
            notes = Table.grid(padding=(0, 1))
            notes.add_column(style="yellow")
            notes.add_column()
            for text in profile.findings:
                notes.add_row("!", text)
            console.print(notes)
        else:
            console.print("[green]✓[/green] nothing will be clipped, dropped or misread.")


def _count(value: int | None) -> str:
    if value is None:
        return "[dim]–[/dim]"
    return f"{value:,}" if value else "[dim]0[/dim]"


def _share(value: int, rows: int) -> str:
    if not value:
        return "[dim]0[/dim]"
    return f"{value / rows:.1%}" if rows else f"{value:,}"
