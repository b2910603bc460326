"""``dalenius perturb``: every row of a table, each value perturbed (course document 004)."""

from __future__ import annotations

import argparse
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    add_release_options,
    emit_json,
    output_path,
    release_session,
    write_frame,
)
from dalenius.core.errors import InvalidLossError


def register(sub: Any) -> None:
    """Add the ``perturb`` sub-command."""
    parser = sub.add_parser(
        "perturb",
        help="release every row of a table with each value perturbed (record perturbation)",
        description=(
            "Release every row of a table (privacy unit: one row, or an id with max_rows = 1)\n"
            "with each value of the named columns perturbed: numeric columns by Laplace noise\n"
            "calibrated to (ε, δ) on the column's public bounds, categorical ones by the\n"
            "discrete mechanism on their public keys (course document 004). Prints the error\n"
            "table: per column the scale, the mean error, the error bar and the floor γ no\n"
            "(ε, δ)-DP mechanism beats. The number of rows released is private (5% of ε).\n"
            "Example:\n"
            "  dalenius perturb --catalog adult.toml --table adult --column age "
            "--epsilon 1 --out ages.csv"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument(
        "--table", required=True, help="the private table (unit: one row, or an id of one row)"
    )
    parser.add_argument(
        "--column",
        action="append",
        required=True,
        help="a numeric column with public bounds, or a categorical one with public keys "
        "(the discrete mechanism); repeat for several",
    )
    parser.add_argument(
        "--tight",
        action="store_true",
        help="calibrate with the tight diam/(ε − 2·ln(1−δ)) instead of the course's bound",
    )
    add_release_options(
        parser,
        epsilon="ε to spend",
        delta="δ to spend (default 0: pure ε)",
        confidence="error bars",
    )
    parser.add_argument(
        "--out", default=None, metavar="FILE", help="write the rows to a .csv or .parquet file"
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_perturb)


def run_perturb(args: argparse.Namespace) -> int:
    """Run ``dalenius perturb``."""
    if args.rho is not None:
        raise InvalidLossError(
            "record perturbation cannot spend a zCDP ρ.",
            why="its noise is Laplace, calibrated to (ε, δ) as in course document 004.",
            fix="pass --epsilon (and --delta) on a pure or (ε, δ) dataset.",
        )
    if args.epsilon is None:
        raise InvalidLossError("dalenius perturb needs --epsilon.", fix="pass --epsilon 1.")
    out = output_path(args.out)
    with release_session(args) as session:
        result = session.perturb(
            args.table, args.column, epsilon=args.epsilon, delta=args.delta, tight=args.tight
        )
    if out is not None:
        write_frame(result.to_pandas(), out, as_text=False)
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result)
        if out is not None:
            print(f"Wrote {out}")
    return EXIT_OK
