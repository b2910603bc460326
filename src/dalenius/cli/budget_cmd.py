"""``dalenius budget``: show budgets with what was spent and what remains, or set them.

``show`` prints, per analyst × dataset, the cap, what was spent in the current period and what
remains (rounded down, and bounded by the dataset's total cap), then each dataset's total cap.
``set`` is the custodian's command: an analyst's budget (``--epsilon``, ``--delta``, ``--rho``,
``--refresh-days``), or with ``--total`` the cap on every analyst's losses together.
"""

from __future__ import annotations

import argparse
from typing import Any

from dalenius.accounting import DEFINITIONS, Definition, definition_of, parse_definition
from dalenius.cli.common import EXIT_OK, default_ledger, emit_json
from dalenius.cli.ledger_cmd import add_store_options, existing_ledger, loss_json, table
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP, as_fraction
from dalenius.ledger import open_ledger


def register(sub: Any) -> None:
    """Add ``dalenius budget show|set``."""
    parser = sub.add_parser(
        "budget",
        help="show or set privacy budgets",
        description="Show each analyst's budget, spent and remaining loss, or set a budget.",
    )
    actions = parser.add_subparsers(dest="budget_command", metavar="ACTION", required=True)

    show = actions.add_parser("show", help="budget, spent and remaining per analyst × dataset")
    add_store_options(show)
    show.set_defaults(func=run_show)

    put = actions.add_parser(
        "set",
        help="set an analyst's budget, or a dataset's total cap (--total)",
        description=(
            "Set an analyst's budget on a dataset: --epsilon (pure DP), --epsilon with --delta "
            "((epsilon, delta)-DP) or --rho (zCDP). With --total, set the dataset's cap on all "
            "analysts' losses together instead."
        ),
    )
    add_store_options(put)
    put.add_argument("--epsilon", default=None, help="the cap on ε")
    put.add_argument("--delta", default=None, help="the cap on δ (with --epsilon)")
    put.add_argument("--rho", default=None, help="the cap on zCDP ρ")
    put.add_argument(
        "--refresh-days",
        type=int,
        default=None,
        help="renew the analyst's budget every N days (only charges in the current period count)",
    )
    put.add_argument(
        "--total",
        action="store_true",
        help="set the dataset's total cap (shared by every analyst) instead of one analyst's",
    )
    put.add_argument(
        "--definition",
        choices=DEFINITIONS,
        default=None,
        help="how the dataset adds up losses (default: kept, or the type of the new cap)",
    )
    put.set_defaults(func=run_set)

    closed = actions.add_parser(
        "fail-closed",
        help="whether a failure after the data gate also exhausts the analyst's budget",
        description=(
            "on: a request that fails after the data gate (charged, one fixed outcome) also "
            "exhausts that analyst's budget on the dataset until the custodian sets it again; "
            "off: only the request's own loss is charged."
        ),
    )
    add_store_options(closed, analyst_filter=False)
    closed.add_argument("setting", choices=("on", "off"), help="on or off")
    closed.set_defaults(func=run_fail_closed)


def cap_from_args(args: argparse.Namespace) -> Loss:
    """The cap ``--epsilon`` / ``--delta`` / ``--rho`` describe (zero is allowed: no access)."""
    if args.rho is not None:
        if args.epsilon is not None or args.delta is not None:
            raise ConfigurationError(
                "Give either --rho or --epsilon (with an optional --delta), not both.",
                fix="a zCDP budget is --rho 0.5; an (ε, δ) budget is --epsilon 1 --delta 1e-6.",
            )
        return ZCDP(as_fraction(args.rho, "rho", allow_zero=True))
    if args.epsilon is None:
        raise ConfigurationError(
            "No budget given.",
            fix="pass --epsilon 1, --epsilon 1 --delta 1e-6, or --rho 0.5.",
        )
    epsilon = as_fraction(args.epsilon, "epsilon", allow_zero=True)
    if args.delta is None:
        return PureDP(epsilon)
    return ApproxDP(epsilon, as_fraction(args.delta, "delta", allow_zero=True))


def _text(loss: Loss | None) -> str:
    return "-" if loss is None else str(loss)


