"""``dalenius continual``: publish a series of counts per period under one lifetime loss."""

from __future__ import annotations

import argparse
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    add_release_options,
    emit_json,
    release_session,
)
from dalenius.core.errors import InvalidLossError


def register(sub: Any) -> None:
    """Add the ``continual`` sub-command."""
    parser = sub.add_parser(
        "continual",
        help="publish counts (and sums) per day, week or month as periods close, one lifetime ε",
        description=(
            "Publish a series: the count of a table's rows per period of a date column (and "
            "the sum of an int column, clipped to its bounds), every closed period with its "
            "estimate and running total, each with an interval. The series is declared once "
            "(period, start, horizon, rows per unit); its first publication charges ε for the "
            "whole horizon (binary-tree mechanism), and running the same command as periods "
            "close publishes them at no further cost. Example (a daily cron job):\n"
            "  dalenius continual --catalog events.toml --table events --time day "
            "--period day --start 2024-01-01 --horizon 366 --max-rows 30 --epsilon 1"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument("--table", required=True, help="the private table")
    parser.add_argument("--time", required=True, help="its date column (the row's period)")
    parser.add_argument(
        "--period", required=True, choices=("day", "week", "month"), help="the period length"
    )
    parser.add_argument(
        "--start", required=True, help="the first day of the first period (YYYY-MM-DD)"
    )
    parser.add_argument(
        "--horizon", required=True, type=int, help="how many periods the series will publish"
    )
    parser.add_argument(
        "--max-rows",
        type=int,
        default=None,
        help="R: rows of one unit counted over the whole horizon (default: the unit's max_rows)",
    )
    parser.add_argument(
        "--value", default=None, help="an int column with bounds whose clipped sum is published"
    )
    parser.add_argument(
        "--levels",
        type=int,
        default=None,
        help="keep the tree's lowest levels only (default: all; 1: one node per period)",
    )
    parser.add_argument(
        "--as-of",
        default=None,
        metavar="DAY",
        help="publish the periods closed by this day (default: today, UTC; never later)",
    )
    add_release_options(
        parser,
        epsilon="the series' lifetime ε (charged once, at its first publication)",
        delta="not accepted: the tree's noise is discrete Laplace (pure ε)",
        confidence="intervals",
    )
    parser.add_argument(
        "--csv", default=None, metavar="FILE", help="also write every closed period as CSV"
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_continual)


def run_continual(args: argparse.Namespace) -> int:
    """Run ``dalenius continual``."""
    if args.delta is not None or args.rho is not None:
        raise InvalidLossError(
            "a continual series spends a pure ε, not δ or ρ.",
            why="every node of its tree gets discrete Laplace noise.",
            fix="pass --epsilon alone.",
        )
    if args.epsilon is None:
        raise InvalidLossError("dalenius continual needs --epsilon.", fix="pass --epsilon 1.")
    with release_session(args) as session:
        result = session.continual(
            args.table,
            time=args.time,
            period=args.period,
            start=args.start,
            horizon=args.horizon,
            epsilon=args.epsilon,
            max_rows=args.max_rows,
            value=args.value,
            levels=args.levels,
            as_of=args.as_of,
        )
    if args.csv:
        result.to_pandas().to_csv(args.csv, index=False)
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result)
        if args.csv:
            print(f"Wrote {args.csv}")
    return EXIT_OK
