"""Accuracy first on the command line: error targets for ``query``/``explain``, and ``batch``.

``--target-error 50`` asks ±50 of every COUNT and SUM; ``--target-error n=50`` (repeatable) of one
output column; ``--target-relative 0.05 --expected 30000`` 5% of a magnitude the analyst states.
``dalenius batch FILE`` splits one budget optimally over several queries with targets, described
in a TOML file (see docs/accuracy.md and docs/cli.md).
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    default_ledger,
    emit_json,
)
from dalenius.core.errors import ConfigurationError
from dalenius.engine.session import connect

_ITEM_KEYS = {"sql", "target_error", "target_relative", "expected"}


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--target-error``, ``--target-relative`` and ``--expected``."""
    parser.add_argument(
        "--target-error",
        action="append",
        default=None,
        metavar="E or COLUMN=E",
        help="instead of --epsilon: the error (half-width of the interval at --confidence) to "
        "meet on every COUNT and SUM, or on one output column (repeatable); the smallest ε "
        "that meets it is spent",
    )
    parser.add_argument(
        "--target-relative",
        default=None,
        metavar="R",
        help="instead of --epsilon: a relative error such as 0.05, relative to --expected",
    )
    parser.add_argument(
        "--expected",
        action="append",
        default=None,
        metavar="V or COLUMN=V",
        help="with --target-relative: the magnitude you expect (the true value is private)",
    )


def _pairs(values: list[str] | None, option: str) -> Any:
    """One value (``50``) or column=value pairs (``n=50``), as the session takes them."""
    if not values:
        return None
    named = [v for v in values if "=" in v]
    if not named:
        if len(values) > 1:
            raise ConfigurationError(
                f"{option} is given {len(values)} times without column names.",
                fix=f"give {option} once for every aggregate, or as COLUMN=VALUE for each column.",
            )
        return values[0]
    if len(named) != len(values):
        raise ConfigurationError(
            f"{option} mixes a value for every aggregate with per-column values.",
            fix=f"give either {option} VALUE once, or {option} COLUMN=VALUE for each column.",
        )
    out: dict[str, str] = {}
    for item in named:
        column, _, value = item.partition("=")
        out[column.strip()] = value.strip()
    return out


def target_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The session keyword arguments the target options describe."""
    return {
        "target_error": _pairs(args.target_error, "--target-error"),
        "target_relative": args.target_relative,
        "expected": _pairs(args.expected, "--expected"),
    }


def register(sub: Any) -> None:
    """Add ``dalenius batch``."""
    parser = sub.add_parser(
        "batch",
        help="split one budget optimally over several queries with error targets",
        description=(
            "Plan (and with --run, answer) several queries with error targets, described in a "
            "TOML file: [[query]] tables with sql and target_error (or target_relative and "
            "expected). Without --epsilon every query gets its smallest ε; with it the worst "
            "error relative to its target is minimised within that budget."
        ),
    )
    parser.add_argument("file", help="the batch file (TOML)")
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument("--epsilon", default=None, help="the total ε to split (optional)")
    parser.add_argument("--delta", default=None, help="δ for queries with private group keys")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of the targets (default 0.95)"
    )
    parser.add_argument(
        "--run", action="store_true", help="answer the queries (spends); default: plan only"
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_batch)


def read_batch(path: str) -> list[dict[str, Any]]:
    """The queries of a batch file, checked for unknown keys."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigurationError(
            f"cannot read the batch file {path!r}: {error}",
            fix='write [[query]] tables, each with sql = "..." and target_error = 50.',
        ) from None
    items = doc.get("query")
    if not isinstance(items, list) or not items:
        raise ConfigurationError(
            f"the batch file {path!r} has no [[query]] tables.",
            fix='add [[query]] with sql = "SELECT COUNT(*) FROM t" and target_error = 50.',
        )
    for i, item in enumerate(items):
        unknown = set(item) - _ITEM_KEYS if isinstance(item, dict) else {"(not a table)"}
        if unknown:
            raise ConfigurationError(
                f"query {i + 1} of {path!r} has unknown keys: {', '.join(sorted(unknown))}.",
                fix=f"use only {', '.join(sorted(_ITEM_KEYS))}.",
            )
    return [dict(item) for item in items]


def run_batch(args: argparse.Namespace) -> int:
    """Run ``dalenius batch``."""
    from dalenius.core.catalog import load_catalog
    from dalenius.engine.session import Session
    from dalenius.executors.factory import executor_for
    from dalenius.ledger import open_ledger

    items = read_batch(args.file)
    catalog = load_catalog(args.catalog)
    if args.run:
        session = connect(catalog, ledger=args.ledger or default_ledger(), analyst=args.analyst)
    else:
        session = Session(
            catalog, ledger=open_ledger(None), executor=executor_for(catalog), analyst=args.analyst
        )
    with session:
        plan = session.plan_batch(
            items, epsilon=args.epsilon, delta=args.delta, confidence=args.confidence
        )
        results = (
            session.query_batch(plan, delta=args.delta, confidence=args.confidence)
            if args.run
            else []
        )
    if args.json:
        emit_json({**plan.to_dict(), "results": [r.to_dict() for r in results]})
        return EXIT_OK
    budget = "" if plan.budget is None else f" of a budget of ε = {float(plan.budget):.6g}"
    print(f"Batch of {len(plan.items)} queries: ε = {float(plan.epsilon):.6g}{budget}")
    if plan.budget is not None:
        print(f"every target × {float(plan.scale):.6g} (the smallest factor that fits)")
    for i, item in enumerate(plan.items):
        print(f"\n[{i + 1}] ε = {float(item.allocation.epsilon):.6g}  {item.sql}")
        for t in item.allocation.targets:
            print(f"    {t.output:<24} target {t.asked:<24} error ±{float(t.error):.6g}")
        if results:
            print(results[i])
    return EXIT_OK
