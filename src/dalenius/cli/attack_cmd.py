"""``dalenius attack <name>``: run a measured attack against raw SQL, a naive noisy system, Dalenius.

One sub-command per attack; every one takes ``--against`` (repeatable; default: all three
targets), ``--epsilon`` and ``--budget`` (the targets' knobs), ``--plot PNG``, ``--json`` and
``--no-progress``. The command calls
:func:`dalenius.attacks.lab.compare` and prints :func:`dalenius.attacks.report.render`'s table;
it adds nothing. Every argument is checked before any data is written.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dalenius.attacks import lab
from dalenius.attacks.report import render
from dalenius.attacks.targets import KINDS
from dalenius.cli import attack_microdata_cmd
from dalenius.cli.common import EXIT_OK, add_json_option, emit_json

_HELP = {
    "differencing": "two sums that differ by one person reveal that person's value",
    "averaging": "the same noisy question asked n times: the noise averages away",
    "reconstruction": "Dinur–Nissim: random subset counts reveal a whole secret column",
    "membership": "one exact count on ZIP, birth date and sex says whether John is in the data",
    "auxiliary": "'John is 10 cm taller than the average woman': what DP does not promise",
}


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def register(sub: Any) -> None:
    """Add ``dalenius attack <name>`` for every query attack."""
    parser = sub.add_parser(
        "attack",
        help="run a measured attack against raw SQL, a naive noisy system and Dalenius",
        description=(
            "Run an attack from the course material against three targets — the raw database, "
            "a naive system adding fresh noise to every answer, and Dalenius — and print the "
            "attacker's success with its confidence interval beside the bound each target "
            "promises (a DP bound for Dalenius; a syntactic one for a k-anonymous file)."
        ),
    )
    actions = parser.add_subparsers(dest="attack", metavar="ATTACK", required=True)
    for name in lab.ATTACKS:
        text = _HELP[name]
        p = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        _common(p, name)
        _specific(p, name)
        p.set_defaults(func=run_attack)
    attack_microdata_cmd.add_commands(actions)


def _common(p: argparse.ArgumentParser, name: str) -> None:
    defaults = lab.ATTACKS[name]
    p.add_argument(
        "--against",
        action="append",
        choices=KINDS,
        default=None,
        help="a target (repeat for several; default: raw, naive and dalenius)",
    )
    p.add_argument(
        "--epsilon",
        default=None,
        help=(
            f"ε of each question for the naive and Dalenius targets (default: naive "
            f"{defaults.naive_epsilon}, dalenius {defaults.dalenius_epsilon})"
        ),
    )
    p.add_argument(
        "--budget",
        default=None,
        help=f"Dalenius budget of one attacker (default: {defaults.budget}, at least --epsilon)",
    )
    given = lab.option_defaults(name)
    p.add_argument(
        "--people",
        type=_positive,
        default=None,
        help=f"people in the experiment (default: {given['people']})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"seed of the people, data only (default: {given['seed']})",
    )
    if defaults.plot is not None:
        p.add_argument("--plot", default=None, metavar="PNG", help=f"write a PNG: {defaults.plot}")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_json_option(p)


def _specific(p: argparse.ArgumentParser, name: str) -> None:
    given = lab.option_defaults(name)
    if name != "reconstruction":
        p.add_argument(
            "--trials",
            type=_positive,
            default=None,
            help=f"independent attackers (default: {given['trials']})",
        )
    if name == "averaging":
        p.add_argument(
            "--asks",
            type=_positive,
            default=None,
            help=f"times each question is asked (default: {given['asks']})",
        )
        p.add_argument(
            "--strategy",
            choices=("repeat", "reword"),
            default=None,
            help="repeat the identical question, or reword it to dodge the cache (default: both)",
        )
    if name == "reconstruction":
        p.add_argument(
            "--queries", type=_positive, default=None, help="subset queries (default: n·ln n)"
        )
        p.add_argument(
            "--decoder", choices=("lstsq", "lp"), default="lstsq", help="least squares or the LP"
        )
    if name == "auxiliary":
        p.add_argument(
            "--tolerance",
            type=float,
            default=None,
            help=f"cm within which a guess counts (default: {given['tolerance']:g})",
        )


def run_attack(args: argparse.Namespace) -> int:
    """``dalenius attack <name>``."""
    options = {
        key: getattr(args, key)
        for key in (
            "people",
            "seed",
            "trials",
            "asks",
            "strategy",
            "queries",
            "decoder",
            "tolerance",
        )
        if getattr(args, key, None) is not None
    }
    progress = not args.no_progress and not args.json and sys.stderr.isatty()
    reports = lab.compare(
        args.attack,
        against=args.against or list(KINDS),
        epsilon=args.epsilon,
        budget=args.budget,
        plot=getattr(args, "plot", None),
        show_progress=progress,
        **options,
    )
    if args.json:
        emit_json({"attack": args.attack, "reports": [r.to_dict() for r in reports]})
    else:
        render(reports)
        if getattr(args, "plot", None):
            print(f"plot written to {args.plot}")
    return EXIT_OK
