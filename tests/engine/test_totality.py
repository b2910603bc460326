"""Every accepted query is total: one added row never turns an answer into an error, a hang or
another shape (DuckDB; the same check on PostgreSQL and Spark is in ``test_totality_engines``).

For each special value (NaN, ±∞, ±0.0, subnormals, the largest double, INT64 extremes, NULL, a
malformed number, a 10 MB string, bytes that are not UTF-8, broken CSV lines), D′ is D plus one
row holding it in every column; every aggregate and expression form must have the same outcome
kind (value or refusal) and output shape on D and D′. So must the empty table and a one-row one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.engine import totality
from tests.engine.totality import (
    COMPACT,
    PRIVATE_QUERIES,
    QUERIES,
    RAW_ROWS,
    SPECIAL,
    Outcome,
    base_rows,
    differences,
    outcomes,
    special_row,
    write_table,
)

from dalenius.core.catalog import load_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

ALL_QUERIES = QUERIES + PRIVATE_QUERIES


def session(path: Path) -> Session:
    catalog = load_catalog(path)
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    folder = tmp_path_factory.mktemp("d")
    with session(write_table(folder, base_rows())) as s:
        found = outcomes(s, ALL_QUERIES)
    assert not [o for o in found.values() if o.kind == "error"], found
    # The suite must exercise answers, not only refusals.
    assert sum(o.kind == "value" for o in found.values()) >= len(ALL_QUERIES) - 3
    return found


@pytest.mark.parametrize("name", [*SPECIAL, *RAW_ROWS])
def test_one_special_row_changes_no_outcome(
    name: str, reference: dict[str, Outcome], tmp_path: Path
) -> None:
    with session(write_table(tmp_path, [*base_rows(), special_row(name)])) as s:
        found = outcomes(s, COMPACT)
    assert differences({q: reference[q] for q in COMPACT}, found, name) == []


def test_every_special_row_at_once_changes_no_outcome(
    reference: dict[str, Outcome], tmp_path: Path
) -> None:
    rows = [special_row(n) for n in [*SPECIAL, *RAW_ROWS]]
    with session(write_table(tmp_path, [*base_rows(), *rows])) as s:
        found = outcomes(s, ALL_QUERIES)
    assert differences(reference, found, "all") == []


@pytest.mark.parametrize("extra", ["ordinary", "int64_max"])
def test_empty_table_and_one_row_have_the_same_outcomes(extra: str, tmp_path: Path) -> None:
    with session(write_table(tmp_path / "empty", [])) as s:
        empty = outcomes(s, ALL_QUERIES)
    row = totality.line(totality.ordinary(1)) if extra == "ordinary" else special_row(extra)
    with session(write_table(tmp_path / "one", [row])) as s:
        one = outcomes(s, ALL_QUERIES)
    assert differences(empty, one, f"empty vs {extra}") == []
