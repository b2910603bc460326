"""``dalenius synthesize``: release synthetic rows of a table with MST."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    default_ledger,
    emit_json,
)
from dalenius.cli.density_cmd import budget_from_args
from dalenius.core.errors import ConfigurationError
from dalenius.engine.session import connect


def register(sub: Any) -> None:
    """Add the ``synthesize`` sub-command."""
    parser = sub.add_parser(
        "synthesize",
        help="release synthetic microdata of a table (MST: 1-way and 2-way marginals, tree model)",
        description=(
            "Release synthetic rows whose 1-way and selected 2-way statistics follow the table's, "
            "with (ε, δ) or zCDP; numeric columns are binned over their public bounds. The same "
            "request gives back the same rows at no cost. Example:\n"
            "  dalenius synthesize --catalog adult.toml --table adult --epsilon 1 --delta 1e-9 "
            "--out adult-synthetic.parquet"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument("--table", required=True, help="the private table")
    parser.add_argument(
        "--column",
        action="append",
        default=None,
        help="a column to synthesise (repeat; default: every column with public keys or bounds)",
    )
    parser.add_argument("--bins", type=int, default=10, help="bins per numeric column (default 10)")
    parser.add_argument(
        "--rows", type=int, default=None, help="rows to draw (default: the noisy row count)"
    )
    parser.add_argument("--where", default=None, help="an SQL filter on the table's rows")
    parser.add_argument("--epsilon", default=None, help="ε to spend (with --delta)")
    parser.add_argument("--delta", default=None, help="δ to spend (the noise is Gaussian)")
    parser.add_argument("--rho", default=None, help="ρ to spend, on a zCDP dataset")
    parser.add_argument(
        "--budget", default=None, help="the analyst's total ε, recorded if the ledger has none yet"
    )
    parser.add_argument("--budget-delta", default=None, help="with --budget: the total δ")
    parser.add_argument("--budget-rho", default=None, help="instead of --budget: a zCDP budget ρ")
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="where to write the rows: .parquet or .csv"
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_synthesize)


def run_synthesize(args: argparse.Namespace) -> int:
    """Run ``dalenius synthesize``."""
    out = Path(args.out)
    if out.suffix.lower() not in (".parquet", ".csv"):
        raise ConfigurationError(
            f"--out must end in .parquet or .csv, got {args.out!r}.",
            fix="write to rows.parquet or rows.csv.",
        )
    with connect(
        args.catalog,
        budget=budget_from_args(args),
        ledger=args.ledger or default_ledger(),
        analyst=args.analyst,
    ) as session:
        result = session.synthesize(
            args.table,
            args.column,
            epsilon=args.epsilon,
            delta=args.delta,
            rho=args.rho,
            bins=args.bins,
            rows=args.rows,
            where=args.where,
        )
    frame = result.to_pandas()
    if out.suffix.lower() == ".parquet":
        frame.astype(str).to_parquet(out, index=False)
    else:
        frame.to_csv(out, index=False)
    if args.json:
        emit_json({**result.to_dict(), "out": str(out)})
    else:
        print(result)
        print(f"Wrote {out}")
    return EXIT_OK
