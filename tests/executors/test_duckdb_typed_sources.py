"""A float column read from a typed source that holds no NaN is converted without the NaN guard.

DuckDB reads Parquet files, DuckDB tables and frames as they are typed. A float declared over a
decimal or an integer column cannot meet a NaN, and the guard that reads NaN as NULL (a ``CASE``
per row, pushed into every filter on the column) is the dearest part of reading it, so the
conversion pins the column to the type the source had when it was opened instead. These check
that the values read are the guarded form's, that the guard stays on a double column, and that a
file rewritten under an open executor with doubles (NaN, ∞) or text in those columns still reads
no NaN and raises no error: it is read through the type the file was opened with, and a value
that type cannot hold is NULL.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pandas as pd

from dalenius.core.catalog import parse_catalog
from dalenius.executors.duckdb import DuckDBExecutor

CATALOG = """[tables.t]
source = {source}
privacy_unit = "row"
[tables.t.columns]
money = {{ type = "float", bounds = [0, 100] }}
small = {{ type = "float", bounds = [0, 100] }}
wide = {{ type = "float", bounds = [0, 100] }}
ratio = {{ type = "float", bounds = [0, 1] }}
"""


COLUMNS = ("money", "small", "wide", "ratio")


def _write(path: Path, select: str) -> None:
    con = duckdb.connect()
    con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    con.close()


TYPED = (
    "SELECT * FROM (VALUES (CAST(12.25 AS DECIMAL(15,2)), CAST(3 AS INTEGER), "
    "CAST(9007199254740993 AS DECIMAL(38,0)), CAST('NaN' AS DOUBLE)), "
    "(NULL, NULL, NULL, 0.5)) AS v(money, small, wide, ratio)"
)


def _view_sql(executor: DuckDBExecutor) -> str:
    rows = executor.fetch("SELECT sql FROM duckdb_views() WHERE view_name = 't'")
    return str(rows[0][0])


def test_decimals_and_integers_read_as_doubles_without_the_nan_guard(tmp_path: Path) -> None:
    _write(tmp_path / "t.parquet", TYPED)
    catalog = parse_catalog(CATALOG.format(source='{ parquet = "t.parquet" }'), base_dir=tmp_path)
    with DuckDBExecutor(catalog) as executor:
        executor.prepare(catalog.tables[0])
        view = _view_sql(executor)
        # The guard stays on the double column only.
        assert [f"(TRY_CAST({c} AS DOUBLE), CAST('NaN'" in view for c in COLUMNS] == [
            False,
            False,
            False,
            True,
        ]
        select = "SELECT money, small, wide, ratio FROM t"
        rows = sorted(executor.fetch(select), key=repr)
        scoped = executor.scoped(select, [("t", ("money", "ratio", "small", "wide"))])
        assert 'TRY_CAST(TRY_CAST("small" AS INTEGER) AS DOUBLE)' in scoped
        assert sorted(executor.fetch(scoped), key=repr) == rows
    guarded = duckdb.connect().execute(
        "SELECT NULLIF(TRY_CAST(money AS DOUBLE), CAST('NaN' AS DOUBLE)), "
        "NULLIF(TRY_CAST(small AS DOUBLE), CAST('NaN' AS DOUBLE)), "
        "NULLIF(TRY_CAST(wide AS DOUBLE), CAST('NaN' AS DOUBLE)), "
        f"NULLIF(TRY_CAST(ratio AS DOUBLE), CAST('NaN' AS DOUBLE)) FROM '{tmp_path / 't.parquet'}'"
    )
    assert rows == sorted(guarded.fetchall(), key=repr)
    assert (12.25, 3.0, 9007199254740992.0, None) in rows


def test_a_file_rewritten_with_doubles_or_text_reads_no_nan_and_raises_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.parquet"
    _write(path, TYPED)
    catalog = parse_catalog(CATALOG.format(source='{ parquet = "t.parquet" }'), base_dir=tmp_path)
    with DuckDBExecutor(catalog) as executor:
        executor.prepare(catalog.tables[0])
        _write(
            path,
            "SELECT * FROM (VALUES (CAST('NaN' AS DOUBLE), CAST('Infinity' AS DOUBLE), 2.5, 0.25),"
            " (7.125, -1e300, 1e300, 0.75)) AS v(money, small, wide, ratio)",
        )
        doubles = executor.fetch("SELECT money, small, wide FROM t")
        _write(path, "SELECT 'x' AS money, '4.5' AS small, '' AS wide, 0.5 AS ratio")
        text = executor.fetch("SELECT money, small, wide FROM t")
    values = [v for row in [*doubles, *text] for v in row]
    assert not any(isinstance(v, float) and math.isnan(v) for v in values)
    assert sorted(doubles, key=repr) == sorted([(None, None, 3.0), (7.13, None, None)], key=repr)
    # Read through the type the file was opened with: the text 4.5 as an INTEGER is 5.
    assert text == [(None, 5.0, None)]


def test_integers_written_by_pandas_and_declared_float_read_exactly(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"money": [1, 2], "small": [3, 4], "wide": [5, 6], "ratio": [float("nan"), 0.5]}
    )
    frame.to_parquet(tmp_path / "t.parquet")
    catalog = parse_catalog(CATALOG.format(source='{ parquet = "t.parquet" }'), base_dir=tmp_path)
    with DuckDBExecutor(catalog) as executor:
        executor.prepare(catalog.tables[0])
        assert "BIGINT) AS DOUBLE)" in _view_sql(executor)
        assert sorted(executor.fetch("SELECT money, small, wide, ratio FROM t"), key=repr) == [
            (1.0, 3.0, 5.0, None),
            (2.0, 4.0, 6.0, 0.5),
        ]
