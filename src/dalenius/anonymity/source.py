"""Bring the input of an anonymisation into DuckDB: a catalog table, a relation, or a data frame.

Everything downstream (the checkers' ``GROUP BY``, the lattice search's frequency set, the release)
reads one DuckDB table, ``src``, in a private in-memory connection. Accepted inputs: a catalog
:class:`~dalenius.core.catalog.Table` (CSV, Parquet or DuckDB source, typed as the catalog
declares), a ``duckdb`` relation, a pandas or Polars DataFrame, a pyarrow Table, or a path to a
CSV or Parquet file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from dalenius.core.catalog import Table
from dalenius.core.dialect import DUCKDB
from dalenius.core.errors import ConfigurationError
from dalenius.core.frames import FRAME_KIND
from dalenius.executors.duckdb import DUCKDB_TYPES, scannable

SOURCE_TABLE = "src"


@dataclass
class Loaded:
    """The input, as the table ``src`` of a private DuckDB connection."""

    con: duckdb.DuckDBPyConnection
    columns: tuple[str, ...]
    types: dict[str, str]
    rows: int

    def column(self, name: str, role: str) -> str:
        """The column called ``name`` (exact case first, then case-insensitive).

        Raises:
            ConfigurationError: naming the column and the columns that exist.
        """
        if name in self.columns:
            return name
        for col in self.columns:
            if col.lower() == name.lower():
                return col
        raise ConfigurationError(
            f"unknown {role} column {name!r}.",
            why=f"the table has the columns {', '.join(self.columns)}.",
            fix="correct the column name.",
        )

    def is_numeric(self, column: str) -> bool:
        """Whether DuckDB holds ``column`` as a number."""
        t = self.types[column].upper()
        return any(
            x in t
            for x in ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC", "HUGEINT", "BIGINT")
        )


quote = DUCKDB.quote
"""A DuckDB identifier, double-quoted."""


def load(data: Any, *, threads: int | None = None) -> Loaded:
    """Copy ``data`` into a fresh in-memory DuckDB connection as the table ``src``.

    Raises:
        ConfigurationError: for an input of an unsupported kind or a file that does not exist.
    """
    con = duckdb.connect(":memory:")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    relation = _relation_sql(con, data)
    con.execute(f"CREATE TABLE {SOURCE_TABLE} AS {relation}")
    described = con.execute(f"DESCRIBE {SOURCE_TABLE}").fetchall()
    columns = tuple(str(r[0]) for r in described)
    types = {str(r[0]): str(r[1]) for r in described}
    rows = int(con.execute(f"SELECT count(*) FROM {SOURCE_TABLE}").fetchall()[0][0])
    return Loaded(con, columns, types, rows)


def _relation_sql(con: duckdb.DuckDBPyConnection, data: Any) -> str:
    if isinstance(data, Table):
        return _catalog_sql(con, data)
    if isinstance(data, str | Path):
        path = Path(data)
        if not path.exists():
            raise ConfigurationError(
                f"the data file {str(path)!r} does not exist.", fix="check the path."
            )
        text = str(path).replace("'", "''")
        if path.suffix.lower() == ".parquet":
            return f"SELECT * FROM read_parquet('{text}')"
        if path.suffix.lower() in {".csv", ".txt", ".tsv"}:
            return f"SELECT * FROM read_csv('{text}', header = true)"
        raise ConfigurationError(
            f"cannot read {str(path)!r}: only .csv and .parquet files are read directly.",
            fix="convert the file, or pass a DataFrame or a catalog table.",
        )
    if isinstance(data, duckdb.DuckDBPyRelation):
        con.register("__input", data.to_arrow_table())
        return "SELECT * FROM __input"
    module = type(data).__module__.split(".")[0]
    if module == "polars":
        con.register("__input", data.to_arrow())
        return "SELECT * FROM __input"
    if module in {"pandas", "pyarrow"}:
        con.register("__input", data)
        return "SELECT * FROM __input"
    raise ConfigurationError(
        f"cannot anonymise an object of type {type(data).__name__}.",
        fix="pass a catalog table, a duckdb relation, a pandas or Polars DataFrame, a pyarrow "
        "Table, or the path of a CSV or Parquet file.",
    )


def _catalog_sql(con: duckdb.DuckDBPyConnection, table: Table) -> str:
    source = table.source
    location = source.location.replace("'", "''")
    if source.kind == "csv":
        raw = f"read_csv('{location}', header = true, all_varchar = true)"
    elif source.kind == "parquet":
        raw = f"read_parquet('{location}')"
    elif source.kind == "duckdb":
        con.execute(f"ATTACH '{location}' AS __catalog_db (READ_ONLY)")
        raw = f"__catalog_db.{quote(source.table or table.name)}"
    elif source.kind == FRAME_KIND:
        con.register("__catalog_frame", scannable(source.frame))
        raw = "__catalog_frame"
    else:
        raise ConfigurationError(
            f"the {source.kind} source of table {table.name!r} cannot be anonymised in DuckDB.",
            fix="export the table to Parquet and point the catalog at it.",
        )
    projection = ", ".join(_converted(c.name, c.type) for c in table.stored_columns)
    return f"SELECT {projection} FROM {raw}"


def _converted(name: str, col_type: str) -> str:
    q = quote(name)
    if col_type == "str":
        return f"NULLIF(CAST({q} AS VARCHAR), '') AS {q}"
    return f"TRY_CAST({q} AS {DUCKDB_TYPES[col_type]}) AS {q}"


def distinct_values(loaded: Loaded, column: str) -> list[Any]:
    """The distinct values of ``column`` as Python objects (``None`` for NULL)."""
    rows = loaded.con.execute(f"SELECT DISTINCT {quote(column)} FROM {SOURCE_TABLE}").fetchall()
    return [r[0] for r in rows]


def check_distinct(columns: Sequence[str], role: str) -> None:
    """Refuse a column listed twice."""
    seen: set[str] = set()
    for col in columns:
        if col in seen:
            raise ConfigurationError(f"the {role} column {col!r} is listed twice.")
        seen.add(col)
