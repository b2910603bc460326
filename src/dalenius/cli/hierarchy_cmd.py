"""``dalenius hierarchy``: noisy counts at every level of a hierarchy, consistent and integral."""

from __future__ import annotations

import argparse
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    default_ledger,
    emit_json,
)
from dalenius.cli.density_cmd import budget_from_args
from dalenius.engine.session import connect


def register(sub: Any) -> None:
    """Add the ``hierarchy`` sub-command."""
    parser = sub.add_parser(
        "hierarchy",
        help="release counts at every level of a hierarchy of key columns, made consistent",
        description=(
            "Measure the count of every node of a hierarchy (the total, each key of the first "
            "column, each pair of keys of the first two, ...) with noise, then release the noisy "
            "counts, the least-squares consistent estimates and non-negative integers that add "
            "up exactly, each with its interval. Example:\n"
            "  dalenius hierarchy --catalog census.toml --table people --level state "
            "--level education --epsilon 1 --csv tables.csv"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument("--table", required=True, help="the private table")
    parser.add_argument(
        "--level",
        action="append",
        required=True,
        help="a column with a public key list; repeat it, coarsest first",
    )
    parser.add_argument("--where", default=None, help="an SQL filter on the table's rows")
    parser.add_argument(
        "--split",
        default=None,
        help="comma-separated weights of the loss per level, root first (default: equal)",
    )
    parser.add_argument(
        "--epsilon", default=None, help="ε to spend (alone: discrete Laplace noise)"
    )
    parser.add_argument(
        "--delta", default=None, help="δ to spend (with --epsilon: discrete Gaussian noise)"
    )
    parser.add_argument("--rho", default=None, help="ρ to spend, on a zCDP dataset")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of the intervals (default 0.95)"
    )
    parser.add_argument(
        "--budget", default=None, help="the analyst's total ε, recorded if the ledger has none yet"
    )
    parser.add_argument("--budget-delta", default=None, help="with --budget: the total δ")
    parser.add_argument("--budget-rho", default=None, help="instead of --budget: a zCDP budget ρ")
    parser.add_argument("--csv", default=None, metavar="FILE", help="also write every node as CSV")
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_hierarchy)


def run_hierarchy(args: argparse.Namespace) -> int:
    """Run ``dalenius hierarchy``."""
    split = [float(w) for w in args.split.split(",")] if args.split else None
    with connect(
        args.catalog,
        budget=budget_from_args(args),
        ledger=args.ledger or default_ledger(),
        analyst=args.analyst,
        confidence=args.confidence,
    ) as session:
        result = session.hierarchy(
            args.table,
            args.level,
            epsilon=args.epsilon,
            delta=args.delta,
            rho=args.rho,
            where=args.where,
            split=split,
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
