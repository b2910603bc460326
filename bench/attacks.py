"""How long each attack of the lab takes at its default size, per target.

    .venv/bin/python bench/attacks.py                 # every attack, every target, default sizes
    .venv/bin/python bench/attacks.py differencing    # one attack

Each row is one ``dalenius.attacks.lab.compare`` run against one target (no plot), timed around
the call; the last column divides by the raw target's time (the attack with exact answers), so
the cost of answering through Dalenius reads as a ratio. The target of the attack lab is that
each demo attack finishes in under 30 s on the project's 2-core machine. Times are single runs
on a shared machine: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from dalenius.attacks import lab
from dalenius.attacks.targets import KINDS

TARGET_SECONDS = 30.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("attacks", nargs="*", metavar="ATTACK", help=", ".join(lab.ATTACKS))
    args = parser.parse_args()
    unknown = sorted(set(args.attacks) - set(lab.ATTACKS))
    if unknown:
        parser.error(f"unknown attack(s): {', '.join(unknown)}")
    table = Table(title="attack lab: one run per attack and target, default sizes")
    for column in ("attack", "target", "success", "questions", "seconds", "÷ raw"):
        table.add_column(column, justify="left" if column in ("attack", "target") else "right")
    worst = 0.0
    for name in args.attacks or list(lab.ATTACKS):
        raw_seconds = None
        total = 0.0
        for kind in KINDS:
            start = time.perf_counter()
            reports = lab.compare(name, against=[kind])
            seconds = time.perf_counter() - start
            total += seconds
            raw_seconds = raw_seconds or seconds
            for i, report in enumerate(reports):  # averaging runs two strategies on Dalenius
                success = "—" if report.rate is None else f"{report.rate.estimate:.1%}"
                table.add_row(
                    name,
                    report.target,
                    success,
                    f"{report.queries:,.4g}",
                    f"{seconds:.2f}" if i == 0 else "",
                    f"{seconds / raw_seconds:.2f}" if i == 0 else "",
                )
        table.add_row(name, "[bold]all three[/bold]", "", "", f"[bold]{total:.2f}[/bold]", "")
        worst = max(worst, total)
    console = Console(width=120)
    console.print(table)
    verdict = "within" if worst <= TARGET_SECONDS else "OVER"
    console.print(
        f"slowest attack (all three targets): {worst:.1f} s — {verdict} the {TARGET_SECONDS:.0f} s target"
    )


if __name__ == "__main__":
    main()