def run_show(args: argparse.Namespace) -> int:
    """Run ``dalenius budget show``.

    Long because it reads everything from the ledger in one transaction, then writes the JSON form
    or the text tables of the same facts.
    """
    with existing_ledger(args.ledger) as ledger:
        datasets = [d for d in ledger.datasets() if args.dataset in (None, d.name)]
        definitions = {d.name: d.definition for d in ledger.datasets()}
        budgets = [
            (b, ledger.spent(b.principal, b.dataset), ledger.remaining(b.principal, b.dataset))
            for b in ledger.budgets(args.analyst, args.dataset)
        ]
        totals = [(d, ledger.total_spent(d.name)) for d in datasets]
        failures = ledger.failure_counts()
    if args.json:
        emit_json(
            {
                "budgets": [
                    {
                        "analyst": b.principal,
                        "dataset": b.dataset,
                        "definition": definitions[b.dataset],
                        "budget": loss_json(b.cap),
                        "spent": loss_json(spent),
                        "remaining": loss_json(left),
                        "refresh_days": b.refresh_days,
                    }
                    for b, spent, left in budgets
                ],
                "datasets": [
                    {
                        "dataset": d.name,
                        "definition": d.definition,
                        "total_cap": loss_json(d.total_cap),
                        "total_spent": loss_json(spent),
                        "fail_closed": d.fail_closed,
                        "failures": failures.get(d.name, 0),
                    }
                    for d, spent in totals
                ],
            }
        )
        return EXIT_OK
    header = ("analyst", "dataset", "definition", "budget", "spent", "remaining", "refresh")
    rows = [
        [
            b.principal,
            b.dataset,
            definitions[b.dataset],
            str(b.cap),
            str(spent),
            str(left),
            "never" if b.refresh_days is None else f"{b.refresh_days} days",
        ]
        for b, spent, left in budgets
    ]
    print(table(header, rows) if rows else "(no budgets)")
    if totals:
        print()
        cells = [
            [
                d.name,
                d.definition,
                _text(d.total_cap),
                str(spent),
                "closed" if d.fail_closed else "open",
                str(failures.get(d.name, 0)),
            ]
            for d, spent in totals
        ]
        head = ("dataset", "definition", "total cap", "spent by all", "on failure", "failures")
        print(table(head, cells))
    return EXIT_OK


def run_fail_closed(args: argparse.Namespace) -> int:
    """Run ``dalenius budget fail-closed``."""
    if args.dataset is None:
        raise ConfigurationError("budget fail-closed needs --dataset.", fix="pass --dataset NAME.")
    on = args.setting == "on"
    with open_ledger(args.ledger or default_ledger()) as ledger:
        known = {d.name: d.definition for d in ledger.datasets()}
        ledger.set_dataset(args.dataset, definition=known.get(args.dataset, "pure"), fail_closed=on)
    if args.json:
        emit_json({"dataset": args.dataset, "fail_closed": on})
    else:
        what = "exhausts that analyst's budget" if on else "charges only its own loss"
        print(f"dataset {args.dataset!r}: a failure after the data gate now {what}")
    return EXIT_OK


def run_set(args: argparse.Namespace) -> int:
    """Run ``dalenius budget set``."""
    if args.dataset is None:
        raise ConfigurationError("budget set needs --dataset.", fix="pass --dataset NAME.")
    cap = cap_from_args(args)
    if args.total and (args.analyst is not None or args.refresh_days is not None):
        raise ConfigurationError(
            "--total sets the dataset's cap on all analysts; it takes no --analyst or "
            "--refresh-days.",
            fix="drop --analyst and --refresh-days, or drop --total to set one analyst's budget.",
        )
    if not args.total and args.analyst is None:
        raise ConfigurationError(
            "budget set needs --analyst (or --total for the dataset's cap).",
            fix="pass --analyst NAME.",
        )
    with open_ledger(args.ledger or default_ledger()) as ledger:
        known = {d.name: d.definition for d in ledger.datasets()}
        before = known.get(args.dataset)
        definition = _definition(args, cap, before)
        if args.total:
            ledger.set_dataset(args.dataset, definition=definition, total_cap=cap)
        else:
            if definition != before:
                ledger.set_dataset(args.dataset, definition=definition)
            ledger.set_budget(args.analyst, args.dataset, cap, refresh_days=args.refresh_days)
        stored = (
            next(d.total_cap for d in ledger.datasets() if d.name == args.dataset)
            if args.total
            else ledger.get_budget(args.analyst, args.dataset)
        )
    switched = before is not None and before != definition
    who = "all analysts (total cap)" if args.total else f"analyst {args.analyst!r}"
    if args.json:
        emit_json(
            {
                "dataset": args.dataset,
                "analyst": None if args.total else args.analyst,
                "total": bool(args.total),
                "definition": definition,
                "switched_from": before if switched else None,
                "cap": loss_json(stored),
            }
        )
    else:
        if switched:
            print(
                f"dataset {args.dataset!r} switched from {before} to {definition} accounting; "
                "its earlier charges and budgets were converted "
                + (
                    "(pure ε carries over as (ε, 0))"
                    if before == "pure" and definition == "approx"
                    else "(spending rounded up, caps rounded down)"
                )
            )
        print(
            f"set the budget of {who} on dataset {args.dataset!r} to {_text(stored)} ({definition})"
        )
    return EXIT_OK


def _definition(args: argparse.Namespace, cap: Loss, before: Definition | None) -> Definition:
    """The dataset's definition after this command: asked for, kept, or widened to keep δ.

    A cap with δ > 0 on a dataset accounted as pure ε widens it to 'approx' (lossless: pure
    charges carry over as (ε, 0)) rather than keep ε and drop δ; a change is always printed.
    """
    if args.definition is not None:
        return parse_definition(args.definition)
    if before is None:
        return definition_of(cap)
    if before == "pure" and isinstance(cap, ApproxDP) and cap.delta > 0:
        return "approx"
    return before
