"""A query's table on a narrow terminal never cuts a released number: the intervals go under
their values, and if that is still too wide each group is printed as a record."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

import dalenius
from dalenius.cli.render import print_table
from dalenius.engine.result import format_cell

QUERIES = [
    "SELECT education, COUNT(*) AS n, AVG(age) AS a, SUM(capital_gain) AS s FROM adult "
    "GROUP BY education",
    "SELECT marital_status, relationship, COUNT(*), AVG(hours_per_week), SUM(capital_loss), "
    "AVG(capital_gain) FROM adult GROUP BY marital_status, relationship",
    "SELECT sex, MEDIAN(age), COUNT(*) FROM adult GROUP BY sex",
]


@pytest.fixture(scope="module")
def session(adult_catalog_path: Path) -> dalenius.Session:
    return dalenius.connect(str(adult_catalog_path), budget=100, ledger="memory:")


@pytest.mark.parametrize("width", [80, 60, 40])
@pytest.mark.parametrize("sql", QUERIES, ids=["3-aggregates", "2-keys-4-aggregates", "median"])
def test_every_released_number_appears_whole_at_any_width(
    session: dalenius.Session, sql: str, width: int
) -> None:
    result = session.query(sql, epsilon=1)
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    print_table(result, console)
    text = out.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    tokens = set(re.findall(r"-?\d(?:[\d,]*\d)?(?:\.\d+)?", text))
    for values, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        for value, low, high in zip(values, lows, highs, strict=True):
            if isinstance(value, int | float) and not isinstance(value, bool):
                assert format_cell(value) in tokens, (format_cell(value), width)
            for bound in (low, high):
                if bound is not None:
                    assert format_cell(bound) in tokens, (format_cell(bound), width)
