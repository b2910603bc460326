"""``dalenius catalog check`` and ``dalenius catalog suggest``: the custodian's tools.

``check`` reads every table (as the custodian, without noise) and prints what the declarations will do
to the data: values clipped to bounds, rows left out of key lists (a key list in the wrong case
drops them all), NULL shares, values that do not parse, people over the privacy unit's caps. It
spends no budget and has no gateway endpoint: its output describes the data, so it is for the
custodian's eyes only (see :mod:`dalenius.engine.profile`).

``suggest`` is the private counterpart for the privacy unit's caps: it releases noisy histograms
of how many rows (and groups) each unit contributes, through the one spending path, and reads the
caps off them (:mod:`dalenius.releases.contributions`); what it prints may be published.
"""

from __future__ import annotations

import argparse
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    EXIT_USER,
    add_json_option,
    add_ledger_options,
    add_release_options,
    emit_json,
    release_session,
)
from dalenius.core.catalog import load_catalog
from dalenius.core.errors import InvalidLossError
from dalenius.engine.profile import TableProfile, profile_catalog


def register(sub: Any) -> None:
    """Add ``dalenius catalog check`` and ``dalenius catalog suggest``."""
    parser = sub.add_parser(
        "catalog",
        help="custodian tools: check a catalog against its data, suggest per-person caps",
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
    suggest = actions.add_parser(
        "suggest",
        help="suggest the privacy unit's caps from noisy histograms of contributions (spends ε)",
        description=(
            "Suggest a table's per-unit caps (max_rows, and max_groups for the --group columns) "
            "from differentially private histograms of how many rows, and distinct values of "
            "each --group column, every unit has. Each unit falls into one bin of each "
            "histogram however many rows it has, so no cap is needed to protect it. Spends "
            "--epsilon from the ledger like any release; asking again with another --coverage "
            "is free. Example:\n"
            "  dalenius catalog suggest pums.toml --table pums --group state --epsilon 0.1"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    suggest.add_argument("catalog", help="the catalog TOML file")
    suggest.add_argument("--table", required=True, help="a table whose privacy unit is a column")
    suggest.add_argument(
        "--group",
        action="append",
        default=[],
        help="a column queries group by: suggest max_groups from it (repeat for several)",
    )
    suggest.add_argument(
        "--coverage",
        default=None,
        help="the share of units whose contributions fit the cap fully (default 0.95)",
    )
    add_release_options(suggest, epsilon="ε to spend (split over the histograms)", delta="not used")
    add_ledger_options(suggest)
    add_json_option(suggest)
    suggest.set_defaults(func=run_suggest)


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


def run_suggest(args: argparse.Namespace) -> int:
    """Run ``dalenius catalog suggest``."""
    if args.epsilon is None or args.delta is not None or args.rho is not None:
        raise InvalidLossError(
            "dalenius catalog suggest spends a pure ε, given with --epsilon.",
            fix="pass --epsilon 0.1 (for example), without --delta or --rho.",
        )
    with release_session(args) as session:
        result = session.suggest_caps(
            args.table, epsilon=args.epsilon, groups=args.group, coverage=args.coverage
        )
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result)
    return EXIT_OK


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
