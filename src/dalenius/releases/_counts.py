"""The exact statement behind a keyed release: the count of rows per combination of key columns.

Hierarchies and origin–destination tables both start from it; the engine runs it behind the data
gate with each unit's rows capped (contribution bounding), and the release adds the noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from dalenius.core.catalog import Catalog, Table
from dalenius.core.loss import PureDP
from dalenius.plan.nodes import DPQuery, Measurement, Query
from dalenius.sql.bind import to_query
from dalenius.sql.filters import product_filter


def keyed_counts(
    catalog: Catalog, table: str, columns: Sequence[str], where: str | None
) -> tuple[DPQuery, tuple[Table, ...], int]:
    """``SELECT cols, COUNT(*) … GROUP BY cols`` as an exact plan, its tables and the row cap R."""
    quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    condition = product_filter(where)
    name = '"' + table.replace('"', '""') + '"'
    text = (
        f"SELECT {quoted}, COUNT(*) FROM {name}"
        + (f" WHERE {condition}" if condition else "")
        + f" GROUP BY {quoted}"
    )
    resolved = to_query(text, catalog)
    query: Query = replace(resolved.query, having=None, order_by=(), limit=None, offset=0)
    rows = query.unit.max_rows
    count = Measurement(
        "m0", "count", None, "int", None, Fraction(0), Fraction(1), 1, rows, Fraction(1)
    )
    return DPQuery(query, (count,), (), None, PureDP(Fraction(1))), resolved.tables, rows


def norm(value: Any) -> Any:
    """A key as the engine returns it, compared with the catalog's (``3.0`` is ``3``)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
