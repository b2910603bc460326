"""Private DataFrames: a lazy, typed, Polars-style API over the SQL path.

``session.table("adult")`` returns a :class:`PrivateFrame`; its ``filter``, ``with_columns``,
``select``, ``join``, ``group_by(...).agg(...)`` build one SQL query that ``Session.query``
answers — the same plan, refusals, cache and ledger entry as the SQL itself (``docs/frames.md``).

Example (after ``dalenius demo`` has written ``dalenius-demo/census.toml``)::

    import dalenius
    from dalenius.frames import col, count, mean

    session = dalenius.connect("dalenius-demo/census.toml", budget=1.0)
    people = session.table("people")
    frame = people.filter(col("age") >= 40).group_by("sex").agg(count(), mean("income"))
    print(frame.schema)              # known before any data is read
    print(frame.explain(epsilon=0.2))
    frame.to_pandas(epsilon=0.2)     # values with <name>_low / <name>_high columns
"""

from dalenius.frames.agg import (
    Agg,
    count,
    count_distinct,
    max,
    mean,
    median,
    min,
    quantile,
    std,
    sum,
    var,
)
from dalenius.frames.expr import Expr, col, lit, when
from dalenius.frames.frame import AggregateFrame, Asker, GroupBy, PrivateFrame

__all__ = [
    "Agg",
    "AggregateFrame",
    "Asker",
    "Expr",
    "GroupBy",
    "PrivateFrame",
    "col",
    "count",
    "count_distinct",
    "lit",
    "max",
    "mean",
    "median",
    "min",
    "quantile",
    "std",
    "sum",
    "var",
    "when",
]
