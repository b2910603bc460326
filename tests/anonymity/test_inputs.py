"""anonymize and check accept a catalog table, a DuckDB relation, pandas, Arrow and files alike."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from dalenius.anonymity import Hierarchy, anonymize, check
from dalenius.core.catalog import load_catalog

ROWS = {
    "name": [f"p{i}" for i in range(8)],
    "age": [21, 23, 29, 27, 35, 37, 38, 33],
    "zip": ["13053", "13068", "13068", "13053", "14853", "14853", "14850", "14850"],
}


def release_of(data: object) -> list[str]:
    r = anonymize(
        data,
        quasi_identifiers=["age"],
        identifiers=["name"],
        k=4,
        hierarchies={"age": Hierarchy.intervals([10])},
    )
    assert "name" not in r.table.column_names
    return [str(x) for x in r.table.column("age").to_pylist()]


def test_every_kind_of_input_gives_the_same_release(tmp_path: Path) -> None:
    df = pd.DataFrame(ROWS)
    expected = ["[20, 30)"] * 4 + ["[30, 40)"] * 4
    assert release_of(df) == expected
    assert release_of(pa.Table.from_pandas(df)) == expected
    assert release_of(duckdb.sql("SELECT * FROM df")) == expected
    df.to_csv(tmp_path / "people.csv", index=False)
    df.to_parquet(tmp_path / "people.parquet")
    assert release_of(tmp_path / "people.csv") == expected
    assert release_of(tmp_path / "people.parquet") == expected
    (tmp_path / "c.toml").write_text(
        '[tables.people]\nsource = { csv = "people.csv" }\nprivacy_unit = "row"\n'
        '[tables.people.columns]\nname = "str"\nage = { type = "int", bounds = [0, 100] }\n'
        'zip = "str"\n'
    )
    table = load_catalog(tmp_path / "c.toml").table("people")
    assert release_of(table) == expected
    assert check(table, ["age"]).k == 1


def test_polars_when_installed() -> None:
    pl = pytest.importorskip("polars")
    assert release_of(pl.DataFrame(ROWS)) == ["[20, 30)"] * 4 + ["[30, 40)"] * 4


def test_the_report_renders_in_a_notebook() -> None:
    r = anonymize(pd.DataFrame(ROWS), quasi_identifiers=["age"], k=2)
    html = r._repr_html_()
    assert "<table>" in html and "k-anonymity (k=2)" in html
    assert "k-anonymity: k" in r.report._repr_html_()
