"""The load hook: the CLI's bar wraps each table DuckDB copies into memory; by default, nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.executors.base import observe_loads
from dalenius.executors.duckdb import DuckDBExecutor

CSV_AND_PARQUET = """
[tables.people]
source = { csv = "people.csv" }
privacy_unit = "row"
columns = { age = { type = "int", bounds = [0, 99] } }

[tables.visits]
source = { parquet = "visits.parquet" }
privacy_unit = "row"
columns = { age = { type = "int", bounds = [0, 99] } }
"""


class Recorder:
    """A fake progress display: records each load it wraps, and what ran inside it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    @contextmanager
    def __call__(self, table: str) -> Iterator[None]:
        self.events.append(f"start {table}")
        yield
        self.events.append(f"end {table}")


def _catalog(tmp_path: Path, text: str = CSV_AND_PARQUET) -> Catalog:
    (tmp_path / "people.csv").write_text("age\n30\n41\n52\n")
    duckdb.sql(f"COPY (SELECT 30 AS age) TO '{tmp_path / 'visits.parquet'}' (FORMAT parquet)")
    return parse_catalog(text, base_dir=tmp_path)


def test_each_csv_load_is_wrapped_once_and_views_are_not(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    recorder = Recorder()
    with DuckDBExecutor(catalog) as executor, observe_loads(recorder):
        people, visits = catalog.tables
        executor.prepare(people)
        assert recorder.events == ["start people", "end people"]  # the load ran inside the hook
        assert executor.fetch('SELECT COUNT(*) FROM "people"') == [(3,)]
        executor.prepare(people)  # loaded once
        executor.prepare(visits)  # a view over the Parquet file: nothing is copied
    assert recorder.events == ["start people", "end people"]


def test_constant_time_loads_every_table_when_opened_inside_the_hook(tmp_path: Path) -> None:
    capped = CSV_AND_PARQUET.replace(
        'privacy_unit = "row"', 'privacy_unit = "row"\nmax_row_count = 9'
    )
    catalog = _catalog(tmp_path, "[dataset]\nconstant_time = true\n" + capped)
    recorder = Recorder()
    with observe_loads(recorder), DuckDBExecutor(catalog):
        pass
    assert recorder.events == ["start people", "end people", "start visits", "end visits"]


def test_without_an_observer_nothing_is_called(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    recorder = Recorder()
    with observe_loads(recorder):
        pass
    with DuckDBExecutor(catalog) as executor:
        executor.prepare(catalog.tables[0])
        assert executor.fetch('SELECT SUM("age") FROM "people"') == [(123,)]
    assert recorder.events == []
