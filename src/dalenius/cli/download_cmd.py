"""``dalenius download``: a release already received, again, by its ledger entry id, at no cost."""

from __future__ import annotations

import argparse
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    default_ledger,
    emit_json,
    output_path,
    write_frame,
)
from dalenius.engine.result import OnTheMapResult, SyntheticResult
from dalenius.engine.session import connect


def register(sub: Any) -> None:
    """Add the ``download`` sub-command."""
    parser = sub.add_parser(
        "download",
        help="fetch a density, hierarchy or synthetic release again by its entry id (free)",
        description=(
            "Rebuild a release this analyst already received — a density curve, a hierarchy of "
            "counts or synthetic rows — from its ledger entry: the same values, at no cost. The "
            "entry id is printed with --json by the release commands (entry_id) and listed by "
            "`dalenius ledger list`. Example:\n"
            "  dalenius download --catalog adult.toml 5f0c… --out adult-synthetic.parquet"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("entry_id", help="the ledger entry id of the release")
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of bands and intervals"
    )
    parser.add_argument(
        "--out", default=None, metavar="FILE", help="also write the release: .csv or .parquet"
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_download)


def run_download(args: argparse.Namespace) -> int:
    """Run ``dalenius download``."""
    out = output_path(args.out)
    with connect(
        args.catalog,
        ledger=args.ledger or default_ledger(),
        analyst=args.analyst,
        confidence=args.confidence,
    ) as session:
        result = session.release(args.entry_id)
    if out is not None:
        rows = isinstance(result, SyntheticResult | OnTheMapResult)
        write_frame(result.to_pandas(), out, as_text=rows)
    if args.json:
        emit_json({**result.to_dict(), **({"out": str(out)} if out else {})})
    else:
        print(result)
        if out is not None:
            print(f"Wrote {out}")
    return EXIT_OK
