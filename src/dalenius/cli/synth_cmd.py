"""``dalenius synthesize``: release synthetic rows of a table with MST or AIM (``--method aim``),
or synthetic origin–destination rows with OnTheMap's Multinomial–Dirichlet synthesizer
(``--method onthemap``).
"""

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
from dalenius.cli.render import progress
from dalenius.core.errors import ConfigurationError
from dalenius.engine.result import OnTheMapResult, SyntheticResult
from dalenius.engine.session import Session
from dalenius.releases.synth_table import SynthesisRound


def register(sub: Any) -> None:
    """Add the ``synthesize`` sub-command.

    Long because it is the flat list of the subcommand's argparse options, one call per option.
    """
    parser = sub.add_parser(
        "synthesize",
        help="release synthetic microdata of a table (MST or AIM: noisy marginals, a model of them)",
        description=(
            "Release synthetic rows whose 1-way and selected 2- or 3-way statistics follow the table's, "
            "with (ε, δ) or zCDP; numeric columns are binned over their public bounds. The same "
            "request gives back the same rows at no cost. Example:\n"
            "  dalenius synthesize --catalog adult.toml --table adult --epsilon 1 --delta 1e-9 "
            "--out adult-synthetic.parquet\n"
            "With --method aim, AIM chooses round by round the marginals its model fits worst "
            "among every --degree-way marginal (2 or 3), measures them and adapts its noise. "
            "Example:\n"
            "  dalenius synthesize --method aim --degree 3 --catalog adult.toml --table adult "
            "--epsilon 1 --delta 1e-9 --out adult-aim.parquet\n"
            "With --method onthemap, one origin–destination table (both columns with public keys): "
            "each destination's noisy size, then synthetic origins drawn from the posterior under "
            "a Dirichlet prior (pure ε). Example:\n"
            "  dalenius synthesize --method onthemap --catalog census.toml --table people "
            "--origin state --destination education --epsilon 8 --per-destination 500 "
            "--out flows.csv"
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
    parser.add_argument(
        "--method",
        choices=("mst", "aim", "onthemap"),
        default="mst",
        help="mst (default): a private tree of pairs; aim: workload-adaptive marginals; "
        "onthemap: one origin–destination table",
    )
    parser.add_argument(
        "--degree",
        type=int,
        choices=(2, 3),
        default=None,
        help="aim: the workload, every 2-way (default) or 3-way marginal of the columns",
    )
    parser.add_argument("--origin", default=None, help="onthemap: the origin column (public keys)")
    parser.add_argument(
        "--destination", default=None, help="onthemap: the destination column (public keys)"
    )
    parser.add_argument(
        "--prior", default=None, help="onthemap: Dirichlet pseudo-counts per origin"
    )
    parser.add_argument(
        "--per-destination",
        type=int,
        default=None,
        help="onthemap: at most this many synthetic rows per destination",
    )
    parser.add_argument(
        "--count-epsilon",
        default=None,
        help="onthemap: ε for the destination sizes (default: a tenth of --epsilon)",
    )
    parser.add_argument("--bins", type=int, default=10, help="bins per numeric column (default 10)")
    parser.add_argument(
        "--rows", type=int, default=None, help="rows to draw (default: the noisy row count)"
    )
    parser.add_argument("--where", default=None, help="an SQL filter on the table's rows")
    add_release_options(
        parser, epsilon="ε to spend (with --delta)", delta="δ to spend (the noise is Gaussian)"
    )
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="where to write the rows: .parquet or .csv"
    )
    parser.add_argument(
        "--quiet",
        "--no-progress",
        action="store_true",
        help="no progress bar (drawn on standard error only when it is a terminal)",
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_synthesize)


def run_synthesize(args: argparse.Namespace) -> int:
    """Run ``dalenius synthesize``."""
    out = output_path(args.out)
    assert out is not None  # --out is required
    with release_session(args) as session:
        result: SyntheticResult | OnTheMapResult
        if args.method == "onthemap":
            result = _onthemap(session, args)
        else:
            with progress(
                f"{args.method.upper()} rounds",
                None,
                "rounds",
                enabled=not (args.quiet or args.json),
            ) as update:
                result = session.synthesize(
                    args.table,
                    args.column,
                    epsilon=args.epsilon,
                    delta=args.delta,
                    rho=args.rho,
                    bins=args.bins,
                    rows=args.rows,
                    where=args.where,
                    method=args.method,
                    degree=args.degree,
                    progress=lambda done: update(done.round, done.rounds, round_note(done)),
                )
    write_frame(result.to_pandas(), out, as_text=True)
    if args.json:
        emit_json({**result.to_dict(), "out": str(out)})
    else:
        print(result)
        print(f"Wrote {out}")
    return EXIT_OK


def round_note(done: SynthesisRound) -> str:
    """What the bar says after a round: the ρ drawn of the total, and the marginal measured."""
    return (
        f"ρ {float(done.spent):.3g} of {float(done.rho):.3g} · measured {' × '.join(done.marginal)}"
    )


def _onthemap(session: Session, args: argparse.Namespace) -> OnTheMapResult:
    if not args.origin or not args.destination:
        raise ConfigurationError(
            "--method onthemap needs --origin and --destination.",
            fix="name the two columns, e.g. --origin home --destination work.",
        )
    if args.column or args.delta or args.rho or args.degree:
        raise ConfigurationError(
            "--column, --delta, --rho and --degree belong to MST and AIM; the OnTheMap "
            "synthesizer is pure ε.",
            fix="use --origin, --destination and --epsilon (with --prior or --per-destination).",
        )
    return session.onthemap(
        args.table,
        origin=args.origin,
        destination=args.destination,
        epsilon=args.epsilon,
        prior=args.prior,
        per_destination=args.per_destination,
        count_epsilon=args.count_epsilon,
        where=args.where,
    )
