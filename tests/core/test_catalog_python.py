"""A catalog built in Python: the TOML document's shape, the same validation, the same messages."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from tests.core.test_catalog import (
    GOOD,
    edited,
    test_validation_errors_name_file_table_column,
    write,
)

from dalenius.core.catalog import PYTHON_FILE, Catalog, load_catalog, parse_catalog
from dalenius.core.errors import CatalogError
from dalenius.core.frames import frame_type, is_frame

CASES = test_validation_errors_name_file_table_column.pytestmark[0].args[1]


@pytest.mark.parametrize(("old", "new", "table", "column", "fragment"), CASES)
def test_same_errors_as_the_toml_file(
    tmp_path: Path, old: str, new: str, table: str, column: str | None, fragment: str
) -> None:
    text = edited(old, new, table)
    path = write(tmp_path, text)
    with pytest.raises(CatalogError) as from_file:
        load_catalog(path)
    with pytest.raises(CatalogError) as from_python:
        Catalog.from_dict(tomllib.loads(text), base_dir=tmp_path)
    assert str(from_python.value) == str(from_file.value).replace(str(path), PYTHON_FILE)
    assert (from_python.value.table, from_python.value.column) == (table, column)


def test_same_catalog_as_the_toml_file(tmp_path: Path) -> None:
    from_file = load_catalog(write(tmp_path, GOOD))
    from_python = Catalog.from_dict(tomllib.loads(GOOD), base_dir=tmp_path)
    assert from_python.tables == from_file.tables
    assert from_python.name == "survey" and from_python.path is None


def test_a_dataframe_as_source_with_tuples_for_lists() -> None:
    frame = pd.DataFrame({"age": [30, 40], "sex": ["F", "M"]})
    cat = Catalog.from_dict(
        {
            "tables": {
                "people": {
                    "source": frame,
                    "privacy_unit": "row",
                    "columns": {
                        "age": {"type": "int", "bounds": (0, 100)},
                        "sex": {"type": "str", "keys": ("F", "M")},
                    },
                }
            }
        }
    )
    source = cat.tables[0].source
    assert source.kind == "frame" and source.frame is frame
    assert source.location.startswith("pandas DataFrame #")
    assert cat.name == "dataset"
    # Each catalog built gets a new registration id: an answer recorded for one is never reused.
    again = Catalog.from_dict({"tables": {"people": {**_people(frame)}}})
    assert again.tables[0].source.location != source.location


def _people(frame: object) -> dict[str, object]:
    return {"source": {"frame": frame}, "privacy_unit": "row", "columns": {"age": "int"}}


def test_frame_errors_name_the_table_and_the_fix() -> None:
    with pytest.raises(CatalogError, match="Arrow record batch reader can be read only once") as e:
        Catalog.from_dict({"tables": {"people": _people(pa.table({"age": [1]}).to_reader())}})
    assert "read_all()" in str(e.value) and e.value.file == PYTHON_FILE
    with pytest.raises(CatalogError, match="got list from Python"):
        Catalog.from_dict({"tables": {"people": _people([1, 2])}})
    with pytest.raises(CatalogError, match="got str from a catalog file"):
        parse_catalog(
            '[tables.people]\nsource = { frame = "df" }\nprivacy_unit = "row"\n'
            'columns = { age = "int" }'
        )
    with pytest.raises(CatalogError, match="postgres engine cannot read a frame source"):
        Catalog.from_dict(
            {"dataset": {"engine": "postgres"}, "tables": {"people": _people(pd.DataFrame())}}
        )
    with pytest.raises(CatalogError, match="must be a mapping"):
        Catalog.from_dict([])  # type: ignore[arg-type]


def test_recognised_types() -> None:
    import duckdb
    import pyarrow.dataset as ds

    table = pa.table({"x": [1]})
    assert frame_type(table) == "Arrow table"
    assert frame_type(table.to_batches()[0]) == "Arrow record batch"
    assert frame_type(ds.dataset(table)) == "Arrow dataset"
    assert frame_type(duckdb.sql("SELECT 1 AS x")) == "DuckDB relation"
    assert not is_frame({"x": [1]}) and not is_frame("df.csv")
