"""Syntactic anonymity through the gateway: checks and releases of microdata, for curators only.

Publishing a de-identified microdata file is the custodian's act, not an analyst's query: it
releases records, not noisy aggregates, and spends no privacy budget because it gives no
differential-privacy guarantee at all. So the routes calling these functions depend on the
curator role (an analyst's token gets 403 before anything is read), and the request names a
table of a registered dataset rather than a file: the data path stays the catalog's.

The body of an anonymisation is the TOML config of ``dalenius anonymize`` as JSON (without its
``[data]`` section), validated by the same code, so a config tried on the command line works here.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

from dalenius.anonymity import check, config_from_dict, risk
from dalenius.anonymity.anonymize import Release
from dalenius.anonymity.config import Config
from dalenius.core.catalog import Table
from dalenius.core.errors import UserError
from dalenius.server.errors import error_body
from dalenius.server.gateway import Gateway
from dalenius.server.store import Caller, NotFoundError

LOG = logging.getLogger(__name__)

REQUEST = "the request"
"""How errors in a request's config name their source (a file's name on the command line)."""


def _table(gateway: Gateway, caller: Caller, name: str, table: str) -> Table:
    opened = gateway.open(caller, name)
    found = opened.catalog.table(table)
    if found is None:
        raise NotFoundError(
            f"The dataset {name!r} has no table {table!r}.",
            fix=f"use one of {', '.join(opened.catalog.table_names)}.",
        )
    return found


def check_table(gateway: Gateway, caller: Caller, name: str, request: Any) -> dict[str, Any]:
    """The models a table satisfies as it is, and its re-identification risks."""
    table = _table(gateway, caller, name, request.table)
    report = check(table, request.quasi_identifiers, request.sensitive)
    risks = risk(table, request.quasi_identifiers)
    return {
        "dataset": name,
        "table": request.table,
        "check": report.to_dict(),
        "risk": risks.to_dict(),
    }


def _config(request: Any) -> Config:
    return config_from_dict(
        {
            "attributes": request.attributes,
            "privacy": request.privacy,
            "anonymize": request.anonymize,
            "hierarchies": request.hierarchies,
        },
        file=REQUEST,
    )


def _answer(name: str, request: Any, config: Config, release: Release) -> dict[str, Any]:
    shown = release.table if request.rows is None else release.table.slice(0, request.rows)
    # The risks an attacker faces in what is published: every released record, its classes as
    # released (generalised values), so a reader sees the drop from the table's own risk.
    released_risk = risk(release.table, config.quasi_identifiers).to_dict()
    return {
        "dataset": name,
        "table": request.table,
        "report": release.report.to_dict(),
        "risk": released_risk,
        "rows": shown.num_rows,
        "data": {
            column: [None if v is None else str(v) for v in shown.column(column).to_pylist()]
            for column in shown.column_names
        },
    }


def anonymize_table(gateway: Gateway, caller: Caller, name: str, request: Any) -> dict[str, Any]:
    """Release a table anonymised as the request's config says: the report and the records.

    ``rows`` caps the records returned (all by default); the report and the risks count them all.
    """
    config = _config(request)
    release = config.release(_table(gateway, caller, name, request.table))
    return _answer(name, request, config, release)


def anonymize_stream(
    gateway: Gateway, caller: Caller, name: str, request: Any, request_id: str
) -> Iterator[bytes]:
    """The same release, as NDJSON lines: ``{"progress": [settled, total]}`` then the answer.

    The config and the table are checked here, before the first line, so a bad request is still
    a plain 400/404. The search runs in its own thread and reports through a queue; a progress
    line is written only when the settled share moves by a whole percent, so a large lattice
    writes at most about a hundred. An error during the search (a model that cannot be met) is
    the last line, ``{"error": {...}}``, in the gateway's error shape.
    """
    config = _config(request)
    table = _table(gateway, caller, name, request.table)
    events: queue.Queue[tuple[str, Any]] = queue.Queue()

    def progress(settled: int, total: int) -> None:
        events.put(("progress", (settled, total)))

    def work() -> None:
        try:
            events.put(
                ("answer", _answer(name, request, config, config.release(table, progress=progress)))
            )
        except Exception as error:
            if not isinstance(error, UserError):
                LOG.exception("anonymisation failed (request %s)", request_id)
            events.put(("error", error))

    threading.Thread(target=work, name="anonymize", daemon=True).start()
    return _lines(events, request_id)


def _lines(events: queue.Queue[tuple[str, Any]], request_id: str) -> Iterator[bytes]:
    shown = -1
    while True:
        kind, value = events.get()
        if kind == "progress":
            settled, total = value
            percent = 100 * settled // max(total, 1)
            if percent > shown:
                shown = percent
                yield _line({"progress": [settled, total]})
            continue
        if kind == "error":
            yield _line(error_body(value, request_id))
        else:
            yield _line(value)
        return


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode() + b"\n"
