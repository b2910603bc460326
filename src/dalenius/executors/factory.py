"""Pick the executor a catalog asks for: DuckDB (embedded), PostgreSQL or Spark.

The heavy engines are optional extras and are imported only when a catalog names them, so a
DuckDB-only installation never loads psycopg or PySpark; a missing extra raises
:class:`~dalenius.core.errors.MissingExtraError` naming the ``pip install`` command.
"""

from __future__ import annotations

from dalenius.core.catalog import Catalog
from dalenius.executors.base import Executor


def executor_for(catalog: Catalog) -> Executor:
    r"""A new executor for ``catalog``'s engine (its ``[dataset] engine``, or the one its sources need).

    Example:
        >>> import pathlib, tempfile
        >>> from dalenius.core.catalog import parse_catalog
        >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "t.csv").write_text("x\n1\n")
        >>> cat = parse_catalog('[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\n'
        ...                     'columns = { x = "int" }', base_dir=d)
        >>> executor_for(cat).dialect.name
        'duckdb'
    """
    if catalog.engine == "postgres":
        from dalenius.executors.postgres import PostgresExecutor

        return PostgresExecutor(catalog)
    if catalog.engine == "spark":
        from dalenius.executors.spark import SparkExecutor

        return SparkExecutor(catalog)
    from dalenius.executors.duckdb import DuckDBExecutor

    return DuckDBExecutor(catalog)
