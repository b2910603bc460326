"""How long each attack of the lab takes at its default size, per target.

    .venv/bin/python bench/attacks.py                 # every attack, every target, default sizes
    .venv/bin/python bench/attacks.py differencing    # one attack
    .venv/bin/python bench/attacks.py linking homogeneity   # the attacks on released microdata

Each row is one ``dalenius.attacks.lab.compare`` run against one target (no plot), timed around
the call; the last column divides by the raw target's time (the attack with exact answers), so
the cost of answering through Dalenius reads as a ratio. The microdata attacks (linking,
homogeneity) are timed per release instead — names dropped, k-anonymous, ℓ-diverse, t-close,
Dalenius synthetic — on the demo census, each divided by the names-dropped release's time. The target of the attack lab is that
each demo attack finishes in under 30 s on the project's 2-core machine. Times are single runs
on a shared machine: read the ratios, not the seconds; the CPU column (this process, all its
threads) is what the run cost when the machine is busy.
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
    known = [*lab.ATTACKS, *MICRODATA]
    parser.add_argument("attacks", nargs="*", metavar="ATTACK", help=", ".join(known))
    args = parser.parse_args()
    unknown = sorted(set(args.attacks) - set(known))
    if unknown:
        parser.error(f"unknown attack(s): {', '.join(unknown)}")
    table = Table(title="attack lab: one run per attack and target, default sizes")
    for column in ("attack", "target", "success", "questions", "seconds", "CPU s", "÷ raw"):
        table.add_column(column, justify="left" if column in ("attack", "target") else "right")
    worst = 0.0
    chosen = args.attacks or known
    for name in [a for a in chosen if a in lab.ATTACKS]:
        raw_seconds = None
        total = 0.0
        for kind in KINDS:
            start, cpu = time.perf_counter(), time.process_time()
            reports = lab.compare(name, against=[kind])
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
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
                    f"{cpu:.2f}" if i == 0 else "",
                    f"{seconds / raw_seconds:.2f}" if i == 0 else "",
                )
        table.add_row(name, "[bold]all three[/bold]", "", "", f"[bold]{total:.2f}[/bold]", "", "")
        worst = max(worst, total)
    on_files = [a for a in chosen if a in MICRODATA]
    if on_files:
        worst = max(worst, microdata(table, on_files))
    console = Console(width=120)
    console.print(table)
    verdict = "within" if worst <= TARGET_SECONDS else "OVER"
    console.print(
        f"slowest attack (all targets or releases): {worst:.1f} s — {verdict} the "
        f"{TARGET_SECONDS:.0f} s target"
    )


# -- attacks on released microdata: linking and homogeneity ------------------------------------

MICRODATA = ("linking", "homogeneity")
"""Attacks on a published file rather than on query answers; each is timed per release."""


def microdata(table: Table, names: list[str]) -> float:
    """Time ``linking`` and ``homogeneity`` against every release at their default size.

    The default size is the demo census (50,000 people, half of them released). Drawing the
    census and the voter roll is timed once and shown on its own row; each release row times
    building the release (the lattice search, the MST synthesis) and attacking it, and divides by
    the names-dropped release's time. Returns the slowest attack's total.
    """
    from dalenius.attacks import homogeneity, linking
    from dalenius.attacks.published import AGAINST, publish
    from dalenius.attacks.voters import scenario

    start, cpu = time.perf_counter(), time.process_time()
    world = scenario()
    drawn, cpu = time.perf_counter() - start, time.process_time() - cpu
    table.add_row(
        "(census + voter roll)", "50,000 people", "", "", f"{drawn:.2f}", f"{cpu:.2f}", ""
    )
    worst = 0.0
    for name in names:
        raw_seconds = None
        total = 0.0
        for against in AGAINST:
            start, cpu = time.perf_counter(), time.process_time()
            if name == "linking":
                report = linking.attack(publish(world, against), world).report()
            else:
                report = homogeneity.run(against, world=world).report()
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            total += seconds
            raw_seconds = raw_seconds or seconds
            success = "—" if report.rate is None else f"{report.rate.estimate:.1%}"
            table.add_row(
                name,
                report.target,
                success,
                "0",
                f"{seconds:.2f}",
                f"{cpu:.2f}",
                f"{seconds / raw_seconds:.2f}",
            )
        table.add_row(
            name, "[bold]all five releases[/bold]", "", "", f"[bold]{total:.2f}[/bold]", "", ""
        )
        worst = max(worst, total)
    return worst


if __name__ == "__main__":
    main()
