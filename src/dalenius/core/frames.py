"""In-memory tables as catalog sources: recognise pandas, Polars, Arrow and DuckDB data by type.

A data scientist's table is often already in memory. The catalog accepts it as a ``frame`` source
(from Python only) under the same declarations as a file: columns with their types, bounds and
keys, and the privacy unit. Recognition goes by the class's module and name, so this module imports
none of those libraries: a DuckDB-only installation never loads Polars, and the core layer stays
free of engines.

A registered frame is a *snapshot by contract*: its data version (which keys the ledger's record of
identical queries) is a fresh id drawn when the catalog is built, so a new catalog over changed
data never reuses an old answer — but a frame changed in place after registration would. Build the
catalog again after changing the data.
"""

from __future__ import annotations

import uuid
from typing import Any

FRAME_KIND = "frame"
"""The source kind of an in-memory table."""

_KINDS = (
    ("pandas", "DataFrame", "pandas DataFrame"),
    ("polars", "DataFrame", "Polars DataFrame"),
    ("pyarrow", "Table", "Arrow table"),
    ("pyarrow", "RecordBatch", "Arrow record batch"),
    ("pyarrow", "Dataset", "Arrow dataset"),
    ("duckdb", "DuckDBPyRelation", "DuckDB relation"),
    ("_duckdb", "DuckDBPyRelation", "DuckDB relation"),
    ("polars", "LazyFrame", "Polars LazyFrame"),
    ("pyarrow", "RecordBatchReader", "Arrow record batch reader"),
)
"""(top-level module, class name, label) of every in-memory table type recognised."""

ONE_SHOT = ("Polars LazyFrame", "Arrow record batch reader")
"""Recognised types that cannot be scanned again and again: refused, with the call that fixes it."""


def frame_type(obj: Any) -> str | None:
    """A readable name of ``obj``'s in-memory table type, or ``None`` if it is not one.

    Example:
        >>> import pandas as pd
        >>> frame_type(pd.DataFrame({"x": [1]})), frame_type([1, 2])
        ('pandas DataFrame', None)
    """
    for cls in type(obj).__mro__:
        top = cls.__module__.split(".", 1)[0]
        for module, name, label in _KINDS:
            if top == module and (
                cls.__name__ == name or (name == "Dataset" and cls.__name__.endswith(name))
            ):
                return label
    return None


def is_frame(obj: Any) -> bool:
    """Whether ``obj`` is an in-memory table a catalog may name as a source."""
    return frame_type(obj) is not None


def frame_label(obj: Any) -> str:
    """The location shown for a frame source: its type and a fresh registration id.

    The id is also the table's data version, so a catalog built again (over new data) never reuses
    an answer recorded for the old one.
    """
    return f"{frame_type(obj)} #{uuid.uuid4().hex[:12]}"
