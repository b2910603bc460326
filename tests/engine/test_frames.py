"""In-memory tables (pandas, Polars, Arrow, DuckDB relations) give the same answers as the file.

The catalog is the Adult fixture's own document with each table's source replaced by the data
read into memory by that library's own CSV reader; the exact answers (noise off, the test-only
hook) must equal those computed from the CSV file, for every query below.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow.csv
import pytest
from tests.support.exact import exact_answer

import dalenius
from dalenius.core.catalog import Catalog, load_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

pl = pytest.importorskip("polars")

QUERIES = (
    "SELECT COUNT(*) FROM adult WHERE age >= 40",
    "SELECT sex, COUNT(*) AS n, AVG(hours_per_week) AS h, SUM(capital_gain) AS g FROM adult "
    "GROUP BY sex",
    "SELECT education, SUM(age) AS a, COUNT(occupation) AS o FROM adult GROUP BY education",
    "SELECT l.level, COUNT(*) AS n FROM adult a JOIN edu_levels l ON a.education = l.education "
    "GROUP BY l.level",
)

READERS: dict[str, Callable[[Path], Any]] = {
    "pandas": pd.read_csv,
    "polars": lambda p: pl.read_csv(p, infer_schema_length=None),
    "arrow": pyarrow.csv.read_csv,
    "duckdb": lambda p: duckdb.read_csv(str(p)),
}


def answers(session: Session) -> list[Any]:
    return [(a.columns, a.rows) for a in (exact_answer(session, q) for q in QUERIES)]


def open_session(catalog: Catalog) -> Session:
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


@pytest.fixture(scope="module")
def from_file(adult_catalog_path: Path) -> list[Any]:
    with open_session(load_catalog(adult_catalog_path)) as session:
        return answers(session)


def frame_doc(catalog_path: Path, read: Callable[[Path], Any]) -> dict[str, Any]:
    doc = tomllib.loads(catalog_path.read_text())
    for table in doc["tables"].values():
        table["source"] = read((catalog_path.parent / table["source"]["csv"]).resolve())
    return doc


@pytest.fixture(params=sorted(READERS))
def frame_session(request: pytest.FixtureRequest, adult_catalog_path: Path) -> Iterator[Session]:
    catalog = Catalog.from_dict(frame_doc(adult_catalog_path, READERS[request.param]))
    with open_session(catalog) as session:
        yield session


def test_same_exact_answers_as_the_file(frame_session: Session, from_file: list[Any]) -> None:
    assert answers(frame_session) == from_file


def test_connect_takes_a_dataframe_and_keeps_the_budget(adult_catalog_path: Path) -> None:
    frame = pd.DataFrame({"age": [20, 30, 95, None], "sex": ["F", "M", "F", "x"]})
    doc = {
        "dataset": {"name": "people"},
        "tables": {
            "people": {
                "source": frame,
                "privacy_unit": "row",
                "columns": {
                    "age": {"type": "int", "bounds": [0, 90]},
                    "sex": {"type": "str", "keys": ["F", "M"]},
                },
            }
        },
    }
    with dalenius.connect(doc, budget=1) as session:
        assert exact_answer(
            session, "SELECT sex, COUNT(*), SUM(age) FROM people GROUP BY sex"
        ).rows == (
            ("F", 2, 20 + 90),
            ("M", 1, 30),
        )
        result = session.query("SELECT COUNT(*) FROM people", epsilon=0.5)
        assert float(result.remaining.epsilon) == 0.5
        assert session.query("SELECT COUNT(*) FROM people", epsilon=0.5).cached


def test_frames_are_scanned_in_place_not_copied() -> None:
    """A pandas column changed in place after registration is seen: DuckDB reads it, no copy."""
    values = np.arange(1000)
    frame = pd.DataFrame({"x": values}, copy=False)
    polars_frame = pl.DataFrame({"x": list(range(1000))})
    catalog = Catalog.from_dict(
        {
            "tables": {
                name: {
                    "source": f,
                    "privacy_unit": "row",
                    "columns": {"x": {"type": "int", "bounds": [0, 2000]}},
                }
                for name, f in (("t", frame), ("p", polars_frame))
            }
        }
    )
    with open_session(catalog) as session:
        assert exact_answer(session, "SELECT SUM(x) FROM t").rows == ((499500,),)
        assert exact_answer(session, "SELECT SUM(x) FROM p").rows == ((499500,),)
        values[0] = 1000  # the frame's own buffer (pandas' .loc would copy on write)
        assert exact_answer(session, "SELECT SUM(x) AS s FROM t").rows == ((500500,),)


def test_a_frame_table_can_be_anonymised_too(adult_catalog_path: Path) -> None:
    from dalenius.anonymity.source import load

    catalog = Catalog.from_dict(frame_doc(adult_catalog_path, READERS["polars"]))
    loaded = load(catalog.tables[0])
    assert loaded.rows == 32561 and loaded.columns == catalog.tables[0].column_names
    assert loaded.types["age"] == "BIGINT"
