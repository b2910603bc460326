"""``dalenius ledger``: list, export, recover, verify and recount the budget ledger's record.

``list`` prints the charges (or, with ``--audit``, the audit trail) as a table or JSON; ``export``
writes them as CSV or JSON for auditors; ``recover`` settles what a crashed gateway left: a
reservation that never reached the data gate is returned, a charge past the gate is marked lost
(it stays charged); ``verify`` checks the store's integrity; ``recount`` rebuilds the running
counts of what was spent from the charges, the repair for a difference ``verify`` reports. The
commands read the library's record and add nothing to it, except ``recover`` and ``recount``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from dalenius.accounting import components
from dalenius.cli.common import EXIT_OK, EXIT_USER, default_ledger, emit_json
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import Loss
from dalenius.ledger import AuditRecord, Ledger, LedgerEntry, open_ledger, sqlite_path

ENTRY_FIELDS = (
    "id",
    "created_at",
    "finished_at",
    "analyst",
    "dataset",
    "status",
    "loss",
    "loss_exact",
    "charged",
    "charged_exact",
    "sql",
    "plan_hash",
    "request_key",
    "idempotency_key",
    "answer",
    "detail",
)
"""Columns of ``dalenius ledger export`` for charges (also the keys of its JSON objects)."""

AUDIT_FIELDS = (
    "seq",
    "at",
    "analyst",
    "dataset",
    "outcome",
    "loss",
    "loss_exact",
    "sql",
    "plan_hash",
    "entry_id",
    "detail",
)
"""Columns of ``dalenius ledger export --audit``."""


def exact(loss: Loss | None) -> str:
    """A loss as exact text, e.g. ``epsilon=1/10 delta=1/1000000`` (empty for no loss)."""
    if loss is None:
        return ""
    return " ".join(
        f"{name}={value.numerator}/{value.denominator}" for name, value in components(loss)
    )


def loss_json(loss: Loss | None) -> dict[str, Any] | None:
    """A loss as a JSON object: each component as a float, plus its exact rational as text."""
    if loss is None:
        return None
    out: dict[str, Any] = {}
    for name, value in components(loss):
        out[name] = float(value)
        out[f"{name}_exact"] = f"{value.numerator}/{value.denominator}"
    return out


def add_store_options(parser: argparse.ArgumentParser, *, analyst_filter: bool = True) -> None:
    """``--ledger``, ``--analyst`` and ``--dataset`` (filters), and ``--json``."""
    parser.add_argument(
        "--ledger",
        default=None,
        metavar="URL",
        help="the ledger: a SQLite file or postgresql://... "
        "(default: $DALENIUS_LEDGER or ./dalenius-ledger.sqlite)",
    )
    if analyst_filter:
        parser.add_argument("--analyst", default=None, help="only this analyst")
    parser.add_argument("--dataset", default=None, help="only this dataset")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


@contextmanager
def existing_ledger(url: str | None) -> Iterator[Ledger]:
    """Open the ledger at ``url`` (or the default), refusing to create a new SQLite file."""
    target = url or default_ledger()
    path = sqlite_path(target)
    if path is not None and not os.path.exists(path):
        raise ConfigurationError(
            f"There is no ledger at {path!r}.",
            why="reading a ledger must not create an empty one in its place.",
            fix="pass --ledger with the path of an existing ledger, or set DALENIUS_LEDGER.",
        )
    ledger = open_ledger(target)
    try:
        yield ledger
    finally:
        ledger.close()


def register(sub: Any) -> None:
    """Add ``dalenius ledger list|export|recover|verify|recount``."""
    parser = sub.add_parser(
        "ledger",
        help="list or export the record of releases and the audit trail",
        description="Read the budget ledger: every charge, and an audit line for every request.",
    )
    actions = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="print charges (or the audit trail) as a table")
    add_store_options(listing)
    listing.add_argument("--audit", action="store_true", help="list the audit trail instead")
    listing.set_defaults(func=run_list)

    export = actions.add_parser("export", help="write charges (or the audit trail) as CSV or JSON")
    add_store_options(export)
    export.add_argument("--audit", action="store_true", help="export the audit trail instead")
    export.add_argument(
        "--format", choices=("csv", "json"), default=None, help="csv (default) or json"
    )
    export.add_argument("--output", "-o", default=None, help="file to write (default: stdout)")
    export.set_defaults(func=run_export)

    recover = actions.add_parser(
        "recover",
        help="settle what a crashed gateway left: return reservations that never reached the "
        "data gate, mark charges past it as lost (still charged)",
    )
    add_store_options(recover, analyst_filter=False)
    recover.add_argument(
        "--older-than-minutes",
        type=float,
        default=10.0,
        help="only entries unfinished for longer than this (default: 10)",
    )
    recover.set_defaults(func=run_recover)

    verify = actions.add_parser("verify", help="check the ledger's integrity and invariants")
    add_store_options(verify, analyst_filter=False)
    verify.set_defaults(func=run_verify)

    recount = actions.add_parser(
        "recount",
        help="rebuild the running counts of what was spent from the charges (the repair for a "
        "difference verify reports)",
    )
    add_store_options(recount, analyst_filter=False)
    recount.set_defaults(func=run_recount)


def entry_row(entry: LedgerEntry) -> dict[str, Any]:
    """One charge as a flat record with the :data:`ENTRY_FIELDS` keys."""
    return {
        "id": entry.id,
        "created_at": entry.created_at.isoformat(),
        "finished_at": entry.finished_at.isoformat() if entry.finished_at else "",
        "analyst": entry.principal,
        "dataset": entry.dataset,
        "status": entry.status,
        "loss": str(entry.loss),
        "loss_exact": exact(entry.loss),
        "charged": str(entry.charged),
        "charged_exact": exact(entry.charged),
        "sql": entry.sql,
        "plan_hash": entry.plan_hash,
        "request_key": entry.request_key,
        "idempotency_key": entry.idempotency_key or "",
        "answer": entry.answer or "",
        "detail": entry.detail,
    }


def audit_row(record: AuditRecord) -> dict[str, Any]:
    """One audit line as a flat record with the :data:`AUDIT_FIELDS` keys."""
    return {
        "seq": record.seq,
        "at": record.at.isoformat(),
        "analyst": record.principal,
        "dataset": record.dataset,
        "outcome": record.outcome,
        "loss": "" if record.loss is None else str(record.loss),
        "loss_exact": exact(record.loss),
        "sql": record.sql,
        "plan_hash": record.plan_hash or "",
        "entry_id": record.entry_id or "",
        "detail": record.detail,
    }


def _rows(args: argparse.Namespace) -> tuple[Sequence[str], list[dict[str, Any]]]:
    analyst = getattr(args, "analyst", None)
    with existing_ledger(args.ledger) as ledger:
        if args.audit:
            return AUDIT_FIELDS, [audit_row(r) for r in ledger.audit(analyst, args.dataset)]
        return ENTRY_FIELDS, [entry_row(e) for e in ledger.entries(analyst, args.dataset)]


def _shorten(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows as a plain-text table with aligned columns."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def run_list(args: argparse.Namespace) -> int:
    """Run ``dalenius ledger list``."""
    _, rows = _rows(args)
    if args.json:
        emit_json({"audit" if args.audit else "entries": rows})
        return EXIT_OK
    if args.audit:
        header = ("seq", "at", "analyst", "dataset", "outcome", "loss", "sql")
        cells = [
            [
                str(r["seq"]),
                r["at"][:19],
                r["analyst"],
                r["dataset"],
                r["outcome"],
                r["loss"],
                _shorten(r["sql"] or r["detail"], 50),
            ]
            for r in rows
        ]
    else:
        header = ("created", "id", "analyst", "dataset", "status", "charged", "sql")
        cells = [
            [
                r["created_at"][:19],
                r["id"][:12],
                r["analyst"],
                r["dataset"],
                r["status"],
                r["charged"],
                _shorten(r["sql"], 50),
            ]
            for r in rows
        ]
    print(table(header, cells) if cells else f"(no {'audit lines' if args.audit else 'entries'})")
    return EXIT_OK


def run_export(args: argparse.Namespace) -> int:
    """Run ``dalenius ledger export``."""
    fmt = args.format or ("json" if args.json else "csv")
    fields, rows = _rows(args)
    if fmt == "json":
        text = json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(fields), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        print(
            f"wrote {len(rows)} {'audit lines' if args.audit else 'entries'} to {args.output}",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return EXIT_OK


def run_recover(args: argparse.Namespace) -> int:
    """Run ``dalenius ledger recover``."""
    if not args.older_than_minutes >= 0:
        raise ConfigurationError(
            f"--older-than-minutes must be >= 0, got {args.older_than_minutes}.",
            fix="pass the age in minutes after which an unfinished entry counts as abandoned.",
        )
    with existing_ledger(args.ledger) as ledger:
        recovery = ledger.recover(timedelta(minutes=args.older_than_minutes))
    if args.json:
        emit_json({"returned": list(recovery.returned), "lost": list(recovery.lost)})
    else:
        print(
            f"returned {len(recovery.returned)} reservation(s) that never reached the data gate; "
            f"marked {len(recovery.lost)} abandoned charge(s) past the gate as lost "
            "(they stay charged)"
        )
    return EXIT_OK


def run_recount(args: argparse.Namespace) -> int:
    """Run ``dalenius ledger recount``."""
    with existing_ledger(args.ledger) as ledger:
        wrong = ledger.recount()
    if args.json:
        emit_json({"recounted": wrong})
    elif wrong:
        print("\n".join(f"recounted: {w}" for w in wrong))
    else:
        print("the running counts already matched the charges; rebuilt them all the same")
    return EXIT_OK


def run_verify(args: argparse.Namespace) -> int:
    """Run ``dalenius ledger verify``; exits with status 2 when problems are found."""
    with existing_ledger(args.ledger) as ledger:
        problems = ledger.verify()
    if args.json:
        emit_json({"ok": not problems, "problems": problems})
    elif problems:
        print("\n".join(f"problem: {p}" for p in problems))
    else:
        print("ledger ok")
    return EXIT_OK if not problems else EXIT_USER
