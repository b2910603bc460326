"""Malformed CSV values read as NULL, never as an error that would depend on the data.

When every column read from a CSV file is converted with ``TRY_CAST``, DuckDB 2.0 moves the casts
into ``read_csv``, whose typed reading raises on a malformed value instead of giving NULL. The
DuckDB executor therefore loads the file as text into a table first and converts from that table.
"""

from __future__ import annotations

from pathlib import Path

from dalenius.core.catalog import parse_catalog
from dalenius.executors.duckdb import DuckDBExecutor


def test_a_csv_of_only_numeric_columns_reads_malformed_values_as_null(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("a\n5\nx\n")
    catalog = parse_catalog(
        '[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\ncolumns = { a = "int" }',
        base_dir=tmp_path,
    )
    with DuckDBExecutor(catalog) as executor:
        executor.prepare(catalog.tables[0])
        assert executor.fetch('SELECT COUNT(*), COUNT("a") FROM "t"') == [(2, 1)]


def test_with_a_text_column_beside_them_malformed_values_are_null(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("a,s\n5,p\nx,q\n")
    catalog = parse_catalog(
        '[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\n'
        'columns = { a = "int", s = "str" }',
        base_dir=tmp_path,
    )
    with DuckDBExecutor(catalog) as executor:
        executor.prepare(catalog.tables[0])
        assert executor.fetch('SELECT COUNT(*), COUNT("a") FROM "t"') == [(2, 1)]
