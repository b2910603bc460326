"""``dalenius query`` and ``dalenius explain``: ask a private question, or see what it would cost."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dalenius.cli.accuracy_cmd import add_target_options, target_kwargs
from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    default_ledger,
    emit_json,
)
from dalenius.cli.render import FORMATS, print_result
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ApproxDP, as_fraction
from dalenius.engine.session import connect


def register(sub: Any) -> None:
    """Add the ``query`` and ``explain`` sub-commands."""
    query = sub.add_parser(
        "query",
        help="answer an aggregate SQL query with differential privacy",
        description=(
            "Answer an aggregate SQL query privately: noisy values with error bars, charged to the "
            "analyst's budget in the ledger. Example:\n"
            '  dalenius query --catalog adult.toml --epsilon 0.1 "SELECT COUNT(*) FROM adult WHERE age >= 40"'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(query)
    query.add_argument(
        "--budget",
        default=None,
        help="the analyst's total ε, recorded if the ledger has no budget for them yet",
    )
    query.add_argument(
        "--budget-delta",
        default=None,
        help="with --budget: the analyst's total δ (an (ε, δ) budget, needed for private group keys)",
    )
    query.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="table (default; coloured on a terminal), json (as --json) or csv (the columns of "
        "Result.to_pandas(): each value with <name>_low and <name>_high)",
    )
    query.set_defaults(func=run_query)

    exp = sub.add_parser(
        "explain",
        help="show a query's plan, cost and expected error without reading data or spending budget",
        description="Show the plan, sensitivities, the ε split and the expected error. Reads no data, spends nothing.",
    )
    _common(exp)
    exp.set_defaults(func=run_explain)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", help="the SQL query, in quotes")
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument(
        "--epsilon",
        default=None,
        help="privacy loss ε to spend on this query (or give it in the SQL's OPTIONS)",
    )
    parser.add_argument(
        "--delta",
        default=None,
        help="δ to spend; needed only for GROUP BY keys without a public list",
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence of the error bars (default 0.95)"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse, before anything is spent, a query the catalog gives a hint about (a "
        "literal compared with a keyed column that is not among its keys)",
    )
    add_target_options(parser)
    add_ledger_options(parser)
    add_json_option(parser)


def run_query(args: argparse.Namespace) -> int:
    """Run ``dalenius query``."""
    fmt = args.format or ("json" if args.json else "table")
    if args.json and fmt != "json":
        raise ConfigurationError(
            f"--json and --format {fmt} ask for two formats.", fix="give one of them."
        )
    args.json = fmt == "json"  # errors, too, are then printed as JSON
    budget: object = args.budget
    if args.budget_delta is not None:
        if args.budget is None:
            raise ConfigurationError(
                "--budget-delta needs --budget.", fix="add --budget 1 (for example)."
            )
        budget = ApproxDP(
            as_fraction(args.budget, "budget"),
            as_fraction(args.budget_delta, "delta", allow_zero=True),
        )
    if args.strict:
        _refuse_hinted(args.sql, args.catalog)
    with connect(
        args.catalog,
        budget=budget,
        ledger=args.ledger or default_ledger(),
        analyst=args.analyst,
        confidence=args.confidence,
    ) as session:
        result = session.query(
            args.sql, epsilon=args.epsilon, delta=args.delta, **target_kwargs(args)
        )
    print_result(result, fmt)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if fmt == "table" and result.accuracy is not None:
        print(f"ε chosen for accuracy: {result.accuracy['epsilon']:.6g} (see explain)")
    return EXIT_OK


def run_explain(args: argparse.Namespace) -> int:
    """Run ``dalenius explain`` (works without a recorded budget: it spends nothing)."""
    from dalenius.core.catalog import load_catalog
    from dalenius.engine.session import Session
    from dalenius.executors.duckdb import DuckDBExecutor
    from dalenius.ledger import open_ledger

    catalog = load_catalog(args.catalog)
    if args.strict:
        _refuse_hinted(args.sql, catalog)
    # The ledger is read only for bounds this analyst already chose privately (bounds =
    # "private"); without a ledger file explain works all the same, in memory.
    url = args.ledger or default_ledger()
    known = "://" in url or Path(url).exists()
    session = Session(
        catalog,
        ledger=open_ledger(url if known else None),
        executor=DuckDBExecutor(catalog),
        analyst=args.analyst,
        confidence=args.confidence,
    )
    with session:
        explanation = session.explain(
            args.sql, epsilon=args.epsilon, delta=args.delta, **target_kwargs(args)
        )
    if args.json:
        emit_json(explanation.to_dict())
    else:
        print(explanation)
    return EXIT_OK


def _refuse_hinted(sql: str, catalog: Any) -> None:
    """``--strict``: refuse the query if the catalog gives a hint about it (reads no data)."""
    from dalenius.core.catalog import load_catalog
    from dalenius.plan.hints import query_hints, strict_refusal
    from dalenius.sql.bind import to_query

    if isinstance(catalog, str):
        catalog = load_catalog(catalog)
    refusal = strict_refusal(query_hints(to_query(sql, catalog).query))
    if refusal is not None:
        raise refusal
