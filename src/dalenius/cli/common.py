"""Options and error handling shared by every ``dalenius`` sub-command."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dalenius.core.errors import ConfigurationError, DaleniusError, EvaluationFailed, UserError
from dalenius.core.loss import ZCDP, ApproxDP, as_fraction
from dalenius.engine.session import Session, connect

DEFAULT_LEDGER = "dalenius-ledger.sqlite"
"""The ledger file used when neither ``--ledger`` nor ``DALENIUS_LEDGER`` says otherwise."""

EXIT_OK = 0
EXIT_BUG = 1
EXIT_USER = 2
EXIT_FAILED = 3
"""The request failed after the data gate: the loss was charged; the message never changes."""

Handler = Callable[[argparse.Namespace], int]


def default_ledger() -> str:
    """``$DALENIUS_LEDGER``, else ``dalenius-ledger.sqlite`` in the working directory."""
    return os.environ.get("DALENIUS_LEDGER") or DEFAULT_LEDGER


def add_ledger_options(parser: argparse.ArgumentParser) -> None:
    """``--ledger`` and ``--analyst``, as every budget-aware command takes them."""
    parser.add_argument(
        "--ledger",
        default=None,
        metavar="URL",
        help=(
            "where budgets and releases are recorded: a SQLite file, or postgresql://... "
            f"(default: $DALENIUS_LEDGER or ./{DEFAULT_LEDGER})"
        ),
    )
    parser.add_argument(
        "--analyst", default="analyst", help="whose budget is spent (default: analyst)"
    )


def add_release_options(
    parser: argparse.ArgumentParser,
    *,
    epsilon: str,
    delta: str,
    confidence: str | None = None,
) -> None:
    """The loss to spend and the budget to record, as every release command takes them.

    ``--epsilon`` and ``--delta`` (with the command's own help), ``--rho`` (zCDP), the
    ``--confidence`` of the intervals when ``confidence`` names them, and ``--budget``,
    ``--budget-delta``, ``--budget-rho`` (read by :func:`budget_from_args`).
    """
    parser.add_argument("--epsilon", default=None, help=epsilon)
    parser.add_argument("--delta", default=None, help=delta)
    parser.add_argument("--rho", default=None, help="ρ to spend, on a zCDP dataset")
    if confidence is not None:
        parser.add_argument(
            "--confidence",
            type=float,
            default=0.95,
            help=f"confidence of the {confidence} (default 0.95)",
        )
    parser.add_argument(
        "--budget", default=None, help="the analyst's total ε, recorded if the ledger has none yet"
    )
    parser.add_argument("--budget-delta", default=None, help="with --budget: the total δ")
    parser.add_argument("--budget-rho", default=None, help="instead of --budget: a zCDP budget ρ")


def budget_from_args(args: argparse.Namespace) -> object:
    """The budget that ``--budget``, ``--budget-delta`` or ``--budget-rho`` give, if any."""
    if args.budget_rho is not None:
        return ZCDP(as_fraction(args.budget_rho, "budget-rho"))
    if args.budget_delta is not None:
        if args.budget is None:
            raise ConfigurationError(
                "--budget-delta needs --budget.", fix="add --budget 1 (for example)."
            )
        return ApproxDP(
            as_fraction(args.budget, "budget"),
            as_fraction(args.budget_delta, "delta", allow_zero=True),
        )
    return args.budget


def release_session(args: argparse.Namespace) -> Session:
    """The session a release command runs in (the options of :func:`add_release_options` and
    :func:`add_ledger_options`, and ``--catalog``).
    """
    confidence = getattr(args, "confidence", None)
    return connect(
        args.catalog,
        budget=budget_from_args(args),
        ledger=args.ledger or default_ledger(),
        analyst=args.analyst,
        **({} if confidence is None else {"confidence": confidence}),
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """``--json``: one JSON object on stdout instead of a table."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of a table"
    )


def emit_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout."""
    print(json.dumps(obj, indent=2, default=str))


_PY_ARGUMENT = re.compile(
    r"(?<![\w.(])(epsilon|delta|rho|budget|confidence|target_error|target_relative)=(?=[\w.+-])"
)
_SUGGESTED_BUDGET_SET = re.compile(r"`(dalenius budget set [^`]*)`")


def in_cli_words(text: str, args: argparse.Namespace) -> str:
    """A library message in the command line's words: flags, not Python arguments, and a
    suggested ``dalenius budget set`` that names the ledger this command used.

    Example:
        >>> in_cli_words("pass epsilon=0.1 or delta=1e-6.", argparse.Namespace())
        'pass --epsilon 0.1 or --delta 1e-6.'
    """
    text = _PY_ARGUMENT.sub(lambda m: "--" + m.group(1).replace("_", "-") + " ", text)
    text = text.replace("omit budget= ", "omit --budget ").replace(" when connecting", "")
    ledger = getattr(args, "ledger", None)
    if isinstance(ledger, str) and ledger:

        def with_ledger(found: re.Match[str]) -> str:
            command = found.group(1).rstrip(" .")
            if "--ledger" in command:
                return found.group(0)
            return f"`{command} --ledger {ledger}`"

        text = _SUGGESTED_BUDGET_SET.sub(with_ledger, text)
    return text


def run_guarded(handler: Handler, args: argparse.Namespace) -> int:
    """Run a command, turning Dalenius errors into readable messages and exit codes."""
    try:
        return handler(args)
    except EvaluationFailed as exc:
        # The one fixed outcome after the data gate: the same bytes whatever happened.
        if getattr(args, "json", False):
            print(exc.body().decode())
        else:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UserError as exc:
        if getattr(args, "json", False):
            detail = exc.to_dict()
            if detail.get("fix"):
                detail["fix"] = in_cli_words(str(detail["fix"]), args)
            emit_json({"error": detail})
        else:
            print(f"error: {in_cli_words(str(exc), args)}", file=sys.stderr)
        return EXIT_USER
    except DaleniusError as exc:
        if getattr(args, "json", False):
            emit_json({"error": {"code": getattr(exc, "code", "error"), "message": str(exc)}})
        else:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_BUG


def output_path(text: str | None) -> Path | None:
    """A release's output file from ``--out``: ``.csv`` or ``.parquet`` (refused otherwise)."""
    if text is None:
        return None
    out = Path(text)
    if out.suffix.lower() not in (".parquet", ".csv"):
        raise ConfigurationError(
            f"--out must end in .parquet or .csv, got {text!r}.",
            fix="write to rows.parquet or rows.csv.",
        )
    return out


def write_frame(frame: Any, out: Path, *, as_text: bool) -> None:
    """Write a release's table; ``as_text`` writes synthetic rows' mixed labels as text in Parquet."""
    if out.suffix.lower() == ".parquet":
        (frame.astype(str) if as_text else frame).to_parquet(out, index=False)
    else:
        frame.to_csv(out, index=False)
