"""The ``dalenius`` command and its subcommands (``query``, ``explain``, ``budget``, ``serve`` …).

Each subcommand lives in its own module, which imports what it needs (the engine, numpy, DuckDB,
the anonymity toolkit …). Importing all of them costs more than a second, so :func:`main` imports
only the module of the subcommand asked for; ``dalenius``, ``dalenius --help`` and ``dalenius
--version`` import none. :data:`COMMANDS` names each subcommand's module and its one-line help; a
test checks it against what the modules register, so the two cannot drift apart.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dalenius import __version__

DESCRIPTION = (
    "Differentially private answers to aggregate SQL, under a budget that is never overspent."
)

COMMANDS: dict[str, tuple[str, str]] = {
    "query": ("query_cmd", "answer an aggregate SQL query with differential privacy"),
    "explain": (
        "query_cmd",
        "show a query's plan, cost and expected error without reading data or spending budget",
    ),
    "batch": ("accuracy_cmd", "split one budget optimally over several queries with error targets"),
    "budget": ("budget_cmd", "show or set privacy budgets"),
    "ledger": ("ledger_cmd", "list or export the record of releases and the audit trail"),
    "demo": ("demo_cmd", "generate a synthetic census and run a guided tour of private queries"),
    "serve": ("serve_cmd", "run the HTTP gateway (JSON API under /v1) and its web console"),
    "density": (
        "density_cmd",
        "release the density curve of a numeric column (Gaussian-process mechanism)",
    ),
    "anonymize": (
        "anonymity_cmd",
        "release a microdata file under k-anonymity, l-diversity, t-closeness ...",
    ),
    "anonymity": (
        "anonymity_cmd",
        "check the privacy models and re-identification risk of a table",
    ),
    "ldp": ("ldp_cmd", "local differential privacy: simulate protocols, read collections"),
    "hierarchy": (
        "hierarchy_cmd",
        "release counts at every level of a hierarchy of key columns, made consistent",
    ),
    "synthesize": (
        "synth_cmd",
        "release synthetic microdata of a table (MST or AIM: noisy marginals, a model of them)",
    ),
    "perturb": (
        "perturb_cmd",
        "release every row of a table with each value perturbed (record perturbation)",
    ),
    "bounds": (
        "bounds_cmd",
        "choose a numeric column's clipping bounds privately (noisy log-scale histogram)",
    ),
    "continual": (
        "continual_cmd",
        "publish counts (and sums) per day, week or month as periods close, one lifetime ε",
    ),
    "calibrate": ("calibrate_cmd", "measure constant-time release deadlines on adversarial tables"),
    "catalog": (
        "catalog_cmd",
        "custodian tools: check a catalog against its data, suggest per-person caps",
    ),
    "attack": (
        "attack_cmd",
        "run a measured attack against raw SQL, a naive noisy system and Dalenius",
    ),
    "download": (
        "download_cmd",
        "fetch a density, hierarchy or synthetic release again by its entry id (free)",
    ),
}
"""Each subcommand: the module under ``dalenius.cli`` that registers it, and its one-line help."""

LOADS_TABLES = frozenset(
    {
        "query",
        "explain",
        "batch",
        "demo",
        "density",
        "hierarchy",
        "synthesize",
        "perturb",
        "bounds",
        "continual",
        "catalog",
        "download",
    }
)
"""Subcommands that open a catalog in the embedded engine: while one loads a CSV table into memory
a bar with the table's name and the time elapsed is shown on stderr (on a terminal only)."""


def _top_parser() -> tuple[argparse.ArgumentParser, Any]:
    parser = argparse.ArgumentParser(prog="dalenius", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"dalenius {__version__}")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def _modules() -> list[str]:
    """The subcommand modules, in the order their commands are listed."""
    return list(dict.fromkeys(module for module, _ in COMMANDS.values()))


def _register(sub: Any, module: str) -> None:
    register: Callable[[Any], None] = importlib.import_module(f"dalenius.cli.{module}").register
    register(sub)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, every subcommand's module imported (docs and tests use it)."""
    parser, sub = _top_parser()
    for module in _modules():
        _register(sub, module)
    return parser


def _parser_for(command: str | None) -> argparse.ArgumentParser:
    """A parser that knows every subcommand's name and help, and the arguments of ``command``."""
    parser, sub = _top_parser()
    module = COMMANDS[command][0] if command in COMMANDS else None
    for name, (owner, text) in COMMANDS.items():
        if owner == module:
            continue
        # A name and its help only: enough to list it, and to refuse an unknown command.
        sub.add_parser(name, help=text, description=text)
    if module is not None:
        _register(sub, module)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand asked for: the first argument that is not an option (top-level options
    take no value).
    """
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _table_loads(command: str) -> contextlib.AbstractContextManager[object]:
    """The load bars of :data:`LOADS_TABLES`' commands (importing the renderer only for them)."""
    if command not in LOADS_TABLES:
        return contextlib.nullcontext()
    from dalenius.cli.render import table_loads

    return table_loads()


EXIT_INTERRUPTED = 130
"""The shell's code for a program ended by Ctrl-C (128 + SIGINT)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dalenius`` script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = _parser_for(_command_of(arguments))
    args = parser.parse_args(arguments)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from dalenius.cli.common import run_guarded

    try:
        with _table_loads(args.command):
            code: int = run_guarded(args.func, args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        print(
            "\ninterrupted (Ctrl-C). A release that had begun reading the data was charged and "
            "recorded as failed, whatever the data (see `dalenius ledger`); one interrupted "
            "before that spent nothing.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``dalenius explain ... | head``): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
