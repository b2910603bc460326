"""``dalenius hierarchy``: noisy counts at every level of a hierarchy, consistent and integral."""

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
    add_release_options(
        parser,
        epsilon="ε to spend (alone: discrete Laplace noise)",
        delta="δ to spend (with --epsilon: discrete Gaussian noise)",
        confidence="intervals",
    )
    parser.add_argument("--csv", default=None, metavar="FILE", help="also write every node as CSV")
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_hierarchy)


def run_hierarchy(args: argparse.Namespace) -> int:
    """Run ``dalenius hierarchy``."""
    split = [float(w) for w in args.split.split(",")] if args.split else None
    with release_session(args) as session:
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
