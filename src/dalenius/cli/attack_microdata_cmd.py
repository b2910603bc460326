"""``dalenius attack linking`` and ``dalenius attack homogeneity``: attacks on released microdata.

Both replay the course's stories on the demo census (or, for homogeneity, on the course's own
twelve-patient table) against the releases a custodian might publish — the file with names
dropped, k-anonymous, ℓ-diverse and t-close releases of the anonymity toolkit, and Dalenius's
synthetic rows — and print each attack's success with a 95% interval. ``--plot`` writes a PNG.
Every argument is checked before any person is generated; the releases are built with a progress
bar on standard error.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dalenius.attacks import homogeneity, linking
from dalenius.attacks.plots import pyplot
from dalenius.attacks.published import AGAINST, check_against, publish
from dalenius.attacks.report import AttackReport, progress_bar, render
from dalenius.attacks.voters import scenario
from dalenius.cli.common import EXIT_OK, add_json_option, emit_json
from dalenius.core.errors import ConfigurationError

DEFAULT_KS = (1, 2, 5, 10, 25, 50)
"""The k values of the linking plot (1: the file with names dropped)."""


def add_commands(attack: Any) -> None:
    """Add ``linking`` and ``homogeneity`` to the ``dalenius attack`` group's sub-commands.

    Long because it is the flat list of the attack subcommands' argparse options, one call per
    option.
    """
    p = attack.add_parser(
        "linking",
        help="re-identify a released census file with a voter roll (Sweeney's attack)",
        description=textwrap.fill(
            "Draw the demo census, release a share of it (--against: names dropped, k-anonymous, "
            "l-diverse, t-close, or Dalenius synthetic rows), draw a voter roll (name, ZIP, date "
            "of birth, sex of the registered adults) and join the two on the quasi-identifiers. "
            "Prints the share of people unique on (ZIP, date of birth, sex), the share of voters "
            "linked to their own record (a 95% interval; at most 1/k against a k-anonymous "
            "release) and what the link reveals."
        ),
        epilog="example:\n  dalenius attack linking --against raw --against k-anonymous --k 5 --plot linking.png",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p)
    p.add_argument(
        "--registered", type=float, default=0.7, help="share of adults on the voter roll (0.7)"
    )
    p.add_argument(
        "--moved", type=float, default=0.05, help="share of voters under a stale ZIP code (0.05)"
    )
    p.add_argument(
        "--plot",
        type=Path,
        metavar="PNG",
        help="also attack k-anonymous releases for each --ks and plot the rate against k",
    )
    p.add_argument(
        "--ks",
        default=",".join(map(str, DEFAULT_KS)),
        help=f"the k values of the plot, comma-separated (default {','.join(map(str, DEFAULT_KS))})",
    )
    p.set_defaults(func=run_linking)

    h = attack.add_parser(
        "homogeneity",
        help="learn sensitive values from a k-anonymous file (homogeneity, background knowledge)",
        description=textwrap.fill(
            "Find each target's class in a released file and read the sensitive values left once "
            "the attacker's background knowledge rules some out. --data course replays the "
            "course's twelve patients (Bob, Umeko); --data census attacks every released person "
            "of the demo census. Prints the share learned with certainty and with --confidence."
        ),
        epilog=(
            "examples:\n"
            "  dalenius attack homogeneity --data course --against k-anonymous --k 4\n"
            "  dalenius attack homogeneity --data census --against k-anonymous "
            "--against l-diverse --negatives 1 --plot homogeneity.png"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(h)
    h.add_argument(
        "--data",
        choices=("census", "course"),
        default="census",
        help="the demo census (default) or the course's twelve-patient table",
    )
    h.add_argument(
        "--negatives",
        type=int,
        default=0,
        help="values the attacker can rule out for each target (the most damaging true ones)",
    )
    h.add_argument(
        "--no-background",
        action="store_true",
        help="(course) without the fact that Japanese people rarely have heart disease",
    )
    h.add_argument(
        "--confidence",
        type=float,
        default=homogeneity.CONFIDENCE,
        help="a value reaching this share of what is left counts as learned (0.9)",
    )
    h.add_argument("--plot", type=Path, metavar="PNG", help="write a bar chart of the rates")
    h.set_defaults(func=run_homogeneity)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--against",
        action="append",
        choices=AGAINST,
        help="the release to attack (repeat to compare; default: raw, then k-anonymous)",
    )
    p.add_argument(
        "--k", type=int, default=None, help="k of the k-anonymous releases (5; course 4)"
    )
    p.add_argument("--l", type=int, default=3, help="ℓ of the ℓ-diverse release (3)")
    p.add_argument("--t", type=float, default=0.2, help="t of the t-close release (0.2)")
    p.add_argument("--epsilon", type=float, default=1.0, help="ε of the Dalenius release (1)")
    p.add_argument("--delta", type=float, default=1e-6, help="δ of the Dalenius release (1e-6)")
    p.add_argument("--people", type=int, default=50_000, help="people in the demo census (50,000)")
    p.add_argument(
        "--release-share", type=float, default=0.5, help="share of the census released (0.5)"
    )
    p.add_argument("--seed", type=int, default=1994, help="the census's seed (1994, the demo's)")
    p.add_argument(
        "--sensitive",
        default=linking.SENSITIVE,
        choices=("occupation", "education", "married"),
        help="the census column the attacker wants to learn (occupation)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_json_option(p)


def run_linking(args: argparse.Namespace) -> int:
    """Run ``dalenius attack linking``."""
    against = args.against or ["raw", "k-anonymous"]
    k = args.k if args.k is not None else 5
    ks = _ks(args.ks) if args.plot else []
    for name in against:
        check_against(name, k=k, l=args.l, t=args.t)
    _check_plot(args.plot)
    world = scenario(
        args.people,
        release_share=args.release_share,
        registered=args.registered,
        moved=args.moved,
        seed=args.seed,
    )
    steps = [(name, k) for name in against] + [
        ("raw" if kk == 1 else "k-anonymous", kk) for kk in ks
    ]
    results = []
    with progress_bar(
        len(steps),
        "linking: building and attacking releases",
        enabled=not (args.no_progress or args.json),
    ) as advance:
        for name, kk in steps:
            issued = publish(
                world,
                name,
                k=kk,
                l=args.l,
                t=args.t,
                epsilon=args.epsilon,
                delta=args.delta,
                sensitive=args.sensitive,
            )
            results.append(linking.attack(issued, world))
            advance(1)
    shown, swept = results[: len(against)], results[len(against) :]
    if args.plot:
        linking.plot(swept, args.plot)
    if args.json:
        doc: dict[str, Any] = {"reports": [r.to_dict() for r in shown]}
        if args.plot:
            doc["plot"] = {"path": str(args.plot), "points": [r.to_dict() for r in swept]}
        emit_json(doc)
        return EXIT_OK
    print(shown[0].uniqueness_text() + ".")
    _print([r.report() for r in shown])
    if args.plot:
        print(f"plot: {args.plot}")
    return EXIT_OK


def run_homogeneity(args: argparse.Namespace) -> int:
    """Run ``dalenius attack homogeneity``.

    Long because it runs one command from its options to its output: argument checks with their
    fixes, the attacks under one progress bar, then the plot, JSON or text report.
    """
    against = args.against or ["raw", "k-anonymous", "l-diverse"]
    course = args.data == "course"
    k = args.k if args.k is not None else (4 if course else 5)
    for name in against:
        check_against(name, k=k, l=args.l, t=args.t)
        if course and name == "dalenius":
            homogeneity.course_release(name)  # raises with the reason and a fix
    if args.negatives < 0:
        raise ConfigurationError(
            f"--negatives must be a whole number >= 0; got {args.negatives}.",
            fix="pass --negatives 1 for an attacker who can rule out one value per target.",
        )
    if not 0 < args.confidence <= 1:
        raise ConfigurationError(
            f"--confidence must be in (0, 1]; got {args.confidence}.", fix="pass --confidence 0.9."
        )
    _check_plot(args.plot)
    world = (
        None if course else scenario(args.people, release_share=args.release_share, seed=args.seed)
    )
    results = []
    with progress_bar(
        len(against),
        "homogeneity: building and attacking releases",
        enabled=not (args.no_progress or args.json or course),
    ) as advance:
        for name in against:
            if course:
                result = homogeneity.run_course(
                    name,
                    k=k,
                    l=args.l,
                    t=args.t,
                    background=not args.no_background,
                    negatives=args.negatives,
                    confidence=args.confidence,
                )
            else:
                result = homogeneity.run(
                    name,
                    k=k,
                    l=args.l,
                    t=args.t,
                    epsilon=args.epsilon,
                    delta=args.delta,
                    negatives=args.negatives,
                    confidence=args.confidence,
                    sensitive=args.sensitive,
                    world=world,
                )
            results.append(result)
            advance(1)
    if args.plot:
        where = "the course's twelve patients" if course else f"the demo census ({args.people:,})"
        homogeneity.plot(results, args.plot, title=f"Homogeneity attack on {where}")
    if args.json:
        doc: dict[str, Any] = {"reports": [r.to_dict() for r in results]}
        if args.plot:
            doc["plot"] = str(args.plot)
        emit_json(doc)
        return EXIT_OK
    _print([r.report() for r in results])
    if args.plot:
        print(f"plot: {args.plot}")
    return EXIT_OK


def _print(reports: Sequence[AttackReport]) -> None:
    """The success table, then one table of the other measures with a column per release."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout, width=max(120, 30 + 34 * len(reports)))
    render([replace(r, details={}) for r in reports], console)
    names: list[str] = []
    for report in reports:
        names.extend(n for n in report.details if n not in names)
    table = Table(show_header=True, title="measured", title_justify="left")
    table.add_column("")
    for report in reports:
        table.add_column(report.target, overflow="fold")
    for name in names:
        table.add_row(name, *(str(r.details.get(name, "—")) for r in reports))
    console.print(table)


def _ks(text: str) -> list[int]:
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ks = []
    if not ks or any(k < 1 for k in ks):
        raise ConfigurationError(
            f"--ks must list whole numbers >= 1, comma-separated; got {text!r}.",
            fix="write --ks 1,2,5,10,25,50.",
        )
    return sorted(set(ks))


def _check_plot(path: Path | None) -> None:
    if path is None:
        return
    if path.suffix.lower() != ".png":
        raise ConfigurationError(
            f"--plot writes a PNG; got {str(path)!r}.", fix="name the file plot.png."
        )
    if not path.parent.exists():
        raise ConfigurationError(
            f"the folder {str(path.parent)!r} does not exist.", fix="create it first."
        )
    pyplot()  # refuses now, with the pip command, if matplotlib is missing
