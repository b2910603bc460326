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

from typing import Any

from dalenius.anonymity import check, config_from_dict, risk
from dalenius.core.catalog import Table
from dalenius.server.gateway import Gateway
from dalenius.server.store import Caller, NotFoundError

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


def anonymize_table(gateway: Gateway, caller: Caller, name: str, request: Any) -> dict[str, Any]:
    """Release a table anonymised as the request's config says: the report and the records.

    ``rows`` caps the records returned (all by default); the report counts them all.
    """
    config = config_from_dict(
        {
            "attributes": request.attributes,
            "privacy": request.privacy,
            "anonymize": request.anonymize,
            "hierarchies": request.hierarchies,
        },
        file=REQUEST,
    )
    release = config.release(_table(gateway, caller, name, request.table))
    shown = release.table if request.rows is None else release.table.slice(0, request.rows)
    return {
        "dataset": name,
        "table": request.table,
        "report": release.report.to_dict(),
        "rows": shown.num_rows,
        "data": {
            column: [None if v is None else str(v) for v in shown.column(column).to_pylist()]
            for column in shown.column_names
        },
    }
