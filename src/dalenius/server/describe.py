"""JSON forms of what the gateway shows: datasets (public metadata only), budgets, ledger records.

A dataset is described by what its catalog declares public — tables, columns, types, clipping
bounds, key lists, the privacy unit and descriptions — and never by its data or the location of its
files (only curators see the catalog's path). Losses are given as floats for people and exact
fractions for machines (``{"epsilon": 0.1, "epsilon_exact": "1/10"}``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from dalenius.core.catalog import Column, Table
from dalenius.core.loss import Loss
from dalenius.core.unit import IdUnit
from dalenius.engine.result import loss_dict
from dalenius.ledger import AuditRecord, BudgetInfo, LedgerEntry
from dalenius.server.registry import OpenDataset
from dalenius.server.store import Principal, Registration, RequestRecord, TokenInfo


def number(x: Fraction) -> int | float:
    """An exact bound as JSON: an integer when it is one.

    Example:
        >>> number(Fraction(90)), number(Fraction(1, 4))
        (90, 0.25)
    """
    return int(x) if x.denominator == 1 else float(x)


def loss_json(loss: Loss | None) -> dict[str, Any] | None:
    """A loss as JSON, or ``None``; it never fails, whatever the record holds.

    A value too large for a float (only a record written before losses were bounded can hold
    one) keeps its exact fraction and shows ``null`` as its float.

    Example:
        >>> from dalenius.core.loss import PureDP
        >>> loss_json(PureDP(Fraction(10) ** 400))["epsilon"] is None
        True
    """
    if loss is None:
        return None
    try:
        return loss_dict(loss)
    except (OverflowError, ValueError):
        out: dict[str, Any] = {}
        for name in ("epsilon", "delta", "rho"):
            value = getattr(loss, name, None)
            if isinstance(value, Fraction):
                out[name] = _float_or_none(value)
                out[f"{name}_exact"] = f"{value.numerator}/{value.denominator}"
        return out


def _float_or_none(value: Fraction) -> float | None:
    try:
        return float(value)
    except OverflowError:
        return None


def column_json(column: Column, description: str) -> dict[str, Any]:
    """A column's public metadata."""
    bounds = None
    if column.bounds is not None:
        bounds = {"low": number(column.bounds[0]), "high": number(column.bounds[1])}
    return {
        "name": column.name,
        "type": column.type,
        "bounds": bounds,
        "bounds_epsilon": None
        if column.private_bounds is None
        else float(column.private_bounds.epsilon),
        "keys": list(column.keys) if column.keys is not None else None,
        "nullable": column.nullable,
        "join_rows_per_key": column.join_rows_per_key,
        "per_unit": column.per_unit,
        "description": description,
    }


def table_json(table: Table, descriptions: dict[str, Any]) -> dict[str, Any]:
    """A table's public metadata: privacy unit and columns."""
    texts = descriptions.get(table.name, {})
    column_texts = texts.get("columns", {})
    unit = table.privacy_unit
    unit_json: dict[str, Any] = {"kind": "row", "description": unit.describe()}
    if isinstance(unit, IdUnit):
        unit_json.update(
            kind="id", column=unit.column, max_rows=unit.max_rows, max_groups=unit.max_groups
        )
        if unit.through is not None:
            unit_json["through"] = unit.through.describe()
    return {
        "name": table.name,
        "description": texts.get("description", ""),
        "public": table.public,
        "privacy_unit": unit_json,
        "columns": [column_json(c, column_texts.get(c.name, "")) for c in table.columns],
    }


def dataset_summary(
    registration: Registration, opened: OpenDataset | None, problem: str | None, *, curator: bool
) -> dict[str, Any]:
    """One line of the dataset list; ``problem`` says why a registered dataset cannot be opened."""
    out: dict[str, Any] = {
        "name": registration.name,
        "description": opened.catalog.description if opened else "",
        "tables": list(opened.catalog.table_names) if opened else [],
        "available": opened is not None,
        "problem": problem,
        "registered_at": registration.registered_at.isoformat(),
    }
    if curator:
        out["catalog"] = registration.catalog
        out["registered_by"] = registration.registered_by
    return out


def dataset_detail(opened: OpenDataset, *, curator: bool) -> dict[str, Any]:
    """A dataset's full public description."""
    out = dataset_summary(opened.registration, opened, None, curator=curator)
    out["tables"] = [table_json(t, opened.descriptions) for t in opened.catalog.tables]
    return out


def budget_json(
    analyst: str,
    dataset: str,
    definition: str,
    info: BudgetInfo | None,
    spent: Loss,
    remaining: Loss,
) -> dict[str, Any]:
    """An analyst's budget on a dataset with what was spent and what remains."""
    return {
        "analyst": analyst,
        "dataset": dataset,
        "definition": definition,
        "budget": loss_json(info.cap) if info else None,
        "refresh_days": info.refresh_days if info else None,
        "spent": loss_json(spent),
        "remaining": loss_json(remaining),
    }


def entry_json(entry: LedgerEntry) -> dict[str, Any]:
    """A ledger entry (one charge); the noisy answer itself is left out."""
    return {
        "id": entry.id,
        "analyst": entry.principal,
        "dataset": entry.dataset,
        "sql": entry.sql,
        "plan_hash": entry.plan_hash,
        "status": entry.status,
        "loss": loss_json(entry.loss),
        "charged": loss_json(entry.charged),
        "created_at": entry.created_at.isoformat(),
        "finished_at": entry.finished_at.isoformat() if entry.finished_at else None,
        "detail": entry.detail,
    }


def audit_json(record: AuditRecord) -> dict[str, Any]:
    """One line of the ledger's audit trail (never fails: a line that cannot be shown says so)."""
    try:
        loss = loss_json(record.loss)
    except Exception:
        loss = None
    return {
        "seq": record.seq,
        "at": record.at.isoformat(),
        "analyst": str(record.principal),
        "dataset": str(record.dataset),
        "sql": str(record.sql),
        "outcome": str(record.outcome),
        "loss": loss,
        "detail": str(record.detail),
        "entry_id": record.entry_id,
    }


def token_json(token: TokenInfo) -> dict[str, Any]:
    """A token's public record."""
    return {
        "id": token.id,
        "label": token.label,
        "created_at": token.created_at.isoformat(),
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        "expired": token.expired(),
    }


def principal_json(
    principal: Principal, grants: list[str], tokens: list[TokenInfo]
) -> dict[str, Any]:
    """A principal with the datasets granted to it and its tokens."""
    return {
        "name": principal.name,
        "role": principal.role,
        "created_at": principal.created_at.isoformat(),
        "created_by": principal.created_by,
        "grants": grants,
        "tokens": [token_json(t) for t in tokens],
    }


def request_json(record: RequestRecord) -> dict[str, Any]:
    """One line of the gateway's request log."""
    return {
        "at": record.at.isoformat(),
        "request_id": record.request_id,
        "principal": record.principal,
        "token_id": record.token_id,
        "client": record.client,
        "method": record.method,
        "path": record.path,
        "status": record.status,
        "code": record.code,
        "millis": record.millis,
    }
