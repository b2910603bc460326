"""The ``dalenius`` command: ``query``, ``explain``, ``budget``, ``ledger``, ``demo``, ``serve`` and ``calibrate``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from dalenius import __version__
from dalenius.cli import (
    accuracy_cmd,
    anonymity_cmd,
    attack_cmd,
    budget_cmd,
    calibrate_cmd,
    catalog_cmd,
    demo_cmd,
    density_cmd,
    download_cmd,
    hierarchy_cmd,
    ldp_cmd,
    ledger_cmd,
    query_cmd,
    serve_cmd,
    synth_cmd,
)
from dalenius.cli.common import run_guarded


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used by the docs test to list every command)."""
    parser = argparse.ArgumentParser(
        prog="dalenius",
        description="Differentially private answers to aggregate SQL, under a budget that is never overspent.",
    )
    parser.add_argument("--version", action="version", version=f"dalenius {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    query_cmd.register(sub)
    accuracy_cmd.register(sub)
    budget_cmd.register(sub)
    ledger_cmd.register(sub)
    demo_cmd.register(sub)
    serve_cmd.register(sub)
    density_cmd.register(sub)
    anonymity_cmd.register(sub)
    ldp_cmd.register(sub)
    hierarchy_cmd.register(sub)
    synth_cmd.register(sub)
    calibrate_cmd.register(sub)
    catalog_cmd.register(sub)
    attack_cmd.register(sub)
    download_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dalenius`` script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = run_guarded(args.func, args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``dalenius explain ... | head``): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
