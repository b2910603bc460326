"""Answering a query over public tables alone: run as checked, exact, free.

The binder hands over a :class:`~dalenius.core.errors.PublicQuery` only once its allow-list
(:mod:`dalenius.sql.public_sql`) has passed: one SELECT over public catalog tables. Public tables
belong to no privacy unit, so reading them is not a release: the statement runs outside the data
gate and the budget, as the public-join multiplicity does, under the engine's own time limit
(:attr:`dalenius.executors.base.Executor.time_limit`). Values come back as the engine gives them,
made plain Python (a ``Decimal`` becomes a ``float``) so every front end and engine shows the same
answer; an aggregate's interval is the value itself.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from dalenius.core.errors import PublicQuery, QueryError
from dalenius.executors.base import Executor

Rows = tuple[tuple[Any, ...], ...]


def public_rows(executor: Executor, public: PublicQuery) -> tuple[Rows, Rows, Rows]:
    """The answer's rows and each cell's interval (``None`` for a key, else the value).

    Raises:
        CatalogError: a table's source is missing or not of its kind (decided from metadata).
        ExecutionError: the engine failed or passed its time limit.
        QueryError: the answer has more than ``public.max_rows`` rows.
    """
    for table in public.tables:
        executor.check_source(table)
        executor.prepare(table)
    fetched = executor.fetch(public.statement(executor.dialect))
    if len(fetched) > public.max_rows:
        raise QueryError(
            f"the answer has more than {public.max_rows:,} rows.",
            clause="SELECT",
            sql=public.sql,
            why="an answer over public tables is sent whole; its size is bounded.",
            fix="aggregate the rows (GROUP BY), or add LIMIT.",
        )
    rows = tuple(
        tuple(_plain(v, t) for v, t in zip(row, public.types, strict=True)) for row in fetched
    )
    bars = tuple(
        tuple(None if k == "key" else v for v, k in zip(row, public.kinds, strict=True))
        for row in rows
    )
    return rows, bars, bars


def _plain(value: Any, declared: str) -> Any:
    """A value as plain Python: numbers as int or float (whole numbers of an integer column as
    int, whichever engine summed them), dates as dates, the rest as text.
    """
    if value is None or isinstance(value, bool | int | float | str | datetime.date):
        return value
    if isinstance(value, decimal.Decimal):
        if declared == "int" and value == value.to_integral_value():
            return int(value)
        return float(value)
    return str(value)
