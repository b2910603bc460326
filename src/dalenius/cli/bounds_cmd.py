"""``dalenius bounds``: choose a numeric column's clipping bounds privately."""

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
    """Add the ``bounds`` sub-command."""
    parser = sub.add_parser(
        "bounds",
        help="choose a numeric column's clipping bounds privately (noisy log-scale histogram)",
        description=(
            "Choose the clipping bounds of a numeric column with a DP mechanism: rows are counted "
            "in bins whose edges are powers of two, each privacy unit's rows capped, noise is "
            "added to every bin and the bounds are the edges of the outermost bins that stand "
            'out from the noise. For a column the catalog declares bounds = "private" this '
            "spends its bounds_epsilon once per data version, and queries then clip to the "
            "result (a query that needs them chooses them itself). Example:\n"
            "  dalenius bounds --catalog adult.toml --table adult --column capital_gain"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument("--table", required=True, help="the private table")
    parser.add_argument("--column", required=True, help="a numeric column")
    add_release_options(
        parser,
        epsilon='ε to spend (default: the catalog\'s bounds_epsilon, for bounds = "private")',
        delta="not used: the choice is pure ε",
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_bounds)


def run_bounds(args: argparse.Namespace) -> int:
    """Run ``dalenius bounds``."""
    if args.rho is not None or args.delta is not None:
        raise InvalidLossError(
            "choosing bounds spends a pure ε only.",
            why="its noise is discrete Laplace on a histogram.",
            fix="leave out --delta and --rho (and --epsilon, to spend the catalog's bounds_epsilon).",
        )
    with release_session(args) as session:
        result = session.choose_bounds(args.table, args.column, epsilon=args.epsilon)
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result)
    return EXIT_OK
